"""Start or stop Samba's smbd for a response surface: the configure hook of
benchmarks/samba-surface.toml (`peakbench surface` runs it before each sample).

    python3 benchmarks/samba_server.py start --workdir DIR --port P --aio SIZE --cpu-percent PCT
    python3 benchmarks/samba_server.py stop --workdir DIR

`start` stops the smbd this script started (by DIR/smbd.pid), starts a new one as
tests/samba.py does (127.0.0.1, a private configuration in DIR, DIR/share shared as
`share`), with `aio read size` and `aio write size` set to SIZE (0: reads and writes in
smbd's own process; otherwise those of SIZE bytes or more go through its thread pool),
confined to PCT% of one CPU if asked (cgroup v1 cpu controller, CFS quota, in a group
named after DIR so two servers never share one; the per-client smbd it forks inherits
it), and returns once it listens (20 s at most). DIR/share is kept between samples, so a file
set prepared for one sample is reused by the next.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ganesha_server import confine, remove_cgroup  # noqa: E402
from samba import Samba, ServerUnavailable, _stop_group  # noqa: E402


def cgroup_of(workdir: Path) -> Path:
    return Path("/sys/fs/cgroup/cpu") / f"peakbench-samba-{workdir.name}"


def stop(workdir: Path) -> None:
    pid_file = workdir / "smbd.pid"
    if pid_file.exists():
        _stop_group(int(pid_file.read_text()))
        pid_file.unlink()
    remove_cgroup(cgroup_of(workdir))


def start(workdir: Path, port: int, aio: int, cpu_percent: float | None) -> None:
    stop(workdir)
    server = Samba(extra_config=f"    aio read size = {aio}\n    aio write size = {aio}\n", port=port, workdir=workdir)
    server.start()
    (workdir / "smbd.pid").write_text(str(server.process.pid))
    if cpu_percent is not None:
        confine(server.process.pid, cpu_percent, cgroup_of(workdir))
    quota = f"{cpu_percent:g}% of one CPU" if cpu_percent is not None else "no CPU quota"
    print(f"smbd pid {server.process.pid} on port {port}: aio read/write size {aio}, {quota}", flush=True)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("start", "stop"))
    p.add_argument("--workdir", type=Path, required=True, help="holds share/, the configuration and the logs")
    p.add_argument("--port", type=int, default=4455, help="smbd's port on 127.0.0.1 (default 4455)")
    p.add_argument("--aio", type=int, default=1, help="aio read size and aio write size (default 1)")
    p.add_argument("--cpu-percent", type=float, help="CFS quota, %% of one CPU (default: none)")
    a = p.parse_args(argv)
    if (
        not 1 <= a.port <= 65535
        or a.aio < 0
        or (a.cpu_percent is not None and not 1 <= a.cpu_percent <= 100 * (os.cpu_count() or 1))
    ):
        p.error("--port must be 1..65535, --aio >= 0 and --cpu-percent 1..100 x CPUs")
    try:
        a.workdir.mkdir(parents=True, exist_ok=True)
        if a.action == "start":
            start(a.workdir.resolve(), a.port, a.aio, a.cpu_percent)
        else:
            stop(a.workdir.resolve())
    except (ServerUnavailable, OSError) as e:
        print(f"samba_server.py {a.action}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
