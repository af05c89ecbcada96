//! One open-loop trial. Each request is sent when the schedule says it is due,
//! whatever is outstanding; latency runs from the intended send time, so
//! queueing anywhere is in the numbers, never hidden.
//!
//! sender.rs: the threads that send (one leader at a time); sched.rs: the schedule
//! and the request source they claim from; tally.rs: what completions add up to;
//! monitor.rs: the main thread's watch (threads, progress, drain); restore.rs: the
//! file set put back afterwards. This file sets a trial up and writes its result.

mod lead;
mod monitor;
mod restore;
mod sched;
mod sender;
mod tally;
#[cfg(test)]
mod tests;

use crate::clock::Clock;
use crate::op::Op;
use crate::pacer;
use crate::prepare::complete_files;
use crate::record::summarize;
use crate::replay::{class_label, ReplayStream, ShareSummary, Trace};
use crate::result::{ClassSummary, FilesetInfo, Latency, Mode, Outcomes, Outstanding, Restore, ScheduleLag, Start, TrialResult, RESULT_SCHEMA};
use crate::spec::{TargetSpec, Timing, TrialSpec};
use crate::target::Target;
use crate::workload::fileset::{layout_id, FileSet, Origin};
use crate::workload::generator::Generator;
use anyhow::bail;
use lead::Lead;
use sched::{Sched, Source};
use sender::{Shared, COUNTED};
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use tally::{MeanNs, Window};

/// Upper bound on sender threads when the user sets no cap.
const DEFAULT_THREAD_LIMIT: usize = 4096;

pub fn run(spec: &TrialSpec, mut target: Box<dyn Target>) -> anyhow::Result<TrialResult> {
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
            let mut trace = Trace::load(r)?;
            let (mut len, files, bytes) = trace.prefix(r.dataset_bytes);
            if len == 0 {
                bail!("replay: even the log's first file is larger than dataset_bytes ({})", r.dataset_bytes.unwrap_or(0));
            }
            let mut summary = trace.summary(r, len, files, bytes);
            // The whole log's times, so a share keeps each request's time and the log's loop period.
            let (mut offsets_ns, period_ns) = if r.timing == Timing::Log { trace.offsets_ns(len) } else { (Vec::new(), 0) };
            if let Some(share) = r.share {
                if !offsets_ns.is_empty() {
                    offsets_ns = offsets_ns.into_iter().enumerate().filter(|(i, _)| i % share.count == share.index).map(|(_, t)| t).collect();
                }
                len = trace.keep_share(len, share);
                if len == 0 {
                    bail!("replay: share {} of {} holds no request: the log has fewer than {} requests", share.index, share.count, share.count);
                }
                summary.share = Some(ShareSummary { index: share.index, count: share.count, requests: len });
            }
            let schedule: Box<dyn pacer::Schedule + Send> = if r.timing == Timing::Log {
                Box::new(pacer::Replayed { offsets_ns, period_ns, speed: r.speed })
            } else {
                pacer::schedule(load.arrivals, load.rate, spec.seed)
            };
            let http = matches!(spec.target, TargetSpec::Http { .. });
            (Source::Replay(ReplayStream::new(trace, len, r.looping, http)), schedule, Some(summary))
        }
        None => {
            let null = matches!(spec.target, TargetSpec::Null);
            if let Some(store) = target.store_mut() {
                let have = complete_files(store, &spec.fileset)?;
                if have < spec.fileset.files {
                    bail!("file set {id} not prepared ({have} of {} files): run prepare first", spec.fileset.files);
                }
                store.enter_fileset(&id, false)?;
            }
            let set = FileSet::build(&spec.fileset);
            if let Some(m) = &spec.markov {
                crate::workload::markov::check_room(m, &set)?;
            }
            let mut generator = Generator::new(spec, set);
            // The null target never looks at paths: don't spend the engine's floor formatting them.
            generator.paths = !null || std::env::var_os("PEAKBENCH_NULL_PATHS").is_some();
            // The posix descriptor cache finds a file by its index: its reads need no path formatted.
            generator.indexed_reads = matches!(spec.target, TargetSpec::Posix { fd_cache: true, .. });
            (Source::Synthetic(generator), pacer::schedule(load.arrivals, load.rate, spec.seed), None)
        }
    };
    let window = Window { start_ns: (load.warmup_s * 1e9) as u64, end_ns: ((load.warmup_s + load.runtime_s) * 1e9) as u64 };
    // Closed loop has no schedule: every request is due when a client is free to send it.
    let first_due = if closed { 0 } else { schedule.due_ns(0) };
    let lead = Lead::new(Sched::new(source, schedule, first_due, spec.trace_ops));
    let calibration = Clock::calibrate(10);
    // Everything slow is done: wait for the agreed instant (if any), then the schedule starts.
    let (start, start_late_ms) = crate::start::anchor(spec.start_at_unix_s)?;
    let started_at_unix_s = crate::start::unix_now() - start.elapsed().as_secs_f64();
    let shared = Arc::new(Shared::new(
        lead,
        Arc::from(target),
        calibration.zero_at(start),
        window,
        closed,
        load.clients.or(load.max_outstanding).unwrap_or(DEFAULT_THREAD_LIMIT),
        load.max_outstanding,
        (load.lag_limit_ms * 1e6) as u64,
        first_due,
    ));
    let watched = monitor::monitor(spec, &shared);

    let timed_out = shared.live.load(Acquire) > 0 || shared.started.load(Acquire) > 0;
    // Take the lead for good: a straggler finishing after the drain timeout records into the side tally.
    let mut guard = loop {
        if let Some(g) = shared.lead.try_take() {
            break g;
        }
        std::thread::yield_now();
    };
    let sched: &mut Sched = &mut guard;
    {
        let mut side = shared.side.lock().expect("a sender panicked");
        sched.tally.merge(&side);
        *side = Default::default();
    }
    // Whatever is still executing after the drain timeout is abandoned: counted as
    // cancelled, not silently dropped.
    for s in shared.slots.lock().expect("slot list").iter() {
        let e = s.executing.load(Acquire);
        if e & COUNTED != 0 {
            sched.tally.rec.ops[((e & 0xff) - 1) as usize].cancellations += 1;
        }
    }
    for op in Op::ALL {
        sched.tally.rec.ops[op.index()].cancellations += shared.in_flight[op.index()].load(Acquire);
    }
    let restore = match &mut sched.source {
        _ if timed_out => Restore::skipped("requests still outstanding at the drain timeout"),
        Source::Synthetic(gen) => restore::restore(gen, shared.target.as_ref()),
        Source::Replay(_) => Restore::from_errors(Vec::new()), // GET and HEAD change nothing
    };
    let Some(runtime_s) = measured_s(&shared, load.runtime_s) else {
        bail!("interrupted during the warm-up: nothing was measured");
    };
    let start = Start { at_unix_s: started_at_unix_s, requested_unix_s: spec.start_at_unix_s, late_ms: start_late_ms };
    let mut out = result(spec, &shared, sched, &watched, restore, start, &id, runtime_s);
    if let Some(mut summary) = replay_summary {
        if let Source::Replay(stream) = &sched.source {
            summary.issued = stream.issued;
            // Over what this engine replays: its share of the log, or the whole (truncated) log.
            let replayed = summary.share.as_ref().map_or(summary.requests, |share| share.requests);
            summary.loops = stream.issued as f64 / replayed as f64;
        }
        summary.exhausted_at_s = sched.exhausted_ns.map(|ns| ns as f64 / 1e9);
        out.replay = Some(summary);
    }
    Ok(out)
}

