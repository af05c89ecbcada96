"""benchmarks/samba_server.py --realtime: the smbd that serves a client runs SCHED_FIFO, pinned to
one CPU, in a cgroup whose real-time runtime is the asked share of a short period (so what else runs
on the machine cannot delay it, and the share binds); the engine wrapper it writes runs the engine
real-time below it, bounded too; `stop` leaves no server and no cgroup behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import pytest  # noqa: E402
from ports import free_port  # noqa: E402
from samba import ServerUnavailable, ensure_installed  # noqa: E402

HOOK = REPO / "benchmarks" / "samba_server.py"
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")


def hook(*args: str, engine: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PEAKBENCH_ENGINE": str(engine)}
    return subprocess.run([sys.executable, str(HOOK), *args], capture_output=True, text=True, timeout=90, env=env)


def children(pid: int) -> set[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=10).stdout
    return {int(c) for c in found.split()}


def cpu_cgroup(pid: int) -> Path:
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if x.split(":")[1] == "cpu")
    return CPU_CGROUPS / line.split(":")[2].lstrip("/")


def test_realtime_smbd_serves_each_client_sched_fifo_within_its_rt_share(engine_path, tmp_path):
    if os.geteuid() != 0 or not (CPU_CGROUPS / "cpu.rt_runtime_us").exists():
        pytest.skip("needs root and cgroup v1 real-time group scheduling")
    try:
        ensure_installed()
    except ServerUnavailable as e:
        pytest.skip(str(e))
    workdir, port = tmp_path / "smbd", free_port()
    try:
        started = hook(
            "start",
            "--workdir",
            str(workdir),
            "--port",
            str(port),
            "--cpu-percent",
            "60",
            "--realtime",
            engine=engine_path,
        )
        assert started.returncode == 0, started.stderr
        parent = int((workdir / "smbd.pid").read_text())
        before = children(parent)
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            deadline = time.monotonic() + 10
            while not (served := children(parent) - before) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(served) == 1, "smbd forked no child for the client"
            child = served.pop()
            assert os.sched_getscheduler(child) == os.SCHED_FIFO
            assert os.sched_getparam(child).sched_priority == 10
            assert len(os.sched_getaffinity(child)) == 1
            group = cpu_cgroup(child)
            assert group.name == "peakbench-samba-smbd"
            assert (group / "cpu.rt_period_us").read_text().strip() == "10000"
            assert (group / "cpu.rt_runtime_us").read_text().strip() == "6000"  # 60% of 10 ms

        # The engine wrapper runs what it is given real-time below smbd, in its own bounded group.
        wrapper = (workdir / "peakbench-engine").read_text()
        engine_group = CPU_CGROUPS / "peakbench-samba-smbd-engine"
        assert f"echo $$ > {engine_group}/cgroup.procs" in wrapper
        assert f'chrt -f 5 taskset -c 0 "{engine_path.resolve()}"' in wrapper
        assert (engine_group / "cpu.rt_runtime_us").read_text().strip() == "2000"

        stopped = hook("stop", "--workdir", str(workdir), engine=engine_path)
        assert stopped.returncode == 0, stopped.stderr
        assert not group.exists() and not engine_group.exists()
        assert not os.path.exists(f"/proc/{parent}") or Path(f"/proc/{parent}/stat").read_text().split()[2] == "Z"

        # More real-time than the bound, or real-time without a share, is refused before smbd starts.
        for share in (["--cpu-percent", "61"], []):
            wrong = hook(
                "start", "--workdir", str(workdir), "--port", str(port), "--realtime", *share, engine=engine_path
            )
            assert wrong.returncode == 2
            assert wrong.stderr.strip().splitlines()[-1].endswith("--realtime needs --cpu-percent 1..60")
        assert not (workdir / "smbd.pid").exists()
    finally:
        hook("stop", "--workdir", str(workdir), engine=engine_path)
