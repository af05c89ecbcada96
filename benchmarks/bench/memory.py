"""`memory`: engine peak RSS with a one-million-file set."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from common import EXAMPLE_MIX, Trial, engine, fileset, header, save, table, trial_spec


def bench_memory(name: str = "memory") -> dict:
    """Engine peak RSS with a one-million-file set: null target (in-memory set only) and a real one on /dev/shm."""
    header("4. memory: peak RSS with a 1,000,000-file set (goal ≤ 100 MiB)")
    files = 1_000_000
    fs = fileset(
        files,
        size=0,
        file_popularity={"kind": "zipf", "alpha": 0.8},
        files_per_dir={"kind": "uniform", "low": 16, "high": 112},
    )
    rows, out = [], {"files": files, "fileset": fs, "runs": {}}

    def record(label, t: Trial, command="run"):
        rss = t.result.get("peak_rss_kib") or t.proc.maxrss_kib
        out["runs"][label] = {
            "peak_rss_kib": t.result.get("peak_rss_kib"),
            "wait4_maxrss_kib": t.proc.maxrss_kib,
            "wall_s": t.proc.wall_s,
            "fileset": t.result.get("fileset"),
            "command": command,
        }
        rows.append(
            {
                "run": label,
                "objects": _objects(t.result.get("fileset")),
                "peak RSS MiB": rss / 1024,
                "wait4 maxrss MiB": t.proc.maxrss_kib / 1024,
                "wall s": t.proc.wall_s,
                "≤ 100 MiB": rss <= 100 * 1024,
            }
        )

    record(
        "null, example mix",
        engine("run", trial_spec({"kind": "null"}, 10_000, EXAMPLE_MIX, fs, runtime_s=2.0), timeout=300),
    )
    work = Path(tempfile.mkdtemp(prefix="peakbench-bench-mem-", dir="/dev/shm"))
    try:
        tgt = {"kind": "posix", "path": str(work)}
        prep = engine("prepare", trial_spec(tgt, 1, EXAMPLE_MIX, fs, runtime_s=1), timeout=600)
        prep.result.setdefault("peak_rss_kib", None)
        record("posix /dev/shm, prepare", prep, "prepare")
        record(
            "posix /dev/shm, example mix",
            engine("run", trial_spec(tgt, 10_000, EXAMPLE_MIX, fs, runtime_s=2.0), timeout=300),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table("engine peak RSS (engine's own peak_rss_kib where reported, else wait4 ru_maxrss)", rows)
    out["goal_le_100MiB"] = all(r["≤ 100 MiB"] for r in rows)
    save(name, out)
    return out


def _objects(fs: dict | None) -> int:
    return sum(fs.get(k, 0) for k in ("files", "dirs", "symlinks")) if fs else 0
