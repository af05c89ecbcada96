"""Start or stop nfs-ganesha for a response surface: the configure hook of
benchmarks/ganesha-surface.toml (`peakbench surface` runs it before each sample).

    python3 benchmarks/ganesha_server.py start --workdir DIR --ioq-threads N --cpu-percent P
    python3 benchmarks/ganesha_server.py stop --workdir DIR

`start` stops the ganesha that runs (by its pid file), starts a new one exporting
DIR/export as /export with `RPC_Ioq_ThrdMax = N`, confines it to P% of one CPU if asked
(cgroup v1 cpu controller, CFS quota) and returns once MOUNT and NFS answer (the
fixture's readiness wait, 20 s at most). The export directory is kept between
samples, so a file set prepared for one sample is reused by the next. `stop` ends
ganesha and the rpcbind this script started, and removes the cgroup.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from ganesha import Ganesha, ServerUnavailable, _stop, stop_leftover  # noqa: E402

CGROUP = Path("/sys/fs/cgroup/cpu/peakbench-ganesha")
PERIOD_US = 100_000


def confine(pid: int, cpu_percent: float, cgroup: Path = CGROUP) -> None:
    """Limit a process (all its threads, and the children it forks later) to cpu_percent of one CPU."""
    cgroup.mkdir(exist_ok=True)
    (cgroup / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (cgroup / "cpu.cfs_quota_us").write_text(str(max(1000, round(PERIOD_US * cpu_percent / 100))))
    (cgroup / "cgroup.procs").write_text(str(pid))


def remove_cgroup(cgroup: Path = CGROUP) -> None:
    if cgroup.exists():
        for pid in filter(None, (cgroup / "cgroup.procs").read_text().split()):
            Path("/sys/fs/cgroup/cpu/cgroup.procs").write_text(pid)
        cgroup.rmdir()


def start(workdir: Path, ioq_threads: int | None, cpu_percent: float | None) -> None:
    stop_leftover()
    remove_cgroup()
    core = f"    RPC_Ioq_ThrdMax = {ioq_threads};\n" if ioq_threads is not None else ""
    server = Ganesha(workdir=workdir, core_params=core)
    server.start()  # waits for MOUNT and NFS to be registered and listening
    if cpu_percent is not None:
        confine(server.pid, cpu_percent)
    if server.rpcbind is not None:
        (workdir / "rpcbind.pid").write_text(str(server.rpcbind.pid))
    print(
        f"ganesha pid {server.pid}: RPC_Ioq_ThrdMax {ioq_threads or 'default'}, "
        + (f"{cpu_percent:g}% of one CPU" if cpu_percent is not None else "no CPU quota"),
        flush=True,
    )


def stop(workdir: Path) -> None:
    stop_leftover()
    remove_cgroup()
    rpcbind = workdir / "rpcbind.pid"
    if rpcbind.exists():
        _stop(int(rpcbind.read_text()))
        rpcbind.unlink()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("start", "stop"))
    p.add_argument("--workdir", type=Path, required=True, help="holds export/, the config and the log")
    p.add_argument("--ioq-threads", type=int, help="RPC_Ioq_ThrdMax (default: ganesha's)")
    p.add_argument("--cpu-percent", type=float, help="CFS quota, %% of one CPU (default: none)")
    a = p.parse_args(argv)
    if (a.ioq_threads is not None and not 1 <= a.ioq_threads <= 10_000) or (
        a.cpu_percent is not None and not 1 <= a.cpu_percent <= 100 * (os.cpu_count() or 1)
    ):
        p.error("--ioq-threads must be 1..10000 and --cpu-percent 1..100 x CPUs")
    try:
        if a.action == "start":
            a.workdir.mkdir(parents=True, exist_ok=True)
            start(a.workdir.resolve(), a.ioq_threads, a.cpu_percent)
        else:
            stop(a.workdir.resolve())
    except (ServerUnavailable, OSError) as e:
        print(f"ganesha_server.py {a.action}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
