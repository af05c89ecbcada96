//! One open-loop trial. Each request is sent when the schedule says it is due,
//! whatever is outstanding. Sender threads claim the next request, sleep until
//! it is due and execute it themselves (no hand-off between threads, so a fast
//! target costs little CPU per op). A monitor adds a thread whenever a due
//! request finds every thread busy, so a blocking server never delays the
//! schedule — unless the user capped outstanding requests. Latency runs from
//! the intended send time: queueing anywhere is in the numbers, never hidden.

use crate::pacer::{self, Schedule};
use crate::prepare::complete_files;
use crate::progress;
use crate::record::{summarize, OpRecord, Recorder};
use crate::replay::{class_label, ClassKey, ReplayStream, Trace};
use crate::spec::{TargetSpec, Timing, TrialSpec, RESULT_SCHEMA};
use crate::target::{Outcome, Request, Target};
use crate::workload::fileset::{layout_id, FileSet, Origin};
use crate::workload::generator::Generator;
use crate::workload::mix::Op;
use anyhow::bail;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Below this a waiting thread spins instead of sleeping: timer wake-ups are too coarse.
const SPIN_NS: u64 = 30_000;
/// A request still unclaimed this long after it was due means every thread is busy.
const SPAWN_AFTER_NS: u64 = 200_000;
/// Upper bound on sender threads when the user sets no cap.
const DEFAULT_THREAD_LIMIT: usize = 4096;
const NOT_DUE: u64 = u64::MAX;
/// Most overdue requests a pipelining sender starts before it flushes them.
const MAX_BATCH: usize = 32;

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
    fn quarter(&self, t: u64) -> usize {
        let q = ((self.end_ns - self.start_ns) / 4).max(1);
        ((t.saturating_sub(self.start_ns) / q) as usize).min(3)
    }
}

/// Where requests come from: the Fstress generator, or a replayed access log.
enum Source {
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
}

struct Claim {
    op: Op,
    due_ns: u64,
    request: Request,
    /// A replayed request's size class: its latency is also recorded per class.
    class: Option<u8>,
    /// Claimed late while no more threads were allowed (the cap or the thread limit).
    held_by_limit: bool,
}

struct Done {
    claim: Claim,
    start_ns: u64,
    done_ns: u64,
    outcome: Outcome,
    retransmissions: u32,
}

/// Everything the sender threads change, behind one lock taken once per request.
struct State {
    source: Source,
    schedule: Box<dyn Schedule + Send>,
    n: u64,
    next_due: u64,
    rec: Recorder,
    lag_quarters: [LagSum; 4],
    sent_by_op: [u64; Op::ALL.len()],
    sent_in_window: u64,
    completed_in_window: u64,
    held_by_limit: u64,
    /// Requests of the window the generator never got to send.
    unsent: u64,
    unsent_by_generator: u64,
    trace: Vec<Value>,
    trace_limit: usize,
    /// Replay: latency and errors per (op, size class, outcome).
    classes: BTreeMap<ClassKey, OpRecord>,
    /// When a replay without loop ran out of requests.
    exhausted_ns: Option<u64>,
}

