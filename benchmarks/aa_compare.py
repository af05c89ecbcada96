#!/usr/bin/env python3
"""A/A false-positive rate of `peakbench compare` (issue 14): the same thing measured twice, many times.

    python3 benchmarks/aa_compare.py [--trials N] [--commands N] [--runs R] [--alpha A] [--out FILE]

Two sources of repeated measurements, each run back to back as one long sequence:
- trial: a peakbench engine trial (installed `peakbench-engine`, posix target on a /dev/shm directory,
  2,000 ops/s of getattr/read, 0.1 s warm-up + 0.5 s); the metric is the trial's mean response time,
  the default stop metric of a plan's trial test.
- command: a small command on tmpfs (`cp` of a 16 MiB file within /dev/shm); the metric is its
  wall time, as a plan's command test measures `elapsed`.
Each sequence is cut into disjoint windows of 2·R runs and every window is one A/A pair, compared with
analysis.compare at --alpha, two ways:
- blocked: the first R runs against the next R, as a plan runs test A's runs and then test B's;
- interleaved: the odd runs against the even ones, as if A and B alternated.
Reported per source and pairing: the share of pairs declared different, with its 95% Wilson interval,
beside alpha. Results go to benchmarks/results/aa_compare.json with the machine it ran on.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import common
from peakbench import analysis

# The installed engine (a pyenv shim execs the real binary); common.machine_info reads common.ENGINE.
ENGINE = os.environ.get("PEAKBENCH_ENGINE") or shutil.which("peakbench-engine") or str(common.ENGINE)
common.ENGINE = Path(ENGINE)


def wilson(successes: int, n: int, confidence_z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial share (95% by default); contains successes/n."""
    share = successes / n
    centre = (share + confidence_z**2 / (2 * n)) / (1 + confidence_z**2 / n)
    half = confidence_z * math.sqrt(share * (1 - share) / n + confidence_z**2 / (4 * n * n)) / (1 + confidence_z**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def trial_values(count: int, directory: Path) -> list[float]:
    spec = common.trial_spec(
        {"kind": "posix", "path": str(directory)},
        2000,
        {"getattr": 0.6, "read": 0.4},
        common.fileset(200, 4096),
        runtime_s=0.5,
        warmup_s=0.1,
    )
    common.run([ENGINE, "prepare", "-"], input=json.dumps(spec), timeout=120)
    values = []
    for number in range(count):
        proc = common.run([ENGINE, "run", "-"], input=json.dumps(spec), timeout=60)
        values.append(json.loads(proc.stdout)["latency"]["mean_ms"])
        if (number + 1) % 100 == 0:
            print(f"  trial {number + 1}/{count}", flush=True)
    return values


def command_values(count: int, directory: Path) -> list[float]:
    source, copy = directory / "source", directory / "copy"
    source.write_bytes(os.urandom(16 << 20))
    values = []
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run(["cp", str(source), str(copy)], check=True, timeout=60)
        values.append(time.perf_counter() - started)
    return values


def false_positives(values: list[float], runs: int, alpha: float) -> dict:
    windows = [values[i : i + 2 * runs] for i in range(0, len(values) - 2 * runs + 1, 2 * runs)]
    out = {}
    for pairing, split in (("blocked", lambda w: (w[:runs], w[runs:])), ("interleaved", lambda w: (w[0::2], w[1::2]))):
        verdicts = [analysis.compare(*split(w), alpha=alpha) for w in windows]
        differ = sum(v["differ"] for v in verdicts)
        low, high = wilson(differ, len(verdicts))
        out[pairing] = {
            "pairs": len(verdicts),
            "declared_different": differ,
            "rate": differ / len(verdicts),
            "wilson95": [low, high],
            "rank_test_share": sum(v["rests_on"] == "mann-whitney" for v in verdicts) / len(verdicts),
        }
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=600, help="engine trials in the sequence (default 600)")
    parser.add_argument("--commands", type=int, default=8000, help="command runs in the sequence (default 8000)")
    parser.add_argument(
        "--runs", type=int, default=5, help="runs per side of each pair (default 5, a plan's typical count)"
    )
    parser.add_argument("--alpha", type=float, default=analysis.DEFAULT_ALPHA)
    parser.add_argument("--out", default="aa_compare")
    args = parser.parse_args(argv)
    common.MACHINE.update(common.machine_info())
    started = datetime.datetime.now(datetime.UTC)
    sources = {}
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="aa-compare-") as work:
        work = Path(work)
        for name, produce, count in (("command", command_values, args.commands), ("trial", trial_values, args.trials)):
            if count < 2 * args.runs:
                continue
            directory = work / name
            directory.mkdir()
            began = time.monotonic()
            values = produce(count, directory)
            sources[name] = {
                "runs_total": count,
                "wall_s": time.monotonic() - began,
                "values": values,
                **false_positives(values, args.runs, args.alpha),
            }
    rows = [
        {
            "source": name,
            "pairing": pairing,
            "pairs": s[pairing]["pairs"],
            "declared different": s[pairing]["declared_different"],
            "rate": s[pairing]["rate"],
            "95% Wilson low": s[pairing]["wilson95"][0],
            "high": s[pairing]["wilson95"][1],
            "alpha": args.alpha,
            "rank test": s[pairing]["rank_test_share"],
        }
        for name, s in sources.items()
        for pairing in ("blocked", "interleaved")
    ]
    common.table(f"A/A false positives of peakbench compare ({args.runs} vs {args.runs} runs per pair)", rows)
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    path = common.RESULTS / f"{args.out}.json"
    path.write_text(
        json.dumps(
            {
                "benchmark": "aa_compare",
                "command": "python3 benchmarks/aa_compare.py " + " ".join(argv),
                "machine": common.MACHINE,
                "started": started.isoformat(),
                "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
                "runs_per_side": args.runs,
                "alpha": args.alpha,
                "engine": ENGINE,
                "sources": sources,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"  -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
