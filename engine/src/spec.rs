//! The TrialSpec the engine reads (see SPEC.md) and its validation.
//! Field errors name the JSON path, so a caller can point at the offending key.

use crate::op::Op;
use crate::workload::dist::Dist;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SPEC_SCHEMA: &str = "peakbench.trial-spec/1";
/// Version 2 adds `start_at_unix_s` (a synchronized start across load clients), `replay`
/// (an access log as the request stream) and `load.clients` (closed loop); a /1 spec reads unchanged.
pub const SPEC_SCHEMA_V2: &str = "peakbench.trial-spec/2";
/// A start further ahead than this is a controller bug or a wildly wrong clock, never a plan.
pub const MAX_START_AHEAD_S: f64 = 3600.0;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TrialSpec {
    pub schema: String,
    pub target: TargetSpec,
    #[serde(default)]
    pub seed: u64,
    pub load: LoadSpec,
    /// Absent only with `replay`, whose log names the files.
    #[serde(default = "FilesetSpec::empty")]
    pub fileset: FilesetSpec,
    #[serde(default)]
    pub mix: BTreeMap<Op, f64>,
    #[serde(default = "IoSpec::default_read")]
    pub read: IoSpec,
    #[serde(default = "IoSpec::default_write")]
    pub write: IoSpec,
    #[serde(default = "default_progress_interval")]
    pub progress_interval_s: f64,
    #[serde(default)]
    pub trace_ops: usize,
    /// Schema /2 only: the wall-clock instant (CLOCK_REALTIME, seconds since the Unix epoch)
    /// at which the schedule's time zero falls. The engine waits for it after its set-up.
    #[serde(default)]
    pub start_at_unix_s: Option<f64>,
    /// Version 2: replay an access log instead of generating Fstress requests.
    #[serde(default)]
    pub replay: Option<ReplaySpec>,
    /// Ops from a Markov chain over handle states instead of independent draws from `mix`
    /// (SPEC.md, "Markov workloads"); `mix` is then the chain's long-run mix.
    #[serde(default)]
    pub markov: Option<MarkovSpec>,
}

/// A Markov chain whose transitions emit ops: each state holds a fixed number of open handles,
/// `open` adds one, `close` removes one, and the ops on a handle are taken only while one is open.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MarkovSpec {
    /// Index of the first state (which must hold no handle).
    #[serde(default)]
    pub start: usize,
    pub states: Vec<MarkovState>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MarkovState {
    pub name: String,
    /// Handles open in this state.
    pub handles: u32,
    pub next: Vec<MarkovTransition>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MarkovTransition {
    pub op: Op,
    pub weight: f64,
    /// Index of the state it leads to.
    pub to: usize,
}

/// More open handles per client than this is a typo, not a client.
pub const MAX_HANDLES: u32 = 1024;

impl MarkovSpec {
    /// Every path through the chain is a valid handle sequence: `open` goes one handle up, `close`
    /// one down, everything else stays, and no op on a handle leaves a state that holds none.
    pub fn validate(&self, mix: &BTreeMap<Op, f64>) -> Result<(), SpecError> {
        if self.states.is_empty() {
            return Err(bad("markov.states", "no states"));
        }
        let at = |i: usize| format!("markov.states[{i}]");
        match self.states.get(self.start) {
            None => return Err(bad("markov.start", format!("no state {}", self.start))),
            Some(s) if s.handles != 0 => return Err(bad("markov.start", format!("state {:?} holds handles; a client starts with none", s.name))),
            _ => {}
        }
        for (i, state) in self.states.iter().enumerate() {
            if state.handles > MAX_HANDLES {
                return Err(bad(format!("{}.handles", at(i)), format!("more than {MAX_HANDLES} open handles")));
            }
            if !state.next.iter().any(|t| t.weight > 0.0) {
                return Err(bad(format!("{}.next", at(i)), format!("state {:?} has no transition with a weight above 0", state.name)));
            }
            for (j, t) in state.next.iter().enumerate() {
                let field = format!("{}.next[{j}]", at(i));
                if !(t.weight.is_finite() && t.weight >= 0.0) {
                    return Err(bad(format!("{field}.weight"), "must be a finite number >= 0"));
                }
                let Some(to) = self.states.get(t.to) else { return Err(bad(format!("{field}.to"), format!("no state {}", t.to))) };
                let want = match t.op {
                    Op::Open => state.handles + 1,
                    Op::Close => state.handles.wrapping_sub(1),
                    _ => state.handles,
                };
                if t.op.on_handle() && state.handles == 0 {
                    return Err(bad(format!("{field}.op"), format!("{} needs an open handle, and state {:?} holds none", t.op.name(), state.name)));
                }
                if matches!(t.op, Op::Remove | Op::Rename) {
                    return Err(bad(format!("{field}.op"), format!("{} would take a file from under its open handles", t.op.name())));
                }
                if to.handles != want {
                    return Err(bad(
                        format!("{field}.to"),
                        format!("{} from {:?} ({} handles) leaves {want}, but {:?} holds {}", t.op.name(), state.name, state.handles, to.name, to.handles),
                    ));
                }
                if t.weight > 0.0 && !mix.contains_key(&t.op) {
                    return Err(bad(format!("{field}.op"), format!("{} is not in the mix (give the chain's long-run mix)", t.op.name())));
                }
            }
        }
        Ok(())
    }
}

/// An access log as the request stream (SPEC.md, "Replay").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    /// Path of the log; gzip-compressed logs are recognised by their magic bytes.
    pub log: String,
    /// "common", "combined", or a format string (Apache `%h %t "%r"...` or nginx `$remote_addr ...`).
    #[serde(default = "default_log_format")]
    pub format: String,
    /// Keep the longest prefix of the log whose distinct files total at most this many bytes.
    #[serde(default)]
    pub dataset_bytes: Option<u64>,
    /// Start the (truncated) log again when it ends, until the measured window is over.
    #[serde(default = "yes", rename = "loop")]
    pub looping: bool,
    /// "rate": send at load.rate (or closed loop with load.clients); "log": at the log's own times.
    #[serde(default = "default_timing")]
    pub timing: Timing,
    /// With timing "log": how many times faster than the log.
    #[serde(default = "one")]
    pub speed: f64,
    /// Replay only successful requests (2xx, 304), or every GET and HEAD.
    #[serde(default)]
    pub all_statuses: bool,
    /// How many unparseable lines to quote in the result.
    #[serde(default = "default_examples")]
    pub examples: usize,
    /// Replay only this share of the (truncated) log: one of several load clients.
    #[serde(default)]
    pub share: Option<Share>,
}

