//! One open-loop trial. Each request is sent when the schedule says it is due,
//! whatever is outstanding; latency runs from the intended send time, so
//! queueing anywhere is in the numbers, never hidden.
//!
//! Sender threads take turns as the *leader*: the one thread that claims the
//! next request, waits until it is due and sends it. The leader gives up the
//! lead while its request executes and takes it back afterwards, so against a
//! fast target one thread does everything (no hand-off, no lock contention,
//! two clock reads per op). When a request is expected to take longer than the
//! gap to the next one, the leader wakes a parked follower to lead meanwhile;
//! when an execution blocks unexpectedly, the monitor wakes or adds a follower.
//! So a blocking server never delays the schedule (unless the user capped
//! outstanding requests), and only one thread ever waits for a due time.

use crate::clock::Clock;
use crate::pacer::{self, Schedule};
use crate::prepare::complete_files;
use crate::progress;
use crate::record::{summarize, Recorder};
use crate::spec::{TargetSpec, TrialSpec, RESULT_SCHEMA};
use crate::target::{Outcome, Request, Target};
use crate::workload::fileset::{layout_id, FileSet, Origin};
use crate::workload::generator::Generator;
use crate::workload::mix::Op;
use anyhow::bail;
use serde_json::{json, Value};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Below this a waiting leader spins instead of sleeping: timer wake-ups are too coarse.
const SPIN_NS: u64 = 30_000;
/// A request still unclaimed this long after it was due, with no leader, means every thread is busy.
const SPAWN_AFTER_NS: u64 = 200_000;
/// Ops expected to take longer than this (and longer than the gap to the next request)
/// make the leader wake a follower before executing: a wake-up costs a few µs.
const HANDOFF_NS: u64 = 50_000;
/// How often the monitor looks for a stalled schedule when nothing is suspect. Each look
/// interrupts a sender on a busy core, so not more often than needed: slow ops hand off
/// before they block; this catches the ones that block unexpectedly.
const MONITOR_NS: u64 = 500_000;
/// Upper bound on sender threads when the user sets no cap.
const DEFAULT_THREAD_LIMIT: usize = 4096;
const NOT_DUE: u64 = u64::MAX;
/// Flag in Slot::executing: the request belongs to the measured window.
const COUNTED: u32 = 0x100;

/// Mean schedule lag over a stretch of the run.
#[derive(Default, Clone, Copy)]
struct LagSum {
    sum_ns: f64,
    count: u64,
}

impl LagSum {
    fn add(&mut self, ns: u64) {
        self.sum_ns += ns as f64;
        self.count += 1;
    }
    fn merge(&mut self, other: &LagSum) {
        self.sum_ns += other.sum_ns;
        self.count += other.count;
    }
    fn mean_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns / self.count as f64 / 1e6
        }
    }
}

/// The measured window [warmup, end) in ns from the start.
#[derive(Clone, Copy)]
struct Window {
    start_ns: u64,
    end_ns: u64,
}

impl Window {
    fn contains(&self, t: u64) -> bool {
        t >= self.start_ns && t < self.end_ns
    }
}

/// The window cut in four for the saturation verdict, with the cuts precomputed
/// (no division per request).
struct Quarters {
    window: Window,
    cuts: [u64; 3],
}

impl Quarters {
    fn new(window: Window) -> Quarters {
        let q = ((window.end_ns - window.start_ns) / 4).max(1);
        Quarters { window, cuts: [window.start_ns + q, window.start_ns + 2 * q, window.start_ns + 3 * q] }
    }
    /// Which quarter `t` falls in, or None outside the window.
    fn of(&self, t: u64) -> Option<usize> {
        if !self.window.contains(t) {
            return None;
        }
        Some((t >= self.cuts[0]) as usize + (t >= self.cuts[1]) as usize + (t >= self.cuts[2]) as usize)
    }
}

struct Claim {
    op: Op,
    due_ns: u64,
    request: Request,
    /// Claimed late while no more threads were allowed (the cap or the thread limit).
    held_by_limit: bool,
}

struct Done {
    op: Op,
    due_ns: u64,
    held_by_limit: bool,
    start_ns: u64,
    done_ns: u64,
    outcome: Outcome,
}

/// What completions add up to. The leader records into the one inside `Sched` (it holds
/// the lead anyway, so that costs no lock); a thread that finds another leader records
/// into the shared side tally. Both are merged at the end.
#[derive(Default)]
struct Tally {
    rec: Recorder,
    lag_quarters: [LagSum; 4],
    completed_in_window: u64,
}

impl Tally {
    fn complete(&mut self, q: &Quarters, d: Done) {
        let due = d.due_ns;
        if let Some(quarter) = q.of(due) {
            let lag = d.start_ns.saturating_sub(due);
            self.rec.lag.saturating_record(lag.max(1));
            if !d.held_by_limit {
                // Lag behind the cap is the server's doing; only free lag indicts the generator.
                self.lag_quarters[quarter].add(lag);
            }
            self.rec.ops[d.op.index()].record(d.done_ns.saturating_sub(due), &d.outcome);
        }
        if q.window.contains(d.done_ns) {
            self.completed_in_window += 1;
        }
    }

