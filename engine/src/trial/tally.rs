//! What completions add up to: per-op latency and errors, schedule lag and latency per
//! quarter of the measured window, and (in a replay) latency per size class.

use crate::op::{Op, Outcome};
use crate::record::{OpRecord, Recorder};
use crate::replay::ClassKey;
use std::collections::BTreeMap;

/// A mean of nanosecond durations (schedule lag, latency) over a stretch of the run. An integer
/// sum: cheaper per request than a float's, and exact (2^64 ns is 584 years).
#[derive(Default, Clone, Copy)]
pub struct MeanNs {
    sum_ns: u64,
    pub count: u64,
}

impl MeanNs {
    fn add(&mut self, ns: u64) {
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.count += 1;
    }
    /// `count` durations of `ns` each.
    pub fn add_many(&mut self, ns: u64, count: u64) {
        self.sum_ns = self.sum_ns.saturating_add(ns.saturating_mul(count));
        self.count += count;
    }
    pub fn merge(&mut self, other: &MeanNs) {
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.count += other.count;
    }
    pub fn mean_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64 / 1e6
        }
    }
}

/// The measured window [warmup, end) in ns from the start.
#[derive(Clone, Copy)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    pub fn contains(&self, t: u64) -> bool {
        t >= self.start_ns && t < self.end_ns
    }
}

/// The window cut in four for the saturation verdict, with the cuts precomputed
/// (no division per request).
pub struct Quarters {
    pub window: Window,
    cuts: [u64; 3],
}

impl Quarters {
    pub fn new(window: Window) -> Quarters {
        let q = ((window.end_ns - window.start_ns) / 4).max(1);
        Quarters { window, cuts: [window.start_ns + q, window.start_ns + 2 * q, window.start_ns + 3 * q] }
    }
    /// Which quarter `t` falls in, or None outside the window.
    pub fn of(&self, t: u64) -> Option<usize> {
        if !self.window.contains(t) {
            return None;
        }
        Some((t >= self.cuts[0]) as usize + (t >= self.cuts[1]) as usize + (t >= self.cuts[2]) as usize)
    }
}

/// A request that completed.
pub struct Done {
    pub op: Op,
    pub due_ns: u64,
    /// A replayed request's size class: its latency is also recorded per class.
    pub class: Option<u8>,
    /// Sent late while no more threads were allowed (the cap or the thread limit).
    pub held_by_limit: bool,
    pub start_ns: u64,
    pub done_ns: u64,
    pub outcome: Outcome,
    pub retransmissions: u32,
}

/// The leader records into the tally it owns (it holds the lead anyway, so that costs no
/// lock); a thread that finds another leader, and a pipelining target's completions,
/// record into the shared side tally. Both are merged at the end.
#[derive(Default)]
pub struct Tally {
    pub rec: Recorder,
    pub lag_quarters: [MeanNs; 4],
    /// Latency of the requests due in each quarter: a queue still growing shows as rising means.
    pub latency_quarters: [MeanNs; 4],
    /// Completions inside the window, whatever their outcome ...
    pub completed_in_window: u64,
    /// ... and those of them that succeeded (goodput).
    pub succeeded_in_window: u64,
    /// Replay: latency and errors per (op, size class, outcome).
    pub classes: BTreeMap<ClassKey, OpRecord>,
}

impl Tally {
    /// Inline: the leader records every completion of a blocking target in its loop, and a
    /// call would save and restore registers around the few additions a completion is.
    #[inline(always)]
    pub fn complete(&mut self, q: &Quarters, d: &Done) {
        let due = d.due_ns;
        if let Some(quarter) = q.of(due) {
            let lag = d.start_ns.saturating_sub(due);
            self.rec.lag.record(lag);
            if !d.held_by_limit {
                // Lag behind the cap is the server's doing; only free lag indicts the generator.
                self.lag_quarters[quarter].add(lag);
            }
            let latency = d.done_ns.saturating_sub(due);
            self.latency_quarters[quarter].add(latency);
            self.rec.ops[d.op.index()].record(latency, &d.outcome, d.retransmissions);
            if let Some(class) = d.class {
                let key = (d.op, class, d.outcome.as_ref().err().cloned());
                self.classes.entry(key).or_default().record(latency, &d.outcome, d.retransmissions);
            }
        }
        if q.window.contains(d.done_ns) {
            self.completed_in_window += 1;
            self.succeeded_in_window += d.outcome.is_ok() as u64;
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        self.rec.merge(&other.rec);
        for (q, o) in self.lag_quarters.iter_mut().zip(other.lag_quarters.iter()) {
            q.merge(o);
        }
        for (q, o) in self.latency_quarters.iter_mut().zip(other.latency_quarters.iter()) {
            q.merge(o);
        }
        self.completed_in_window += other.completed_in_window;
        self.succeeded_in_window += other.succeeded_in_window;
        for (key, rec) in &other.classes {
            self.classes.entry(key.clone()).or_default().merge(rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarters_cut_the_window_as_a_division_would() {
        for (start, end) in [(0u64, 4u64), (2_000_000_000, 12_000_000_000), (5, 1_000_003), (7, 9)] {
            let w = Window { start_ns: start, end_ns: end };
            let q = Quarters::new(w);
            let len = ((end - start) / 4).max(1);
            for t in (start.saturating_sub(3)..start + 40).chain(end - 40.min(end - start)..end + 3) {
                let want = w.contains(t).then(|| (((t - start) / len) as usize).min(3));
                assert_eq!(q.of(t), want, "t={t} window [{start}, {end})");
            }
        }
    }
}
