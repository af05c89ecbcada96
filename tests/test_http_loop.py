"""The HTTP target's event loop against a slow real server (peakbench.servers.mdc, one worker,
D = 5 ms: capacity 200 req/s): an open-loop run at twice that holds hundreds of requests in
flight on connections, not threads, and a request that finds every connection busy waits for one."""

import json
import resource
import subprocess
import time
from pathlib import Path

import pytest
from peakbench.servers.mdc import MDCServer

pytestmark = pytest.mark.integration

SERVICE_MS = 5.0
CAPACITY = 1000.0 / SERVICE_MS


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    www = tmp_path_factory.mktemp("www")
    (www / "f.bin").write_bytes(b"x" * 1024)
    log = www.parent / "one.log"
    log.write_text('h - - [01/Jan/2024:00:00:00 +0000] "GET /f.bin HTTP/1.1" 200 1024\n')
    with MDCServer(1, SERVICE_MS, www) as server:
        yield server, log


def overload(server, log: Path, runtime_s: float) -> dict:
    """Twice the server's capacity, with a drain long enough for the queue to empty."""
    return {
        "schema": "peakbench.trial-spec/2",
        "target": {"kind": "http", "url": server.url, "timeout_s": 10.0},
        "load": {"rate": 2 * CAPACITY, "runtime_s": runtime_s, "warmup_s": 0.0, "drain_timeout_s": runtime_s + 5},
        "replay": {"log": str(log), "format": "common"},
    }


def run_sampled(engine_path: Path, spec: dict, nofile: int | None = None) -> tuple[dict, int]:
    """The engine's result, and the most threads /proc showed it with (sampled every 10 ms)."""

    def limit_descriptors():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        [str(engine_path), "run", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=limit_descriptors,
    )
    proc.stdin.write(json.dumps(spec))
    proc.stdin.close()
    peak, deadline = 0, time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            break
        peak = max(peak, *(int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:")))
        time.sleep(0.01)
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 0
    return json.loads(out), peak


def assert_all_served_in_turn(result: dict):
    """Every request sent was answered, none failed, and latency (from the intended send time)
    carries the queue: at twice capacity a request sent t seconds in waits about t."""
    read = result["ops"]["read"]
    assert read["errors"] == {} and read["timeouts"] == 0 and read["cancellations"] == 0, read
    assert read["count"] == result["sent"]
    assert result["achieved_rate"] == pytest.approx(CAPACITY, rel=0.15)
    assert result["latency"]["mean_ms"] > 0.25 * result["runtime_s"] * 1000


def test_twice_capacity_holds_hundreds_of_requests_on_connections_not_threads(engine_path, slow_server):
    server, log = slow_server
    result, peak_threads = run_sampled(engine_path, overload(server, log, 2.0))
    # About 400 requests pile up over 2 s; one thread per request would show hundreds.
    assert result["outstanding"]["max"] >= 250, result["outstanding"]
    assert peak_threads <= 4, f"{peak_threads} threads for {result['outstanding']['max']} requests in flight"
    assert result["outstanding"]["threads"] == 1
    assert result["http_connections_max"] >= 250
    assert_all_served_in_turn(result)


def test_a_request_finding_every_connection_busy_waits_for_one(engine_path, slow_server):
    """With 72 descriptors the target opens at most 8 connections (it keeps 64 for everything
    else); the requests beyond them queue in the engine, and their wait is in their latency."""
    server, log = slow_server
    result, _ = run_sampled(engine_path, overload(server, log, 1.0), nofile=72)
    assert_all_served_in_turn(result)
    assert result["http_connections_max"] <= 8
    assert result["http_waited_for_connection"] > 0.5 * result["sent"]


@pytest.mark.parametrize("clients", [1, 8])
def test_a_closed_loop_keeps_its_clients_in_flight_and_times_each_from_its_send(engine_path, slow_server, clients):
    """One thread keeps the clients' requests in flight; by Little's law clients = throughput x
    mean latency, so a latency timed from before a client was free (the wait for the previous
    reply counted twice) shows as more clients than there are."""
    server, log = slow_server
    spec = {
        "schema": "peakbench.trial-spec/2",
        "target": {"kind": "http", "url": server.url},
        "load": {"clients": clients, "runtime_s": 2.0, "warmup_s": 0.0},
        "replay": {"log": str(log), "format": "common"},
    }
    result, peak_threads = run_sampled(engine_path, spec)
    assert result["outstanding"]["max"] == clients and peak_threads <= 4
    in_flight = result["completed_rate"] * result["latency"]["mean_ms"] / 1000
    assert in_flight == pytest.approx(clients, rel=0.1), (result["completed_rate"], result["latency"]["mean_ms"])
