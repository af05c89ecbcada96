//! One open-loop trial. The dispatcher sends each request when the schedule
//! says it is due, whatever is outstanding; blocking ops run on a worker pool
//! that grows so a request never waits for a worker (unless the user capped
//! outstanding requests). Latency runs from the intended send time, so queueing
//! anywhere (in the server or in the engine) is in the numbers, never hidden.

use crate::pacer;
use crate::prepare::complete_files;
use crate::progress;
use crate::record::{summarize, Recorder};
use crate::spec::{TargetSpec, TrialSpec, RESULT_SCHEMA};
use crate::target::{Outcome, Request, Target};
use crate::workload::fileset::{layout_id, FileSet, Origin};
use crate::workload::generator::Generator;
use crate::workload::mix::Op;
use anyhow::bail;
use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Below this the dispatcher spins instead of sleeping: timer wake-ups are too coarse.
const SPIN_NS: u64 = 50_000;
/// Upper bound on worker threads when the user sets no cap.
const DEFAULT_WORKER_LIMIT: usize = 4096;
/// Sends handled before completions are drained again, so neither starves.
const SEND_BATCH: usize = 256;

struct Job {
    op: Op,
    intended_ns: u64,
    request: Request,
}

struct Done {
    op: Op,
    intended_ns: u64,
    done_ns: u64,
    outcome: Outcome,
}

/// Workers for blocking targets. A worker is claimed when a job is sent, so the
/// pool knows exactly when it must grow.
struct Pool {
    target: Arc<dyn Target>,
    start: Instant,
    jobs_tx: Sender<Job>,
    jobs_rx: Receiver<Job>,
    done_tx: Sender<Done>,
    done_rx: Receiver<Done>,
    idle: Arc<AtomicUsize>,
    workers: usize,
    limit: usize,
    /// Jobs that had to queue because the pool was at its limit.
    queued: u64,
}

impl Pool {
    fn new(target: Arc<dyn Target>, start: Instant, limit: usize) -> Pool {
        let (jobs_tx, jobs_rx) = unbounded();
        let (done_tx, done_rx) = unbounded();
        Pool { target, start, jobs_tx, jobs_rx, done_tx, done_rx, idle: Arc::new(AtomicUsize::new(0)), workers: 0, limit, queued: 0 }
    }

    fn submit(&mut self, job: Job) {
        let claimed = self.idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
        if !claimed {
            if self.workers < self.limit {
                self.spawn();
            } else {
                self.queued += 1;
            }
        }
        self.jobs_tx.send(job).expect("workers outlive the dispatcher");
    }