struct Shared {
    state: Mutex<State>,
    target: Arc<dyn Target>,
    start: Instant,
    window: Window,
    /// Closed loop: a fixed set of clients, each sending as soon as its last request completed.
    closed: bool,
    thread_limit: usize,
    /// The user's cap on requests in flight, for pipelining targets.
    thread_limit_cap: Option<usize>,
    lag_limit_ns: u64,
    /// Due time of the next unclaimed request, NOT_DUE once the schedule is done.
    next_due: AtomicU64,
    /// Requests claimed so far (the next one's number).
    claimed: AtomicU64,
    threads: AtomicUsize,
    busy: AtomicUsize,
    /// Requests started without blocking (pipelining targets) and not yet complete.
    started: AtomicUsize,
    /// A sender waiting for the cap to let it start another request.
    cap_waiting: AtomicUsize,
    cap_waiter: Mutex<Option<std::thread::Thread>>,
    live: AtomicUsize,
    completed: AtomicU64,
    interval_lag_ns: AtomicU64,
    interval_lag_count: AtomicU64,
    /// In-window requests being executed, per op: what the drain timeout turns into timeouts.
    in_flight: [AtomicU64; Op::ALL.len()],
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

impl State {
    fn claim(&mut self, shared: &Shared, now: u64) -> Option<Claim> {
        if self.next_due >= shared.window.end_ns {
            return None;
        }
        if shared.closed && now >= shared.window.end_ns {
            self.next_due = NOT_DUE;
            shared.next_due.store(NOT_DUE, Relaxed);
            return None;
        }
        if !shared.closed && now >= shared.window.end_ns + shared.lag_limit_ns {
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
        let due_ns = if shared.closed { now } else { self.next_due };
        let Some((op, request, object, class)) = self.source.next() else {
            // A replay that does not loop has run out of requests.
            self.exhausted_ns = Some(now);
            self.next_due = NOT_DUE;
            shared.next_due.store(NOT_DUE, Relaxed);
            return None;
        };
        if self.trace.len() < self.trace_limit {
            self.trace.push(json!([op.name(), object]));
        }
        self.n += 1;
        if !shared.closed {
            self.next_due = self.schedule.due_ns(self.n);
            shared.next_due.store(if self.next_due >= shared.window.end_ns { NOT_DUE } else { self.next_due }, Relaxed);
        }
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
        Some(Claim { op, due_ns, request, class, held_by_limit })
    }

    fn complete(&mut self, shared: &Shared, d: Done) {
        let w = shared.window;
        let due = d.claim.due_ns;
        if w.contains(due) {
            let lag = d.start_ns.saturating_sub(due);
            self.rec.lag.saturating_record(lag.max(1));
            if !d.claim.held_by_limit {
                // Lag behind the cap is the server's doing; only free lag indicts the generator.
                self.lag_quarters[w.quarter(due)].add(lag);
            }
            let latency = d.done_ns.saturating_sub(due);
            self.rec.ops[d.claim.op.index()].record(latency, &d.outcome, d.retransmissions);
            if let Some(class) = d.claim.class {
                let key = (d.claim.op, class, d.outcome.as_ref().err().cloned());
                self.classes.entry(key).or_default().record(latency, &d.outcome, d.retransmissions);
            }
        }
        if w.contains(d.done_ns) {
            self.completed_in_window += 1;
        }
    }
}

fn sleep_until(shared: &Shared, due_ns: u64) {
    loop {
        let now = shared.now_ns();
        if now >= due_ns {
            return;
        }
        if due_ns - now > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(due_ns - now - SPIN_NS / 2));
        } else {
            std::hint::spin_loop();
        }
    }
}

