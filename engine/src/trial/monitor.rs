//! The main thread during a trial: wake or add senders when a due request finds no
//! leader and no progress, report progress, and end the drain at its deadline.

use super::sender::{spawn_sender, Shared, HANDOFF_NS, NOT_DUE, SPAWN_AFTER_NS};
use crate::progress;
use crate::spec::TrialSpec;
use serde_json::json;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Duration;

/// How often the monitor looks for a stalled schedule when nothing is suspect. Each look
/// interrupts a sender on a busy core, so not more often than needed: slow ops hand off
/// before they block; this catches the ones that block unexpectedly.
const MONITOR_NS: u64 = 500_000;
/// The same for a pipelining target with no sender blocked in it: it cannot starve the schedule.
const IDLE_PIPELINE_NS: u64 = 1_000_000;
/// ... and for one whose leader completes the replies itself (`Target::poll`): that leader never
/// blocks longer than its poll slice, and each look costs a wake-up on the sender's core.
const IDLE_POLLING_NS: u64 = 10_000_000;

/// Scheduler statistics of a thread: (ns on a CPU, ns waiting on a run queue).
/// The kernel updates them at scheduler events and ticks, so over a short stretch they may lag.
fn schedstat(tid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let mut it = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// Whether a thread is running or runnable (state R), as opposed to asleep in a system call.
fn runnable(tid: u32) -> bool {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    text.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('R'))
}

/// A stall: a due request unclaimed, nobody leading, and the claim count unchanged
/// since `since`. Whether more threads would help is judged from /proc only then.
struct Stall {
    claimed: u64,
    since: u64,
    /// (tid, ns on a CPU, ns waiting on a run queue) of the active threads, when a
    /// runnable one made the first look inconclusive.
    stats: Option<(u64, Vec<ThreadTimes>)>,
}

/// (tid, ns on a CPU, ns waiting on a run queue) of one thread.
type ThreadTimes = (u32, u64, u64);

enum Verdict {
    /// Every active thread is blocked in the target (or computing while CPUs are free).
    AddThreads,
    /// A thread waits for a CPU, or as many compute as there are CPUs: more threads would only compete.
    ShortOfCpu,
    /// Not yet known: a thread is on its way to the lead, or runnable for too short a time
    /// for the scheduler's counters to say whether it runs or waits.
    Undecided,
}

impl Stall {
    fn verdict(&mut self, shared: &Shared, now: u64, cpus: usize) -> Verdict {
        let Some((at, before)) = &self.stats else {
            // First look. The stall waits for the thread that last gave up the lead; a thread
            // neither parked nor executing is on its way to the lead (unless it is short of CPU).
            let slots = shared.slots.lock().expect("slot list");
            let mut watch = Vec::new();
            for s in slots.iter().filter(|s| !s.parked.load(Relaxed)) {
                let tid = s.tid.load(Relaxed);
                let executing = s.executing.load(Relaxed) != 0;
                if tid == 0 {
                    return Verdict::Undecided; // just spawned or woken: it will lead as soon as it runs
                }
                if !executing || s.index == shared.last_leader.load(Relaxed) {
                    watch.push(tid);
                }
            }
            drop(slots);
            let stats: Vec<_> = watch.iter().filter_map(|&tid| schedstat(tid).map(|(run, wait)| (tid, run, wait))).collect();
            if !watch.iter().any(|&tid| runnable(tid)) {
                return Verdict::AddThreads; // asleep in the target
            }
            self.stats = Some((now, stats));
            return Verdict::Undecided;
        };
        let interval = now - at;
        let (mut runnable_threads, mut computing) = (0, 0);
        for &(tid, run0, wait0) in before {
            let Some((run, wait)) = schedstat(tid) else { continue };
            if wait.saturating_sub(wait0) > interval / 4 {
                return Verdict::ShortOfCpu;
            }
            if runnable(tid) {
                runnable_threads += 1;
                computing += (run.saturating_sub(run0) > interval / 2) as usize;
            }
        }
        if runnable_threads == 0 {
            Verdict::AddThreads
        } else if interval < 20_000_000 {
            Verdict::Undecided // the counters move at ticks: give them a few
        } else if computing == runnable_threads && computing < cpus {
            Verdict::AddThreads
        } else {
            Verdict::ShortOfCpu
        }
    }
}

