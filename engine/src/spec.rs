//! The TrialSpec the engine reads (see SPEC.md) and its validation.
//! Field errors name the JSON path, so a caller can point at the offending key.

use crate::workload::dist::Dist;
use crate::workload::mix::Op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SPEC_SCHEMA: &str = "peakbench.trial-spec/1";
pub const RESULT_SCHEMA: &str = "peakbench.trial-result/1";

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TrialSpec {
    pub schema: String,
    pub target: TargetSpec,
    #[serde(default)]
    pub seed: u64,
    pub load: LoadSpec,
    pub fileset: FilesetSpec,
    pub mix: BTreeMap<Op, f64>,
    #[serde(default = "IoSpec::default_read")]
    pub read: IoSpec,
    #[serde(default = "IoSpec::default_write")]
    pub write: IoSpec,
    #[serde(default = "default_progress_interval")]
    pub progress_interval_s: f64,
    #[serde(default)]
    pub trace_ops: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum TargetSpec {
    Posix {
        path: String,
        /// Keep read descriptors open between reads (see target/posix.rs); false: open per read.
        #[serde(default = "yes")]
        fd_cache: bool,
    },
    Null,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    Uniform,
    Poisson,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    pub rate: f64,
    #[serde(default = "default_arrivals")]
    pub arrivals: Arrivals,
    #[serde(default)]
    pub warmup_s: f64,
    pub runtime_s: f64,
    #[serde(default)]
    pub max_outstanding: Option<usize>,
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout_s: f64,
    #[serde(default = "default_lag_limit")]
    pub lag_limit_ms: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FilesetSpec {
    #[serde(default)]
    pub seed: u64,
    pub files: u64,
    pub files_per_dir: Dist,
    pub dirs_per_dir: Dist,
    #[serde(default = "Dist::zero")]
    pub symlinks_per_dir: Dist,
    pub max_depth: u32,
    pub file_sizes: Dist,
    #[serde(default = "Dist::one")]
    pub file_popularity: Dist,
    #[serde(default = "Dist::one")]
    pub dir_popularity: Dist,
    #[serde(default = "Dist::one")]
    pub symlink_popularity: Dist,
    #[serde(default = "one")]
    pub active_fraction: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Random,
    Sequential,
    Append,
    WholeFile,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IoSpec {
    pub size: Dist,
    pub pattern: Pattern,
}

impl IoSpec {
    fn default_read() -> Self {
        IoSpec { size: Dist::constant(8192.0), pattern: Pattern::Random }
    }
    fn default_write() -> Self {
        IoSpec { size: Dist::constant(8192.0), pattern: Pattern::Random }
    }
}

fn default_arrivals() -> Arrivals {
    Arrivals::Uniform
}
fn default_drain_timeout() -> f64 {
    10.0
}
fn default_lag_limit() -> f64 {
    5.0
}
fn default_progress_interval() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn one() -> f64 {
    1.0
}

/// A spec that parsed but says something impossible; `field` is the JSON path.
#[derive(Debug)]
pub struct SpecError {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field {}: {}", self.field, self.message)
    }
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError { field: field.into(), message: message.into() }
}

/// Parse JSON text into a spec; errors carry the JSON path and position.
pub fn parse(text: &str) -> Result<TrialSpec, SpecError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let spec: TrialSpec = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        bad(if path == "." { "(document)".into() } else { path }, format!("{} (line {}, column {})", strip_position(&inner), inner.line(), inner.column()))
    })?;
    spec.validate()?;
    Ok(spec)
}

fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.find(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

impl TrialSpec {
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.schema != SPEC_SCHEMA {
            return Err(bad("schema", format!("expected {SPEC_SCHEMA:?}, got {:?}", self.schema)));
        }
        let l = &self.load;
        if !(l.rate.is_finite() && l.rate > 0.0) {
            return Err(bad("load.rate", "must be a finite number > 0"));
        }
        if l.rate > 50_000_000.0 {
            return Err(bad("load.rate", "above 50,000,000 ops/s, beyond what one engine can schedule"));
        }
        if !(l.runtime_s.is_finite() && l.runtime_s > 0.0) {
            return Err(bad("load.runtime_s", "must be > 0"));
        }
        for (name, v) in [("load.warmup_s", l.warmup_s), ("load.drain_timeout_s", l.drain_timeout_s), ("load.lag_limit_ms", l.lag_limit_ms)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(bad(name, "must be a finite number >= 0"));
            }
        }
        if l.max_outstanding == Some(0) {
            return Err(bad("load.max_outstanding", "must be >= 1 (or absent for no cap)"));
        }
        if !(self.progress_interval_s.is_finite() && self.progress_interval_s > 0.0) {
            return Err(bad("progress_interval_s", "must be > 0"));
        }
        self.validate_mix()?;
        let f = &self.fileset;
        if f.files == 0 && self.mix.keys().any(|op| op.needs_file()) {
            return Err(bad("fileset.files", "the mix uses files, so the file set needs at least one"));
        }
        if f.files > u32::MAX as u64 - 1 {
            return Err(bad("fileset.files", "more than 4 billion files"));
        }
        if f.max_depth > 64 {
            return Err(bad("fileset.max_depth", "deeper than 64 levels"));
        }
        if !(f.active_fraction > 0.0 && f.active_fraction <= 1.0) {
            return Err(bad("fileset.active_fraction", "must be in (0, 1]"));
        }
        for (name, d) in [
            ("fileset.files_per_dir", &f.files_per_dir),
            ("fileset.dirs_per_dir", &f.dirs_per_dir),
            ("fileset.symlinks_per_dir", &f.symlinks_per_dir),
            ("fileset.file_sizes", &f.file_sizes),
            ("fileset.file_popularity", &f.file_popularity),
            ("fileset.dir_popularity", &f.dir_popularity),
            ("fileset.symlink_popularity", &f.symlink_popularity),
            ("read.size", &self.read.size),
            ("write.size", &self.write.size),
        ] {
            d.validate().map_err(|m| bad(name, m))?;
        }
        if self.read.pattern == Pattern::Append {
            return Err(bad("read.pattern", "append is a write pattern"));
        }
        if let TargetSpec::Posix { path, .. } = &self.target {
            if path.is_empty() {
                return Err(bad("target.path", "empty path"));
            }
        }
        Ok(())
    }

    fn validate_mix(&self) -> Result<(), SpecError> {
        if self.mix.is_empty() {
            return Err(bad("mix", "no operations"));
        }
        let mut total = 0.0;
        for (op, w) in &self.mix {
            if !(w.is_finite() && *w >= 0.0) {
                return Err(bad(format!("mix.{}", op.name()), "weight must be a finite number >= 0"));
            }
            total += w;
        }
        if (total - 1.0).abs() > 1e-6 {
            return Err(bad("mix", format!("weights sum to {total}, not 1 (normalise them)")));
        }
        Ok(())
    }
}
