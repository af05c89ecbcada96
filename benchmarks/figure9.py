#!/usr/bin/env python3
"""Fstress Figure 9 on this machine: mean response time over proxy memory hit x disk hit ratio at one
offered load, as one fixed-rate surface plan. Not part of the test suite.

    python3 benchmarks/figure9.py [--rate OPS] [--iops N] [--trials N] [--runlength S] [--warmup S]
    python3 benchmarks/figure9.py --redraw      # the figure again from benchmarks/results/figure9.json

The target is a loop-mounted ext4 (peakbench.fsimage) throttled to --iops read and write I/Os per
second (cgroup v1 blkio, as the demo's disk), so a commit and a cache-missing read cost disk I/Os
as on the paper's DISK++ server, and peakbench runs under SCHED_FIFO; without root it is a plain
directory at the default priority (said in the output). The
plan's samples are memory_hit 0, 0.25, 0.5, 0.75, 1 x disk_hit 0, 0.5, 1 of the web-proxy model
(peakbench.workloadknobs), `--trials` trials each. Every number is `peakbench surface` and
the report's own surface section draws it; results: benchmarks/results/figure9.json and the figure
benchmarks/results/figure9/surface-1-response.{svg,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import common  # benchmarks/common.py: machine info, CPU load, results files

sys.path.insert(0, str(common.ROOT / "python"))
from peakbench import cgroups, fsimage  # noqa: E402
from peakbench.report import figures  # noqa: E402
from peakbench.report.model import Figure, ReportData, ReportOptions  # noqa: E402
from peakbench.report.sections import surfaces  # noqa: E402

PLAN = """
workload = "web-proxy"
target = "{target}"

[design]
kind = "full-factorial"

[search]
runlength_s = {runlength}
warmup_s = {warmup}

[fixed_rate]
rate = {rate}
trials = {trials}

[[factors]]
name = "memory_hit"
levels = [0, 0.25, 0.5, 0.75, 1]

[[factors]]
name = "disk_hit"
levels = [0, 0.5, 1]
"""


# The load generator under SCHED_FIFO where it may (root), as benchmarks/truth.py runs it: on a
# shared, busy machine the run queue's waits would otherwise be most of what is measured.
PRIORITY = ["chrt", "-f", "5"] if os.geteuid() == 0 else []


def peakbench(*args: str, timeout: float, priority: list[str] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(common.ROOT / "python")}
    return subprocess.run(
        [*priority, sys.executable, "-m", "peakbench.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def draw(measured: dict, out: Path) -> None:
    """The figure `peakbench report surface:ID --figures DIR` draws, from the stored result itself."""
    shutil.rmtree(out, ignore_errors=True)
    section = surfaces.section(ReportData("", [], [], {"surfaces": [measured]}), ReportOptions())
    for block in section.blocks:
        if isinstance(block, Figure):
            figures.save(block.figure, out, block.name, ("svg", "png"))
            print(f"{block.name}: {block.caption}")
    for line in section.summary:
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--iops", type=int, default=400)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--runlength", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--redraw", action="store_true", help="only draw the figure of the stored result again")
    args = parser.parse_args()
    out = common.RESULTS / "figure9"
    if args.redraw:
        draw(json.loads((common.RESULTS / "figure9.json").read_text())["surface"], out)
        return 0
    work = Path(tempfile.mkdtemp(prefix="peakbench-figure9-"))
    db = work / "figure9.db"
    throttle = os.geteuid() == 0 and shutil.which("mkfs.ext4") is not None and cgroups.BLKIO.is_dir()
    fs = fsimage.create(work / "ext4", "ext4", size_mb=1024) if throttle else None
    target = (fs.mountpoint if fs else work) / "target"
    target.mkdir()
    plan = work / "figure9.toml"
    plan.write_text(PLAN.format(target=target, **vars(args)))
    samples = 15 * args.trials * (args.runlength + args.warmup)
    before = common.cpu_times()
    try:
        if fs:
            with cgroups.throttled_device(fs.device_numbers, read_iops=args.iops, write_iops=args.iops):
                done = peakbench(
                    "surface", str(plan), "--db", str(db), "--json", "-", timeout=20 * samples + 600, priority=PRIORITY
                )
        else:
            done = peakbench(
                "surface", str(plan), "--db", str(db), "--json", "-", timeout=20 * samples + 600, priority=PRIORITY
            )
        load = common.cpu_share(before, common.cpu_times())
    finally:
        if fs:
            fs.destroy()
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode not in (0, 3):
        print(done.stderr, file=sys.stderr)
        return 1
    print(done.stderr.splitlines()[-1] if done.stderr else "")
    measured = json.loads(done.stdout)
    draw(measured, out)
    target_text = (
        f"ext4 on a loop device, throttled to {args.iops} read and {args.iops} write IOPS"
        if fs
        else "a plain directory (not root: no throttled disk)"
    )
    result = {
        "benchmark": "figure9",
        "command": "python3 benchmarks/figure9.py " + " ".join(sys.argv[1:]),
        "machine": common.machine_info(),
        "cpu_load_during": load,
        "target": target_text,
        "scheduling": " ".join(PRIORITY) or "default (not root)",
        "settings": vars(args),
        "surface": measured,
    }
    (common.RESULTS / "figure9.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
