//! The sender threads and what they share.
//!
//! Threads take turns as the *leader*: the one thread that claims the next request,
//! waits until it is due and sends it. It gives up the lead while its request executes
//! and takes it back afterwards, so against a fast target one thread does everything
//! (no hand-off, no lock, two clock reads per request). A request expected to outlast
//! the gap to the next one makes the leader wake a parked follower (or ask the monitor
//! for a new thread) before executing; one that blocks unexpectedly is caught by the
//! monitor. A pipelining target's requests are started without waiting, so its leader
//! keeps the lead and its completions arrive on the target's own threads, or, for a
//! target that completes in `poll` (an event loop), on the leader itself while it waits
//! for the next due time or for a place under the cap: one thread does everything.

use super::lead::{Lead, LeadGuard};
use super::sched::Claim;
use super::tally::{Done, Quarters, Tally, Window};
use crate::clock::Clock;
use crate::op::{Op, Request};
use crate::target::{Completion, Target};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Below this a waiting leader spins instead of sleeping: timer wake-ups are too coarse.
const SPIN_NS: u64 = 30_000;
/// A request still unclaimed this long after it was due, with no leader, means every thread is busy.
pub const SPAWN_AFTER_NS: u64 = 200_000;
/// Ops expected to take longer than this (and longer than the gap to the next request)
/// make the leader wake a follower before executing: a wake-up costs a few µs.
pub const HANDOFF_NS: u64 = 50_000;
pub const NOT_DUE: u64 = u64::MAX;
/// Flag in Slot::executing: the request belongs to the measured window.
pub const COUNTED: u32 = 0x100;
/// Most overdue requests a pipelining leader starts before it flushes them (and, on a
/// target that completes in `poll`, looks for completions).
const MAX_BATCH: usize = 32;
/// Longest single wait in `Target::poll` while nothing else is due, so the leader looks at
/// the interrupt and the drain in good time.
const POLL_SLICE: Duration = Duration::from_millis(10);

/// One sender thread's public face. Counters have a single writer (the thread), so
/// they are updated with plain loads and stores, never read-modify-write.
#[derive(Default)]
pub struct Slot {
    /// Position in Shared::slots.
    pub index: usize,
    thread: OnceLock<std::thread::Thread>,
    /// Kernel thread id, to ask the scheduler whether a stuck thread is blocked or waiting for a CPU.
    pub tid: AtomicU32,
    pub parked: AtomicBool,
    /// 0 when not executing, else op index + 1, | COUNTED for a request of the window.
    pub executing: AtomicU32,
    /// When the request being executed was sent.
    pub started: AtomicU64,
    pub completed: AtomicU64,
    pub lag_ns: AtomicU64,
    pub lag_count: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed) + by, Relaxed);
}

pub struct Shared {
    pub lead: Lead,
    pub side: Mutex<Tally>,
    pub target: Arc<dyn Target>,
    pub clock: Clock,
    pub window: Window,
    pub quarters: Quarters,
    /// Closed loop: a fixed set of clients, each sending as soon as its last request completed.
    pub closed: bool,
    /// Requests are started without waiting (a pipelining target, open loop; or closed loop
    /// on a target that completes in `poll`, its clients being the cap on requests in flight).
    pub pipelines: bool,
    /// Started requests complete in `Target::poll`, which the leader calls whenever it waits.
    pub polls: bool,
    /// The monitor is done (everything completed, or the drain timed out): a polling leader stops.
    pub drained: AtomicBool,
    pub thread_limit: usize,
    /// The user's cap on requests in flight, which a pipelining target honours here.
    pub cap: Option<usize>,
    pub lag_limit_ns: u64,
    /// Due time of the next unclaimed request, NOT_DUE once the schedule is done.
    pub next_due: AtomicU64,
    /// When an interrupt (interrupt.rs) ended the measured window, NOT_DUE if none did.
    pub stopped_at_ns: AtomicU64,
    /// Requests claimed so far (the next one's number).
    pub claimed: AtomicU64,
    /// Set by the leader that finds the schedule done: every thread then exits.
    pub finished: AtomicBool,
    pub slots: Mutex<Vec<Arc<Slot>>>,
    /// Parked followers, most recently parked last.
    idle: Mutex<Vec<Arc<Slot>>>,
    pub idle_count: AtomicUsize,
    pub threads: AtomicUsize,
    pub live: AtomicUsize,
    /// A leader about to block found no follower to take over: the monitor adds one now.
    pub want_thread: AtomicBool,
    /// Slot of the thread that last gave up the lead to execute: the one a stall waits for.
    pub last_leader: AtomicUsize,
    /// At the monitor's last look a request had been inside the target for longer than
    /// HANDOFF_NS: the target blocks, so every request is handed off before it executes
    /// (a wake-up per request costs little against such a target).
    pub congested: AtomicBool,
    pub monitor: OnceLock<std::thread::Thread>,
    /// Running estimate of the 90th percentile of each op's execution time, for the
    /// hand-off decision. A quantile, not a mean: a rare preemption must not move it.
    pub expect_ns: [AtomicU64; Op::ALL.len()],
    /// Requests started on a pipelining target and not yet complete.
    pub started: AtomicUsize,
    /// ... of them in the window, per op: what the drain timeout turns into cancellations.
    pub in_flight: [AtomicU64; Op::ALL.len()],
    /// Completions of started requests (they arrive on the target's threads, not in a slot).
    pub started_completed: AtomicU64,
    /// A leader waiting for the cap to let it start another request.
    cap_waiting: AtomicUsize,
    cap_waiter: Mutex<Option<std::thread::Thread>>,
}

