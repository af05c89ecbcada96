"""A real multi-host trial: hosts built on this machine with network namespaces.

Topology (addresses from 198.18.0.0/15, the range set aside for network benchmarking):

    switch namespace: bridge br0
      ├─ veth ── ctl    198.18.8.10   the controller: `peakbench run --cluster tcp://198.18.8.11:8786`
      ├─ veth ── sched  198.18.8.11   `dask scheduler`
      ├─ veth ── c0     198.18.8.12   `dask worker`: load client 0
      ├─ veth ── c1     198.18.8.13   `dask worker`: load client 1
      └─ veth ── srv    198.18.8.14   the server under test: nginx (WebDAV) on port 8080

This is the SSH recipe of docs/clusters.md, with namespaces for hosts.
Every byte between controller, scheduler and workers crosses the veths and the
bridge (the test checks the counters); nothing leaves the namespaces it made,
and it deletes them (and every process it started) afterwards.

The clients load nginx over HTTP: each prepares its own part of the Web proxy
file set through WebDAV PUTs and then reads, writes, creates and removes files
in it; nginx's own access log in the server host says what it served.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUBNET = "198.18.8"
HOSTS = {"ctl": 10, "sched": 11, "c0": 12, "c1": 13, "srv": 14}
SCHEDULER_PORT = 8786

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None,
    reason="network namespaces need root, ip and unshare",
)


def sh(*args: str, timeout: float = 30) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=timeout).stdout


class NginxHost:
    """nginx with WebDAV on the srv host; its docroot and access log live in a directory of the test's."""

    PORT = 8080

    def __init__(self, hosts: Hosts, workdir: Path):
        from peakbench.servers.nginx import Nginx

        (workdir / "docroot").mkdir()
        self.server = Nginx(
            workdir / "docroot",
            host=hosts.address("srv"),
            port=self.PORT,
            netns=hosts.ns("srv"),
            webdav=True,
            workers=2,
            access_log=workdir / "access.log",
        )

    def start(self) -> None:
        self.server.start()

    def target(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()


class Hosts:
    """The namespaces, the veths, and the processes started in them; close() removes them all."""

    def __init__(self):
        self.tag = f"{os.getpid() % 100000}{uuid.uuid4().hex[:3]}"
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def ns(self, host: str) -> str:
        return f"pb{self.tag}-{host}"

    def address(self, host: str) -> str:
        return f"{SUBNET}.{HOSTS[host]}"

    def build(self) -> None:
        switch = self.ns("sw")
        sh("ip", "netns", "add", switch)
        self.namespaces.append(switch)
        sh("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", switch, "link", "set", "br0", "up")
        sh("ip", "-n", switch, "link", "set", "lo", "up")
        for host in HOSTS:
            namespace = self.ns(host)
            sh("ip", "netns", "add", namespace)
            self.namespaces.append(namespace)
            inside, outside = f"v{self.tag}{host}"[:15], f"s{self.tag}{host}"[:15]
            sh("ip", "-n", switch, "link", "add", outside, "type", "veth", "peer", "name", inside, "netns", namespace)
            sh("ip", "-n", switch, "link", "set", outside, "master", "br0", "up")
            sh("ip", "-n", namespace, "link", "set", inside, "name", "eth0")
            sh("ip", "-n", namespace, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            sh("ip", "-n", namespace, "link", "set", "eth0", "up")
            sh("ip", "-n", namespace, "link", "set", "lo", "up")

    def start(self, host: str, command: list[str], env: dict | None = None) -> subprocess.Popen:
        log = Path(f"/tmp/peakbench-netns-{self.tag}-{host}-{len(self.logs)}.log")
        self.logs.append(log)
        with log.open("w") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(host), *command],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def run(self, host: str, command: list[str], env: dict | None = None, timeout: float = 300):
        return subprocess.run(
            ["ip", "netns", "exec", self.ns(host), *command], capture_output=True, text=True, env=env, timeout=timeout
        )

    def bytes_through(self, host: str) -> int:
        """Bytes the switch received from `host` over its veth."""
        outside = f"s{self.tag}{host}"[:15]
        stats = json.loads(sh("ip", "-n", self.ns("sw"), "-s", "-j", "link", "show", outside))
        return stats[0]["stats64"]["rx"]["bytes"]

    def kill(self, process: subprocess.Popen) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        for process in self.processes:
            self.kill(process)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for namespace in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        for log in self.logs:
            log.unlink(missing_ok=True)

    def diagnostics(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in self.logs if log.exists())


@pytest.fixture
def hosts(engine_path, tmp_path):
    built = Hosts()
    server = NginxHost(built, tmp_path)
    try:
        try:
            built.build()
        except subprocess.CalledProcessError as error:
            pytest.skip(f"cannot build network namespaces here: {error.stderr.strip()}")
        server.start()
        env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "PEAKBENCH_ENGINE": str(engine_path)}
        scheduler = f"tcp://{built.address('sched')}:{SCHEDULER_PORT}"
        built.start(
            "sched",
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                built.address("sched"),
                "--port",
                str(SCHEDULER_PORT),
                "--no-dashboard",
            ],
            env,
        )
        workers = {}
        for host in ("c0", "c1"):
            workers[host] = built.start(
                host,
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_worker",
                    scheduler,
                    "--host",
                    built.address(host),
                    "--nthreads",
                    "1",
                    "--name",
                    host,
                    "--no-dashboard",
                ],
                env,
            )
        ready = built.run(
            "ctl",
            [
                sys.executable,
                "-c",
                "import sys; from distributed import Client;"
                f" c = Client({scheduler!r}, timeout=60); c.wait_for_workers(2, timeout=120);"
                " print(sorted(c.scheduler_info(n_workers=-1)['workers']))",
            ],
            env,
            timeout=200,
        )
        assert ready.returncode == 0, ready.stderr + built.diagnostics()
        built.env, built.scheduler, built.server, built.workers = env, scheduler, server, workers
        yield built
    finally:
        server.stop()
        built.close()
    leftover = sh("ip", "netns", "list")
    assert built.tag not in leftover, leftover