    fn merge(&mut self, other: &Tally) {
        self.rec.merge(&other.rec);
        for (q, o) in self.lag_quarters.iter_mut().zip(other.lag_quarters.iter()) {
            q.merge(o);
        }
        self.completed_in_window += other.completed_in_window;
    }
}

/// The schedule and the generator: only the leader touches them.
struct Sched {
    gen: Generator,
    schedule: Box<dyn Schedule + Send>,
    n: u64,
    next_due: u64,
    tally: Tally,
    sent_by_op: [u64; Op::ALL.len()],
    sent_in_window: u64,
    held_by_limit: u64,
    /// Requests of the window the generator never got to send.
    unsent: u64,
    unsent_by_generator: u64,
    trace: Vec<Value>,
    trace_limit: usize,
}

/// The lead: whoever holds it owns `Sched`. A spin-free try-lock; nobody ever waits for it.
struct Lead {
    taken: AtomicBool,
    sched: UnsafeCell<Sched>,
}

// SAFETY: `sched` is only reached through a LeadGuard, and `taken` admits one guard at a time.
unsafe impl Sync for Lead {}

struct LeadGuard<'a>(&'a Lead);

impl Lead {
    fn try_take(&self) -> Option<LeadGuard<'_>> {
        if self.taken.load(Relaxed) {
            return None;
        }
        self.taken.compare_exchange(false, true, Acquire, Relaxed).ok().map(|_| LeadGuard(self))
    }
    fn is_taken(&self) -> bool {
        self.taken.load(Relaxed)
    }
}

impl std::ops::Deref for LeadGuard<'_> {
    type Target = Sched;
    fn deref(&self) -> &Sched {
        // SAFETY: this guard is the only one (see Lead).
        unsafe { &*self.0.sched.get() }
    }
}

impl std::ops::DerefMut for LeadGuard<'_> {
    fn deref_mut(&mut self) -> &mut Sched {
        // SAFETY: this guard is the only one (see Lead).
        unsafe { &mut *self.0.sched.get() }
    }
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        self.0.taken.store(false, Release);
    }
}

/// One sender thread's public face. Counters have a single writer (the thread), so
/// they are updated with plain loads and stores, never read-modify-write.
#[derive(Default)]
struct Slot {
    /// Position in Shared::slots.
    index: usize,
    thread: OnceLock<std::thread::Thread>,
    /// Kernel thread id, to ask the scheduler whether a stuck thread is blocked or waiting for a CPU.
    tid: AtomicU32,
    parked: AtomicBool,
    /// 0 when not executing, else op index + 1, | COUNTED for a request of the window.
    executing: AtomicU32,
    /// When the request being executed was sent.
    started: AtomicU64,
    completed: AtomicU64,
    lag_ns: AtomicU64,
    lag_count: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed) + by, Relaxed);
}

struct Shared {
    lead: Lead,
    side: Mutex<Tally>,
    target: Arc<dyn Target>,
    clock: Clock,
    window: Window,
    quarters: Quarters,
    thread_limit: usize,
    lag_limit_ns: u64,
    /// Due time of the next unclaimed request, NOT_DUE once the schedule is done.
    next_due: AtomicU64,
    /// Requests claimed so far (the next one's number).
    claimed: AtomicU64,
    /// Set by the leader that finds the schedule done: every thread then exits.
    finished: AtomicBool,
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Parked followers, most recently parked last.
    idle: Mutex<Vec<Arc<Slot>>>,
    idle_count: AtomicUsize,
    threads: AtomicUsize,
    live: AtomicUsize,
    /// A leader about to block found no follower to take over: the monitor adds one now.
    want_thread: AtomicBool,
    /// Slot of the thread that last gave up the lead to execute: the one a stall waits for.
    last_leader: AtomicUsize,
    /// At the monitor's last look a request had been inside the target for longer than
    /// HANDOFF_NS: the target blocks, so every request is handed off before it executes
    /// (a wake-up per request costs little against such a target).
    congested: AtomicBool,
    monitor: OnceLock<std::thread::Thread>,
    /// Running estimate of the 90th percentile of each op's execution time, for the
    /// hand-off decision. A quantile, not a mean: a rare preemption must not move it.
    expect_ns: [AtomicU64; Op::ALL.len()],
}

impl Shared {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Wake the most recently parked follower, if any. Returns whether one was woken.
    fn wake_one(&self) -> bool {
        if self.idle_count.load(Relaxed) == 0 {
            return false;
        }
        let slot = {
            let mut idle = self.idle.lock().expect("idle list");
            let s = idle.pop();
            self.idle_count.store(idle.len(), Relaxed);
            s
        };
        match slot {
            Some(s) => {
                s.parked.store(false, Release);
                if let Some(t) = s.thread.get() {
                    t.unpark();
                }
                true
            }
            None => false,
        }
    }

