//! The TrialResult the engine prints (SPEC.md, "TrialResult"): one typed struct, so every field
//! the Python side reads is named once. main prints it through a `serde_json::Value`, whose
//! keys are sorted, so the output's bytes do not depend on the order of the fields here.

use crate::op::Op;
use crate::record::{LatencySummary, OpSummary};
use crate::replay::ReplaySummary;
use serde::Serialize;
use std::collections::BTreeMap;

pub const RESULT_SCHEMA: &str = "peakbench.trial-result/1";

#[derive(Serialize, Debug)]
pub struct TrialResult {
    pub schema: &'static str,
    pub engine_version: &'static str,
    pub mode: Mode,
    /// Closed loop's number of clients.
    pub clients: Option<usize>,
    /// None in closed loop, which offers no rate.
    pub requested_rate: Option<f64>,
    /// Goodput: successful completions in the window per second.
    pub achieved_rate: f64,
    pub completed_rate: f64,
    pub outcomes: Outcomes,
    pub sent: u64,
    pub unsent: u64,
    pub completed: u64,
    pub issued: u64,
    pub bytes: u64,
    pub output_mbit_s: f64,
    pub warmup_s: f64,
    pub runtime_s: f64,
    /// Ended early by Ctrl-C or SIGTERM: runtime_s is the part of the window measured.
    pub interrupted: bool,
    pub ops: BTreeMap<String, OpSummary>,
    pub latency: Latency,
    pub schedule_lag: ScheduleLag,
    pub generator_saturated: bool,
    pub saturation_reason: Option<String>,
    pub outstanding: Outstanding,
    pub mix_actual: BTreeMap<&'static str, f64>,
    pub engine_cpu_s: f64,
    /// The part of engine_cpu_s spent while the measured window ran (null if it never started): the
    /// measured requests' cost without set-up, warm-up, drain and restore.
    pub window_cpu_s: Option<f64>,
    pub engine_clock: &'static str,
    pub peak_rss_kib: u64,
    /// None for a replay, whose files come from the log.
    pub fileset: Option<FilesetInfo>,
    pub restore: Restore,
    pub start: Start,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySummary>,
    /// Replay only: latency per method, size class and outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<BTreeMap<String, ClassSummary>>,
    /// The first `trace_ops` requests: op and object index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_trace: Option<Vec<(Op, Option<u32>)>>,
    /// What a target reports about its own transport (the NFS target's `receive_moderation`).
    #[serde(flatten)]
    pub transport: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Open,
    Closed,
    /// A replay sent at the log's own times.
    Timed,
}

/// What became of the requests due in the window: every one is exactly one of these.
#[derive(Serialize, Debug, Default)]
pub struct Outcomes {
    pub succeeded: u64,
    pub errors: u64,
    pub shed: u64,
    pub timeouts: u64,
    pub cancelled: u64,
    pub failed_share: f64,
}

impl Outcomes {
    pub fn of(ops: &BTreeMap<String, OpSummary>) -> Outcomes {
        let sum = |f: fn(&OpSummary) -> u64| ops.values().map(f).sum::<u64>();
        let succeeded = sum(|o| o.successes);
        let errors = sum(|o| o.errors.values().sum());
        let (shed, timeouts, cancelled) = (sum(|o| o.shed), sum(|o| o.timeouts), sum(|o| o.cancellations));
        let failed = errors + shed + timeouts + cancelled;
        let all = succeeded + failed;
        Outcomes { succeeded, errors, shed, timeouts, cancelled, failed_share: if all == 0 { 0.0 } else { failed as f64 / all as f64 } }
    }
}

#[derive(Serialize, Debug)]
pub struct Latency {
    #[serde(flatten)]
    pub all: LatencySummary,
    /// Mean latency of the requests due in each quarter of the window, and their counts
    /// (so results of several clients merge exactly).
    pub quarters_mean_ms: Vec<f64>,
    pub quarters_count: Vec<u64>,
}

#[derive(Serialize, Debug)]
pub struct ScheduleLag {
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub hist: String,
    pub quarters_mean_ms: Vec<f64>,
}

#[derive(Serialize, Debug)]
pub struct Outstanding {
    pub cap: Option<usize>,
    /// Requests sent late because no more sender threads were allowed, with a user cap ...
    pub cap_bound: u64,
    pub max: usize,
    pub threads: usize,
    /// ... and without one.
    pub thread_limit_bound: u64,
}

#[derive(Serialize, Debug)]
pub struct FilesetInfo {
    pub id: String,
    pub files: u64,
    pub dirs: usize,
    pub symlinks: usize,
    pub bytes: u64,
}

/// The file set put back after the trial.
#[derive(Serialize, Debug)]
pub struct Restore {
    pub done: bool,
    /// Why nothing was restored (requests still outstanding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_errors: Option<Vec<String>>,
}

impl Restore {
    pub fn skipped(reason: &'static str) -> Restore {
        Restore { done: false, reason: Some(reason), errors: None, first_errors: None }
    }

    pub fn from_errors(errors: Vec<String>) -> Restore {
        Restore { done: errors.is_empty(), reason: None, errors: Some(errors.len()), first_errors: Some(errors.into_iter().take(5).collect()) }
    }
}

#[derive(Serialize, Debug)]
pub struct Start {
    /// Wall clock at the schedule's time zero (this host's clock).
    pub at_unix_s: f64,
    pub requested_unix_s: Option<f64>,
    /// How late the engine was ready for `requested_unix_s` (0 if on time).
    pub late_ms: f64,
}

#[derive(Serialize, Debug)]
pub struct ClassSummary {
    pub count: u64,
    pub bytes: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub hist: String,
}