/// Load client `index` of `count` replays the requests at positions index, index + count, ...
/// of the truncated log, each at its own log time.
#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Share {
    pub index: usize,
    pub count: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    Rate,
    Log,
}

/// How the HTTP target asks for a file's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GetattrMethod {
    #[default]
    Head,
    /// GET with `If-None-Match: *`: a 304 when the file exists.
    Conditional,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum TargetSpec {
    Posix {
        path: String,
        /// Keep read descriptors open between reads (see target/posix/fdcache.rs); false: open per read.
        #[serde(default = "yes")]
        fd_cache: bool,
    },
    Null,
    Nfs(NfsSpec),
    Smb(SmbSpec),
    /// An HTTP/1.1 server; see target/http.rs for the op mapping.
    Http {
        url: String,
        /// The directory the server serves: the file set is built there, not through HTTP.
        #[serde(default)]
        docroot: Option<String>,
        #[serde(default = "default_http_timeout")]
        timeout_s: f64,
        #[serde(default)]
        getattr: GetattrMethod,
        /// Whether PUT/DELETE/MKCOL/MOVE work; absent: ask the server (OPTIONS lists PUT).
        #[serde(default)]
        writable: Option<bool>,
    },
}

/// SPECsfs2008's limit on BIOD_MAX_READS and BIOD_MAX_WRITES.
pub const MAX_BIOD: u32 = 32;

/// An NFSv3 export spoken to over ONC-RPC/TCP.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NfsSpec {
    pub host: String,
    /// The export's path, as MOUNT knows it (e.g. "/export").
    pub export: String,
    /// NFS and MOUNT ports; absent: ask the portmapper.
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub mount_port: Option<u16>,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    /// Transfer sizes; absent: negotiated through FSINFO.
    #[serde(default)]
    pub rsize: Option<u32>,
    #[serde(default)]
    pub wsize: Option<u32>,
    /// Transfers of one logical READ or WRITE in flight at once (SPECsfs's BIOD_MAX_READS and
    /// BIOD_MAX_WRITES: the client's read-ahead and write-behind); absent, 0 or 1: one at a time.
    #[serde(default)]
    pub biod_reads: Option<u32>,
    #[serde(default)]
    pub biod_writes: Option<u32>,
    #[serde(default = "one_usize")]
    pub connections: usize,
    /// Cap on RPCs in flight across the connections.
    #[serde(default)]
    pub max_outstanding: Option<usize>,
    /// Per-attempt RPC timeout, and retransmissions before a call times out.
    #[serde(default = "default_rpc_timeout")]
    pub timeout_ms: f64,
    #[serde(default = "default_retrans")]
    pub retrans: u32,
    /// Receive moderation: while many calls are in flight and a read found few replies,
    /// wait this long before the next read, so that one wake-up collects several replies.
    /// Adds up to this much to measured latencies; 0 turns it off. Absent (the default):
    /// adaptive, a tenth of the observed reply latency, at most 200 µs.
    #[serde(default)]
    pub recv_wait_us: Option<f64>,
    /// How the target is named in messages.
    #[serde(default)]
    pub url: Option<String>,
}

