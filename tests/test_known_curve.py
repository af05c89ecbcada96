"""A real server whose curve is known (peakbench.servers.mdc): the engine and the search against the truth.

The server has c workers and a deterministic service time D, so under the engine's
Poisson arrivals it is an M/D/c queue: its mean response W(λ) is the Pollaczek-Khinchine
formula for c = 1 and the exact stationary chain for any c (cross-checked here against a
simulation of the FIFO queue itself). The engine runs the example workload beside the
server (every op a HEAD, Poisson arrivals) through the `peakbench` CLI, as a user would.
"""

from __future__ import annotations

import heapq
import http.client
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from peakbench.servers import mdc
from peakbench.servers.mdc import EXAMPLE_WORKLOAD, MDCServer

REPO = Path(__file__).resolve().parents[1]

SERVICE_MS = 5.0  # capacity 200 req/s per worker
RSAT_MS, WIDTH = 50.0, 0.10  # issue 20's check: λ* = 189.5 req/s, peak region 188.2–190.5 for one worker
# Time the engine's side adds to each response beyond the server's W: loopback, the two
# processes' system calls and wake-ups (about 0.3 ms median on this 2-vCPU machine, see
# mdc.py), with room for a busy machine.
TIMING_ALLOWANCE_MS = 1.0
# The client runs under SCHED_FIFO where it may (root), below the server's priority: on this
# machine, shared with builds and test runs (load average 10 on 2 vCPUs), an ordinary engine
# at 60 req/s had a p99 schedule lag of 49-133 ms (nice -10: 8-16 ms; real-time: 0.1 ms,
# n = 330 requests each), and that, not the server, is what the tests would measure. It uses
# about 2% of a CPU at these rates (engine_cpu_s), and the kernel caps real-time tasks at 95%.
PRIORITY = ["chrt", "-f", "5"] if os.geteuid() == 0 else []
# A trial whose p99 schedule lag exceeds this was stalled by the machine (see undisturbed_trial).
STALL_MS = 5.0


def peakbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`peakbench ARGS...` as conftest's `cli` runs it, at the raised priority."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [*PRIORITY, sys.executable, "-m", "peakbench.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def simulated_window_means(
    rate: float, workers: int, warmup_s: float, runtime_s: float, repeats: int, seed: int
) -> np.ndarray:
    """Mean response of the requests arriving in [warmup, warmup + runtime) of an M/D/c FIFO queue
    that starts empty, over `repeats` independent runs: what one trial can show, and its spread."""
    rng = np.random.default_rng(seed)
    service_s = SERVICE_MS / 1000
    means = []
    for _ in range(repeats):
        span = warmup_s + runtime_s
        arrivals = np.sort(rng.uniform(0, span, rng.poisson(rate * span)))
        free = [0.0] * workers  # heap: when each worker is next free
        responses = []
        for arrival in arrivals.tolist():
            end = max(arrival, free[0]) + service_s
            heapq.heapreplace(free, end)
            if arrival >= warmup_s:
                responses.append(end - arrival)
        means.append(1000 * sum(responses) / len(responses))
    return np.array(means)


