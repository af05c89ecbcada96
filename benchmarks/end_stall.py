#!/usr/bin/env python3
"""One stall of the load generator, at the measured window's end or inside it: does the engine call the trial
generator-bound? (issue 17: one request of 840 left unsent at a Samba sample's window end ended its search.)

    python3 benchmarks/end_stall.py [--engine PATH] [--baseline PATH] [--repeats N] [--rate OPS] [--stall-ms MS]

The stall is real: the engine's process is stopped (SIGSTOP) and continued (SIGCONT) at chosen instants of its
schedule, which the spec anchors with start_at_unix_s. Per engine (this checkout's and --baseline, e.g. an older
build) and per case, N trials against null:// (instant replies): a stall of STALL-MS that ends just after the
window does; the same stall in the window's middle; one of 0.6 s across the window's end (a generator truly
behind, which must still count); and none. Recorded per trial: the verdict and its reason, the
requests left unsent, and the schedule lag.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from peakbench.contract import SPEC_SCHEMA_V2  # noqa: E402

WARMUP_S, RUNTIME_S, LEAD_S = 0.5, 2.0, 1.5  # the window is [LEAD + WARMUP, LEAD + WARMUP + RUNTIME) from now
LONG_STALL_S = 0.6
CASES = ("end", "middle", "end-long", "none")


def spec(rate: float, start_at: float) -> dict:
    fileset = common.fileset(100)
    load = common.trial_spec(
        {"kind": "null"}, rate, common.EXAMPLE_MIX, fileset, runtime_s=RUNTIME_S, warmup_s=WARMUP_S
    )
    return {**load, "schema": SPEC_SCHEMA_V2, "start_at_unix_s": start_at}


def trial(engine: Path, rate: float, case: str, stall_s: float) -> dict:
    start_at = time.time() + LEAD_S
    window_end = start_at + WARMUP_S + RUNTIME_S
    # "end" and "end-long" (a generator truly behind): stopped for the stall's first half before the window closes,
    # so what fell due then is still unsent when it resumes, past the engine's 5 ms limit
    stall_s = LONG_STALL_S if case == "end-long" else stall_s
    stop_at = {"middle": window_end - RUNTIME_S / 2, "none": None}.get(case, window_end - stall_s / 2)
    proc = subprocess.Popen(
        [str(engine), "run", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    proc.stdin.write(json.dumps(spec(rate, start_at)))
    proc.stdin.close()
    if stop_at is not None:
        time.sleep(max(stop_at - time.time(), 0))
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(stall_s)
        os.kill(proc.pid, signal.SIGCONT)
    result = json.loads(proc.stdout.read())
    if proc.wait(timeout=60) != 0:
        raise RuntimeError(f"{engine} exited with {proc.returncode}")
    return {
        "case": case,
        "generator_saturated": result["generator_saturated"],
        "saturation_reason": result["saturation_reason"],
        "unsent": result["unsent"],
        "sent": result["sent"],
        "lag_mean_ms": result["schedule_lag"]["mean_ms"],
        "lag_max_ms": result["schedule_lag"]["max_ms"],
        "latency_mean_ms": result["latency"]["mean_ms"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", type=Path, default=common.ENGINE)
    parser.add_argument("--baseline", type=Path, help="another engine build, run beside it in the same rounds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--stall-ms", type=float, default=30.0)
    parser.add_argument("--out", default="end-stall")
    args = parser.parse_args()
    engines = {"engine": args.engine, **({"baseline": args.baseline} if args.baseline else {})}
    rows = []
    for repeat in range(args.repeats):
        for case in CASES:
            for name, path in engines.items():
                row = {"engine": name, "repeat": repeat, **trial(path, args.rate, case, args.stall_ms / 1000)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = {
        f"{name} {case}": {
            "trials": len(picked := [r for r in rows if r["engine"] == name and r["case"] == case]),
            "generator_bound": sum(r["generator_saturated"] for r in picked),
            "unsent": [r["unsent"] for r in picked],
        }
        for name in engines
        for case in CASES
    }
    common.save(
        args.out,
        {
            "what": __doc__.split("\n\n")[0],
            "command": " ".join(sys.argv),
            "machine": common.machine_info(),
            "engines": {name: str(path) for name, path in engines.items()},
            "settings": {"rate": args.rate, "stall_ms": args.stall_ms, "warmup_s": WARMUP_S, "runtime_s": RUNTIME_S},
            "summary": summary,
            "trials": rows,
        },
    )
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