impl Shared {
    /// Everything else starts empty: no thread, no request.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        lead: Lead,
        target: Arc<dyn Target>,
        clock: Clock,
        window: Window,
        closed: bool,
        thread_limit: usize,
        cap: Option<usize>,
        lag_limit_ns: u64,
        first_due: u64,
    ) -> Shared {
        let polls = target.pipelines() && target.completes_in_poll();
        // A closed-loop client waits for its reply: on its own thread, unless one thread can
        // keep every client's request in flight and complete them all itself.
        let pipelines = target.pipelines() && (!closed || polls);
        Shared {
            lead,
            side: Mutex::new(Tally::default()),
            pipelines,
            polls,
            drained: AtomicBool::new(false),
            target,
            clock,
            window,
            quarters: Quarters::new(window),
            closed,
            thread_limit,
            cap: if closed && pipelines { Some(thread_limit) } else { cap }, // thread_limit: the clients
            lag_limit_ns,
            next_due: AtomicU64::new(first_due),
            stopped_at_ns: AtomicU64::new(NOT_DUE),
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
            started: AtomicUsize::new(0),
            in_flight: Default::default(),
            started_completed: AtomicU64::new(0),
            cap_waiting: AtomicUsize::new(0),
            cap_waiter: Mutex::new(None),
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Whether an interrupt has ended the schedule; the first to see it records when.
    pub fn interrupted(&self, now: u64) -> bool {
        if !crate::interrupt::requested() {
            return false;
        }
        let _ = self.stopped_at_ns.compare_exchange(NOT_DUE, now, Relaxed, Relaxed);
        true
    }

    /// Wake the most recently parked follower, if any. Returns whether one was woken.
    #[inline]
    pub fn wake_one(&self) -> bool {
        // Inline, so that a leader with no follower (closed loop, one client) pays one load.
        self.idle_count.load(Relaxed) > 0 && self.wake_parked()
    }

    #[inline(never)]
    fn wake_parked(&self) -> bool {
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

    /// A pipelining target: wait while the user's cap is reached. Sleeps until a
    /// completion frees a place (it unparks us), not in a polling loop.
    fn wait_for_cap(&self) {
        let Some(cap) = self.cap else { return };
        if self.started.load(Relaxed) < cap {
            return;
        }
        if self.polls {
            self.target.flush(); // what was started must go out before the wait for its replies
                                 // Open loop: resume once a quarter of the places are free, so the next requests go
                                 // out in one write; a closed-loop client sends as soon as its reply is in.
            let resume_at = if self.closed { cap - 1 } else { self.resume_at(cap) };
            while self.started.load(Relaxed) > resume_at {
                self.target.poll(POLL_SLICE);
            }
            return;
        }
        self.target.flush();
        *self.cap_waiter.lock().expect("cap waiter lock") = Some(std::thread::current());
        self.cap_waiting.fetch_add(1, Relaxed);
        while self.started.load(SeqCst) >= cap {
            std::thread::park_timeout(Duration::from_millis(1));
        }
        self.cap_waiting.fetch_sub(1, Relaxed);
    }

    /// How many requests may still be in flight when a leader held by the cap resumes: a
    /// quarter of the places free, so it sends a batch instead of one request per wake-up.
    fn resume_at(&self, cap: usize) -> usize {
        cap - (cap / 4).max(1)
    }

    /// A started request completed (on the target's thread).
    fn started_done(&self, counted: bool, d: Done) {
        if counted {
            self.in_flight[d.op.index()].fetch_sub(1, Relaxed);
        }
        self.started_completed.fetch_add(1, Relaxed);
        self.side.lock().expect("a sender panicked").complete(&self.quarters, &d);
        self.started.fetch_sub(1, SeqCst);
        let resume_at = self.cap.map_or(0, |cap| self.resume_at(cap));
        if self.cap_waiting.load(SeqCst) > 0 && self.started.load(Relaxed) <= resume_at {
            if let Some(t) = self.cap_waiter.lock().expect("cap waiter lock").as_ref() {
                t.unpark();
            }
        }
    }
}

/// Start a claimed request on a pipelining target without waiting for it, and give back the
/// request (its path buffer serves the next); hand the claim back if the target must execute
/// this one the blocking way.
fn start(shared: &Arc<Shared>, claim: Claim, start_ns: u64, counted: bool) -> Result<Request, Claim> {
    shared.wait_for_cap();
    // Counted before the target may complete it, on another thread.
    shared.started.fetch_add(1, Relaxed);
    if counted {
        shared.in_flight[claim.op.index()].fetch_add(1, Relaxed);
    }
    let s = shared.clone();
    let (op, due_ns, class, held_by_limit) = (claim.op, claim.due_ns, claim.class, claim.held_by_limit);
    let done: Completion = Box::new(move |outcome, retransmissions| {
        let done_ns = s.now_ns();
        s.started_done(counted, Done { op, due_ns, class, held_by_limit, start_ns, done_ns, outcome, retransmissions });
    });
    match shared.target.start(&claim.request, done) {
        Ok(()) => Ok(claim.request),
        Err(_unused) => {
            shared.started.fetch_sub(1, SeqCst);
            if counted {
                shared.in_flight[op.index()].fetch_sub(1, Relaxed);
            }
            Err(claim)
        }
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

/// Wait for `due_ns`; returns the time read when it had come. A target that completes in
/// `poll` completes its replies meanwhile, each as it arrives, until SPIN_NS / 2 before the
/// due time; then it spins like any other: a poll there is a system call per turn, and a
/// wait to the due time itself would send a timer wake-up late (≈ 18 µs on the reference
/// machine). A reply that lands in that last stretch is read right after the send.
///
/// With the target's send slack, the wait runs to the due time plus the slack, without the
/// spin: the request may go out that much late, and every request due by then with it.
fn wait_until(shared: &Shared, due_ns: u64) -> u64 {
    loop {
        let now = shared.now_ns();
        if now >= due_ns {
            return now;
        }
        let left = due_ns - now;
        let slack = if shared.polls { shared.target.send_slack().as_nanos() as u64 } else { 0 };
        if slack > 0 {
            shared.target.poll(Duration::from_nanos(left + slack));
        } else if shared.polls && left > SPIN_NS / 2 {
            shared.target.poll(Duration::from_nanos(left - SPIN_NS / 2));
        } else if !shared.polls && left > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(left - SPIN_NS / 2));
        } else {
            std::hint::spin_loop();
        }
    }
}

fn sender(shared: Arc<Shared>, slot: Arc<Slot>) {
    crate::clock::tight_timer_slack();
    shared.target.enter_sender_thread();
    let _ = slot.thread.set(std::thread::current());
    slot.tid.store(unsafe { libc::syscall(libc::SYS_gettid) } as u32, Relaxed);
    let mut lead: Option<LeadGuard> = None;
    // The last time read: good enough for the claim's bookkeeping, so claiming reads no clock.
    let mut now = shared.now_ns();
    // Started requests not yet flushed to the target.
    let mut batched = 0usize;
    'run: loop {
        let mut guard = match lead.take() {
            Some(g) => g,
            None => loop {
                if shared.finished.load(Acquire) {
                    break 'run;
                }
                if let Some(g) = shared.lead.try_take() {
                    now = shared.now_ns(); // the last reading may be from before a park
                    break g;
                }
                shared.park(&slot);
            },
        };
        if shared.pipelines && shared.closed {
            // A closed-loop request is due when a client is free: wait for one before claiming.
            shared.wait_for_cap();
            now = shared.now_ns();
        }
        let Some(mut claim) = guard.claim(&shared, now) else {
            if batched > 0 {
                shared.target.flush();
            }
            // Nobody else completes what is still in flight.
            while shared.polls && shared.started.load(Relaxed) > 0 && !shared.drained.load(Relaxed) {
                shared.target.poll(POLL_SLICE);
            }
            drop(guard);
            shared.wake_all();
            break;
        };
        let next_due = guard.next_due;
        // Closed loop: the end of one request is the start of the next. The reading taken when
        // the last one completed is this one's due time (the claim's `now`), and it is sent as
        // soon as it is built, so it is also its send time: the request's latency, measured from
        // its due time, counts the claim as before, its schedule lag is 0 by definition, and one
        // clock read per request suffices. Open loop reads the clock against the due time.
        if !shared.closed {
            now = shared.now_ns();
            if now < claim.due_ns {
                now = wait_until(&shared, claim.due_ns);
            }
        }
        let start_ns = now;
        let counted = shared.window.contains(claim.due_ns);
        if shared.pipelines {
            let lag = start_ns - claim.due_ns;
            match start(&shared, claim, start_ns, counted) {
                Ok(request) => {
                    guard.source.recycle(request);
                    if counted {
                        bump(&slot.lag_ns, lag);
                        bump(&slot.lag_count, 1);
                    }
                    // Requests already due go out together in one write; the last of a
                    // batch (or one sent on time) goes out at once.
                    batched += 1;
                    if batched >= MAX_BATCH || next_due > shared.now_ns() {
                        shared.target.flush();
                        if shared.polls && batched >= MAX_BATCH {
                            shared.target.poll(Duration::ZERO); // behind schedule: replies must not wait
                        }
                        batched = 0;
                    }
                    lead = Some(guard);
                    continue;
                }
                Err(refused) => {
                    shared.target.flush();
                    batched = 0;
                    claim = refused;
                }
            }
        }
        // The claim's fields are used in place below: moving a Claim (about 100 bytes) out of
        // a branch or into a pattern copies it, tens of instructions per request.
        let op = claim.op.index();
        let expect = shared.expect_ns[op].load(Relaxed);
        shared.last_leader.store(slot.index, Relaxed);
        drop(guard); // whoever is free may lead while this request executes
        slot.started.store(start_ns, Relaxed);
        slot.executing.store(op as u32 + 1 + if counted { COUNTED } else { 0 }, Relaxed);
        // A closed-loop client always lets another client lead: they all send at once.
        if (expect > HANDOFF_NS && start_ns + expect > next_due) || shared.congested.load(Relaxed) || shared.closed {
            shared.hand_off();
        }
        let outcome = shared.target.execute(&claim.request);
        let retransmissions = shared.target.take_retransmissions();
        now = shared.now_ns();
        slot.executing.store(0, Relaxed);
        shared.expect_ns[op].store(track_p90(expect, now - start_ns), Relaxed);
        if counted {
            bump(&slot.lag_ns, start_ns - claim.due_ns);
            bump(&slot.lag_count, 1);
        }
        bump(&slot.completed, 1);
        let done = Done {
            op: claim.op,
            due_ns: claim.due_ns,
            class: claim.class,
            held_by_limit: claim.held_by_limit,
            start_ns,
            done_ns: now,
            outcome,
            retransmissions,
        };
        match shared.lead.try_take() {
            Some(mut g) => {
                g.tally.complete(&shared.quarters, &done);
                g.source.recycle(claim.request);
                lead = Some(g);
            }
            None => shared.side.lock().expect("a sender panicked").complete(&shared.quarters, &done),
        }
    }
    shared.live.fetch_sub(1, Release);
}

pub fn spawn_sender(shared: &Arc<Shared>) {
    let s = shared.clone();
    let slot = {
        let mut slots = shared.slots.lock().expect("slot list");
        let slot = Arc::new(Slot { index: slots.len(), ..Slot::default() });
        slots.push(slot.clone());
        slot
    };
    shared.threads.fetch_add(1, Relaxed);
    shared.live.fetch_add(1, Relaxed);
    std::thread::Builder::new().name("pb-sender".into()).stack_size(256 * 1024).spawn(move || sender(s, slot)).expect("spawn sender thread");
}