def run_trial(
    server: MDCServer, docroot: Path, tmp_path: Path, rate: float, warmup_s: float, runtime_s: float, name: str
) -> dict:
    out = tmp_path / f"{name}.json"
    done = peakbench(
        "run",
        str(EXAMPLE_WORKLOAD),
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--rate",
        f"{rate:g}",
        "--warmup",
        f"{warmup_s:g}",
        "--runtime",
        f"{runtime_s:g}",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def undisturbed_trial(
    server: MDCServer, docroot: Path, tmp_path: Path, rate: float, warmup_s: float, runtime_s: float, attempts: int = 3
) -> dict:
    """A trial the machine did not stall: the engine's own schedule lag shows a stall (it sends
    late whatever it was doing), and a stalled engine also reads its replies late, which no
    server curve explains. Up to `attempts` trials; all stalled is a failure that says so."""
    lags = []
    for attempt in range(attempts):
        result = run_trial(server, docroot, tmp_path, rate, warmup_s, runtime_s, f"r{rate:g}-{attempt}")
        if result["schedule_lag"]["p99_ms"] <= STALL_MS:
            return result
        lags.append(result["schedule_lag"]["p99_ms"])
    pytest.fail(
        f"at {rate:g} req/s the engine was stalled in every trial (p99 schedule lag {lags} ms > {STALL_MS} ms):"
        " the machine is too busy to check the server's curve"
    )


@pytest.fixture
def docroot(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    return www


def test_the_truth_agrees_with_the_closed_form_and_with_a_simulation_of_the_queue():
    # c = 1: the chain is the Pollaczek-Khinchine formula; issue 20's figures.
    for rate in (40.0, 150.0, 189.0, 199.0):
        load = rate * SERVICE_MS / 1000
        assert mdc._mean_in_system(load, 1) / rate * 1000 == pytest.approx(
            SERVICE_MS + load * SERVICE_MS / (2 * (1 - load)), rel=1e-9
        )
    assert mdc.peak_rate(RSAT_MS) == pytest.approx(189.47, abs=0.01)
    low, high = mdc.peak_region(RSAT_MS, WIDTH)
    assert (round(low, 1), round(high, 1)) == (188.2, 190.5)
    assert mdc.mean_response_ms(200.0) == math.inf
    # c = 2 at ρ = 0.8: the chain against 100 simulated 60 s windows of the FIFO queue itself
    # (W ≈ 9.5 ms; the windows' grand mean has a standard error of about 0.03 ms).
    simulated = simulated_window_means(320.0, 2, 5.0, 60.0, 100, seed=3)
    assert mdc.mean_response_ms(320.0, 2) == pytest.approx(simulated.mean(), abs=4 * simulated.std() / 10)
    assert (
        2 * mdc.peak_rate(RSAT_MS) < mdc.peak_rate(RSAT_MS, 2) < 400.0
    )  # two workers queue less than one twice as fast


@pytest.mark.integration
def test_the_server_serves_its_docroot_and_every_request_takes_the_service_time(docroot):
    (docroot / "a.txt").write_bytes(b"hello")
    (docroot / "sub").mkdir()
    with MDCServer(1, 20.0, docroot) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        answers = []
        for method, path in (
            ("GET", "/a.txt"),
            ("HEAD", "/a.txt"),
            ("GET", "/"),
            ("GET", "/missing"),
            ("GET", "/../etc/passwd"),
            ("PUT", "/a.txt"),
        ):
            started = time.monotonic()
            connection.request(method, path, body=b"" if method == "PUT" else None)
            response = connection.getresponse()  # one keep-alive connection throughout
            answers.append((response.status, response.getheader("Content-Length"), response.read()))
            assert time.monotonic() - started >= 0.020
    assert answers == [
        (200, "5", b"hello"),
        (200, "5", b""),
        (200, "11", b"a.txt\nsub/\n"),
        (404, "0", b""),
        (404, "0", b""),
        (405, "0", b""),
    ]


@pytest.mark.parametrize("workers, rates", [(1, (60.0, 120.0, 160.0)), (2, (320.0,))])
def test_open_loop_poisson_runs_below_capacity_report_the_queues_mean_response(
    engine_path, docroot, tmp_path, workers, rates
):
    """Each trial's mean response (from the moment the engine actually sent: its own schedule
    lag, which the busy machine's scheduling adds, is subtracted) lies within 3.5 standard
    deviations of what one 6 s window of the exact queue shows, plus the timing allowance.

    The standard deviation is the window mean's own sampling error at that ρ, from 200
    simulated windows: responses in a queue are correlated, so it is far larger than the
    per-request spread over √n (for 6 s at ρ = 0.8, about 2.4 ms on W = 15 ms; at ρ = 0.3, 0.17 ms)."""
    warmup_s, runtime_s = 1.0, 6.0
    with MDCServer(workers, SERVICE_MS, docroot) as server:
        for rate in rates:
            result = undisturbed_trial(server, docroot, tmp_path, rate, warmup_s, runtime_s)
            truth = server.mean_response_ms(rate)
            spread = simulated_window_means(rate, workers, warmup_s, runtime_s, 200, seed=int(rate)).std()
            measured = result["latency"]["mean_ms"] - result["schedule_lag"]["mean_ms"]
            assert (
                result["ops"].keys() == {"getattr"} and result["ops"]["getattr"]["successes"] > 0.9 * rate * runtime_s
            )
            assert abs(measured - truth) <= 3.5 * spread + TIMING_ALLOWANCE_MS, (rate, measured, truth, spread)
    # The server's own replies left on time: what the test compares is the queue, not timer jitter.
    assert server.stats["lateness_mean_ms"] < 0.5, server.stats


def test_at_twice_capacity_the_latency_grows_like_the_queue(engine_path, docroot, tmp_path):
    """λ = 2μ from an empty queue: a request arriving at t waits about (λ − μ)/μ · t = t, so the
    window [0, 2 s) averages about 1 s and the window [2 s, 4 s) about 3 s, while the server
    completes μ = 200 req/s. (The engine leaves out of the mean the window's last requests
    that it had not sent when the window ended, about 60 of 800 here, which reads the later
    window up to about 15% low: hence 20%.)"""
    capacity = 1000.0 / SERVICE_MS
    with MDCServer(1, SERVICE_MS, docroot) as server:
        early = run_trial(server, docroot, tmp_path, 2 * capacity, 0.0, 2.0, "early")
        late = run_trial(server, docroot, tmp_path, 2 * capacity, 2.0, 2.0, "late")
    growth = (2 * capacity - capacity) / capacity  # seconds of queue per second of run
    for result, middle_s in ((early, 1.0), (late, 3.0)):
        expected_ms = SERVICE_MS + growth * middle_s * 1000
        assert result["latency"]["mean_ms"] == pytest.approx(expected_ms, rel=0.2), (middle_s, result["latency"])
        assert result["achieved_rate"] == pytest.approx(capacity, rel=0.1)
    assert late["latency"]["mean_ms"] / early["latency"]["mean_ms"] == pytest.approx(3.0, rel=0.25)


def quick_search(server: MDCServer, docroot: Path, tmp_path: Path, seed: int) -> dict:
    out = tmp_path / f"search-{server.workers}-{seed}.json"
    done = peakbench(
        "search",
        str(EXAMPLE_WORKLOAD),
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--quick",
        "--rsat",
        f"{RSAT_MS:g}",
        "--width",
        f"{WIDTH:g}",
        "--seed",
        str(seed),
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(out),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


@pytest.mark.slow  # 4 minutes of searches: scripts/test.sh -m slow
@pytest.mark.parametrize("workers, seeds", [(1, (101, 202)), (2, (404,))])
def test_repeated_quick_searches_find_the_known_peak_within_their_claimed_accuracy(
    engine_path, docroot, tmp_path, workers, seeds
):
    """A search claims its peak within 1 − a of the truth at confidence c; with distinct seeds
    (independent arrival streams) at least ⌈c·n⌉ of n searches must hold it (for n = 2 at c = 90%:
    both), and each must state a peak (the server saturates at a known load). The interval
    it states for the peak rate must hold the truth as often, and its explanation must fit the
    server: W(λ) is smooth and steep here (it climbs 45 → 55 ms over 188.2–190.5 req/s), so
    "the response time jumps across the peak region" is false (issue 20, item 1)."""
    with MDCServer(workers, SERVICE_MS, docroot) as server:
        truth = server.peak_rate(RSAT_MS)
        found = [quick_search(server, docroot, tmp_path, seed) for seed in seeds]
    summary = [(r["verdict"], r["peak_rate"], r["message"]) for r in found]
    assert all(r["verdict"] == "peak" for r in found), summary
    enough = math.ceil(found[0]["confidence"] * len(found))
    within = [abs(r["peak_rate"] - truth) / truth <= 1 - r["target_accuracy"] for r in found]
    assert sum(within) >= enough, (truth, summary)
    contains = [r["ci_low"] is not None and r["ci_low"] <= truth <= r["ci_high"] for r in found]
    assert sum(contains) >= enough, (truth, [(r["ci_low"], r["ci_high"]) for r in found])
    assert not any("jumps across the peak region" in r["message"] for r in found), summary
