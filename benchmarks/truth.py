#!/usr/bin/env python3
"""The peak-rate search against servers whose peak is known (issues 14 and 20). Not part of the test suite.

    python3 benchmarks/truth.py [--quick N] [--careful M] [--policies guided,binsearch,model,linear]
                                [--workers 1,2] [--max-outstanding N] [--engine PATH] [--out FILE]

For each server (peakbench.servers.mdc: c workers, D = 5 ms, so an M/D/c queue under the
example workload's Poisson arrivals; Rsat = 50 ms and s = 10% give λ* = 189.5 req/s and a
peak region of 188.2–190.5 req/s for c = 1, 389.3 and 388.0–390.3 for c = 2) and each
policy, it runs N quick searches (`--quick`) and M careful ones (`--runlength 20 --warmup 5`,
the settings of issue 20's full search; the default confidence and accuracy), each with its
own `--seed` (trial k of a search uses seed + k, so seeds are 1,000 apart: no two searches
share an arrival stream). Every search is `peakbench search` as a user runs it (under
SCHED_FIFO when root, as tests/test_known_curve.py runs it and says why: the busy machine's
scheduling is not what is measured); `--max-outstanding N` adds that cap to every search.

Recorded per search: seed, verdict, peak, its interval, bracket, message, cost (benchmarking
seconds), trials and wall time; per server, policy and kind: how many stated a peak, the
share within the claimed accuracy (|λ̂ − λ*|/λ* ≤ 1 − a, of all searches), the share whose
interval [ci_low, ci_high] contains λ* (of all searches), median cost and trials, and how
often each explanation was given (the message with its numbers blanked out).
Results: benchmarks/results/truth.json (or --out), with the machine and its load, rewritten after every
search so that an interrupted run keeps what it measured ("complete": false until the end).
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
import time
from collections import Counter
from pathlib import Path

import run as runner  # benchmarks/run.py: processes, machine info, tables

ROOT = runner.ROOT
sys.path.insert(0, str(ROOT / "python"))
from peakbench.servers.mdc import EXAMPLE_WORKLOAD, MDCServer  # noqa: E402 (the checkout, not an install)

POLICIES = ("guided", "binsearch", "model", "linear")
RSAT_MS, WIDTH, SERVICE_MS = 50.0, 0.10, 5.0
PRIORITY = ["chrt", "-f", "5"] if os.geteuid() == 0 else []
KINDS = {"quick": ["--quick"], "careful": ["--runlength", "20", "--warmup", "5"]}
SEARCH_TIMEOUT_S = {"quick": 900, "careful": 7200}


def explanation(message: str) -> str:
    """Why the search stopped where it did: the message's last clause (a peak's message first
    describes its bracket), up to its ", so ..." consequence, numbers blanked so that equal
    explanations count together."""
    clause = message.rsplit("; ", 1)[-1].split(", so ", 1)[0]
    return re.sub(r"-?\d[\d,]*(\.\d+)?", "#", clause)


def one_search(
    server: MDCServer,
    docroot: Path,
    work: Path,
    policy: str,
    kind: str,
    seed: int,
    truth: float,
    env: dict,
    cap: list[str],
) -> dict:
    out = work / f"search-{policy}-{kind}-{seed}.json"
    started = time.monotonic()
    proc = runner.run(
        [
            *PRIORITY,
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
    if proc.rc not in (0, 3):  # 3: the search ended without a peak, and says why in its JSON
        last_line = (proc.stderr.strip().splitlines() or [f"exit {proc.rc}"])[-1]
        return {
            "seed": seed,
            "verdict": "error",
            "message": f"error: {last_line}",
            "wall_s": time.monotonic() - started,
        }
    found = json.loads(out.read_text())
    peak, low, high = found["peak_rate"], found["ci_low"], found["ci_high"]
    return {
        "seed": seed,
        "verdict": found["verdict"],
        "peak_rate": peak,
        "ci_low": low,
        "ci_high": high,
        "bracket_low": found["bracket_low"],
        "bracket_high": found["bracket_high"],
        "target_accuracy": found["target_accuracy"],
        "confidence": found["confidence"],
        "relative_error": None if peak is None else (peak - truth) / truth,
        "within": peak is not None and abs(peak - truth) / truth <= 1 - found["target_accuracy"],
        "contains": low is not None and high is not None and low <= truth <= high,
        "message": found["message"],
        "cost_s": found["cost_seconds"],
        "trials": found["trials"],
        "wall_s": time.monotonic() - started,
        # The true mean response at each tested load; None at or past capacity (it grows without bound).
        "loads": [
            {
                "load": load["load"],
                "true_mean_ms": finite_or_none(server.mean_response_ms(load["load"])),
                **{k: load[k] for k in ("classification", "mean_ms", "trials", "reason")},
            }
            for load in found["loads"]
        ],
    }


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def summary(searches: list[dict]) -> dict:
    n = len(searches)
    costs = [s["cost_s"] for s in searches if "cost_s" in s]
    errors = [abs(s["relative_error"]) for s in searches if s.get("relative_error") is not None]
    return {
        "n": n,
        "peaks": sum(s["verdict"] == "peak" for s in searches),
        "within": sum(s.get("within", False) for s in searches) / n,
        "contains": sum(s.get("contains", False) for s in searches) / n,
        "median_abs_error": statistics.median(errors) if errors else None,
        "max_abs_error": max(errors) if errors else None,
        "median_cost_s": statistics.median(costs) if costs else None,
        "median_trials": statistics.median([s["trials"] for s in searches if "trials" in s] or [0]),
        "explanations": dict(Counter(explanation(s["message"]) for s in searches).most_common()),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", type=int, default=20, metavar="N", help="quick searches per policy (default 20)")
    parser.add_argument("--careful", type=int, default=5, metavar="M", help="careful searches per policy (default 5)")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated (default all four)")
    parser.add_argument("--workers", default="1,2", help="servers to search: worker counts (default 1,2)")
    parser.add_argument("--first-seed", type=int, default=1000, help="seed of the first search; the next +1000")
    parser.add_argument("--max-outstanding", type=int, metavar="N", help="cap on requests in flight in every search")
    parser.add_argument(
        "--engine", type=Path, help="engine binary (default $PEAKBENCH_ENGINE, else benchmarks/run.py's)"
    )
    parser.add_argument("--out", type=Path, default=runner.RESULTS / "truth.json")
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    if unknown := set(policies) - set(POLICIES):
        parser.error(f"--policies: unknown {', '.join(sorted(unknown))} (known: {', '.join(POLICIES)})")
    engine = args.engine or Path(os.environ.get("PEAKBENCH_ENGINE") or runner.ENGINE)
    if not engine.exists():
        runner.build_engine()
    runner.ENGINE = engine.resolve()
    cap = ["--max-outstanding", str(args.max_outstanding)] if args.max_outstanding else []
    env = {"PYTHONPATH": str(ROOT / "python"), "PEAKBENCH_ENGINE": str(runner.ENGINE)}
    machine = runner.machine_info()
    load_before = runner.cpu_times()
    loadavg_before = Path("/proc/loadavg").read_text().split()[:3]
    print("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()), flush=True)

    servers, rows, seed = [], [], args.first_seed

    def save(complete: bool) -> None:
        doc = {
            "benchmark": "truth",
            "command": "python3 benchmarks/truth.py " + " ".join(argv),
            "complete": complete,
            "machine": machine,
            "load": {
                "loadavg_before": loadavg_before,
                "during": runner.cpu_share(load_before, runner.cpu_times()),
                "loadavg_now": Path("/proc/loadavg").read_text().split()[:3],
            },
            "settings": {
                "rsat_ms": RSAT_MS,
                "width": WIDTH,
                "max_outstanding": args.max_outstanding,
                "kinds": KINDS,
                "priority": PRIORITY,
                "workload": EXAMPLE_WORKLOAD.read_text(),
            },
            "servers": servers,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        partial = args.out.with_suffix(".partial")
        partial.write_text(json.dumps(doc, indent=2) + "\n")
        partial.replace(args.out)

    for workers in [int(w) for w in args.workers.split(",")]:
        work = Path(tempfile.mkdtemp(prefix="peakbench-truth-"))
        docroot = work / "www"
        docroot.mkdir()
        try:
            with MDCServer(workers, SERVICE_MS, docroot) as server:
                truth, region = server.peak_rate(RSAT_MS), server.peak_region(RSAT_MS, WIDTH)
                record = {
                    "workers": workers,
                    "service_ms": SERVICE_MS,
                    "peak_rate": truth,
                    "peak_region": region,
                    "policies": {},
                }
                servers.append(record)
                runner.header(f"M/D/{workers}: λ* = {truth:.1f} req/s, peak region {region[0]:.1f}-{region[1]:.1f}")
                # Policies take turns search by search, so that a run stopped early compares them on equal n.
                found: dict[tuple[str, str], list[dict]] = {}
                for kind, count in (("quick", args.quick), ("careful", args.careful)):
                    for _ in range(count):
                        for policy in policies:
                            searches = found.setdefault((policy, kind), [])
                            searches.append(one_search(server, docroot, work, policy, kind, seed, truth, env, cap))
                            seed += 1000
                            s = searches[-1]
                            kinds = record["policies"].setdefault(policy, {})
                            kinds[kind] = {"summary": summary(searches), "searches": searches}
                            save(complete=False)
                            print(
                                f"  {policy} {kind} seed {s['seed']}: {s['verdict']} {s.get('peak_rate')} "
                                f"[{s.get('ci_low')}, {s.get('ci_high')}] {s.get('cost_s')} s: {s['message']}",
                                flush=True,
                            )
                for (policy, kind), searches in found.items():
                    rows.append(
                        {
                            "server": f"M/D/{workers}",
                            "policy": policy,
                            "kind": kind,
                            **{k: v for k, v in summary(searches).items() if k != "explanations"},
                        }
                    )
            record["server_timing"] = server.stats  # known once the server has stopped
        finally:
            shutil.rmtree(work, ignore_errors=True)
    runner.table("searches against a known peak (within: |λ̂−λ*|/λ* ≤ 1−a; contains: λ* in [ci_low, ci_high])", rows)
    for record in servers:
        for policy, kinds in record["policies"].items():
            for kind, data in kinds.items():
                print(f"\nM/D/{record['workers']} {policy} {kind}: explanations")
                for text, times in data["summary"]["explanations"].items():
                    print(f"  {times:3d} x {text}")
    save(complete=True)
    print(f"  -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