/// The mean send lag of the quarter where the generator's unsent requests begin, with them counted at the
/// lag they had at least when it gave them up (Sched::unsent_lag); 0 when it sent all it could. A stall at the
/// window's end so weighs as the same stall inside the window does, where its late requests count in that
/// quarter's lag: one request given up among a thousand sent on time does not make a trial generator-bound,
/// and a generator that never reached the window's last quarters does.
fn unsent_quarter_lag_ms(lags: &[MeanNs; 4], quarters: &tally::Quarters, unsent_from_ns: u64, unsent_lag: MeanNs) -> f64 {
    if unsent_lag.count == 0 {
        return 0.0;
    }
    let Some(quarter) = quarters.of(unsent_from_ns) else {
        return 0.0;
    };
    let mut lag = lags[quarter];
    lag.merge(&unsent_lag);
    lag.mean_ms()
}

/// The measured seconds: the window, or its part before an interrupt ended it (None: the
/// interrupt came during the warm-up, so nothing was measured).
fn measured_s(shared: &Shared, runtime_s: f64) -> Option<f64> {
    let stopped = shared.stopped_at_ns.load(Relaxed);
    if stopped >= shared.window.end_ns {
        return Some(runtime_s);
    }
    let covered = stopped.saturating_sub(shared.window.start_ns) as f64 / 1e9;
    (covered > 0.0).then_some(covered)
}