fn usable_cpus() -> usize {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } == 0 {
        (unsafe { libc::CPU_COUNT(&set) } as usize).max(1)
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Per-thread counters summed, for progress lines.
#[derive(Default, Clone, Copy)]
pub struct Counts {
    pub completed: u64,
    lag_ns: u64,
    lag_count: u64,
    /// Requests in flight: executing in a sender, or started on a pipelining target.
    pub busy: usize,
    /// Senders executing a request.
    executing: usize,
    /// Requests inside the target for longer than HANDOFF_NS.
    blocked: usize,
    /// The thread of the longest-running one.
    oldest_tid: u32,
}

pub fn counts(shared: &Shared, now: u64) -> Counts {
    let mut c = Counts { completed: shared.started_completed.load(Relaxed), busy: shared.started.load(Relaxed), ..Counts::default() };
    let mut oldest = 0;
    for s in shared.slots.lock().expect("slot list").iter() {
        c.completed += s.completed.load(Relaxed);
        c.lag_ns += s.lag_ns.load(Relaxed);
        c.lag_count += s.lag_count.load(Relaxed);
        if s.executing.load(Relaxed) != 0 {
            c.executing += 1;
            let started = s.started.load(Relaxed);
            if started + HANDOFF_NS < now {
                if c.blocked == 0 || started < oldest {
                    oldest = started;
                    c.oldest_tid = s.tid.load(Relaxed);
                }
                c.blocked += 1;
            }
        }
    }
    c.busy += c.executing;
    c
}

/// What the monitor saw over a trial.
pub struct Watched {
    /// The most requests seen in flight.
    pub max_busy: usize,
    /// The process's CPU time between the measured window's start and its end (or the interrupt
    /// that ended it, or the senders' finishing before it), as the monitor read it when each came;
    /// None if the trial ended before the window started.
    pub window_cpu_s: Option<f64>,
}

/// Follow the trial.
pub fn monitor(spec: &TrialSpec, shared: &Arc<Shared>) -> Watched {
    let load = &spec.load;
    let _ = shared.monitor.set(std::thread::current());
    let progress_ns = (spec.progress_interval_s * 1e9) as u64;
    let mut next_progress = progress_ns;
    let mut drain_deadline = NOT_DUE;
    let mut max_busy = 0;
    let mut last = Counts::default();
    let mut suspect: Option<Stall> = None;
    let mut last_claimed = u64::MAX;
    // CPU read at the window's start and end: the engine's own cost of the measured requests,
    // without set-up, warm-up (a descriptor cache's opens), drain, restore and the result.
    let (mut cpu_at_start, mut cpu_at_end) = (None, None);
    let cpus = usable_cpus();
    // A pipelining leader keeps every request in flight itself, closed loop included.
    for _ in 0..if shared.pipelines { 1 } else { load.clients.unwrap_or(1) } {
        spawn_sender(shared);
    }
    loop {
        let now = shared.now_ns();
        let due = shared.next_due.load(Relaxed);
        let threads = shared.threads.load(Relaxed);
        let c = counts(shared, now);
        max_busy = max_busy.max(c.busy);
        // Congested: a request has been inside the target for a while, and its thread sleeps
        // there (a thread that is merely preempted, on a busy machine, does not count).
        shared.congested.store(c.blocked > 0 && c.oldest_tid != 0 && !runnable(c.oldest_tid), Relaxed);
        if shared.want_thread.swap(false, Acquire) && threads < shared.thread_limit && shared.idle_count.load(Relaxed) == 0 {
            // A leader about to block found nobody to lead meanwhile. By Little's law the
            // schedule needs about rate x op time threads in flight: add what is missing at
            // once (up to 16 at a time), not one per request, so thread start-up keeps pace.
            // Only ops that block count: fast ones need no thread of their own.
            let expect_s = shared.expect_ns.iter().map(|e| e.load(Relaxed)).filter(|&e| e > HANDOFF_NS).max().unwrap_or(0) as f64 / 1e9;
            let needed = (load.rate * expect_s).ceil() as usize + 1;
            for _ in 0..needed.saturating_sub(threads).clamp(1, 16).min(shared.thread_limit - threads) {
                spawn_sender(shared);
            }
        }
        let claimed = shared.claimed.load(Relaxed);
        // Claims since the last look: the generator is moving; look again at the usual pace.
        let progressed = claimed != last_claimed;
        last_claimed = claimed;
        // A due request unclaimed, nobody leading, and no claim since the last look: every
        // thread is inside the target. Wake a parked follower, or add threads for what is
        // overdue. (A closed loop has its clients and no schedule to fall behind.)
        let starved = !shared.closed && due != NOT_DUE && now > due + SPAWN_AFTER_NS && !shared.lead.is_taken();
        suspect = match suspect {
            Some(mut stall) if starved && stall.claimed == claimed => {
                if now - stall.since < SPAWN_AFTER_NS {
                    Some(stall)
                } else {
                    match stall.verdict(shared, now, cpus) {
                        Verdict::AddThreads => {
                            if !shared.wake_one() && threads < shared.thread_limit {
                                let overdue = ((now - due) as f64 * load.rate / 1e9).ceil() as usize;
                                for _ in 0..overdue.clamp(1, 16).min(shared.thread_limit - threads) {
                                    spawn_sender(shared);
                                }
                            }
                            None
                        }
                        // Preempted or computing, not blocked: the CPUs, not the target's latency, hold it up.
                        Verdict::ShortOfCpu => None,
                        Verdict::Undecided => Some(stall),
                    }
                }
            }
            // Seen once, it may be a 1 µs system call caught in the act: look again.
            _ if starved => Some(Stall { claimed, since: now, stats: None }),
            _ => None,
        };
        let interrupted = shared.interrupted(now);
        if cpu_at_start.is_none() && now >= shared.window.start_ns {
            cpu_at_start = Some(super::process_cpu_s());
        }
        if cpu_at_start.is_some() && cpu_at_end.is_none() && (now >= shared.window.end_ns || interrupted) {
            cpu_at_end = Some(super::process_cpu_s());
        }
        if interrupted && drain_deadline == NOT_DUE {
            // Senders stop claiming at their next look; whatever is still out after a short drain is cancelled.
            drain_deadline = now + ((load.drain_timeout_s * 1e9) as u64).min(crate::interrupt::DRAIN_NS);
        } else if due == NOT_DUE && drain_deadline == NOT_DUE {
            drain_deadline = now.max(shared.window.end_ns) + (load.drain_timeout_s * 1e9) as u64;
        }
        if now >= next_progress {
            let lag_count = (c.lag_count - last.lag_count).max(1);
            let phase = if now < shared.window.start_ns {
                "warmup"
            } else if due != NOT_DUE {
                "measure"
            } else {
                "drain"
            };
            progress::emit(json!({
                "phase": phase, "elapsed_s": now as f64 / 1e9, "completed": c.completed,
                "outstanding": c.busy, "rate": (c.completed - last.completed) as f64 / spec.progress_interval_s,
                "lag_ms": (c.lag_ns - last.lag_ns) as f64 / lag_count as f64 / 1e6, "threads": threads,
            }));
            last = c;
            next_progress += progress_ns * ((now - next_progress) / progress_ns + 1);
        }
        if (shared.live.load(Acquire) == 0 && shared.started.load(Acquire) == 0) || now >= drain_deadline {
            shared.drained.store(true, Release);
            // Senders done before the window's end (an open-loop schedule's last request is due before
            // it, and its sender wakes the monitor on leaving) end the window's CPU time here.
            let cpu_at_end = cpu_at_end.or_else(|| cpu_at_start.map(|_| super::process_cpu_s()));
            let window_cpu_s = cpu_at_start.zip(cpu_at_end).map(|(start, end)| end - start);
            return Watched { max_busy, window_cpu_s };
        }
        let idle_pipeline = shared.pipelines && c.executing == 0;
        let idle_pace = if shared.polls { IDLE_POLLING_NS } else { IDLE_PIPELINE_NS };
        let pace = if idle_pipeline { idle_pace } else { MONITOR_NS };
        let watch = if suspect.is_some() && !progressed {
            now + SPAWN_AFTER_NS
        } else if due == NOT_DUE {
            NOT_DUE
        } else if shared.closed {
            shared.window.end_ns.max(now + SPAWN_AFTER_NS) // nothing to watch but the window's end
        } else {
            (due + SPAWN_AFTER_NS).max(now + pace)
        };
        let window_edge = match (cpu_at_start, cpu_at_end) {
            (None, _) => shared.window.start_ns,
            (Some(_), None) => shared.window.end_ns,
            _ => NOT_DUE,
        };
        let wake = watch.min(next_progress).min(drain_deadline).min(window_edge);
        let floor = if idle_pipeline { idle_pace } else { SPAWN_AFTER_NS / 4 };
        std::thread::park_timeout(Duration::from_nanos(wake.saturating_sub(now).clamp(floor, 100_000_000)));
    }
}