    fn spawn(&mut self) {
        let (jobs, done, idle, target, start) =
            (self.jobs_rx.clone(), self.done_tx.clone(), self.idle.clone(), self.target.clone(), self.start);
        std::thread::Builder::new()
            .name(format!("pb-worker-{}", self.workers))
            .stack_size(256 * 1024)
            .spawn(move || {
                while let Ok(job) = jobs.recv() {
                    let outcome = target.execute(&job.request);
                    let done_ns = start.elapsed().as_nanos() as u64;
                    idle.fetch_add(1, Ordering::AcqRel);
                    if done.send(Done { op: job.op, intended_ns: job.intended_ns, done_ns, outcome }).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn worker thread");
        self.workers += 1;
    }
}

/// Mean schedule lag per quarter of the measured window, for the saturation verdict.
#[derive(Default, Clone, Copy)]
struct LagSum {
    sum_ns: f64,
    count: u64,
}

impl LagSum {
    fn mean_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns / self.count as f64 / 1e6
        }
    }
}

struct Clock {
    start: Instant,
}

impl Clock {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

pub fn run(spec: &TrialSpec, mut target: Box<dyn Target>) -> anyhow::Result<Value> {
    for (op, w) in &spec.mix {
        if *w > 0.0 && !target.supports(*op) {
            bail!("the target cannot do {}", op.name());
        }
    }
    let id = layout_id(&spec.fileset);
    if !matches!(spec.target, TargetSpec::Null) {
        let have = complete_files(target.as_ref(), &spec.fileset)?;
        if have < spec.fileset.files {
            bail!("file set {id} not prepared ({have} of {} files): run prepare first", spec.fileset.files);
        }
        target.enter_fileset(&id, false)?;
    }
    let mut gen = Generator::new(spec, FileSet::build(&spec.fileset));
    let target: Arc<dyn Target> = Arc::from(target);
    let load = &spec.load;
    let warmup_ns = (load.warmup_s * 1e9) as u64;
    let end_ns = warmup_ns + (load.runtime_s * 1e9) as u64;
    let quarter_ns = ((end_ns - warmup_ns) / 4).max(1);
    let mut schedule = pacer::schedule(load.arrivals, load.rate, spec.seed);
    let inline = target.inline();

    // Wake-ups land within microseconds instead of the default 50 µs timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let clock = Clock { start: Instant::now() };
    let mut pool = Pool::new(target.clone(), clock.start, load.max_outstanding.unwrap_or(DEFAULT_WORKER_LIMIT));
    let mut rec = Recorder::default();
    let mut lag_quarters = [LagSum::default(); 4];
    let mut sent_by_op = [0u64; Op::ALL.len()];
    let mut outstanding_by_op = [0u64; Op::ALL.len()]; // in-window requests not yet answered
    let mut trace: Vec<Value> = Vec::new();
    let (mut n, mut outstanding, mut max_outstanding) = (0u64, 0usize, 0usize);
    let (mut sent_in_window, mut completed_in_window, mut cap_bound) = (0u64, 0u64, 0u64);
    let mut next_due = schedule.due_ns(0);
    let mut sending = next_due < end_ns;
    let mut blocked_by_cap = false;
    let progress_ns = (spec.progress_interval_s * 1e9) as u64;
    let mut next_progress = progress_ns;
    let (mut interval_completed, mut interval_lag) = (0u64, LagSum::default());
    let mut drain_deadline = u64::MAX;

    let in_window = |t: u64| t >= warmup_ns && t < end_ns;
    let complete = |d: Done, rec: &mut Recorder, outstanding_by_op: &mut [u64], completed_in_window: &mut u64| {
        if in_window(d.intended_ns) {
            rec.ops[d.op.index()].record(d.done_ns - d.intended_ns.min(d.done_ns), &d.outcome);
            outstanding_by_op[d.op.index()] -= 1;
        }
        if in_window(d.done_ns) {
            *completed_in_window += 1;
        }
    };

    loop {
        let mut now = clock.now_ns();
        let mut batch = 0;
        while sending && next_due <= now && batch < SEND_BATCH {
            if !inline && load.max_outstanding.is_some_and(|cap| outstanding >= cap) {
                if !blocked_by_cap {
                    cap_bound += 1;
                    blocked_by_cap = true;
                }
                break;
            }
            let (op, request, object) = gen.next();
            if trace.len() < spec.trace_ops {
                trace.push(json!([op.name(), object]));
            }
            let lag = now - next_due;
            if in_window(next_due) {
                sent_in_window += 1;
                sent_by_op[op.index()] += 1;
                rec.lag.saturating_record(lag.max(1));
                if !blocked_by_cap {
                    // Lag caused by the cap is the server's doing; only free lag indicts the generator.
                    let q = &mut lag_quarters[(((next_due - warmup_ns) / quarter_ns) as usize).min(3)];
                    q.sum_ns += lag as f64;
                    q.count += 1;
                }
                interval_lag.sum_ns += lag as f64;
                interval_lag.count += 1;
            }
            blocked_by_cap = false;
            if inline {
                let outcome = target.execute(&request);
                let done_ns = clock.now_ns();
                if in_window(next_due) {
                    outstanding_by_op[op.index()] += 1;
                }
                complete(Done { op, intended_ns: next_due, done_ns, outcome }, &mut rec, &mut outstanding_by_op, &mut completed_in_window);
                interval_completed += 1;
            } else {
                if in_window(next_due) {
                    outstanding_by_op[op.index()] += 1;
                }
                pool.submit(Job { op, intended_ns: next_due, request });
                outstanding += 1;
                max_outstanding = max_outstanding.max(outstanding);
            }
            n += 1;
            next_due = schedule.due_ns(n);
            if next_due >= end_ns {
                sending = false;
                drain_deadline = end_ns.max(clock.now_ns()) + (load.drain_timeout_s * 1e9) as u64;
            }
            batch += 1;
            if batch % 32 == 0 {
                now = clock.now_ns();
            }
        }
        while let Ok(d) = pool.done_rx.try_recv() {
            complete(d, &mut rec, &mut outstanding_by_op, &mut completed_in_window);
            outstanding -= 1;
            interval_completed += 1;
        }
        now = clock.now_ns();
        if now >= next_progress {
            let phase = if now < warmup_ns { "warmup" } else if sending { "measure" } else { "drain" };
            let behind_ms = if sending && next_due < now { (now - next_due) as f64 / 1e6 } else { 0.0 };
            progress::emit(json!({
                "phase": phase, "elapsed_s": now as f64 / 1e9, "sent": n, "outstanding": outstanding,
                "rate": interval_completed as f64 / spec.progress_interval_s, "lag_ms": interval_lag.mean_ms().max(behind_ms),
                "workers": pool.workers,
            }));
            next_progress += progress_ns * ((now - next_progress) / progress_ns + 1);
            interval_completed = 0;
            interval_lag = LagSum::default();
        }
        if !sending && (outstanding == 0 || now >= drain_deadline) {
            break;
        }
        let can_send = sending && !(blocked_by_cap && outstanding > 0);
        let wake = if can_send { next_due } else { u64::MAX }.min(next_progress).min(drain_deadline);
        if wake > now + SPIN_NS && !(sending && next_due <= now) {
            let wait = Duration::from_nanos(wake - now - SPIN_NS / 2);
            if let Ok(d) = pool.done_rx.recv_timeout(wait) {
                complete(d, &mut rec, &mut outstanding_by_op, &mut completed_in_window);
                outstanding -= 1;
                interval_completed += 1;
            }
        } else {
            std::hint::spin_loop();
        }
    }

    // Whatever is still outstanding after the drain timeout is a timeout, not silently dropped.
    for op in Op::ALL {
        rec.ops[op.index()].timeouts += outstanding_by_op[op.index()];
    }
    let restore = if outstanding == 0 { restore(&mut gen, target.as_ref()) } else { json!({"done": false, "reason": "requests still outstanding at the drain timeout"}) };

    let runtime_s = load.runtime_s;
    let (ops, all) = rec.summaries();
    let (first, last) = (lag_quarters[0].mean_ms(), lag_quarters[3].mean_ms());
    let saturated = last > load.lag_limit_ms && last > first;
    let saturation_reason = saturated.then(|| {
        format!(
            "the generator fell behind its own schedule: mean send lag grew from {first:.3} ms to {last:.3} ms over the run (limit {} ms); the engine, not the target, limited this trial",
            load.lag_limit_ms
        )
    });
    let lag = summarize(&rec.lag);
    let mix_actual: serde_json::Map<String, Value> = Op::ALL
        .iter()
        .filter(|op| sent_by_op[op.index()] > 0)
        .map(|op| (op.name().to_string(), json!(sent_by_op[op.index()] as f64 / sent_in_window.max(1) as f64)))
        .collect();
    let (cpu_s, rss_kib) = own_usage();
    let mut result = json!({
        "schema": RESULT_SCHEMA,
        "engine_version": env!("CARGO_PKG_VERSION"),
        "requested_rate": load.rate,
        "achieved_rate": completed_in_window as f64 / runtime_s,
        "sent": sent_in_window,
        "completed": all.len(),
        "warmup_s": load.warmup_s,
        "runtime_s": runtime_s,
        "ops": ops,
        "latency": summarize(&all),
        "schedule_lag": {"mean_ms": lag.mean_ms, "p99_ms": lag.p99_ms, "max_ms": lag.max_ms, "hist": lag.hist,
                          "quarters_mean_ms": lag_quarters.iter().map(|q| q.mean_ms()).collect::<Vec<_>>()},
        "generator_saturated": saturated,
        "saturation_reason": saturation_reason,
        "outstanding": {"cap": load.max_outstanding, "cap_bound": cap_bound, "max": max_outstanding,
                         "workers": pool.workers, "queued_for_worker": if load.max_outstanding.is_some() { 0 } else { pool.queued }},
        "mix_actual": mix_actual,
        "engine_cpu_s": cpu_s,
        "peak_rss_kib": rss_kib,
        "fileset": {"id": id, "files": spec.fileset.files, "dirs": gen.set.dirs.iter().filter(|d| d.origin == Origin::Prepared).count(),
                     "symlinks": gen.set.symlinks.iter().filter(|s| s.origin == Origin::Prepared).count(), "bytes": gen.set.prepared_bytes},
        "restore": restore,
    });
    if spec.trace_ops > 0 {
        result["op_trace"] = Value::Array(trace);
    }
    Ok(result)
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