fn sender(shared: Arc<Shared>) {
    // Wake-ups land within microseconds instead of the default 50 µs timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let mut finished: Option<Done> = None;
    let pipelines = shared.target.pipelines();
    let mut batched = 0usize;
    let cap = shared.thread_limit_cap;
    loop {
        let claim = {
            let mut state = shared.state.lock().expect("a sender panicked");
            if let Some(d) = finished.take() {
                state.complete(&shared, d);
            }
            state.claim(&shared, shared.now_ns())
        };
        let Some(claim) = claim else {
            if batched > 0 {
                shared.target.flush();
            }
            break;
        };
        sleep_until(&shared, claim.due_ns);
        let start_ns = shared.now_ns();
        let counted = shared.window.contains(claim.due_ns);
        if counted {
            shared.in_flight[claim.op.index()].fetch_add(1, Relaxed);
            shared.interval_lag_ns.fetch_add(start_ns - claim.due_ns, Relaxed);
            shared.interval_lag_count.fetch_add(1, Relaxed);
        }
        if pipelines {
            if let Some(cap) = cap {
                // The user's cap holds requests back while that many are in flight.
                if shared.started.load(Relaxed) >= cap {
                    shared.target.flush();
                    batched = 0;
                    // Sleep until a completion frees a place (it unparks us), not in a polling loop.
                    *shared.cap_waiter.lock().expect("cap waiter lock") = Some(std::thread::current());
                    shared.cap_waiting.fetch_add(1, Relaxed);
                    while shared.started.load(std::sync::atomic::Ordering::SeqCst) >= cap {
                        std::thread::park_timeout(Duration::from_millis(1));
                    }
                    shared.cap_waiting.fetch_sub(1, Relaxed);
                }
            }
            shared.started.fetch_add(1, Relaxed);
            let (s, op, due_ns, held, class) = (shared.clone(), claim.op, claim.due_ns, claim.held_by_limit, claim.class);
            let request = claim.request;
            let done: crate::target::Completion = Box::new(move |outcome, retransmissions| {
                let done_ns = s.now_ns();
                if counted {
                    s.in_flight[op.index()].fetch_sub(1, Relaxed);
                }
                s.completed.fetch_add(1, Relaxed);
                let d = Done { claim: Claim { op, due_ns, request: Request::Null, class, held_by_limit: held }, start_ns, done_ns, outcome, retransmissions };
                s.state.lock().expect("a sender panicked").complete(&s, d);
                s.started.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                // Wake a sender held by the cap once a quarter of the places are free, so it
                // sends a batch instead of one request per wake-up.
                let resume_at = s.thread_limit_cap.map_or(0, |cap| cap - (cap / 4).max(1));
                if s.cap_waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 && s.started.load(Relaxed) <= resume_at {
                    if let Some(t) = s.cap_waiter.lock().expect("cap waiter lock").as_ref() {
                        t.unpark();
                    }
                }
            });
            match shared.target.start(&request, done) {
                Ok(()) => {
                    // Requests already due go out together in one write; the last of a
                    // batch (or one sent on time) goes out at once.
                    batched += 1;
                    if batched >= MAX_BATCH || shared.next_due.load(Relaxed) > shared.now_ns() {
                        shared.target.flush();
                        batched = 0;
                    }
                    continue;
                }
                Err(done) => {
                    shared.target.flush();
                    batched = 0;
                    shared.busy.fetch_add(1, Relaxed);
                    let outcome = shared.target.execute(&request);
                    let retransmissions = shared.target.take_retransmissions();
                    shared.busy.fetch_sub(1, Relaxed);
                    done(outcome, retransmissions);
                    continue;
                }
            }
        }
        shared.busy.fetch_add(1, Relaxed);
        let outcome = shared.target.execute(&claim.request);
        let retransmissions = shared.target.take_retransmissions();
        shared.busy.fetch_sub(1, Relaxed);
        let done_ns = shared.now_ns();
        if counted {
            shared.in_flight[claim.op.index()].fetch_sub(1, Relaxed);
        }
        shared.completed.fetch_add(1, Relaxed);
        finished = Some(Done { claim, start_ns, done_ns, outcome, retransmissions });
    }
    shared.live.fetch_sub(1, Relaxed);
}

fn spawn_sender(shared: &Arc<Shared>) {
    let s = shared.clone();
    shared.threads.fetch_add(1, Relaxed);
    shared.live.fetch_add(1, Relaxed);
    std::thread::Builder::new()
        .name("pb-sender".into())
        .stack_size(256 * 1024)
        .spawn(move || sender(s))
        .expect("spawn sender thread");
}

