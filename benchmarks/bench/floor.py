"""`floor`: the highest rate one engine core sustains against the null target."""

from __future__ import annotations

import os

from common import (
    EXAMPLE_MIX,
    Trial,
    engine,
    fileset,
    find_ceiling,
    header,
    keeps_up,
    save,
    table,
    trial_spec,
)

FLOOR_MIN_CORE_SHARE = 0.97  # below this a floor trial was disturbed (see bench_floor)


FLAT_OUT = 20_000_000  # offered to show the generator's raw throughput (5,000,000 until the engine passed it)


def bench_floor(name: str = "floor") -> dict:
    """Highest rate one engine core sustains against `null` with p99 schedule lag under 100 µs.

    The null target never blocks, so the engine spins on its core and its CPU time should be
    close to the trial's length (undisturbed trials get 97.5-100%). A trial in which it got
    less than 97% of its core was disturbed by other work on a shared machine (or by the host:
    steal): every 4 ms slice lost to a neighbour puts thousands of requests 100 µs behind at
    these rates, which is the p99 criterion measuring the neighbour. Such a trial is run again
    (up to three times) and only the least disturbed attempt counts."""
    header("1. engine floor: null target, one core, p99 schedule lag < 100 µs")
    cpu = max(os.sched_getaffinity(0))
    lag_limit_ms, warmup_s, runtime_s = 0.1, 1.0, 3.0
    rows, out = [], {"pinned_cpu": cpu, "lag_limit_ms": lag_limit_ms, "mixes": {}}
    disturbed = []

    def core_share(t: Trial) -> float:
        return t.result["engine_cpu_s"] / (warmup_s + runtime_s)

    for label, mix in [("getattr", {"getattr": 1.0}), ("example-mix", EXAMPLE_MIX)]:
        print(f" mix {label} (pinned to CPU {cpu}; warm-up {warmup_s:g} s, {runtime_s:g} s measured per step)")

        def trial(rate, mix=mix, env=None):
            attempts = []
            for _ in range(4):
                spec = trial_spec({"kind": "null"}, rate, mix, fileset(1000), warmup_s=warmup_s, runtime_s=runtime_s)
                attempts.append(engine("run", spec, cpus={cpu}, env_extra=env))
                if core_share(attempts[-1]) >= FLOOR_MIN_CORE_SHARE:
                    break
                disturbed.append({"mix": label, "rate": rate, "core_share": round(core_share(attempts[-1]), 3)})
                print(
                    f"  {rate:>12,.0f} ops/s: engine got {core_share(attempts[-1]):.0%} of its core (disturbed), again",
                    flush=True,
                )
            return max(attempts, key=core_share)

        def passes(t):
            return keeps_up(t, 0.01) and t.result["schedule_lag"]["p99_ms"] < lag_limit_ms

        best, trials = find_ceiling(trial, passes, start=1_000_000, grow=1.25, max_steps=14, refine=2)
        confirms = [trial(best.rate) for _ in range(3)] if best else []
        flat_out = trial(FLAT_OUT)  # far beyond the ceiling: what the generator gets through at all
        # The null target needs no paths, so the engine formats none for it; a path-based target
        # (posix) pays for them. The same flat-out trial with paths formatted shows that cost.
        with_paths = trial(FLAT_OUT, env={"PEAKBENCH_NULL_PATHS": "1"})
        out["mixes"][label] = {
            "ceiling_ops_s": best.rate if best else None,
            "confirm": [dict(c.summary(), core_share=core_share(c), passes=passes(c)) for c in confirms],
            "max_throughput": dict(flat_out.summary(), core_share=core_share(flat_out)),
            "max_throughput_with_paths": dict(with_paths.summary(), core_share=core_share(with_paths)),
            "steps": [dict(t.summary(), core_share=core_share(t), passes=passes(t)) for t in trials],
        }
        rows.append(
            {
                "mix": label,
                "ceiling ops/s": best.rate if best else 0.0,
                "confirms passed": f"{sum(passes(c) for c in confirms)}/{len(confirms)}",
                "confirm lag p99 µs": " ".join(f"{c.result['schedule_lag']['p99_ms'] * 1000:.0f}" for c in confirms),
                "achieved @20M offered": flat_out.achieved,
                "same, paths formatted": with_paths.achieved,
                "goal ≥ 1M": bool(best and best.rate >= 1_000_000),
            }
        )
    out["disturbed_attempts"] = disturbed
    table("engine floor", rows)
    save(name, out)
    return out
