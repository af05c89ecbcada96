"""A real one-node Slurm cluster for tests: Debian's slurmctld and slurmd, authenticated by munged.

Everything runs as root in the foreground with a private configuration in a temporary work
directory: munged with its own key, socket, pid, log and seed files; slurm.conf with its own
state, spool, log and pid paths and two free ports for slurmctld and slurmd. No system service
is used or touched (Debian's packages install their services, and the container's policy-rc.d
keeps them from starting). Slurm's client commands (sbatch, squeue, scancel) find the cluster
through SLURM_CONF, which `env` carries; the node is this host with its CPUs and memory.

    with Slurm() as slurm:                      # slurm.env: the environment for sbatch & co.
        subprocess.run(["sbatch", ...], env=slurm.env)

On stop, the jobs still queued or running are cancelled and waited for, then slurmd,
slurmctld and munged are stopped by PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from debian import apt_install
from ports import free_port

PACKAGES = ("slurmctld", "slurmd", "munge")
START_TIMEOUT_S = 30.0

CONFIG = """\
ClusterName=peakbench
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={work}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmUnavailable(Exception):
    """Slurm cannot be had here (not installed and not installable, not root, or it did not start)."""


def ensure_installed() -> None:
    if all(map(shutil.which, ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scancel"))):
        return
    failed = apt_install(PACKAGES)
    if failed or not shutil.which("slurmctld"):
        raise SlurmUnavailable(failed or "slurmctld is missing after apt-get install")


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise SlurmUnavailable("no MemTotal in /proc/meminfo")


def _stop(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)


class Slurm:
    """munged, slurmctld and slurmd for one node (this host) with a private configuration."""

    def __init__(self):
        self.node = socket.gethostname().split(".")[0]
        self.workdir: Path | None = None
        self.processes: list[subprocess.Popen] = []  # munged, slurmctld, slurmd, in start order

    @property
    def env(self) -> dict[str, str]:
        assert self.workdir is not None
        return {**os.environ, "SLURM_CONF": str(self.workdir / "slurm.conf")}

    def _run(self, *command: str) -> str:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise SlurmUnavailable(f"{' '.join(command)}: {done.stderr.strip()[-300:]}")
        return done.stdout

    def start(self) -> Slurm:
        if os.geteuid() != 0:
            raise SlurmUnavailable("slurmd runs jobs as their users, so a private cluster needs root")
        ensure_installed()
        self.workdir = Path(tempfile.mkdtemp(prefix="peakbench-slurm-"))
        for sub in ("munge", "state", "spool"):
            (self.workdir / sub).mkdir(mode=0o700)
        key = self.workdir / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (self.workdir / "slurm.conf").write_text(
            CONFIG.format(
                node=self.node,
                ctld_port=free_port(),
                slurmd_port=free_port(),
                work=self.workdir,
                cpus=os.cpu_count(),
                memory_mb=_memory_mb(),
            )
        )
        munge = self.workdir / "munge"
        # --force: munged refuses to run as root without it.
        self._spawn(
            "munged",
            "--foreground",
            "--force",
            f"--socket={munge}/munge.socket",
            f"--key-file={key}",
            f"--pid-file={munge}/munged.pid",
            f"--log-file={munge}/munged.log",
            f"--seed-file={munge}/munged.seed",
        )
        self._wait_for(lambda: (munge / "munge.socket").exists(), "munged")
        config = str(self.workdir / "slurm.conf")
        self._spawn("slurmctld", "-D", "-f", config)
        self._wait_for(lambda: self._answers("scontrol", "ping"), "slurmctld")
        self._spawn("slurmd", "-D", "-f", config, "-N", self.node)
        self._wait_for(lambda: "idle" in self._sinfo_state(), "slurmd (node idle)")
        return self

    def _spawn(self, *command: str) -> None:
        log = (self.workdir / f"{command[0]}.out").open("w")
        with log:
            self.processes.append(
                subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )

    def _answers(self, *command: str) -> bool:
        return subprocess.run(command, env=self.env, capture_output=True, timeout=30).returncode == 0

    def _sinfo_state(self) -> str:
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True, timeout=30
        )
        return done.stdout if done.returncode == 0 else ""

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            exited = [p.args[0] for p in self.processes if p.poll() is not None]
            if exited or time.monotonic() > deadline:
                logs = self.logs()
                self.stop()
                why = f"{', '.join(exited)} exited" if exited else f"not ready in {START_TIMEOUT_S:.0f} s"
                raise SlurmUnavailable(f"{what}: {why}; {logs}")
            time.sleep(0.1)

    def logs(self) -> str:
        """The tails of the daemons' logs, for a failure message."""
        assert self.workdir is not None
        tails = []
        for log in sorted(self.workdir.glob("*.log")) + sorted(self.workdir.glob("*.out")):
            tails.append(f"{log.name}: {log.read_text(errors='replace')[-400:]}")
        return " | ".join(tails)

    def jobs(self) -> list[str]:
        """IDs of this cluster's jobs that are queued or running."""
        return self._run("squeue", "-h", "-o", "%i").split()

    def running_jobs(self) -> list[str]:
        return self._run("squeue", "-h", "-t", "RUNNING", "-o", "%i").split()

    def stop(self) -> None:
        if self.workdir is None:
            return
        running = {p.args[0] for p in self.processes if p.poll() is None}
        if {"slurmctld", "slurmd"} <= running:
            # Cancel what is left, and wait until slurmd has ended the jobs' processes
            # (slurmstepd and the job script), before the daemons go.
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True, timeout=30)
            deadline = time.monotonic() + START_TIMEOUT_S
            while self._answers("squeue", "-h", "-o", "%i") and self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        for process in reversed(self.processes):
            _stop(process)
        self.processes = []
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None

    def __enter__(self) -> Slurm:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