pub fn run(spec: &TrialSpec, mut target: Box<dyn Target>) -> anyhow::Result<Value> {
    for (op, w) in &spec.mix {
        if *w > 0.0 && !target.supports(*op) {
            bail!("the target cannot do {}", op.name());
        }
    }
    let id = layout_id(&spec.fileset);
    let load = &spec.load;
    let closed = load.clients.is_some();
    let (source, mut schedule, replay_summary) = match &spec.replay {
        // A replay names its files itself (paths below the target's root); nothing to check.
        Some(r) => {
            let trace = Trace::load(r)?;
            let (len, files, bytes) = trace.prefix(r.dataset_bytes);
            if len == 0 {
                bail!("replay: even the log's first file is larger than dataset_bytes ({})", r.dataset_bytes.unwrap_or(0));
            }
            let summary = trace.summary(r, len, files, bytes);
            let schedule: Box<dyn pacer::Schedule + Send> = if r.timing == Timing::Log {
                let (offsets_ns, period_ns) = trace.offsets_ns(len);
                Box::new(pacer::Replayed { offsets_ns, period_ns, speed: r.speed })
            } else {
                pacer::schedule(load.arrivals, load.rate, spec.seed)
            };
            let http = matches!(spec.target, TargetSpec::Http { .. });
            (Source::Replay(ReplayStream::new(trace, len, r.looping, http)), schedule, Some(summary))
        }
        None => {
            if !matches!(spec.target, TargetSpec::Null) {
                let have = complete_files(target.as_ref(), &spec.fileset)?;
                if have < spec.fileset.files {
                    bail!("file set {id} not prepared ({have} of {} files): run prepare first", spec.fileset.files);
                }
                target.enter_fileset(&id, false)?;
            }
            let generator = Generator::new(spec, FileSet::build(&spec.fileset));
            (Source::Synthetic(generator), pacer::schedule(load.arrivals, load.rate, spec.seed), None)
        }
    };
    let window = Window { start_ns: (load.warmup_s * 1e9) as u64, end_ns: ((load.warmup_s + load.runtime_s) * 1e9) as u64 };
    // Closed loop has no schedule: every request is due when a client is free to send it.
    let first_due = if closed { 0 } else { schedule.due_ns(0) };
    let state = State {
        source,
        schedule,
        n: 0,
        next_due: first_due,
        rec: Recorder::default(),
        lag_quarters: Default::default(),
        sent_by_op: [0; Op::ALL.len()],
        sent_in_window: 0,
        completed_in_window: 0,
        held_by_limit: 0,
        unsent: 0,
        unsent_by_generator: 0,
        trace: Vec::new(),
        trace_limit: spec.trace_ops,
        classes: BTreeMap::new(),
        exhausted_ns: None,
    };
    // Everything slow is done: wait for the agreed instant (if any), then the schedule starts.
    let (start, start_late_ms) = crate::start::anchor(spec.start_at_unix_s)?;
    let started_at_unix_s = crate::start::unix_now() - start.elapsed().as_secs_f64();
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        target: Arc::from(target),
        start,
        window,
        closed,
        thread_limit: load.clients.or(load.max_outstanding).unwrap_or(DEFAULT_THREAD_LIMIT),
        thread_limit_cap: load.max_outstanding,
        lag_limit_ns: (load.lag_limit_ms * 1e6) as u64,
        next_due: AtomicU64::new(first_due),
        claimed: AtomicU64::new(0),
        threads: AtomicUsize::new(0),
        busy: AtomicUsize::new(0),
        started: AtomicUsize::new(0),
        cap_waiting: AtomicUsize::new(0),
        cap_waiter: Mutex::new(None),
        live: AtomicUsize::new(0),
        completed: AtomicU64::new(0),
        interval_lag_ns: AtomicU64::new(0),
        interval_lag_count: AtomicU64::new(0),
        in_flight: Default::default(),
    });
    let max_busy = monitor(spec, &shared);

    let timed_out = shared.live.load(Relaxed) > 0 || shared.started.load(Relaxed) > 0;
    let mut state = shared.state.lock().expect("a sender panicked");
    // Whatever is still executing after the drain timeout is abandoned: counted as
    // cancelled, not silently dropped.
    for op in Op::ALL {
        state.rec.ops[op.index()].cancellations += shared.in_flight[op.index()].load(Relaxed);
    }
    let restore = match &mut state.source {
        _ if timed_out => json!({"done": false, "reason": "requests still outstanding at the drain timeout"}),
        Source::Synthetic(gen) => restore(gen, shared.target.as_ref()),
        Source::Replay(_) => json!({"done": true, "errors": 0, "first_errors": []}), // GET and HEAD change nothing
    };
    let mut out = result(spec, &shared, &state, max_busy, restore, &id);
    out["start"] = json!({"at_unix_s": started_at_unix_s, "requested_unix_s": spec.start_at_unix_s, "late_ms": start_late_ms});
    if let Some(mut summary) = replay_summary {
        if let Source::Replay(stream) = &state.source {
            summary["issued"] = json!(stream.issued);
            summary["loops"] = json!(stream.issued as f64 / summary["requests"].as_f64().unwrap_or(1.0));
        }
        summary["exhausted_at_s"] = json!(state.exhausted_ns.map(|ns| ns as f64 / 1e9));
        out["replay"] = summary;
    }
    Ok(out)
}