def test_a_trial_across_hosts_in_network_namespaces(hosts, tmp_path):
    out, db = tmp_path / "trial.json", tmp_path / "p.db"
    before = {host: hosts.bytes_through(host) for host in ("ctl", "c0", "c1", "srv")}
    done = hosts.run(
        "ctl",
        [
            sys.executable,
            "-m",
            "peakbench.cli",
            "run",
            "web-proxy",
            "--target",
            hosts.server.target(),
            "--rate",
            "600",
            "--warmup",
            "0.5",
            "--runtime",
            "2",
            "--cluster",
            hosts.scheduler,
            "--clock-tolerance",
            "50",
            "--db",
            str(db),
            "--json",
            str(out),
        ],
        hosts.env,
    )
    assert done.returncode == 0, done.stderr + hosts.diagnostics()
    assert f"cluster: 2 load clients (workers of {hosts.scheduler})" in done.stderr
    result = json.loads(out.read_text())
    assert result["requested_rate"] == 600.0
    # The schedule is kept exactly (no client lagged); goodput counts completions inside the 2 s window,
    # whose edges move with the latency: on a loaded machine a 30 ms rise over the window reads 1.5% low.
    assert result["sent"] == pytest.approx(600 * 2, abs=2)
    assert result["achieved_rate"] == pytest.approx(600.0, rel=0.05)
    assert [c["requested_rate"] for c in result["clients"]] == [300.0, 300.0]
    assert result["cluster"]["verdict"] == "complete" and result["lagging"] == []
    assert result["cluster"]["start_skew_ms"] < 50
    # Each client host prepared and drove its own part of the file set on the server host's nginx,
    # which served every request the clients say they sent in the measured window and more.
    assert sum(sum(op["errors"].values()) for op in result["ops"].values()) == 0
    served = len(hosts.server.server.access_log_lines())
    assert served >= sum(op["count"] for op in result["ops"].values())
    # Controller, scheduler, workers and server talked over the veths.
    for host in ("ctl", "c0", "c1", "srv"):
        assert hosts.bytes_through(host) - before[host] > 10_000, host


def test_a_host_lost_mid_trial_is_named_and_the_other_kept(hosts, tmp_path):
    out, db = tmp_path / "trial.json", tmp_path / "p.db"
    command = [
        sys.executable,
        "-m",
        "peakbench.cli",
        "run",
        "web-proxy",
        "--target",
        hosts.server.target(),
        "--rate",
        "400",
        "--warmup",
        "0.5",
        "--runtime",
        "6",
        "--cluster",
        hosts.scheduler,
        "--clock-tolerance",
        "50",
        "--db",
        str(db),
        "--json",
        str(out),
    ]
    controller = subprocess.Popen(
        ["ip", "netns", "exec", hosts.ns("ctl"), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=hosts.env,
        start_new_session=True,
    )
    hosts.processes.append(controller)
    # Wait for the trial's start, then take host c1 down (its worker and the engine it started).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        engines = subprocess.run(
            ["pgrep", "-s", str(hosts.workers["c1"].pid), "-f", "peakbench-engine run"], capture_output=True, text=True
        ).stdout.split()
        if engines:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the trial never started on c1" + hosts.diagnostics())
    time.sleep(2.0)
    hosts.kill(hosts.workers["c1"])
    stdout, stderr = controller.communicate(timeout=120)
    assert controller.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("peakbench: lost client-1 (tcp://198.18.8.13:"), stderr
    assert "1 of 2 clients finished" in last and "recorded as failed trial" in last
    assert "client-0" in stdout and "was lost mid-trial" in stdout  # the survivor's figures are shown
