"""`openloop`: a blkio-throttled ext4 driven at twice its capacity (open-loop latency grows; fio's paced one does not)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import Trial, drop_page_cache, engine, fileset, fio, header, list_files, save, sh, table, trial_spec


class ThrottledExt4:
    """An ext4 image on a loop device whose I/O, from processes in our blkio cgroup, is limited to `iops`."""

    def __init__(self, iops: int, size_mib: int = 512, inodes: int = 65536):
        self.iops, self.size_mib, self.inodes = iops, size_mib, inodes
        self.dir = self.loop = self.cgroup = None
        self.mounted = False

    def __enter__(self):
        try:
            self.dir = Path(tempfile.mkdtemp(prefix="peakbench-throttle-"))
            image, self.mnt = self.dir / "ext4.img", self.dir / "mnt"
            self.mnt.mkdir()
            with open(image, "wb") as f:
                f.truncate(self.size_mib << 20)
            sh("mkfs.ext4", "-q", "-F", "-N", str(self.inodes), image)
            self.loop = sh("losetup", "--find", "--show", image)
            sh("mount", "-o", "noatime", self.loop, self.mnt)  # no atime: reads must not make journal writes
            self.mounted = True
            self.majmin = sh("lsblk", "-dno", "MAJ:MIN", self.loop).strip()
            self.cgroup = Path(f"/sys/fs/cgroup/blkio/peakbench-bench-{os.getpid()}")
            self.cgroup.mkdir()
            for knob in ("write_iops_device", "read_iops_device"):
                (self.cgroup / f"blkio.throttle.{knob}").write_text(f"{self.majmin} {self.iops}\n")
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        errors = []
        for what, step in [
            ("umount", lambda: self.mounted and sh("umount", self.mnt)),
            ("losetup -d", lambda: self.loop and sh("losetup", "-d", self.loop)),
            ("rmdir cgroup", lambda: self.cgroup and self.cgroup.exists() and self.cgroup.rmdir()),
            ("rm tmpdir", lambda: self.dir and shutil.rmtree(self.dir)),
        ]:
            try:
                step()
            except Exception as e:  # keep cleaning up; report at the end
                errors.append(f"{what}: {e}")
        if errors:
            print("  cleanup problems: " + "; ".join(errors), file=sys.stderr)
        return False


def steady_rate(t: Trial, skip_s: float = 3.0) -> float:
    """Median per-second completion rate from the progress lines, after the first `skip_s` seconds (the throttle lets a burst through)."""
    rates = sorted(p["rate"] for p in t.progress if p.get("phase") == "measure" and p.get("elapsed_s", 0) > skip_s)
    return rates[len(rates) // 2] if rates else t.achieved


def bench_openloop(name: str = "openloop") -> dict:
    """Drive a blkio-throttled ext4 at twice its capacity: open-loop latency must grow with the queue; fio's paced latency does not.

    The throttled op is a cold-cache read of a 4 KiB file (readahead off, noatime, page cache
    dropped before each run): one read is one throttled I/O, submitted in the reading process's
    context, so the cgroup v1 throttle applies and the capacity is the throttle's IOPS.
    4 KiB files because peakbench's random offsets used not to be page-aligned (a 4 KiB read
    of a larger file touched two pages, i.e. two throttled I/Os); they are now, and the file
    size stays for comparability with earlier runs. Buffered writes are written back by
    the flusher, outside the cgroup; a write+commit mix was tried first and gave a capacity that
    wandered with jbd2's batching (see BENCHMARKS.md)."""
    header("3. open-loop truth: blkio-throttled ext4 on a loop device, 2x capacity for 10 s")
    iops, runtime = 100, 10.0
    with ThrottledExt4(iops) as fsys:
        target = fsys.mnt / "pb"
        target.mkdir()
        tgt = {"kind": "posix", "path": str(target)}
        fs = fileset(32768, size=4096)  # a 10 s run at 2x touches a few % of the files, so reads stay cold
        mix = {"read": 1.0}
        engine("prepare", trial_spec(tgt, 1, mix, fs, runtime_s=1), timeout=300)
        sh("blockdev", "--setra", "0", fsys.loop)
        root, files = list_files(target)
        print(
            f" {fsys.loop} ({fsys.majmin}) throttled to {iops} IOPS for cgroup {fsys.cgroup.name}; {len(files)} files, readahead off"
        )

        def trial(rate, runtime_s):
            drop_page_cache()
            return engine(
                "run", trial_spec(tgt, rate, mix, fs, runtime_s=runtime_s, drain_timeout_s=60.0), cgroup=fsys.cgroup
            )

        # Capacity: what an overloaded open-loop client gets through per second once the throttle's initial burst is spent.
        calib = trial(3.0 * iops, 8.0)
        capacity = steady_rate(calib)
        print(f" peakbench capacity (steady completions/s of an 8 s run at {3 * iops}/s): {capacity:.0f} reads/s")
        half = trial(0.5 * capacity, runtime)
        double = trial(2.0 * capacity, runtime)

        # fio: the same files, 4 KiB random reads (psync, one job), paced with --rate_iops; capacity from a closed-loop run.
        # It runs in the file-set root and names it ".", so it opens the relative paths the engine opens
        # (as flatout_ab.py and posix.py run it).
        fio_args = [
            "--opendir=.",
            "--file_service_type=random",
            "--ioengine=psync",
            "--rw=randread",
            "--bs=4k",
            "--time_based=1",
        ]

        def fio_run(label, seconds, *extra):
            drop_page_cache()
            j, _ = fio(
                [f"--name={label}", *fio_args, f"--runtime={seconds:g}", *extra],
                timeout=120,
                cgroup=fsys.cgroup,
                cwd=root,
            )
            return j["jobs"][0]["read"]

        fio_capacity = fio_run("capacity", 5)["iops"]
        fio_runs = {
            f: (round(f * fio_capacity), fio_run(f"x{f}", runtime, f"--rate_iops={max(1, round(f * fio_capacity))}"))
            for f in (0.5, 2.0)
        }

    def pb_row(label, t):
        lat = t.result["latency"]
        return {
            "tool": f"peakbench {label}",
            "requested": t.rate,
            "achieved": t.achieved,
            "mean_ms": lat["mean_ms"],
            "p50_ms": lat["p50_ms"],
            "p99_ms": lat["p99_ms"],
            "max_ms": lat["max_ms"],
            "max_outstanding": t.result["outstanding"].get("max"),
        }

    def fio_row(factor, rate, r):
        c = r["clat_ns"]
        p = c.get("percentile", {})
        return {
            "tool": f"fio --rate_iops {factor:g}x",
            "requested": float(rate),
            "achieved": r["iops"],
            "mean_ms": c["mean"] / 1e6,
            "p50_ms": p.get("50.000000", 0) / 1e6,
            "p99_ms": p.get("99.000000", 0) / 1e6,
            "max_ms": c["max"] / 1e6,
            "max_outstanding": 1,
        }

    rows = [pb_row("0.5x", half), pb_row("2x", double)] + [fio_row(f, *v) for f, v in fio_runs.items()]
    table(
        f"cold 4 KiB random reads, throttle {iops} IOPS; capacity: peakbench {capacity:.0f}/s, fio {fio_capacity:.0f}/s (closed loop)",
        rows,
    )
    per_second = [
        {
            "t_s": round(p["elapsed_s"]),
            "phase": p["phase"],
            "completed/s": p["rate"],
            "outstanding": p["outstanding"],
            "send lag ms": p.get("lag_ms"),
        }
        for p in double.progress
        if "elapsed_s" in p
    ]
    table(
        "peakbench at 2x capacity, per progress second: the backlog grows by ~capacity each second, then drains",
        per_second,
    )
    growth = double.result["latency"]["mean_ms"] / max(half.result["latency"]["mean_ms"], 1e-9)
    fio_growth = fio_runs[2.0][1]["clat_ns"]["mean"] / max(fio_runs[0.5][1]["clat_ns"]["mean"], 1e-9)
    # A deterministic server fed at 2C for T seconds: the request due at t waits about t, so the mean is about T/2.
    print(
        f"\n mean latency 2x / 0.5x: peakbench {growth:,.0f}x, fio {fio_growth:.1f}x; "
        f"queueing predicts a mean of ~{runtime / 2 * 1000:,.0f} ms at 2x: peakbench reports {double.result['latency']['mean_ms']:,.0f} ms, "
        f"fio {fio_runs[2.0][1]['clat_ns']['mean'] / 1e6:.1f} ms"
    )
    out = {
        "throttle_iops": iops,
        "runtime_s": runtime,
        "mix": mix,
        "capacity_ops_s": capacity,
        "calibration": calib.summary(),
        "fio_capacity_iops": fio_capacity,
        "rows": rows,
        "per_second_2x": per_second,
        "mean_latency_growth": {"peakbench": growth, "fio": fio_growth},
        "predicted_mean_ms_2x": runtime / 2 * 1000,
        "goal_latency_grows": growth > 10 and double.result["latency"]["mean_ms"] > 0.25 * runtime / 2 * 1000,
    }
    save(name, out)
    return out