    fn wake_all(&self) {
        self.finished.store(true, SeqCst);
        for s in self.slots.lock().expect("slot list").iter() {
            s.parked.store(false, Release);
            if let Some(t) = s.thread.get() {
                t.unpark();
            }
        }
        if let Some(m) = self.monitor.get() {
            m.unpark();
        }
    }

    /// Before a slow execution: make sure somebody else leads meanwhile.
    fn hand_off(&self) {
        if !self.wake_one() && self.threads.load(Relaxed) < self.thread_limit {
            self.want_thread.store(true, Release);
            if let Some(m) = self.monitor.get() {
                m.unpark();
            }
        }
    }

    /// Park until woken (by a hand-off, the monitor or the end of the schedule).
    fn park(&self, slot: &Arc<Slot>) {
        {
            let mut idle = self.idle.lock().expect("idle list");
            slot.parked.store(true, SeqCst);
            idle.push(slot.clone());
            self.idle_count.store(idle.len(), Relaxed);
        }
        // The lead may have been given up after our failed try: then take it rather than sleep.
        if !self.lead.is_taken() || self.finished.load(SeqCst) {
            let mut idle = self.idle.lock().expect("idle list");
            if let Some(i) = idle.iter().rposition(|s| Arc::ptr_eq(s, slot)) {
                idle.remove(i);
                self.idle_count.store(idle.len(), Relaxed);
            }
            slot.parked.store(false, Relaxed);
            return;
        }
        while slot.parked.load(Acquire) && !self.finished.load(Acquire) {
            std::thread::park();
        }
    }
}

impl Sched {
    fn claim(&mut self, shared: &Shared, now: u64) -> Option<Claim> {
        if self.next_due >= shared.window.end_ns {
            return None;
        }
        if now >= shared.window.end_ns + shared.lag_limit_ns {
            // The window is long over and the generator is still behind: what it never sent
            // is counted, not sent late into a window that no longer measures it.
            // Unsent because the thread limit was reached is the server's doing.
            let blocked = shared.threads.load(Relaxed) >= shared.thread_limit;
            while self.next_due < shared.window.end_ns {
                self.unsent += 1;
                self.unsent_by_generator += !blocked as u64;
                self.n += 1;
                self.next_due = self.schedule.due_ns(self.n);
            }
            shared.next_due.store(NOT_DUE, Relaxed);
            return None;
        }
        let due_ns = self.next_due;
        let (op, request, object) = self.gen.next();
        if self.trace.len() < self.trace_limit {
            self.trace.push(json!([op.name(), object]));
        }
        self.n += 1;
        self.next_due = self.schedule.due_ns(self.n);
        shared.next_due.store(if self.next_due >= shared.window.end_ns { NOT_DUE } else { self.next_due }, Relaxed);
        shared.claimed.store(self.n, Relaxed);
        // Late while no more threads were allowed: the cap (or the thread limit) held it
        // behind requests blocked in the target, not a slow generator. Below the limit the
        // monitor adds threads within microseconds, so lasting lag there is the generator's.
        let held_by_limit = now > due_ns + SPAWN_AFTER_NS && shared.threads.load(Relaxed) >= shared.thread_limit;
        if shared.window.contains(due_ns) {
            self.sent_in_window += 1;
            self.sent_by_op[op.index()] += 1;
            self.held_by_limit += held_by_limit as u64;
        }
        Some(Claim { op, due_ns, request, held_by_limit })
    }
}

/// One step of a stochastic 90th-percentile estimate: up 20% when exceeded, down 2% when
/// not (at the 90th percentile 0.1 * ln 1.2 = 0.9 * -ln 0.98, so it stays put).
fn track_p90(estimate: u64, took: u64) -> u64 {
    if estimate == 0 {
        // An op's first run is often its slowest (cold caches, first page faults): start
        // below the hand-off threshold and let a really slow op climb there in a few steps.
        took.clamp(1, HANDOFF_NS / 2)
    } else if took > estimate {
        (estimate + estimate / 5).max(estimate + 1)
    } else {
        estimate - estimate / 50
    }
}

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
    stats: Option<(u64, Vec<(u32, u64, u64)>)>,
}

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

/// Wait for `due_ns`; returns the time read when it had come.
fn wait_until(shared: &Shared, due_ns: u64) -> u64 {
    loop {
        let now = shared.now_ns();
        if now >= due_ns {
            return now;
        }
        if due_ns - now > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(due_ns - now - SPIN_NS / 2));
        } else {
            std::hint::spin_loop();
        }
    }
}

