"""The README's main job: a quick peak-rate search on a default local target.

On one machine the generator and a fast file system share the CPU, so a search
on tmpfs or a quick SSD ends generator-bound. As root, the demo therefore
builds a small loop-mounted ext4 image under ./peakbench-data whose device is
throttled (cgroup v1 blkio, like the paper's resource factors), so the file
system saturates long before the generator; it is unmounted and removed
afterwards. The default workload, sync-overwrite, makes every op one
synchronous write on a mount that adds no flush and no journal commit to it,
so the disk's capacity holds still and the quick search settles in a minute or
two (a mix such as mail waits on grouped journal commits, whose capacity
drifts; give its name to search with it). Without root it searches a plain directory and says so. Either
way it ends by writing the search's report (self-contained HTML, figures in
PNG/SVG/PDF and tables in CSV under ./peakbench-data) and printing its path.

    python -m peakbench.demo [WORKLOAD] [--iops N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from . import cgroups, fsimage
from .cli import main as peakbench

DATA = Path("peakbench-data")
# Each write is on the disk when it returns (sync) as one write I/O: no cache flush (nobarrier),
# no journal commit for timestamps (lazytime).
SYNC_MOUNT = "sync,nobarrier,lazytime"


def can_throttle() -> bool:
    return os.geteuid() == 0 and shutil.which("mkfs.ext4") is not None and cgroups.BLKIO.is_dir()


def search(target: Path, workload: str, extra: list[str]) -> int:
    # Past the peak every synchronous write holds a sender thread; a cap (about three times what
    # the peak keeps in flight) queues the excess for the disk instead of for new threads.
    return peakbench(
        [
            "search",
            workload,
            "--target",
            str(target),
            "--quick",
            "--max-outstanding",
            "128",
            "--db",
            str(DATA / "peakbench.db"),
            "--json",
            str(DATA / "search.json"),
            *extra,
        ]
    )


def report(search_status: int) -> int:
    """The report of the search just run (the store's newest), whatever its verdict, or of what it
    stored before it failed; the search's status is kept. Bad input stored nothing to report on."""
    if search_status not in (0, 1, 3):
        return search_status
    html = DATA / "report.html"
    written = peakbench(
        [
            "report",
            "--db",
            str(DATA / "peakbench.db"),
            "--html",
            str(html),
            "--figures",
            str(DATA / "figures"),
            "--csv",
            str(DATA / "tables"),
        ]
    )
    if written == 0:
        print(f"demo: the report is {html.absolute()}  (figures in {DATA / 'figures'}, tables in {DATA / 'tables'})")
    return search_status or written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peakbench.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "workload", nargs="?", default="sync-overwrite", help="workload to search with (default sync-overwrite)"
    )
    parser.add_argument("--iops", type=int, default=200, help="read and write I/Os per second the disk allows")
    args, extra = parser.parse_known_args(argv)
    DATA.mkdir(exist_ok=True)
    if not can_throttle():
        target = DATA / "target"
        target.mkdir(exist_ok=True)
        print(
            f"demo: not root (or no blkio/mkfs.ext4): searching the plain directory {target};"
            " a fast disk may leave the generator as the bottleneck",
            file=sys.stderr,
        )
        return report(search(target, args.workload, extra))
    fs = fsimage.create(DATA / "ext4", "ext4", size_mb=512, options=SYNC_MOUNT)
    try:
        print(
            f"demo: ext4 on {fs.device} ({fs.image}), throttled to {args.iops} read and {args.iops} write"
            f" I/Os per second, mounted {SYNC_MOUNT} at {fs.mountpoint}",
            file=sys.stderr,
        )
        target = fs.mountpoint / "target"
        target.mkdir()
        with cgroups.throttled_device(fs.device_numbers, read_iops=args.iops, write_iops=args.iops):
            status = search(target, args.workload, extra)
    finally:
        fs.destroy()
        shutil.rmtree(DATA / "ext4", ignore_errors=True)
    return report(status)


if __name__ == "__main__":
    sys.exit(main())
