"""Start or stop Samba's smbd for a response surface: the configure hook of
benchmarks/samba-surface.toml (`peakbench surface` runs it before each sample).

    python3 benchmarks/samba_server.py start --workdir DIR --port P --aio SIZE --cpu-percent PCT [--realtime]
    python3 benchmarks/samba_server.py stop --workdir DIR

`start` stops the smbd this script started (by DIR/smbd.pid), starts a new one as
tests/samba.py does (127.0.0.1, a private configuration in DIR, DIR/share shared as
`share`), with `aio read size` and `aio write size` set to SIZE (0: reads and writes in
smbd's own process; otherwise those of SIZE bytes or more go through its thread pool),
confined to PCT% of one CPU if asked (cgroup v1 cpu controller, CFS quota, in a group
named after DIR so two servers never share one; the per-client smbd it forks inherits
it), and returns once it listens (20 s at most). DIR/share is kept between samples, so a file
set prepared for one sample is reused by the next.

With --realtime the quota is real-time bandwidth instead: smbd runs SCHED_FIFO (priority
10) pinned to the last CPU, in a group whose cpu.rt_runtime_us is PCT% of a 10 ms
cpu.rt_period_us, so no CFS task (others' builds and tests) can delay it and a throttled
smbd waits at most the rest of 10 ms (a 100 ms CFS period stalls it up to 70 ms at 30%).
It also writes DIR/peakbench-engine, to be given as PEAKBENCH_ENGINE: it runs the engine
SCHED_FIFO at priority 5 (below smbd, as benchmarks/truth.py does), pinned to the first CPU,
in a group of its own bounded to 20% of it. Both bounds hold whatever the tasks do, so
together they never take more than PCT + 20% of one CPU (PCT at most 60: smbd's CPU keeps at
least 40% for everything else, and both fit the kernel's 95% real-time limit).
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

RT_PERIOD_US = 10_000
SMBD_RT_PRIORITY, ENGINE_RT_PRIORITY = 10, 5
ENGINE_RT_PERCENT = 20
MAX_RT_PERCENT = 60  # smbd's share; with the engine's, at most 80% of one CPU is real-time


def cgroup_of(workdir: Path) -> Path:
    return Path("/sys/fs/cgroup/cpu") / f"peakbench-samba-{workdir.name}"


def engine_cgroup_of(workdir: Path) -> Path:
    return Path("/sys/fs/cgroup/cpu") / f"peakbench-samba-{workdir.name}-engine"


def rt_group(cgroup: Path, percent: float) -> None:
    """A cgroup whose tasks may run real-time for percent of each RT_PERIOD_US on a CPU."""
    cgroup.mkdir(exist_ok=True)
    # The period can only change while the runtime fits both the old and the new one.
    (cgroup / "cpu.rt_runtime_us").write_text("0")
    (cgroup / "cpu.rt_period_us").write_text(str(RT_PERIOD_US))
    (cgroup / "cpu.rt_runtime_us").write_text(str(round(RT_PERIOD_US * percent / 100)))


def confine_realtime(pid: int, cpu_percent: float, workdir: Path, engine: Path) -> Path:
    """smbd's parent into its RT group, SCHED_FIFO, pinned to one CPU: the smbd it forks per
    client inherits all three. Returns the engine wrapper."""
    cpus = sorted(os.sched_getaffinity(0))
    rt_group(cgroup_of(workdir), cpu_percent)
    (cgroup_of(workdir) / "cgroup.procs").write_text(str(pid))
    os.sched_setaffinity(pid, {cpus[-1]})
    os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(SMBD_RT_PRIORITY))
    engine_group = engine_cgroup_of(workdir)
    rt_group(engine_group, ENGINE_RT_PERCENT)
    wrapper = workdir / "peakbench-engine"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"echo $$ > {engine_group}/cgroup.procs || exit 1\n"
        f'exec chrt -f {ENGINE_RT_PRIORITY} taskset -c {cpus[0]} "{engine}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def engine_binary(wrapper: Path) -> Path:
    """The engine the CLI would run ($PEAKBENCH_ENGINE, installed, or this checkout's build). As the
    configure hook of a surface, $PEAKBENCH_ENGINE is the wrapper itself: then the one the CLI would
    run without it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    from peakbench.engine import ENV_VAR, RunError, find_engine

    if Path(os.environ.get(ENV_VAR) or "/").resolve() == wrapper.resolve():
        del os.environ[ENV_VAR]
    try:
        return find_engine().resolve()
    except RunError as e:
        raise OSError(str(e)) from None


def stop(workdir: Path) -> None:
    pid_file = workdir / "smbd.pid"
    if pid_file.exists():
        _stop_group(int(pid_file.read_text()))
        pid_file.unlink()
    remove_cgroup(cgroup_of(workdir))
    remove_cgroup(engine_cgroup_of(workdir))


def start(workdir: Path, port: int, aio: int, cpu_percent: float | None, realtime: bool = False) -> None:
    stop(workdir)
    engine = engine_binary(workdir / "peakbench-engine") if realtime else None
    server = Samba(extra_config=f"    aio read size = {aio}\n    aio write size = {aio}\n", port=port, workdir=workdir)
    server.start()
    (workdir / "smbd.pid").write_text(str(server.process.pid))
    if realtime:
        wrapper = confine_realtime(server.process.pid, cpu_percent, workdir, engine)
        quota = (
            f"SCHED_FIFO at {cpu_percent:g}% of one CPU ({RT_PERIOD_US} us RT period); "
            f"engine: PEAKBENCH_ENGINE={wrapper}"
        )
    elif cpu_percent is not None:
        confine(server.process.pid, cpu_percent, cgroup_of(workdir))
        quota = f"{cpu_percent:g}% of one CPU (CFS quota)"
    else:
        quota = "no CPU quota"
    print(f"smbd pid {server.process.pid} on port {port}: aio read/write size {aio}, {quota}", flush=True)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("start", "stop"))
    p.add_argument("--workdir", type=Path, required=True, help="holds share/, the configuration and the logs")
    p.add_argument("--port", type=int, default=4455, help="smbd's port on 127.0.0.1 (default 4455)")
    p.add_argument("--aio", type=int, default=1, help="aio read size and aio write size (default 1)")
    p.add_argument("--cpu-percent", type=float, help="CFS quota, %% of one CPU (default: none)")
    p.add_argument(
        "--realtime",
        action="store_true",
        help=f"smbd SCHED_FIFO with --cpu-percent (at most {MAX_RT_PERCENT}) as real-time bandwidth of one CPU "
        f"per {RT_PERIOD_US} us, and DIR/peakbench-engine to run the engine SCHED_FIFO below it (PEAKBENCH_ENGINE)",
    )
    a = p.parse_args(argv)
    if (
        not 1 <= a.port <= 65535
        or a.aio < 0
        or (a.cpu_percent is not None and not 1 <= a.cpu_percent <= 100 * (os.cpu_count() or 1))
    ):
        p.error("--port must be 1..65535, --aio >= 0 and --cpu-percent 1..100 x CPUs")
    if a.realtime and (a.cpu_percent is None or a.cpu_percent > MAX_RT_PERCENT):
        p.error(f"--realtime needs --cpu-percent 1..{MAX_RT_PERCENT}")
    try:
        a.workdir.mkdir(parents=True, exist_ok=True)
        if a.action == "start":
            start(a.workdir.resolve(), a.port, a.aio, a.cpu_percent, a.realtime)
        else:
            stop(a.workdir.resolve())
    except (ServerUnavailable, OSError) as e:
        print(f"samba_server.py {a.action}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
