"""SPECsfs2008 load points at SPEC's own file-set size (120 MB per op/s) on a loop-mounted file system.

    python3 benchmarks/sfs_spec_size.py --load 20 --procs 2 --fstype ext4 --workdir /var/tmp/sfs-spec

Makes a sparse image large enough for the file set of the highest load (SPEC's 120 MB per op/s,
the guide's 10% growth, and room for the file system's own metadata), formats and mounts it
(peakbench.fsimage, as the tests do), writes an rc file, runs `peakbench sfs RC --scale 1000`
against the mount point, prints the sfssum lines and the file set the engine built, and tears
the image down. Needs root (mount, losetup). BENCHMARKS.md §11 records a run.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from peakbench import fsimage  # noqa: E402
from peakbench.engine import Engine  # noqa: E402
from peakbench.workload import find_workload, trial_spec  # noqa: E402

SPEC_SCALE = 1000  # the canned specsfs2008 keeps a thousandth of SPEC's 120 MB per op/s
GROWTH = 1.10  # the guide: "space for 10% growth during a typical benchmark run"
METADATA = 1.15  # inodes, directories and journal on top of the files' bytes
MIN_IMAGE_MB = 256


def image_mb(top_load: float) -> int:
    """Room for the file set the engine will draw at the top load (its size comes from the engine's own
    model, a null-target trial: with files up to 32 MiB a drawn set strays from 120 MB per op/s)."""
    spec = trial_spec(find_workload("specsfs2008"), {"kind": "null"}, rate=top_load, warmup_s=0, runtime_s=0.1,
                      scale=SPEC_SCALE)  # fmt: skip
    drawn = Engine().run(spec)["fileset"]["bytes"]
    return max(MIN_IMAGE_MB, round(drawn * GROWTH * METADATA / 2**20))


def run(loads: list[float], procs: int, fstype: str, workdir: Path, warmup: float, runtime: float) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    size = image_mb(loads[-1])
    fs = fsimage.create(workdir / "fs", fstype, size_mb=size)
    try:
        target = fs.mountpoint / "sfs"  # the fresh file system's root holds lost+found
        target.mkdir()
        rc = workdir / "sfs_rc"
        rc.write_text(
            f'LOAD="{" ".join(f"{load:g}" for load in loads)}"\nPROCS={procs}\nMNT_POINTS={target}\n'
            f"WARMUP_TIME={warmup:g}\nRUNTIME={runtime:g}\n"
        )
        db = workdir / "sfs.db"
        db.unlink(missing_ok=True)
        command = [sys.executable, "-m", "peakbench.cli", "sfs", str(rc), "--scale", str(SPEC_SCALE), "--db", str(db)]
        env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"peakbench sfs failed ({done.returncode}):\n{done.stderr}")
        with sqlite3.connect(db) as connection:
            results = [json.loads(r) for (r,) in connection.execute("SELECT result FROM trials ORDER BY id")]
        sfssum = (workdir / "sfs-sfs-1" / "sfssum.1").read_text()
        return {
            "command": " ".join(command),
            "fstype": fstype,
            "image_mb": size,
            "rc": rc.read_text(),
            "filesets": [r["fileset"] for r in results],
            "sfssum": sfssum,
            "stdout": done.stdout,
        }
    finally:
        fs.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=float, nargs="+", default=[20.0], help="load points, ops/s (default 20)")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--fstype", choices=sorted(fsimage.MKFS), default="ext4")
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp/peakbench-sfs-spec"))
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--runtime", type=float, default=60.0)
    parser.add_argument("--json", type=Path, help="also write the run's record here")
    args = parser.parse_args()
    found = run(sorted(args.load), args.procs, args.fstype, args.workdir, args.warmup, args.runtime)
    if args.json:
        args.json.write_text(json.dumps({**found, "load_average": os.getloadavg()}, indent=1) + "\n")
    print(f"$ {found['command']}\n{found['rc']}{found['fstype']} image {found['image_mb']} MiB (sparse)")
    for fileset in found["filesets"]:
        print(f"file set: {fileset['files']:,} files, {fileset['bytes'] / 1e9:.3f} GB")
    print(found["stdout"])
    print("sfssum:\n" + found["sfssum"])


if __name__ == "__main__":
    main()
