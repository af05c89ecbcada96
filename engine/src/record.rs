//! Latency histograms and counters per op type, and their JSON summaries.

use crate::hist::LatencyHist;
use crate::op::Op;
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;

/// Nanoseconds, 1 ns to 1 hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

#[derive(Default)]
pub struct OpRecord {
    pub hist: Option<LatencyHist>,
    pub errors: BTreeMap<String, u64>,
    pub timeouts: u64,
    pub retransmissions: u64,
    pub cancellations: u64,
    pub successes: u64,
    /// Replies in which the server said it is overloaded (kept out of `errors`).
    pub shed: u64,
    pub bytes: u64,
}

/// The error kind a target reports for a request that got no reply in time.
pub const TIMEOUT_KIND: &str = "ETIMEDOUT";

/// Error kinds by which a server refuses work on purpose because it is overloaded:
/// HTTP 503 (Service Unavailable) and 429 (Too Many Requests), NFS3ERR_JUKEBOX.
pub fn is_shed(kind: &str) -> bool {
    matches!(kind, "http_503" | "http_429" | "NFS3ERR_JUKEBOX")
}

impl OpRecord {
    /// Inline, per completion; an error's bookkeeping is out of line.
    #[inline]
    pub fn record(&mut self, latency_ns: u64, outcome: &Result<u64, String>, retransmissions: u32) {
        self.hist.get_or_insert_with(LatencyHist::default).record(latency_ns);
        self.retransmissions += retransmissions as u64;
        match outcome {
            Ok(bytes) => {
                self.bytes += bytes;
                self.successes += 1;
            }
            Err(kind) => self.record_error(kind),
        }
    }

    #[cold]
    fn record_error(&mut self, kind: &str) {
        match kind {
            TIMEOUT_KIND => self.timeouts += 1,
            _ if is_shed(kind) => self.shed += 1,
            _ => *self.errors.entry(kind.to_string()).or_insert(0) += 1,
        }
    }
}

/// Everything the engine measures for the measured window.
pub struct Recorder {
    pub ops: Vec<OpRecord>, // indexed by Op::index()
    pub lag: LatencyHist,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder { ops: (0..Op::ALL.len()).map(|_| OpRecord::default()).collect(), lag: LatencyHist::default() }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: f64,
    pub stddev_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub total_ms: f64,
    pub hist: String,
}

#[derive(Serialize, Clone, Debug)]
pub struct OpSummary {
    #[serde(flatten)]
    pub latency: LatencySummary,
    pub errors: BTreeMap<String, u64>,
    pub timeouts: u64,
    pub retransmissions: u64,
    pub cancellations: u64,
    pub successes: u64,
    pub shed: u64,
    pub bytes: u64,
}

const MS: f64 = 1e6;

pub fn summarize(h: &Histogram<u64>) -> LatencySummary {
    let empty = h.is_empty();
    let q = |p: f64| if empty { 0.0 } else { h.value_at_quantile(p) as f64 / MS };
    let (mean, stdev) = mean_and_stdev(h);
    LatencySummary {
        count: h.len(),
        mean_ms: mean / MS,
        stddev_ms: stdev / MS,
        min_ms: if empty { 0.0 } else { h.min() as f64 / MS },
        max_ms: if empty { 0.0 } else { h.max() as f64 / MS },
        p50_ms: q(0.50),
        p90_ms: q(0.90),
        p95_ms: q(0.95),
        p99_ms: q(0.99),
        p999_ms: q(0.999),
        total_ms: mean * h.len() as f64 / MS,
        hist: encode(h),
    }
}

/// `Histogram::mean` and `Histogram::stdev`, the same sums in the same order, from one walk over
/// the recorded values instead of four (mean, mean again, and stdev's mean and its own walk): a
/// flat-out trial's latencies span seconds, so each walk is long, and it is a cost of every trial.
fn mean_and_stdev(h: &Histogram<u64>) -> (f64, f64) {
    if h.is_empty() {
        return (0.0, 0.0);
    }
    let n = h.len() as f64;
    let recorded: Vec<(f64, f64)> = h.iter_recorded().map(|v| (h.median_equivalent(v.value_iterated_to()) as f64, v.count_at_value() as f64)).collect();
    let mean = recorded.iter().fold(0.0_f64, |total, (value, count)| total + value * count / n);
    let deviations = recorded.iter().fold(0.0_f64, |total, (value, count)| {
        let dev = value - mean;
        total + (dev * dev) * count
    });
    (mean, (deviations / n).sqrt())
}

/// HdrHistogram's standard V2 compressed form, base64: readable by every HdrHistogram library.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).expect("histogram serialises");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

impl OpRecord {
    pub fn merge(&mut self, other: &OpRecord) {
        if let Some(h) = &other.hist {
            self.hist.get_or_insert_with(LatencyHist::default).add(h);
        }
        for (kind, n) in &other.errors {
            *self.errors.entry(kind.clone()).or_insert(0) += n;
        }
        self.timeouts += other.timeouts;
        self.retransmissions += other.retransmissions;
        self.cancellations += other.cancellations;
        self.successes += other.successes;
        self.shed += other.shed;
        self.bytes += other.bytes;
    }
}

impl Recorder {
    /// Add another recorder's counts (recorders of different threads of one trial).
    pub fn merge(&mut self, other: &Recorder) {
        for (mine, theirs) in self.ops.iter_mut().zip(other.ops.iter()) {
            mine.merge(theirs);
        }
        self.lag.add(&other.lag);
    }

    /// Per-op summaries (ops that were sent) and the overall histogram.
    pub fn summaries(&self) -> (BTreeMap<String, OpSummary>, Histogram<u64>) {
        let mut all = new_histogram();
        let empty = new_histogram();
        let mut out = BTreeMap::new();
        for op in Op::ALL {
            let r = &self.ops[op.index()];
            if r.hist.is_none() && r.timeouts == 0 && r.cancellations == 0 {
                continue; // never sent in the measured window
            }
            let h = r.hist.as_ref().map_or_else(|| empty.clone(), LatencyHist::histogram);
            all.add(&h).expect("same bounds");
            out.insert(
                op.name().to_string(),
                OpSummary {
                    latency: summarize(&h),
                    errors: r.errors.clone(),
                    timeouts: r.timeouts,
                    retransmissions: r.retransmissions,
                    cancellations: r.cancellations,
                    successes: r.successes,
                    shed: r.shed,
                    bytes: r.bytes,
                },
            );
        }
        (out, all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_walk_gives_hdrhistograms_own_mean_and_stdev() {
        let mut h = new_histogram();
        assert_eq!(mean_and_stdev(&h), (0.0, 0.0));
        // Latencies from microseconds to seconds, as a flat-out trial records them.
        let mut x: u64 = 12345;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            h.record(1_000 + (x >> 33) % 4_000_000_000).unwrap();
        }
        h.record_n(250_000, 7).unwrap();
        assert_eq!(mean_and_stdev(&h), (h.mean(), h.stdev()));
        let s = summarize(&h);
        assert_eq!((s.mean_ms, s.stddev_ms, s.total_ms), (h.mean() / MS, h.stdev() / MS, h.mean() * h.len() as f64 / MS));
    }
}
