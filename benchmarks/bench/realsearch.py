"""`realsearch`: a quick `peakbench search` of a throttled ext4 against a dense sweep of it."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import common
from common import ROOT, Proc, run, save, table


def bench_realsearch(name: str = "realsearch") -> dict:
    """A quick `peakbench search` of a throttled ext4 whose capacity holds still, then a dense sweep
    of the same target (11 rates over 0.6–1.4 λ*, one trial each at the search's runlength, judged by
    the search's criteria), PB_REALSEARCH_REPEATS times (default 3), each on a fresh image.

    The target is tests/test_search.py's (throttled_sync_ext4, SYNC_OVERWRITE): ext4 mounted
    sync,nobarrier,lazytime, held to 200 I/Os per second, where each 4 KiB overwrite in place is
    one write I/O, however many are queued; at most 128 requests in flight (why: see the test).
    """
    sys.path.insert(0, str(ROOT / "python"))
    from peakbench import cgroups, fsimage, searching
    from peakbench.controller import SearchSettings, saturated, sweep_knee

    workload = ROOT / "python" / "peakbench" / "workloads" / "sync-overwrite.toml"
    settings = SearchSettings(**searching.QUICK)
    env = {"PYTHONPATH": str(ROOT / "python"), "PEAKBENCH_ENGINE": str(common.ENGINE)}
    cap = ("--max-outstanding", 128)

    def peakbench(*args, timeout: float) -> Proc:
        return run([sys.executable, "-m", "peakbench.cli", *args], timeout=timeout, env_extra=env)

    repeats, rows = [], []
    for repeat in range(int(os.environ.get("PB_REALSEARCH_REPEATS", "3"))):
        work = Path(tempfile.mkdtemp(prefix="peakbench-realsearch-", dir="/dev/shm"))  # as the test: image in memory
        fs = fsimage.create(work / "fs", "ext4", size_mb=256, options="sync,nobarrier,lazytime")
        try:
            target = fs.mountpoint / "target"
            target.mkdir()
            loadavg_before = Path("/proc/loadavg").read_text().split()[:3]
            with cgroups.throttled_device(fs.device_numbers, read_iops=200, write_iops=200):
                search = peakbench(
                    "search",
                    workload,
                    "--target",
                    target,
                    "--quick",
                    *cap,
                    "--db",
                    work / "p.db",
                    "--json",
                    work / "search.json",
                    timeout=900,
                )
                found = json.loads((work / "search.json").read_text())
                peak = found["peak_rate"]
                sweep = []
                for step in range(11):
                    rate = peak * (0.6 + 0.08 * step)
                    peakbench(
                        "run",
                        workload,
                        "--target",
                        target,
                        "--rate",
                        f"{rate:.1f}",
                        "--warmup",
                        settings.warmup_s,
                        "--runtime",
                        settings.runlength_s,
                        *cap,
                        "--db",
                        work / "p.db",
                        "--json",
                        work / "trial.json",
                        timeout=120,
                    )
                    trial = json.loads((work / "trial.json").read_text())
                    observed = searching.observation_of(trial, rate, settings.psat, cost_s=0)
                    sweep.append(
                        {
                            "rate": rate,
                            "achieved": observed.achieved_rate,
                            "mean_ms": observed.mean_ms,
                            f"p{settings.psat:g}_ms": observed.percentile_ms,
                            "generator_saturated": observed.generator_saturated,
                            "saturated": saturated(observed, settings),
                            "observation": observed,
                        }
                    )
            knee = sweep_knee([point.pop("observation") for point in sweep], settings)
            outcome = {
                "loadavg_before": loadavg_before,
                "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
                "search_wall_s": search.wall_s,
                "search": {
                    k: found[k]
                    for k in (
                        "verdict",
                        "peak_rate",
                        "ci_low",
                        "ci_high",
                        "accuracy",
                        "target_accuracy",
                        "confidence",
                        "cost_seconds",
                        "trials",
                        "message",
                    )
                },
                "sweep": sweep,
                "knee": knee,
                "disagreement": None if knee is None else (knee - peak) / peak,
            }
            repeats.append(outcome)
            rows.append(
                {
                    "repeat": repeat + 1,
                    "λ*": peak,
                    "ci_low": found["ci_low"],
                    "ci_high": found["ci_high"],
                    "accuracy": found["accuracy"],
                    "search s": found["cost_seconds"],
                    "trials": found["trials"],
                    "knee": knee,
                    "knee − λ*": outcome["disagreement"],
                    "capacity (achieved at 1.4 λ*)": sweep[-1]["achieved"],
                    "loadavg": loadavg_before[0],
                }
            )
            print(
                f" repeat {repeat + 1}: λ* {peak:.1f} ({found['message']}); sweep (* saturated): "
                + ", ".join(f"{p['rate']:.0f}{'*' if p['saturated'] else ''}" for p in sweep),
                flush=True,
            )
        finally:
            fs.destroy()
            shutil.rmtree(work, ignore_errors=True)
    table("quick search vs a dense sweep on ext4 (sync,nobarrier,lazytime) throttled to 200 IOPS", rows)
    out = {
        "workload": workload.read_text(),
        "mount": "sync,nobarrier,lazytime",
        "iops": 200,
        "max_outstanding": 128,
        "settings": dict(searching.QUICK),
        "repeats": repeats,
    }
    save(name, out)
    return out
