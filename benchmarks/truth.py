#!/usr/bin/env python3
"""The peak-rate search against servers whose peak is known (issues 14 and 20). Not part of the test suite.

    python3 benchmarks/truth.py [--quick N] [--careful M] [--policies guided,binsearch,model,linear]
                                [--careful-equal E] [--workers 1,4] [--parallel P] [--resume]
                                [--max-outstanding N] [--engine PATH] [--out FILE]
    python3 benchmarks/truth.py --drift-alarms [--out FILE]

For each server (peakbench.servers.mdc: c workers, D = 5 ms, so an M/D/c queue under the
example workload's Poisson arrivals; Rsat = 50 ms and s = 10% give λ* = 189.5 req/s and a peak
region of 188.2–190.5 req/s for c = 1, 789.2 and 787.9–790.3 for c = 4) and each policy, it
runs N quick searches (`--quick`), M careful ones (`--runlength 20 --warmup 5`, the settings of
issue 20's full search; the default confidence and accuracy) and E careful ones at equal trial
length (`--careful-equal`: also `--min-runlength 20`, which keeps the guided policy from
shortening its careful trials; run for guided only, as the other policies' careful trials are
already full length, so their careful searches are their equal-length set), each with its own `--seed` (trial k of a search uses seed + k,
so seeds are 1,000 apart: no two searches share an arrival stream; a search's seed depends only
on its place in the plan, so a resumed run gives the same search the same seed). Every search
is `peakbench search` as a user runs it, its engine under SCHED_FIFO when root (as
tests/test_known_curve.py runs it and says why: the busy machine's scheduling is not what is
measured; see ENGINE_PRIORITY), against a server process of its own on its own port, so
`--parallel P` searches (at most 3) run at once without sharing a queue. The server sleeps
through its service times, so it needs little CPU. `--max-outstanding N` adds that cap to every
search.

The searches are run server by server, in an order that keeps every (policy, kind) group
equally far along, so a run stopped early compares them on proportional n. `--resume` keeps
the searches already in --out and runs only the rest (with every search done, it only
rewrites the summaries).

The truth: λ* from the exact stationary chain (mdc.py), and, as a check, by simulating the
FIFO M/D/c queue at λ*: with deterministic service, customer i starts at max(a_i, start of
customer i−c + D), so each residue class mod c is a Lindley recursion, vectorised with
numpy (SIMULATION_REPLICATES runs of SIMULATION_CUSTOMERS customers each, the first tenth
discarded; the mean response and its 95% t-interval over the runs are recorded).

Recorded per search: seed, verdict, peak, its interval, bracket, message, cost (benchmarking
seconds), trials, the runlengths of its careful trials and scouts, each tested load with its
true mean response, its classification and reason, and whether that classification contradicts
the truth, and each trial's load, purpose, runlength, mean response, offered and achieved rate. Per server, policy and kind: how many stated a peak, the share within the claimed
accuracy (|λ̂ − λ*|/λ* ≤ 1 − a, of all searches), the share whose interval [ci_low, ci_high]
contains λ* (of all searches), cost median and range, the careful runlengths used, loads
classified against the truth (settled ones, and those only steering the search), and how often
each explanation was given (the message with its numbers blanked out). Results:
benchmarks/results/truth.json (or --out), with the machine and its load average at each
search's end, rewritten after every search so that an interrupted run keeps what it measured
("complete": false until the end).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import common  # benchmarks/common.py: processes, machine info, tables
import numpy as np

ROOT = common.ROOT
sys.path.insert(0, str(ROOT / "python"))
from peakbench.controller import POLICIES as SEARCH_POLICIES  # noqa: E402 (the checkout, not an install)
from peakbench.controller import Observation, SearchSettings  # noqa: E402
from peakbench.controller.search import trials_still_rising  # noqa: E402
from peakbench.searching import QUICK  # noqa: E402
from peakbench.servers.mdc import (  # noqa: E402
    EXAMPLE_WORKLOAD,
    MDCServer,
    mean_response_ms,
    peak_rate,
    peak_region,
)
from peakbench.servers.mdc_queue import responses_s  # noqa: E402

POLICIES = ("guided", "binsearch", "model", "linear")
RSAT_MS, WIDTH, SERVICE_MS = 50.0, 0.10, 5.0
# The engine alone runs under SCHED_FIFO when root (the server is above it, at 10): searches run side by
# side, and a search's own Python (start-up, storing results) at real-time priority starved the engines
# of the others for up to 1.4 s, so 3 concurrent CLIs under `chrt` ended "generator-bound" at 100 req/s.
ENGINE_PRIORITY = ["chrt", "-f", "5"] if os.geteuid() == 0 else []
KINDS = {
    "quick": ["--quick"],
    "careful": ["--runlength", "20", "--warmup", "5"],
    # The guided policy shortens careful trials to runlength/3 from the noise it sees; this compares
    # the policies at equal trial length (issue 20, item 4).
    "careful-equal": ["--runlength", "20", "--warmup", "5", "--min-runlength", "20"],
}
SEARCH_TIMEOUT_S = {"quick": 900, "careful": 7200, "careful-equal": 7200}
MAX_PARALLEL = 3  # a 2-core machine shared with others: at most this many searches at once
SERVER_START_ATTEMPTS = 3  # free_port() can race with another search's server taking the same port
SIMULATION_REPLICATES, SIMULATION_CUSTOMERS = 20, 2_000_000
DRIFT_RATES, DRIFT_SETS = (150.0, 170.0, 185.0, 195.0), 1000  # M/D/1 true means 12.5, 19.2, 35.8, 102.5 ms


def explanation(message: str) -> str:
    """What a search said, with its numbers blanked and the parenthesised details of its loads dropped
    (their R̄ and intervals), so that equal explanations count together. How the peak was estimated
    ("their midpoint", "where the response line ...", "a measured load") is kept."""
    text = re.sub(r"-?\d[\d,]*(\.\d+)?", "#", message)
    while (shorter := re.sub(r" \((?!their midpoint|where the|a measured load)[^()]*\)", "", text)) != text:
        text = shorter
    return text


def simulated_mean_ms(rate: float, workers: int, seed: int) -> dict:
    """The mean response of a FIFO M/D/c queue at `rate` by simulation (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(SIMULATION_REPLICATES):
        responses = responses_s(np.cumsum(rng.exponential(1 / rate, SIMULATION_CUSTOMERS)), workers, SERVICE_MS / 1000)
        means.append(1000 * responses[SIMULATION_CUSTOMERS // 10 :].mean())
    mean, deviation = statistics.fmean(means), statistics.stdev(means)
    half = 2.093 * deviation / math.sqrt(len(means))  # t(0.975, 19)
    return {
        "rate": rate,
        "replicates": len(means),
        "customers_each": SIMULATION_CUSTOMERS,
        "discarded_each": SIMULATION_CUSTOMERS // 10,
        "mean_ms": mean,
        "ci95_ms": [mean - half, mean + half],
        "seed": seed,
    }


def drift_alarms(seed: int) -> list[dict]:
    """How often the search's still-rising test (controller.search.trials_still_rising) fires on trials of the
    M/D/1 queue, each from empty after the preset's warm-up, as the engine measures them (quarter means of the
    requests due in each quarter of the window): DRIFT_SETS sets of 2 and of 4 trials per preset and rate."""
    rng = np.random.default_rng(seed)
    presets = {
        "quick": (SearchSettings(**{**QUICK, "rsat_ms": RSAT_MS, "width": WIDTH}), 1.0, 4.0),
        "careful, guided's 6.7 s trials": (SearchSettings(rsat_ms=RSAT_MS, width=WIDTH, warmup_s=5.0), 5.0, 20 / 3),
    }

    def trial(rate: float, warmup_s: float, runtime_s: float) -> Observation:
        span = warmup_s + runtime_s
        arrivals = np.sort(rng.uniform(0, span, rng.poisson(rate * span)))
        responses = responses_s(arrivals, 1, SERVICE_MS / 1000)[arrivals >= warmup_s]
        quarter = np.minimum((arrivals[arrivals >= warmup_s] - warmup_s) / runtime_s * 4, 3).astype(int)
        means = tuple(1000 * float(responses[quarter == q].mean()) for q in range(4))
        mean = 1000 * float(responses.mean())
        return Observation(rate, rate, mean, mean, False, span, quarter_means_ms=means)

    rows = []
    for name, (settings, warmup_s, runtime_s) in presets.items():
        for rate in DRIFT_RATES:
            row = {"preset": name, "rate": rate, "true_mean_ms": mean_response_ms(rate), "sets": DRIFT_SETS}
            for count in (2, 4):
                fired = sum(
                    trials_still_rising([trial(rate, warmup_s, runtime_s) for _ in range(count)], settings)
                    for _ in range(DRIFT_SETS)
                )
                row[f"fires_{count}_trials"] = fired / DRIFT_SETS
            rows.append(row)
            print(row, flush=True)
    return rows


def start_server(workers: int, docroot: Path) -> MDCServer:
    for attempt in range(SERVER_START_ATTEMPTS):
        server = MDCServer(workers, SERVICE_MS, docroot)
        try:
            server.start()
            return server
        except RuntimeError:
            if attempt == SERVER_START_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def misclassified(load: dict) -> bool:
    """A load classified against its true mean response: below though the truth is above the region, or above
    though it is below (a load at or past capacity has no finite mean: it is above)."""
    true_ms = load["true_mean_ms"]
    low_ms, high_ms = RSAT_MS * (1 - WIDTH), RSAT_MS * (1 + WIDTH)
    if load["classification"] == "below":
        return true_ms is None or true_ms > high_ms
    if load["classification"] == "above":
        return true_ms is not None and true_ms < low_ms
    return False


def provisional(load: dict) -> bool:
    """A classification that only steers the search (a scout's, or a load 'taken as' below or above Rsat
    because it did not settle): it never bounds a claim."""
    return load["reason"].startswith("scout:") or "taken as" in load["reason"]


def one_search(workers: int, policy: str, kind: str, seed: int, env: dict, cap: list[str]) -> dict:
    """One `peakbench search` against a server of its own, in a directory of its own."""
    work = Path(tempfile.mkdtemp(prefix="peakbench-truth-"))
    docroot = work / "www"
    docroot.mkdir()
    out = work / "search.json"
    started = time.monotonic()
    try:
        server = start_server(workers, docroot)
        try:
            proc = common.run(
                [
                    sys.executable,
                    "-m",
                    "peakbench.cli",
                    "search",
                    EXAMPLE_WORKLOAD,
                    "--target",
                    server.url,
                    "--docroot",
                    docroot,
                    "--policy",
                    policy,
                    *KINDS[kind],
                    "--rsat",
                    RSAT_MS,
                    "--width",
                    WIDTH,
                    "--seed",
                    seed,
                    *cap,
                    "--db",
                    work / "p.db",
                    "--json",
                    out,
                ],
                timeout=SEARCH_TIMEOUT_S[kind],
                env_extra=env,
                check=False,
            )
        finally:
            server.stop()
        base = {"workers": workers, "policy": policy, "kind": kind, "seed": seed, "server_timing": server.stats}
        if proc.rc not in (0, 3):  # 3: the search ended without a peak, and says why in its JSON
            last_line = (proc.stderr.strip().splitlines() or [f"exit {proc.rc}"])[-1]
            return {**base, "verdict": "error", "message": f"error: {last_line}", "wall_s": time.monotonic() - started}
        found = json.loads(out.read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    truth = peak_rate(RSAT_MS, workers, SERVICE_MS)
    peak, low, high = found["peak_rate"], found["ci_low"], found["ci_high"]
    loads = [
        {
            "load": load["load"],
            "true_mean_ms": finite_or_none(server.mean_response_ms(load["load"])),
            **{k: load[k] for k in ("classification", "mean_ms", "ci_low_ms", "ci_high_ms", "trials", "reason")},
        }
        for load in found["loads"]
    ]
    # Each trial's own figures, so that two trials of one load can be told apart (trial k's seed: seed + k − 1).
    trials = [
        {
            "trial": t["trial"],
            "load": t["load"],
            "purpose": t["purpose"],
            "runlength_s": t["runlength_s"],
            **{k: t["observation"][k] for k in ("mean_ms", "offered_rate", "achieved_rate")},
        }
        for t in found["trace"]
    ]
    runlengths = {
        purpose: sorted({t["runlength_s"] for t in found["trace"] if t["purpose"] == purpose})
        for purpose in ("careful", "scout")
    }
    return {
        **base,
        "verdict": found["verdict"],
        "peak_rate": peak,
        "ci_low": low,
        "ci_high": high,
        "bracket_low": found["bracket_low"],
        "bracket_high": found["bracket_high"],
        "measured_load": found["measured_load"],
        "response_ms": found["response_ms"],
        "response_ci_ms": [found["response_ci_low_ms"], found["response_ci_high_ms"]],
        "target_accuracy": found["target_accuracy"],
        "confidence": found["confidence"],
        "relative_error": None if peak is None else (peak - truth) / truth,
        "within": peak is not None and abs(peak - truth) / truth <= 1 - found["target_accuracy"],
        "contains": low is not None and high is not None and low <= truth <= high,
        "message": found["message"],
        "cost_s": found["cost_seconds"],
        "trials": found["trials"],
        "runlengths_s": runlengths,
        "wall_s": time.monotonic() - started,
        "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3],
        "loads": loads,  # the true mean response at each tested load; None at or past capacity
        "trace": trials,
    }


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def summary(searches: list[dict]) -> dict:
    n = len(searches)
    costs = [s["cost_s"] for s in searches if "cost_s" in s]
    errors = [abs(s["relative_error"]) for s in searches if s.get("relative_error") is not None]
    wrong = [load for s in searches for load in s.get("loads", []) if misclassified(load)]
    steered_wrong = [load for load in wrong if provisional(load)]
    return {
        "n": n,
        "peaks": sum(s["verdict"] == "peak" for s in searches),
        "within": sum(s.get("within", False) for s in searches) / n,
        "contains": sum(s.get("contains", False) for s in searches) / n,
        "median_abs_error": statistics.median(errors) if errors else None,
        "max_abs_error": max(errors) if errors else None,
        "median_cost_s": statistics.median(costs) if costs else None,
        "min_cost_s": min(costs, default=None),
        "max_cost_s": max(costs, default=None),
        "median_trials": statistics.median([s["trials"] for s in searches if "trials" in s] or [0]),
        "careful_runlengths_s": sorted({r for s in searches for r in s.get("runlengths_s", {}).get("careful", [])}),
        "loads_tested": sum(len(s.get("loads", [])) for s in searches),
        "loads_misclassified": len(wrong) - len(steered_wrong),
        "loads_steered_wrong": len(steered_wrong),
        "misclassification_reasons": dict(Counter(explanation(load["reason"]) for load in wrong).most_common()),
        "explanations": dict(Counter(explanation(s["message"]) for s in searches).most_common()),
        "jumps_explanations": sum("jump" in s["message"] for s in searches),
    }


def plan(workers: list[int], policies: list[str], counts: dict[str, int], first_seed: int) -> list[tuple]:
    """Every search as (workers, policy, kind, seed): server by server, in an order that keeps each of a server's
    (policy, kind) groups equally far along. Careful-equal searches only for policies that shorten careful trials."""
    tasks, seed = [], first_seed
    for w in workers:
        for kind, count in counts.items():
            for policy in policies:
                if kind == "careful-equal" and not SEARCH_POLICIES[policy].adapts_runlength:
                    continue  # its careful trials already run the full runlength: "careful" is its equal-length set
                for i in range(count):
                    tasks.append(((i + 0.5) / count, w, policy, kind, seed))
                    seed += 1000
    return [task[1:] for task in sorted(tasks, key=lambda t: (workers.index(t[1]), t[0]))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", type=int, default=20, metavar="N", help="quick searches per policy (default 20)")
    parser.add_argument("--careful", type=int, default=5, metavar="M", help="careful searches per policy (default 5)")
    parser.add_argument(
        "--careful-equal",
        type=int,
        default=0,
        metavar="E",
        help="careful searches with --min-runlength 20 too, per policy that shortens careful trials (default 0)",
    )
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated (default all four)")
    parser.add_argument("--workers", default="1,4", help="servers to search: worker counts (default 1,4)")
    parser.add_argument("--first-seed", type=int, default=1000, help="seed of the first search; the next +1000")
    parser.add_argument("--parallel", type=int, default=1, metavar="P", help=f"searches at once (1-{MAX_PARALLEL})")
    parser.add_argument("--resume", action="store_true", help="keep the searches already in --out; run the rest")
    parser.add_argument("--max-outstanding", type=int, metavar="N", help="cap on requests in flight in every search")
    parser.add_argument(
        "--engine", type=Path, help="engine binary (default $PEAKBENCH_ENGINE, else benchmarks/run.py's)"
    )
    parser.add_argument("--out", type=Path, default=common.RESULTS / "truth.json")
    parser.add_argument(
        "--drift-alarms",
        action="store_true",
        help="only simulate how often the still-rising test fires on the M/D/1 queue; write that to --out",
    )
    args = parser.parse_args(argv)
    if args.drift_alarms:
        doc = {"benchmark": "truth --drift-alarms", "command": "python3 benchmarks/truth.py " + " ".join(argv)}
        args.out.write_text(json.dumps({**doc, "seed": 20, "rows": drift_alarms(seed=20)}, indent=2) + "\n")
        return 0
    policies = [p for p in args.policies.split(",") if p]
    if unknown := set(policies) - set(POLICIES):
        parser.error(f"--policies: unknown {', '.join(sorted(unknown))} (known: {', '.join(POLICIES)})")
    if not 1 <= args.parallel <= MAX_PARALLEL:
        parser.error(f"--parallel: {args.parallel} is not between 1 and {MAX_PARALLEL}")
    engine = args.engine or Path(os.environ.get("PEAKBENCH_ENGINE") or common.ENGINE)
    if not engine.exists():
        common.build_engine()
    common.ENGINE = engine.resolve()
    cap = ["--max-outstanding", str(args.max_outstanding)] if args.max_outstanding else []
    wrapper_dir = Path(tempfile.mkdtemp(prefix="peakbench-truth-engine-"))
    wrapper = wrapper_dir / "peakbench-engine"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(ENGINE_PRIORITY)} "{common.ENGINE}" "$@"\n')
    wrapper.chmod(0o755)
    env = {"PYTHONPATH": str(ROOT / "python"), "PEAKBENCH_ENGINE": str(wrapper)}
    workers = [int(w) for w in args.workers.split(",")]
    tasks = plan(
        workers,
        policies,
        {"quick": args.quick, "careful": args.careful, "careful-equal": args.careful_equal},
        args.first_seed,
    )

    done: list[dict] = []
    if args.resume and args.out.exists():
        previous = json.loads(args.out.read_text())
        done = [s for s in previous["searches"] if s["verdict"] != "error"]
    finished = {(s["workers"], s["policy"], s["kind"], s["seed"]) for s in done}
    tasks = [t for t in tasks if t not in finished]
    machine = common.machine_info()
    load_before = common.cpu_times()
    loadavg_before = Path("/proc/loadavg").read_text().split()[:3]
    print("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()), flush=True)
    servers = {}
    for w in workers:
        truth = peak_rate(RSAT_MS, w, SERVICE_MS)
        servers[w] = {
            "workers": w,
            "service_ms": SERVICE_MS,
            "peak_rate": truth,
            "peak_region": peak_region(RSAT_MS, WIDTH, w, SERVICE_MS),
            "simulated_at_peak": simulated_mean_ms(truth, w, seed=w),
        }
        print(f"M/D/{w}: λ* = {truth:.2f} req/s; simulated there: {servers[w]['simulated_at_peak']}", flush=True)
    print(f"{len(done)} searches kept, {len(tasks)} to run, {args.parallel} at once", flush=True)
    lock = threading.Lock()

    def document(complete: bool) -> dict:
        groups = {}
        for s in done:
            groups.setdefault((s["workers"], s["policy"], s["kind"]), []).append(s)
        return {
            "benchmark": "truth",
            "command": "python3 benchmarks/truth.py " + " ".join(argv),
            "complete": complete,
            "machine": machine,
            "load": {
                "loadavg_before": loadavg_before,
                "during": common.cpu_share(load_before, common.cpu_times()),
                "loadavg_now": Path("/proc/loadavg").read_text().split()[:3],
            },
            "settings": {
                "rsat_ms": RSAT_MS,
                "width": WIDTH,
                "max_outstanding": args.max_outstanding,
                "parallel": args.parallel,
                "kinds": KINDS,
                "engine_priority": ENGINE_PRIORITY,
                "workload": EXAMPLE_WORKLOAD.read_text(),
            },
            "servers": list(servers.values()),
            "summaries": [
                {"server": f"M/D/{w}", "policy": p, "kind": k, **summary(searches)}
                for (w, p, k), searches in sorted(groups.items())
            ],
            "searches": done,
        }

    def save(complete: bool) -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        partial = args.out.with_suffix(".partial")
        partial.write_text(json.dumps(document(complete), indent=2) + "\n")
        partial.replace(args.out)

    def run_one(task: tuple) -> None:
        try:
            s = one_search(*task, env, cap)
        except RuntimeError as error:  # a server that would not start, a search past its timeout: kept as an error
            w, policy, kind, seed = task
            s = {"workers": w, "policy": policy, "kind": kind, "seed": seed, "verdict": "error", "message": str(error)}
        with lock:
            done.append({**s, "git_commit": machine["git_commit"]})  # a resumed file can hold several commits' searches
            save(complete=False)
        print(
            f"  M/D/{s['workers']} {s['policy']} {s['kind']} seed {s['seed']}: {s['verdict']} {s.get('peak_rate')} "
            f"[{s.get('ci_low')}, {s.get('ci_high')}] {s.get('cost_s')} s: {s['message']}",
            flush=True,
        )

    try:
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            for future in [pool.submit(run_one, task) for task in tasks]:
                future.result()
    finally:
        shutil.rmtree(wrapper_dir, ignore_errors=True)
    doc = document(complete=True)
    rows = [{k: v for k, v in row.items() if not isinstance(v, dict | list)} for row in doc["summaries"]]
    common.table("searches against a known peak (within: |λ̂−λ*|/λ* ≤ 1−a; contains: λ* in [ci_low, ci_high])", rows)
    for row in doc["summaries"]:
        print(f"\n{row['server']} {row['policy']} {row['kind']}: explanations")
        for text, times in row["explanations"].items():
            print(f"  {times:3d} x {text}")
    save(complete=True)
    print(f"  -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
