//! The schedule and the request source, owned by whoever holds the lead: claiming a
//! request takes its op and object from the seeded source (so the sequence never
//! depends on timing or threads) and its due time from the pacer.

use super::sender::{Shared, NOT_DUE, SPAWN_AFTER_NS};
use super::tally::{MeanNs, Tally};
use crate::op::{Op, Request};
use crate::pacer::Schedule;
use crate::replay::ReplayStream;
use crate::workload::generator::Generator;
use std::sync::atomic::Ordering::Relaxed;

/// Where requests come from: the Fstress generator, or a replayed access log.
// One Source per trial, made once and never moved on the hot path: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Source {
    Synthetic(Generator),
    Replay(ReplayStream),
}

impl Source {
    /// The next request, the object it names (for traces) and, in a replay, its size class.
    fn next(&mut self) -> Option<(Op, Request, Option<u32>, Option<u8>)> {
        match self {
            Source::Synthetic(g) => {
                let (op, request, object) = g.next();
                Some((op, request, object, None))
            }
            Source::Replay(r) => r.next().map(|(op, request, object, class)| (op, request, object, Some(class))),
        }
    }

    /// Take back an executed request's buffers.
    pub fn recycle(&mut self, request: Request) {
        if let Source::Synthetic(g) = self {
            g.recycle(request);
        }
    }
}

pub struct Claim {
    pub op: Op,
    pub due_ns: u64,
    pub request: Request,
    /// A replayed request's size class: its latency is also recorded per class.
    pub class: Option<u8>,
    /// Claimed late while no more threads were allowed (the cap or the thread limit).
    pub held_by_limit: bool,
}

pub struct Sched {
    pub source: Source,
    pub schedule: Box<dyn Schedule + Send>,
    pub n: u64,
    pub next_due: u64,
    pub tally: Tally,
    pub sent_by_op: [u64; Op::ALL.len()],
    pub sent_in_window: u64,
    pub held_by_limit: u64,
    /// Requests of the window the generator never got to send.
    pub unsent: u64,
    /// Of those, the ones unsent while sender threads were free (the generator's doing, its count), with the send
    /// lag they had at least, counted as if sent when it gave them up, and the due time of the first of them:
    /// the lag test weighs them where they fell (mod.rs, `unsent_quarter_lag_ms`).
    pub unsent_lag: MeanNs,
    pub unsent_from_ns: u64,
    pub trace: Vec<(Op, Option<u32>)>,
    pub trace_limit: usize,
    /// When a replay without loop ran out of requests.
    pub exhausted_ns: Option<u64>,
}

impl Sched {
    pub fn new(source: Source, schedule: Box<dyn Schedule + Send>, first_due: u64, trace_limit: usize) -> Sched {
        Sched {
            source,
            schedule,
            n: 0,
            next_due: first_due,
            tally: Tally::default(),
            sent_by_op: [0; Op::ALL.len()],
            sent_in_window: 0,
            held_by_limit: 0,
            unsent: 0,
            unsent_lag: MeanNs::default(),
            unsent_from_ns: 0,
            trace: Vec::new(),
            trace_limit,
            exhausted_ns: None,
        }
    }

    /// The next request, or None when the schedule is done. `now` may be a little old:
    /// it only decides the bookkeeping, never when the request is sent.
    pub fn claim(&mut self, shared: &Shared, now: u64) -> Option<Claim> {
        let window = shared.window;
        if self.next_due >= window.end_ns {
            return None;
        }
        if shared.interrupted(now) || (shared.closed && now >= window.end_ns) {
            self.next_due = NOT_DUE;
            shared.next_due.store(NOT_DUE, Relaxed);
            return None;
        }
        if !shared.closed && now >= window.end_ns + shared.lag_limit_ns {
            // The window is long over and the generator is still behind: what it never sent
            // is counted, not sent late into a window that no longer measures it.
            // Unsent because the thread limit was reached is the server's doing.
            let blocked = shared.threads.load(Relaxed) >= shared.thread_limit;
            if self.next_due < window.end_ns {
                let first_due = self.next_due;
                let resume = self.schedule.first_due_at_or_after(self.n, window.end_ns);
                let never_sent = resume - self.n;
                self.unsent += never_sent;
                if !blocked {
                    // Due between first_due and the window's end, and still unsent now: their mean lag is
                    // at least now less the middle of that span (exactly so for an even schedule).
                    self.unsent_lag.add_many(now.saturating_sub(first_due / 2 + window.end_ns / 2), never_sent);
                    self.unsent_from_ns = first_due;
                }
                self.n = resume;
                self.next_due = self.schedule.due_ns(self.n);
            }
            shared.next_due.store(NOT_DUE, Relaxed);
            return None;
        }
        // Closed loop has no schedule: a request is due when a client is free to send it.
        let due_ns = if shared.closed { now } else { self.next_due };
        let Some((op, request, object, class)) = self.source.next() else {
            // A replay that does not loop has run out of requests.
            self.exhausted_ns = Some(now);
            self.next_due = NOT_DUE;
            shared.next_due.store(NOT_DUE, Relaxed);
            return None;
        };
        if self.trace.len() < self.trace_limit {
            self.trace.push((op, object));
        }
        self.n += 1;
        if !shared.closed {
            self.next_due = self.schedule.due_ns(self.n);
            shared.next_due.store(if self.next_due >= window.end_ns { NOT_DUE } else { self.next_due }, Relaxed);
        }
        shared.claimed.store(self.n, Relaxed);
        // Late while no more threads were allowed: the cap (or the thread limit) held it
        // behind requests blocked in the target, not a slow generator. Below the limit
        // threads are added within microseconds, so lasting lag there is the generator's.
        let held_by_limit = now > due_ns + SPAWN_AFTER_NS && shared.threads.load(Relaxed) >= shared.thread_limit;
        if window.contains(due_ns) {
            self.sent_in_window += 1;
            self.sent_by_op[op.index()] += 1;
            self.held_by_limit += held_by_limit as u64;
        }
        Some(Claim { op, due_ns, request, class, held_by_limit })
    }
}