#[allow(clippy::too_many_arguments)]
fn result(
    spec: &TrialSpec,
    shared: &Shared,
    state: &Sched,
    watched: &monitor::Watched,
    restore: Restore,
    start: Start,
    id: &str,
    runtime_s: f64,
) -> TrialResult {
    let load = &spec.load;
    let tally = &state.tally;
    let (ops, all) = tally.rec.summaries();
    let quarters = tally.lag_quarters;
    // Compare the first and the last quarter that sent anything: a generator far
    // behind may never reach the last quarter's requests at all.
    let sent_quarters: Vec<&MeanNs> = quarters.iter().filter(|q| q.count > 0).collect();
    let first = sent_quarters.first().map_or(0.0, |q| q.mean_ms());
    let last = sent_quarters.last().map_or(0.0, |q| q.mean_ms());
    let lag_grew = last > load.lag_limit_ms && last > first;
    let unsent_lag_ms = unsent_quarter_lag_ms(&quarters, &shared.quarters, state.unsent_from_ns, state.unsent_lag);
    let saturation_reason = if unsent_lag_ms > load.lag_limit_ms {
        Some(format!(
            "the generator never sent {} of the window's requests although sender threads were free, and counted at the lag they had when it gave them up they put the mean send lag of their quarter at {unsent_lag_ms:.3} ms (limit {} ms); the engine, not the target, limited this trial",
            state.unsent_lag.count, load.lag_limit_ms
        ))
    } else if lag_grew {
        Some(format!(
            "the generator fell behind its own schedule: mean send lag grew from {first:.3} ms to {last:.3} ms over the run (limit {} ms); the engine, not the target, limited this trial",
            load.lag_limit_ms
        ))
    } else {
        None
    };
    let lag = summarize(&tally.rec.lag.histogram());
    let mix_actual = Op::ALL
        .iter()
        .filter(|op| state.sent_by_op[op.index()] > 0)
        .map(|op| (op.name(), state.sent_by_op[op.index()] as f64 / state.sent_in_window.max(1) as f64))
        .collect();
    let (cpu_s, rss_kib) = own_usage();
    let capped = load.max_outstanding.is_some();
    let timed = spec.replay.as_ref().is_some_and(|r| r.timing == Timing::Log);
    let mode = if shared.closed {
        Mode::Closed
    } else if timed {
        Mode::Timed
    } else {
        Mode::Open
    };
    // Closed loop offers no rate; a timed replay offers what the log's times put in the window.
    let requested_rate = match mode {
        Mode::Closed => None,
        Mode::Timed => Some(state.sent_in_window as f64 / runtime_s),
        Mode::Open => Some(load.rate),
    };
    let bytes: u64 = ops.values().map(|o| o.bytes).sum();
    let fileset = match &state.source {
        Source::Synthetic(gen) => {
            let set = &gen.set;
            Some(FilesetInfo {
                id: id.to_string(),
                files: spec.fileset.files,
                dirs: set.dirs.iter().filter(|d| d.origin == Origin::Prepared).count(),
                symlinks: set.symlinks.iter().filter(|s| s.origin == Origin::Prepared).count(),
                bytes: set.prepared_bytes,
            })
        }
        Source::Replay(_) => None,
    };
    let classes = (!tally.classes.is_empty()).then(|| {
        tally
            .classes
            .iter()
            .map(|(key, rec)| {
                let s = summarize(&rec.hist.as_ref().expect("a recorded class has a histogram").histogram());
                let class =
                    ClassSummary { count: s.count, bytes: rec.bytes, mean_ms: s.mean_ms, p50_ms: s.p50_ms, p99_ms: s.p99_ms, max_ms: s.max_ms, hist: s.hist };
                (class_label(key), class)
            })
            .collect()
    });
    TrialResult {
        schema: RESULT_SCHEMA,
        engine_version: env!("CARGO_PKG_VERSION"),
        mode,
        clients: load.clients,
        requested_rate,
        // Goodput: a reply that says the server failed or shed the request is no throughput.
        achieved_rate: tally.succeeded_in_window as f64 / runtime_s,
        completed_rate: tally.completed_in_window as f64 / runtime_s,
        outcomes: Outcomes::of(&ops),
        sent: state.sent_in_window,
        unsent: state.unsent,
        completed: all.len(),
        issued: monitor::counts(shared, 0).completed,
        bytes,
        output_mbit_s: bytes as f64 * 8.0 / runtime_s / 1e6,
        warmup_s: load.warmup_s,
        runtime_s,
        interrupted: runtime_s < load.runtime_s,
        ops,
        latency: Latency {
            all: summarize(&all),
            quarters_mean_ms: tally.latency_quarters.iter().map(|q| q.mean_ms()).collect(),
            quarters_count: tally.latency_quarters.iter().map(|q| q.count).collect(),
        },
        schedule_lag: ScheduleLag {
            mean_ms: lag.mean_ms,
            p99_ms: lag.p99_ms,
            max_ms: lag.max_ms,
            hist: lag.hist,
            quarters_mean_ms: quarters.iter().map(|q| q.mean_ms()).collect(),
        },
        generator_saturated: saturation_reason.is_some(),
        saturation_reason,
        outstanding: Outstanding {
            cap: load.max_outstanding,
            cap_bound: if capped { state.held_by_limit } else { 0 },
            max: watched.max_busy,
            threads: shared.threads.load(Relaxed),
            thread_limit_bound: if capped { 0 } else { state.held_by_limit },
        },
        mix_actual,
        engine_cpu_s: cpu_s,
        window_cpu_s: watched.window_cpu_s,
        engine_clock: shared.clock.source(),
        peak_rss_kib: rss_kib,
        fileset,
        restore,
        start,
        replay: None,
        classes,
        op_trace: (spec.trace_ops > 0).then(|| state.trace.clone()),
        transport: shared.target.result_fields(),
    }
}

fn rusage() -> libc::rusage {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru
}

fn cpu_s_of(ru: &libc::rusage) -> f64 {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// The process's CPU time so far (user + system, all threads), in seconds.
fn process_cpu_s() -> f64 {
    cpu_s_of(&rusage())
}

fn own_usage() -> (f64, u64) {
    let ru = rusage();
    (cpu_s_of(&ru), ru.ru_maxrss as u64)
}