/// Follow the trial from the main thread: add senders when all are busy, report
/// progress, and end the drain at its deadline. Returns the most requests seen in flight.
fn monitor(spec: &TrialSpec, shared: &Arc<Shared>) -> usize {
    let load = &spec.load;
    let progress_ns = (spec.progress_interval_s * 1e9) as u64;
    let mut next_progress = progress_ns;
    let mut drain_deadline = NOT_DUE;
    let mut max_busy = 0;
    let mut last_completed = 0;
    let mut suspect: Option<(u64, u64)> = None; // (claimed count, when all threads were first seen busy)
    let pipelines = shared.target.pipelines();
    for _ in 0..load.clients.unwrap_or(1) {
        spawn_sender(shared);
    }
    loop {
        let now = shared.now_ns();
        let due = shared.next_due.load(Relaxed);
        let threads = shared.threads.load(Relaxed);
        max_busy = max_busy.max(shared.busy.load(Relaxed) + shared.started.load(Relaxed));
        // Every thread busy inside the target while a request waits, seen twice: add
        // threads for what is overdue. Seen once, it may be a 1 µs syscall caught in the act.
        let claimed = shared.claimed.load(Relaxed);
        let starved = !shared.closed && due != NOT_DUE && now > due + SPAWN_AFTER_NS && shared.busy.load(Relaxed) >= threads;
        suspect = match suspect {
            Some((c, since)) if starved && c == claimed => {
                if now - since >= SPAWN_AFTER_NS && threads < shared.thread_limit {
                    let overdue = ((now - due) as f64 * load.rate / 1e9).ceil() as usize;
                    for _ in 0..overdue.clamp(1, 16).min(shared.thread_limit - threads) {
                        spawn_sender(shared);
                    }
                    None
                } else {
                    Some((c, since))
                }
            }
            _ if starved => Some((claimed, now)),
            _ => None,
        };
        if due == NOT_DUE && drain_deadline == NOT_DUE {
            drain_deadline = now.max(shared.window.end_ns) + (load.drain_timeout_s * 1e9) as u64;
        }
        if now >= next_progress {
            let completed = shared.completed.load(Relaxed);
            let lag_ns = shared.interval_lag_ns.swap(0, Relaxed);
            let lag_count = shared.interval_lag_count.swap(0, Relaxed).max(1);
            let phase = if now < shared.window.start_ns { "warmup" } else if due != NOT_DUE { "measure" } else { "drain" };
            progress::emit(json!({
                "phase": phase, "elapsed_s": now as f64 / 1e9, "completed": completed,
                "outstanding": shared.busy.load(Relaxed) + shared.started.load(Relaxed), "rate": (completed - last_completed) as f64 / spec.progress_interval_s,
                "lag_ms": lag_ns as f64 / lag_count as f64 / 1e6, "threads": threads,
            }));
            last_completed = completed;
            next_progress += progress_ns * ((now - next_progress) / progress_ns + 1);
        }
        if (shared.live.load(Relaxed) == 0 && shared.started.load(Relaxed) == 0) || now >= drain_deadline {
            return max_busy;
        }
        // A pipelining target with no sender blocked in it cannot starve the schedule:
        // look again in a millisecond instead of every few microseconds while requests are overdue.
        let idle_pipeline = pipelines && shared.busy.load(Relaxed) == 0;
        let watch = if suspect.is_some() {
            now + SPAWN_AFTER_NS / 2
        } else if due == NOT_DUE {
            NOT_DUE
        } else if idle_pipeline {
            (due + SPAWN_AFTER_NS).max(now + 1_000_000)
        } else if shared.closed {
            shared.window.end_ns.max(now + SPAWN_AFTER_NS) // nothing to watch but the window's end
        } else {
            due + SPAWN_AFTER_NS
        };
        let wake = watch.min(next_progress).min(drain_deadline);
        let floor = if idle_pipeline { 1_000_000 } else { SPAWN_AFTER_NS / 4 };
        std::thread::sleep(Duration::from_nanos(wake.saturating_sub(now).clamp(floor, 100_000_000)));
    }
}