/// A share of an SMB2/3 server spoken to over TCP (target/smb).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SmbSpec {
    pub host: String,
    #[serde(default = "default_smb_port")]
    pub port: u16,
    pub share: String,
    /// A directory below the share's root that holds the file sets ("" for the root).
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub password: String,
    #[serde(default)]
    pub domain: String,
    /// "2.1", "3.0", "3.0.2" or "3.1.1"; absent: offer all four.
    #[serde(default)]
    pub dialect: Option<String>,
    #[serde(default)]
    pub signing: Signing,
    #[serde(default)]
    pub encrypt: Encrypt,
    #[serde(default = "one_usize")]
    pub connections: usize,
    /// Cap on requests in flight across the connections.
    #[serde(default)]
    pub max_outstanding: Option<usize>,
    #[serde(default = "default_rpc_timeout")]
    pub timeout_ms: f64,
    /// How the target is named in messages (without the password).
    #[serde(default)]
    pub url: Option<String>,
}

/// Whether an SMB client signs its messages: never (but SMB 3.1.1 signs TREE_CONNECT
/// always), when the server requires it (as Windows clients do by default), or always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Signing {
    Off,
    #[default]
    IfOffered,
    Required,
}

/// Whether an SMB 3.x client encrypts its session: never, when the server asks for it
/// (its session or share says so), or always (a server without a cipher is refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Encrypt {
    Off,
    #[default]
    Desired,
    Required,
}

fn default_smb_port() -> u16 {
    445
}

/// Longest receive moderation wait: beyond it the latency it adds is no longer small.
pub const MAX_RECV_WAIT_US: f64 = 1000.0;

