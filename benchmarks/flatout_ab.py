"""Flat-out A/B of two engine binaries against `null`: ops per engine CPU-second.

    python3 benchmarks/flatout_ab.py NEW_ENGINE OLD_ENGINE ROUNDS OUT.json

Each round runs both engines back to back (getattr-only, then the SPEC example mix),
pinned to the same CPU, offered 20,000,000 ops/s (far beyond either's ceiling), 1 s
warm-up + 3 s. Ops per CPU-second = every completed request (`issued`) / the engine's
own CPU time, so a neighbour taking the CPU lowers both numerator and denominator:
the ratio between the engines holds on a busy machine where the floor's p99-lag
criterion (bench_floor in run.py) measures the neighbours instead.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (trial_spec, fileset, EXAMPLE_MIX)


def main(new: str, old: str, rounds: int, out_path: str) -> None:
    cpu = max(os.sched_getaffinity(0))
    rows = []
    for rnd in range(rounds):
        for label, mix in [("getattr", {"getattr": 1.0}), ("example-mix", bench.EXAMPLE_MIX)]:
            for name, engine in [("new", new), ("old", old)]:
                spec = bench.trial_spec(
                    {"kind": "null"}, 20_000_000, mix, bench.fileset(1000), warmup_s=1.0, runtime_s=3.0
                )
                p = bench.run([engine, "run", "-"], input=json.dumps(spec), timeout=120, cpus={cpu})
                r = json.loads(p.stdout)
                row = {
                    "round": rnd,
                    "mix": label,
                    "engine": name,
                    "binary": engine,
                    "issued": r["issued"],
                    "cpu_s": r["engine_cpu_s"],
                    "ops_per_cpu_s": r["issued"] / r["engine_cpu_s"],
                    "achieved": r["achieved_rate"],
                    "clock": r.get("engine_clock"),
                    "loadavg": open("/proc/loadavg").read().split()[:3],
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        sha = {
            name: hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]
            for name, path in [("new", new), ("old", old)]
        }
        json.dump(
            {"command": sys.argv, "machine": bench.machine_info(), "engine_sha256": sha, "rows": rows}, f, indent=1
        )


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