fn result(spec: &TrialSpec, shared: &Shared, state: &State, max_busy: usize, restore: Value, id: &str) -> Value {
    let load = &spec.load;
    let (ops, all) = state.rec.summaries();
    let quarters = state.lag_quarters;
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
    let lag = summarize(&state.rec.lag);
    let mix_actual: serde_json::Map<String, Value> = Op::ALL
        .iter()
        .filter(|op| state.sent_by_op[op.index()] > 0)
        .map(|op| (op.name().to_string(), json!(state.sent_by_op[op.index()] as f64 / state.sent_in_window.max(1) as f64)))
        .collect();
    let (cpu_s, rss_kib) = own_usage();
    let capped = load.max_outstanding.is_some();
    let timed = spec.replay.as_ref().is_some_and(|r| r.timing == Timing::Log);
    // Closed loop offers no rate; a timed replay offers what the log's times put in the window.
    let requested = if shared.closed {
        Value::Null
    } else if timed {
        json!(state.sent_in_window as f64 / load.runtime_s)
    } else {
        json!(load.rate)
    };
    let bytes: u64 = ops.values().map(|o| o.bytes).sum();
    let fileset = match &state.source {
        Source::Synthetic(gen) => {
            let set = &gen.set;
            json!({"id": id, "files": spec.fileset.files,
                   "dirs": set.dirs.iter().filter(|d| d.origin == Origin::Prepared).count(),
                   "symlinks": set.symlinks.iter().filter(|s| s.origin == Origin::Prepared).count(), "bytes": set.prepared_bytes})
        }
        Source::Replay(_) => Value::Null,
    };
    let mut result = json!({
        "schema": RESULT_SCHEMA,
        "engine_version": env!("CARGO_PKG_VERSION"),
        "mode": if shared.closed { "closed" } else if timed { "timed" } else { "open" },
        "clients": load.clients,
        "requested_rate": requested,
        "achieved_rate": state.completed_in_window as f64 / load.runtime_s,
        "sent": state.sent_in_window,
        "unsent": state.unsent,
        "completed": all.len(),
        "issued": shared.completed.load(Relaxed),
        "bytes": bytes,
        "output_mbit_s": bytes as f64 * 8.0 / load.runtime_s / 1e6,
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
        "peak_rss_kib": rss_kib,
        "fileset": fileset,
        "restore": restore,
    });
    if !state.classes.is_empty() {
        let classes: serde_json::Map<String, Value> = state
            .classes
            .iter()
            .map(|(key, rec)| {
                let h = rec.hist.as_ref().expect("a recorded class has a histogram");
                let s = summarize(h);
                (class_label(key), json!({"count": s.count, "bytes": rec.bytes, "mean_ms": s.mean_ms, "p50_ms": s.p50_ms,
                                          "p99_ms": s.p99_ms, "max_ms": s.max_ms, "hist": s.hist}))
            })
            .collect();
        result["classes"] = Value::Object(classes);
    }
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