fn sender(shared: Arc<Shared>, slot: Arc<Slot>) {
    // Wake-ups land within microseconds instead of the default 50 µs timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let _ = slot.thread.set(std::thread::current());
    slot.tid.store(unsafe { libc::syscall(libc::SYS_gettid) } as u32, Relaxed);
    let mut lead: Option<LeadGuard> = None;
    // The last time read: good enough for the claim's bookkeeping, so claiming reads no clock.
    let mut now = shared.now_ns();
    'run: loop {
        let mut guard = match lead.take() {
            Some(g) => g,
            None => loop {
                if shared.finished.load(Acquire) {
                    break 'run;
                }
                if let Some(g) = shared.lead.try_take() {
                    break g;
                }
                shared.park(&slot);
            },
        };
        let Some(claim) = guard.claim(&shared, now) else {
            drop(guard);
            shared.wake_all();
            break;
        };
        let next_due = guard.next_due;
        now = shared.now_ns();
        if now < claim.due_ns {
            now = wait_until(&shared, claim.due_ns);
        }
        let start_ns = now;
        let op = claim.op.index();
        let counted = shared.window.contains(claim.due_ns);
        let expect = shared.expect_ns[op].load(Relaxed);
        shared.last_leader.store(slot.index, Relaxed);
        drop(guard); // whoever is free may lead while this request executes
        slot.started.store(start_ns, Relaxed);
        slot.executing.store(op as u32 + 1 + if counted { COUNTED } else { 0 }, Relaxed);
        if (expect > HANDOFF_NS && start_ns + expect > next_due) || shared.congested.load(Relaxed) {
            shared.hand_off();
        }
        let Claim { op: op_kind, due_ns, request, held_by_limit } = claim;
        let outcome = shared.target.execute(&request);
        now = shared.now_ns();
        slot.executing.store(0, Relaxed);
        shared.expect_ns[op].store(track_p90(expect, now - start_ns), Relaxed);
        if counted {
            bump(&slot.lag_ns, start_ns - due_ns);
            bump(&slot.lag_count, 1);
        }
        bump(&slot.completed, 1);
        let done = Done { op: op_kind, due_ns, held_by_limit, start_ns, done_ns: now, outcome };
        match shared.lead.try_take() {
            Some(mut g) => {
                g.tally.complete(&shared.quarters, done);
                g.gen.recycle(request);
                lead = Some(g);
            }
            None => shared.side.lock().expect("a sender panicked").complete(&shared.quarters, done),
        }
    }
    shared.live.fetch_sub(1, Release);
}

fn spawn_sender(shared: &Arc<Shared>) {
    let s = shared.clone();
    let slot = {
        let mut slots = shared.slots.lock().expect("slot list");
        let slot = Arc::new(Slot { index: slots.len(), ..Slot::default() });
        slots.push(slot.clone());
        slot
    };
    shared.threads.fetch_add(1, Relaxed);
    shared.live.fetch_add(1, Relaxed);
    std::thread::Builder::new()
        .name("pb-sender".into())
        .stack_size(256 * 1024)
        .spawn(move || sender(s, slot))
        .expect("spawn sender thread");
}

pub fn run(spec: &TrialSpec, mut target: Box<dyn Target>) -> anyhow::Result<Value> {
    for (op, w) in &spec.mix {
        if *w > 0.0 && !target.supports(*op) {
            bail!("the target cannot do {}", op.name());
        }
    }
    let id = layout_id(&spec.fileset);
    let null = matches!(spec.target, TargetSpec::Null);
    if !null {
        let have = complete_files(target.as_ref(), &spec.fileset)?;
        if have < spec.fileset.files {
            bail!("file set {id} not prepared ({have} of {} files): run prepare first", spec.fileset.files);
        }
        target.enter_fileset(&id, false)?;
    }
    let load = &spec.load;
    let window = Window { start_ns: (load.warmup_s * 1e9) as u64, end_ns: ((load.warmup_s + load.runtime_s) * 1e9) as u64 };
    let mut schedule = pacer::schedule(load.arrivals, load.rate, spec.seed);
    let first_due = schedule.due_ns(0);
    let mut gen = Generator::new(spec, FileSet::build(&spec.fileset));
    // The null target never looks at paths: don't spend the engine's floor formatting them.
    gen.paths = !null || std::env::var_os("PEAKBENCH_NULL_PATHS").is_some();
    let sched = Sched {
        gen,
        schedule,
        n: 0,
        next_due: first_due,
        tally: Tally::default(),
        sent_by_op: [0; Op::ALL.len()],
        sent_in_window: 0,
        held_by_limit: 0,
        unsent: 0,
        unsent_by_generator: 0,
        trace: Vec::new(),
        trace_limit: spec.trace_ops,
    };
    let shared = Arc::new(Shared {
        lead: Lead { taken: AtomicBool::new(false), sched: UnsafeCell::new(sched) },
        side: Mutex::new(Tally::default()),
        target: Arc::from(target),
        clock: Clock::start(10),
        window,
        quarters: Quarters::new(window),
        thread_limit: load.max_outstanding.unwrap_or(DEFAULT_THREAD_LIMIT),
        lag_limit_ns: (load.lag_limit_ms * 1e6) as u64,
        next_due: AtomicU64::new(first_due),
        claimed: AtomicU64::new(0),
        finished: AtomicBool::new(false),
        slots: Mutex::new(Vec::new()),
        idle: Mutex::new(Vec::new()),
        idle_count: AtomicUsize::new(0),
        threads: AtomicUsize::new(0),
        live: AtomicUsize::new(0),
        want_thread: AtomicBool::new(false),
        last_leader: AtomicUsize::new(0),
        congested: AtomicBool::new(false),
        monitor: OnceLock::new(),
        expect_ns: Default::default(),
    });
    let max_busy = monitor(spec, &shared);

    let timed_out = shared.live.load(Acquire) > 0;
    // Take the lead for good: a straggler finishing after the drain timeout records into the side tally.
    let mut guard = loop {
        if let Some(g) = shared.lead.try_take() {
            break g;
        }
        std::thread::yield_now();
    };
    let mut side = shared.side.lock().expect("a sender panicked");
    let sched: &mut Sched = &mut guard;
    sched.tally.merge(&side);
    *side = Tally::default();
    // Whatever is still executing after the drain timeout is a timeout, not silently dropped.
    for s in shared.slots.lock().expect("slot list").iter() {
        let e = s.executing.load(Acquire);
        if e & COUNTED != 0 {
            sched.tally.rec.ops[((e & 0xff) - 1) as usize].timeouts += 1;
        }
    }
    let restore = if timed_out {
        json!({"done": false, "reason": "requests still outstanding at the drain timeout"})
    } else {
        restore(&mut sched.gen, shared.target.as_ref())
    };
    Ok(result(spec, &shared, sched, max_busy, restore, &id))
}