fn one_usize() -> usize {
    1
}
fn default_rpc_timeout() -> f64 {
    5000.0
}
fn default_retrans() -> u32 {
    2
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
    /// Offered ops/s (open loop); ignored in closed loop and in timed replay.
    #[serde(default)]
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
    /// Version 2: closed loop with this many clients, each sending its next request as soon
    /// as its last one completes (no schedule; latency from the actual send).
    #[serde(default)]
    pub clients: Option<usize>,
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
fn default_log_format() -> String {
    "combined".into()
}
fn default_timing() -> Timing {
    Timing::Rate
}
fn default_examples() -> usize {
    5
}
fn default_http_timeout() -> f64 {
    10.0
}

impl FilesetSpec {
    /// No files: the file set of a replay, whose files come from the log.
    fn empty() -> Self {
        FilesetSpec {
            seed: 0,
            files: 0,
            files_per_dir: Dist::zero(),
            dirs_per_dir: Dist::zero(),
            symlinks_per_dir: Dist::zero(),
            max_depth: 0,
            file_sizes: Dist::zero(),
            file_popularity: Dist::one(),
            dir_popularity: Dist::one(),
            symlink_popularity: Dist::one(),
            active_fraction: 1.0,
        }
    }
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

/// The fields every protocol target over TCP has (nfs, smb).
fn check_transport(host: &str, connections: usize, max_outstanding: Option<usize>, timeout_ms: f64) -> Result<(), SpecError> {
    if host.is_empty() {
        return Err(bad("target.host", "empty host"));
    }
    if connections == 0 || connections > 1024 {
        return Err(bad("target.connections", "must be 1 to 1024"));
    }
    if max_outstanding == Some(0) {
        return Err(bad("target.max_outstanding", "must be >= 1 (or absent for no cap)"));
    }
    if !(timeout_ms.is_finite() && timeout_ms > 0.0) {
        return Err(bad("target.timeout_ms", "must be > 0"));
    }
    Ok(())
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
        let v2 = self.schema == SPEC_SCHEMA_V2;
        if self.schema != SPEC_SCHEMA && !v2 {
            return Err(bad("schema", format!("expected {SPEC_SCHEMA:?} or {SPEC_SCHEMA_V2:?}, got {:?}", self.schema)));
        }
        if !v2 && self.replay.is_some() {
            return Err(bad("replay", format!("needs schema {SPEC_SCHEMA_V2:?}")));
        }
        if !v2 && self.load.clients.is_some() {
            return Err(bad("load.clients", format!("needs schema {SPEC_SCHEMA_V2:?}")));
        }
        if let Some(at) = self.start_at_unix_s {
            if !v2 {
                return Err(bad("start_at_unix_s", format!("needs schema {SPEC_SCHEMA_V2:?}")));
            }
            if !(at.is_finite() && at > 0.0) {
                return Err(bad("start_at_unix_s", "must be a finite number of seconds since the Unix epoch"));
            }
        }
        let l = &self.load;
        match l.clients {
            Some(0) => return Err(bad("load.clients", "must be >= 1")),
            Some(n) if n > 4096 => return Err(bad("load.clients", "more than 4096 clients")),
            _ => {}
        }
        if let Some(r) = &self.replay {
            if r.log.is_empty() {
                return Err(bad("replay.log", "empty path"));
            }
            let format = crate::replay::Format::parse(&r.format).map_err(|e| bad("replay.format", e))?;
            if r.timing == Timing::Log && !format.has_time {
                return Err(bad("replay.timing", "\"log\" needs a time field in the log format (%t, $time_local)"));
            }
            if !(r.speed.is_finite() && r.speed > 0.0) {
                return Err(bad("replay.speed", "must be a finite number > 0"));
            }
            if let Some(share) = r.share {
                if share.count == 0 || share.index >= share.count {
                    return Err(bad("replay.share", "needs count >= 1 and index < count"));
                }
            }
            if r.timing == Timing::Log && l.clients.is_some() {
                return Err(bad("replay.timing", "\"log\" sends at the log's times; it cannot be closed loop (load.clients)"));
            }
            if !self.mix.is_empty() || self.fileset.files > 0 {
                return Err(bad("replay", "a replay takes its requests and files from the log: give no mix or fileset"));
            }
        }
        let paced = l.clients.is_none() && self.replay.as_ref().is_none_or(|r| r.timing == Timing::Rate);
        if paced && !(l.rate.is_finite() && l.rate > 0.0) {
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
        if self.replay.is_none() {
            self.validate_mix()?;
        }
        if let Some(m) = &self.markov {
            m.validate(&self.mix)?;
            for (name, io) in [("read.pattern", &self.read), ("write.pattern", &self.write)] {
                if io.pattern == Pattern::Sequential {
                    return Err(bad(name, "a sequential run crosses files, and a Markov workload's reads and writes stay on their handle's file"));
                }
            }
        } else if let Some(op) = self.mix.keys().find(|op| op.explicit_handle()) {
            return Err(bad(format!("mix.{}", op.name()), "handle ops come only from a Markov workload (markov), which opens and closes the handles"));
        }
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
        if let TargetSpec::Nfs(n) = &self.target {
            check_transport(&n.host, n.connections, n.max_outstanding, n.timeout_ms)?;
            if !n.export.starts_with('/') {
                return Err(bad("target.export", "must be an absolute path such as /export"));
            }
            if n.recv_wait_us.is_some_and(|w| !(0.0..=MAX_RECV_WAIT_US).contains(&w)) {
                return Err(bad("target.recv_wait_us", format!("must be 0 to {MAX_RECV_WAIT_US} µs")));
            }
            for (name, v) in [("target.biod_reads", n.biod_reads), ("target.biod_writes", n.biod_writes)] {
                if v.is_some_and(|v| v > MAX_BIOD) {
                    return Err(bad(name, format!("must be 0 to {MAX_BIOD} transfers in flight")));
                }
            }
            for (name, v) in [("target.rsize", n.rsize), ("target.wsize", n.wsize)] {
                if v.is_some_and(|v| !(512..=(1 << 20)).contains(&v)) {
                    return Err(bad(name, "must be 512 to 1048576 bytes"));
                }
            }
        }
        if let TargetSpec::Smb(s) = &self.target {
            check_transport(&s.host, s.connections, s.max_outstanding, s.timeout_ms)?;
            if s.share.is_empty() || s.share.contains(['/', '\\']) {
                return Err(bad("target.share", "must name one share"));
            }
            crate::dialect::dialects(s.dialect.as_deref()).map_err(|e| bad("target.dialect", e.to_string()))?;
        }
        if let TargetSpec::Http { url, timeout_s, .. } = &self.target {
            crate::url::split_url(url).map_err(|e| bad("target.url", e.to_string()))?;
            if !(timeout_s.is_finite() && *timeout_s > 0.0) {
                return Err(bad("target.timeout_s", "must be > 0"));
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
