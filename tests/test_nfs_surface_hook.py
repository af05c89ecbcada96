"""benchmarks/ganesha_server.py, the configure hook of the ganesha response surface:
it restarts ganesha with the sample's worker limit and CPU quota and returns only
once the server answers; `stop` leaves no server and no cgroup behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from ganesha import NFS_PORT, PIDFILE, _listening  # noqa: E402

HOOK = REPO / "benchmarks" / "ganesha_server.py"
CGROUP = Path("/sys/fs/cgroup/cpu/peakbench-ganesha")


def hook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HOOK), *args], capture_output=True, text=True, timeout=90)


def test_the_hook_starts_a_confined_ready_ganesha_and_stop_cleans_up(engine_path, ganesha_server, tmp_path, cli):
    # The hook replaces whatever ganesha runs, so the session's server is started again afterwards.
    try:
        started = hook("start", "--workdir", str(tmp_path), "--ioq-threads", "4", "--cpu-percent", "30")
        assert started.returncode == 0, started.stderr
        pid = int(PIDFILE.read_text())
        assert str(pid) in (CGROUP / "cgroup.procs").read_text().split()
        assert (CGROUP / "cpu.cfs_quota_us").read_text().strip() == "30000"  # 30% of a 100 ms period
        assert "RPC_Ioq_ThrdMax = 4;" in (tmp_path / "ganesha.conf").read_text()
        assert "Unknown parameter" not in (tmp_path / "ganesha.log").read_text()
        # Ready when the hook returns: a client can use it at once.
        (tmp_path / "export" / "v").mkdir()
        validated = cli("validate", "nfs://127.0.0.1/export/v")
        assert validated.returncode == 0, validated.stdout + validated.stderr

        stopped = hook("stop", "--workdir", str(tmp_path))
        assert stopped.returncode == 0, stopped.stderr
        assert not CGROUP.exists()
        assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"

        # A quota of nothing is refused before any server is touched.
        wrong = hook("start", "--workdir", str(tmp_path), "--cpu-percent", "0")
        assert wrong.returncode == 2 and wrong.stderr.strip().splitlines()[-1].endswith(
            "--ioq-threads must be 1..10000 and --cpu-percent 1..100 x CPUs"
        )
        assert not _listening(NFS_PORT)
    finally:
        ganesha_server.start()