/// Per-thread counters summed, for progress lines.
#[derive(Default, Clone, Copy)]
struct Counts {
    completed: u64,
    lag_ns: u64,
    lag_count: u64,
    busy: usize,
    /// Requests inside the target for longer than HANDOFF_NS.
    blocked: usize,
    /// The thread of the longest-running one.
    oldest_tid: u32,
}

fn counts(shared: &Shared, now: u64) -> Counts {
    let mut c = Counts::default();
    let mut oldest = 0;
    for s in shared.slots.lock().expect("slot list").iter() {
        c.completed += s.completed.load(Relaxed);
        c.lag_ns += s.lag_ns.load(Relaxed);
        c.lag_count += s.lag_count.load(Relaxed);
        if s.executing.load(Relaxed) != 0 {
            c.busy += 1;
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
    c
}

/// Follow the trial from the main thread: wake or add senders when a due request finds
/// no leader and no progress, report progress, and end the drain at its deadline.
/// Returns the most requests seen in flight.
fn monitor(spec: &TrialSpec, shared: &Arc<Shared>) -> usize {
    let load = &spec.load;
    let _ = shared.monitor.set(std::thread::current());
    let progress_ns = (spec.progress_interval_s * 1e9) as u64;
    let mut next_progress = progress_ns;
    let mut drain_deadline = NOT_DUE;
    let mut max_busy = 0;
    let mut last = Counts::default();
    let mut suspect: Option<Stall> = None;
    let mut last_claimed = u64::MAX;
    let cpus = usable_cpus();
    spawn_sender(shared);
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
        // A due request unclaimed, nobody leading, and no claim since the last look: every
        // thread is inside the target. Wake a parked follower, or add threads for what is
        // overdue. Seen once, it may be a 1 µs syscall caught in the act.
        let claimed = shared.claimed.load(Relaxed);
        // Claims since the last look: the generator is moving; look again at the usual pace.
        let progressed = claimed != last_claimed;
        last_claimed = claimed;
        let starved = due != NOT_DUE && now > due + SPAWN_AFTER_NS && !shared.lead.is_taken();
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
        if due == NOT_DUE && drain_deadline == NOT_DUE {
            drain_deadline = now.max(shared.window.end_ns) + (load.drain_timeout_s * 1e9) as u64;
        }
        if now >= next_progress {
            let lag_count = (c.lag_count - last.lag_count).max(1);
            let phase = if now < shared.window.start_ns { "warmup" } else if due != NOT_DUE { "measure" } else { "drain" };
            progress::emit(json!({
                "phase": phase, "elapsed_s": now as f64 / 1e9, "completed": c.completed,
                "outstanding": c.busy, "rate": (c.completed - last.completed) as f64 / spec.progress_interval_s,
                "lag_ms": (c.lag_ns - last.lag_ns) as f64 / lag_count as f64 / 1e6, "threads": threads,
            }));
            last = c;
            next_progress += progress_ns * ((now - next_progress) / progress_ns + 1);
        }
        if shared.live.load(Acquire) == 0 || now >= drain_deadline {
            return max_busy;
        }
        let watch = if suspect.is_some() && !progressed {
            now + SPAWN_AFTER_NS
        } else if due == NOT_DUE {
            NOT_DUE
        } else {
            (due + SPAWN_AFTER_NS).max(now + MONITOR_NS)
        };
        let wake = watch.min(next_progress).min(drain_deadline);
        std::thread::park_timeout(Duration::from_nanos(wake.saturating_sub(now).clamp(SPAWN_AFTER_NS / 4, 100_000_000)));
    }
}

fn result(spec: &TrialSpec, shared: &Shared, state: &Sched, max_busy: usize, restore: Value, id: &str) -> Value {
    let load = &spec.load;
    let tally = &state.tally;
    let (ops, all) = tally.rec.summaries();
    let quarters = tally.lag_quarters;
    // Compare the first and the last quarter that sent anything: a generator far
    // behind may never reach the last quarter's requests at all.
    let sent_quarters: Vec<&LagSum> = quarters.iter().filter(|q| q.count > 0).collect();
    let first = sent_quarters.first().map_or(0.0, |q| q.mean_ms());
    let last = sent_quarters.last().map_or(0.0, |q| q.mean_ms());
    let lag_grew = last > load.lag_limit_ms && last > first;
    let saturation_reason = if state.unsent_by_generator > 0 {
        Some(format!(
            "the generator never sent {} of the window's requests although sender threads were free; the engine, not the target, limited this trial",
            state.unsent_by_generator
        ))
    } else if lag_grew {
        Some(format!(
            "the generator fell behind its own schedule: mean send lag grew from {first:.3} ms to {last:.3} ms over the run (limit {} ms); the engine, not the target, limited this trial",
            load.lag_limit_ms
        ))
    } else {
        None
    };
    let saturated = saturation_reason.is_some();
    let lag = summarize(&tally.rec.lag);
    let mix_actual: serde_json::Map<String, Value> = Op::ALL
        .iter()
        .filter(|op| state.sent_by_op[op.index()] > 0)
        .map(|op| (op.name().to_string(), json!(state.sent_by_op[op.index()] as f64 / state.sent_in_window.max(1) as f64)))
        .collect();
    let (cpu_s, rss_kib) = own_usage();
    let set = &state.gen.set;
    let capped = load.max_outstanding.is_some();
    let mut result = json!({
        "schema": RESULT_SCHEMA,
        "engine_version": env!("CARGO_PKG_VERSION"),
        "requested_rate": load.rate,
        "achieved_rate": tally.completed_in_window as f64 / load.runtime_s,
        "sent": state.sent_in_window,
        "unsent": state.unsent,
        "completed": all.len(),
        "warmup_s": load.warmup_s,
        "runtime_s": load.runtime_s,
        "ops": ops,
        "latency": summarize(&all),
        "schedule_lag": {"mean_ms": lag.mean_ms, "p99_ms": lag.p99_ms, "max_ms": lag.max_ms, "hist": lag.hist,
                          "quarters_mean_ms": quarters.iter().map(|q| q.mean_ms()).collect::<Vec<_>>()},
        "generator_saturated": saturated,
        "saturation_reason": saturation_reason,
        "outstanding": {"cap": load.max_outstanding, "cap_bound": if capped { state.held_by_limit } else { 0 }, "max": max_busy,
                         "threads": shared.threads.load(Relaxed), "thread_limit_bound": if capped { 0 } else { state.held_by_limit }},
        "mix_actual": mix_actual,
        "engine_cpu_s": cpu_s,
        "engine_clock": shared.clock.source(),
        "peak_rss_kib": rss_kib,
        "fileset": {"id": id, "files": spec.fileset.files,
                     "dirs": set.dirs.iter().filter(|d| d.origin == Origin::Prepared).count(),
                     "symlinks": set.symlinks.iter().filter(|s| s.origin == Origin::Prepared).count(), "bytes": set.prepared_bytes},
        "restore": restore,
    });
    if spec.trace_ops > 0 {
        result["op_trace"] = Value::Array(state.trace.clone());
    }
    result
}

/// Put the file set back as prepare left it, untimed, so every trial starts from the same state.
fn restore(gen: &mut Generator, target: &dyn Target) -> Value {
    let mut errors: Vec<String> = Vec::new();
    let mut note = |r: Outcome, what: &str| {
        if let Err(e) = r {
            errors.push(format!("{what}: {e}"));
        }
    };
    for path in std::mem::take(&mut gen.links) {
        note(target.execute(&Request::Remove { path: path.clone() }), &path);
    }
    let set = &mut gen.set;
    for s in (0..set.symlinks.len()).rev().filter(|&s| set.symlinks[s].origin == Origin::Created) {
        let path = set.symlink_path(s as u32);
        note(target.execute(&Request::Remove { path: path.clone() }), &path);
    }
    let content = crate::prepare::content_block(0);
    for i in 0..set.files.len() {
        let f = &set.files[i];
        let (alive, origin, generation) = (f.alive, f.origin, f.generation);
        let current = set.file_path(i as u32);
        if origin == Origin::Created {
            if alive {
                note(target.execute(&Request::Remove { path: current.clone() }), &current);
            }
            continue;
        }
        set.files[i].generation = 0;
        let base = set.file_path(i as u32);
        let original = gen.original_sizes.get(&(i as u32)).copied();
        if !alive {
            let size = original.unwrap_or(set.files[i].size);
            note(target.ensure_file(&base, size, &content).map(|_| 0).map_err(|e| e.to_string()), &base);
            continue;
        }
        if generation > 0 {
            note(target.execute(&Request::Rename { from: current, to: base.clone() }), &base);
        }
        if let Some(size) = original {
            note(target.truncate(&base, size).map(|_| 0).map_err(|e| e.to_string()), &base);
        }
    }
    for d in (0..set.dirs.len()).rev().filter(|&d| set.dirs[d].origin == Origin::Created && set.dirs[d].alive) {
        let mut path = String::new();
        set.dir_path(d as u32, &mut path);
        note(target.execute(&Request::Rmdir { path: path.clone() }), &path);
    }
    json!({"done": errors.is_empty(), "errors": errors.len(), "first_errors": errors.iter().take(5).collect::<Vec<_>>()})
}

fn own_usage() -> (f64, u64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A target whose ops sleep: `every`-th op for `slow`, the others for `fast`.
    /// With `capacity` Some(k), at most k ops run at once (a server with k workers).
    struct Sleepy {
        fast: Duration,
        slow: Duration,
        every: u64,
        count: AtomicU64,
        workers: Option<(Mutex<usize>, std::sync::Condvar, usize)>,
    }

    impl Sleepy {
        fn new(fast_us: u64, slow_us: u64, every: u64, capacity: Option<usize>) -> Sleepy {
            Sleepy {
                fast: Duration::from_micros(fast_us),
                slow: Duration::from_micros(slow_us),
                every,
                count: AtomicU64::new(0),
                workers: capacity.map(|k| (Mutex::new(0), std::sync::Condvar::new(), k)),
            }
        }
    }

    impl Target for Sleepy {
        fn supports(&self, _op: Op) -> bool {
            true
        }
        fn execute(&self, _request: &Request) -> Outcome {
            let n = self.count.fetch_add(1, Relaxed) + 1;
            if let Some((busy, cv, k)) = &self.workers {
                let mut b = cv.wait_while(busy.lock().unwrap(), |b| *b >= *k).unwrap();
                *b += 1;
            }
            let d = if n % self.every == 0 { self.slow } else { self.fast };
            if !d.is_zero() {
                std::thread::sleep(d);
            }
            if let Some((busy, cv, _)) = &self.workers {
                *busy.lock().unwrap() -= 1;
                cv.notify_one();
            }
            Ok(0)
        }
        fn enter_fileset(&mut self, _id: &str, _create: bool) -> anyhow::Result<()> {
            Ok(())
        }
        fn is_empty(&self) -> anyhow::Result<bool> {
            Ok(true)
        }
        fn read_meta(&self, _name: &str) -> anyhow::Result<Option<Vec<u8>>> {
            Ok(None)
        }
        fn write_meta(&self, _name: &str, _bytes: &[u8]) -> anyhow::Result<()> {
            Ok(())
        }
        fn ensure_dir(&self, _path: &str) -> anyhow::Result<()> {
            Ok(())
        }
        fn ensure_file(&self, _path: &str, _size: u64, _content: &[u8]) -> anyhow::Result<()> {
            Ok(())
        }
        fn ensure_symlink(&self, _path: &str, _points_to: &str) -> anyhow::Result<()> {
            Ok(())
        }
        fn truncate(&self, _path: &str, _size: u64) -> anyhow::Result<()> {
            Ok(())
        }
    }

    /// A spec for the synthetic targets. The lag limit is 50 ms, not 5: these tests run on
    /// shared machines, and an engine that fails to add threads lags by whole op times.
    fn spec(rate: f64, runtime_s: f64, cap: Option<usize>, trace: usize) -> TrialSpec {
        let cap = cap.map_or("null".to_string(), |c| c.to_string());
        crate::spec::parse(&format!(
            r#"{{"schema": "peakbench.trial-spec/1", "target": {{"kind": "null"}}, "seed": 3,
                "load": {{"rate": {rate}, "warmup_s": 0.2, "runtime_s": {runtime_s}, "max_outstanding": {cap},
                          "drain_timeout_s": 30, "lag_limit_ms": 50}},
                "fileset": {{"seed": 1, "files": 200, "files_per_dir": {{"kind": "constant", "value": 20}},
                             "dirs_per_dir": {{"kind": "constant", "value": 3}}, "max_depth": 2,
                             "file_sizes": {{"kind": "constant", "value": 8192}}}},
                "mix": {{"getattr": 0.5, "read": 0.2, "lookup": 0.1, "create": 0.1, "remove": 0.1}},
                "trace_ops": {trace}, "progress_interval_s": 100}}"#
        ))
        .expect("test spec")
    }

    fn num(v: &Value) -> f64 {
        v.as_f64().expect("a number")
    }

    /// Timing tests run one at a time: cargo runs tests in parallel threads.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

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

    #[test]
    fn a_blocking_target_gets_threads_and_the_schedule_holds() {
        let _one_at_a_time = serial();
        // 20 ms per op at 500/s: about 10 requests in flight. One thread would manage 50/s.
        let r = run(&spec(500.0, 1.5, None, 0), Box::new(Sleepy::new(20_000, 20_000, 1, None))).unwrap();
        assert_eq!(r["generator_saturated"], false, "{}", r["saturation_reason"]);
        assert!((num(&r["achieved_rate"]) - 500.0).abs() < 10.0, "{}", r["achieved_rate"]);
        let lat = &r["latency"];
        assert!(num(&lat["p50_ms"]) >= 20.0 && num(&lat["p50_ms"]) < 25.0, "{lat}");
        // Requests are sent on time although each one blocks its thread for 20 ms.
        assert!(num(&r["schedule_lag"]["p99_ms"]) < 10.0, "{}", r["schedule_lag"]);
        let threads = r["outstanding"]["threads"].as_u64().unwrap();
        assert!((10..=80).contains(&threads), "{threads} threads for about 10 in flight");
        assert!(r["outstanding"]["max"].as_u64().unwrap() >= 8);
    }

    #[test]
    fn an_op_that_blocks_unexpectedly_does_not_stall_the_schedule() {
        let _one_at_a_time = serial();
        // Mostly instant, but every 250th op blocks for 100 ms: the monitor must let another
        // thread lead meanwhile, so at 2,500/s the lag stays far below 100 ms.
        let r = run(&spec(2500.0, 1.5, None, 0), Box::new(Sleepy::new(0, 100_000, 250, None))).unwrap();
        assert_eq!(r["generator_saturated"], false, "{}", r["saturation_reason"]);
        assert!((num(&r["achieved_rate"]) - 2500.0).abs() < 50.0, "{}", r["achieved_rate"]);
        assert!(num(&r["schedule_lag"]["max_ms"]) < 50.0, "{}", r["schedule_lag"]);
        assert!(num(&r["schedule_lag"]["p99_ms"]) < 20.0, "{}", r["schedule_lag"]);
        assert!(num(&r["latency"]["max_ms"]) >= 100.0);
    }

    #[test]
    fn a_cap_holds_requests_back_and_the_server_gets_the_blame() {
        let _one_at_a_time = serial();
        // Two outstanding at most, 10 ms each: capacity 200/s, offered 400/s.
        let r = run(&spec(400.0, 1.0, Some(2), 0), Box::new(Sleepy::new(10_000, 10_000, 1, None))).unwrap();
        assert!(r["outstanding"]["threads"].as_u64().unwrap() <= 2);
        assert!(r["outstanding"]["cap_bound"].as_u64().unwrap() > 50, "{}", r["outstanding"]);
        assert_eq!(r["generator_saturated"], false, "{}", r["saturation_reason"]);
        // Latency from the intended send time includes the wait behind the cap: it grows.
        assert!(num(&r["latency"]["mean_ms"]) > 100.0, "{}", r["latency"]);
        assert!(num(&r["achieved_rate"]) < 230.0);
    }

    #[test]
    fn an_overloaded_server_shows_its_queue_in_the_latency() {
        let _one_at_a_time = serial();
        // One worker, 10 ms per op (100/s), offered 200/s for 1 s: the request due at t
        // completes at about 2t, so the mean latency is hundreds of ms, and threads pile up.
        let r = run(&spec(200.0, 1.0, None, 0), Box::new(Sleepy::new(10_000, 10_000, 1, Some(1)))).unwrap();
        assert!(num(&r["latency"]["mean_ms"]) > 150.0, "{}", r["latency"]);
        assert!(num(&r["achieved_rate"]) < 130.0);
        assert_eq!(r["generator_saturated"], false, "{}", r["saturation_reason"]);
        assert!(num(&r["schedule_lag"]["p99_ms"]) < 20.0, "{}", r["schedule_lag"]);
        assert!(r["outstanding"]["max"].as_u64().unwrap() > 50, "{}", r["outstanding"]);
    }

    #[test]
    fn the_op_sequence_does_not_depend_on_threads_or_timing() {
        let _one_at_a_time = serial();
        let fast = run(&spec(20_000.0, 0.3, None, 2000), Box::new(Sleepy::new(0, 0, 1, None))).unwrap();
        let slow = run(&spec(20_000.0, 0.3, None, 2000), Box::new(Sleepy::new(0, 3000, 7, None))).unwrap();
        assert!(slow["outstanding"]["threads"].as_u64().unwrap() > 1);
        assert_eq!(fast["op_trace"], slow["op_trace"]);
        assert_eq!(fast["op_trace"].as_array().unwrap().len(), 2000);
    }
}
