"""Pure logic of the cluster layer: splitting a trial across clients, clock offsets, version checks."""

from __future__ import annotations

import math
import random

import pytest
from peakbench.cluster.clock import ClockOffset, check_skew, estimate, skew_bound_s
from peakbench.cluster.connection import identity, version_mismatches
from peakbench.cluster.fanout import (
    COMPLETE,
    FAILED,
    LOST,
    SEED_STRIDE,
    ClientRun,
    client_specs,
    measured_start_skew_ms,
    start_instants,
    verdict_of,
)
from peakbench.errors import InputError, RunError
from peakbench.workload import find_workload, trial_spec
from test_cluster_merge import fake_result


@pytest.fixture
def spec():
    return trial_spec(
        find_workload("mail"),
        {"kind": "posix", "path": "/tmp/x"},
        rate=900.0,
        warmup_s=1.0,
        runtime_s=5.0,
        seed=7,
        max_outstanding=10,
    )


def test_the_aggregate_rate_is_split_evenly(spec):
    parts = client_specs(spec, 4)
    assert [p["load"]["rate"] for p in parts] == [225.0] * 4
    assert math.fsum(p["load"]["rate"] for p in parts) == spec["load"]["rate"]
    assert all(p["schema"] == "peakbench.trial-spec/2" for p in parts)
    assert [p["seed"] for p in parts] == [7 + i * SEED_STRIDE for i in range(4)]
    assert [p["load"]["max_outstanding"] for p in parts] == [3] * 4
    # The rest of the load is unchanged, and the caller's spec is not modified.
    for p in parts:
        assert {k: v for k, v in p["load"].items() if k not in ("rate", "max_outstanding")} == {
            k: v for k, v in spec["load"].items() if k not in ("rate", "max_outstanding")
        }
    assert spec["schema"] == "peakbench.trial-spec/1" and spec["load"]["rate"] == 900.0


def test_each_client_gets_its_own_part_of_the_file_set(spec):
    files = spec["fileset"]["files"]
    parts = client_specs(spec, 3)
    assert [p["fileset"]["files"] for p in parts] == [math.ceil(files / 3)] * 3
    assert sum(p["fileset"]["files"] for p in parts) >= files
    seeds = [p["fileset"]["seed"] for p in parts]
    assert seeds == [spec["fileset"]["seed"] + i for i in range(3)]  # disjoint layouts
    layout = {k: v for k, v in spec["fileset"].items() if k not in ("files", "seed")}
    assert all({k: v for k, v in p["fileset"].items() if k not in ("files", "seed")} == layout for p in parts)


def test_one_client_runs_the_given_spec(spec):
    (only,) = client_specs(spec, 1)
    assert {**only, "schema": spec["schema"]} == spec


def test_a_shared_file_set_needs_a_read_only_mix(spec):
    with pytest.raises(InputError, match="read-only mix"):
        client_specs(spec, 2, shared_fileset=True)
    web = trial_spec(find_workload("web-server"), {"kind": "null"}, rate=100.0, warmup_s=0, runtime_s=1)
    parts = client_specs(web, 2, shared_fileset=True)
    assert all(p["fileset"] == web["fileset"] for p in parts)


def test_uniform_clients_interleave_into_one_metronome(spec):
    offsets = [ClockOffset(f"client-{i}", offset, 0.0001) for i, offset in enumerate((0.0, 0.5, -0.25))]
    instants = start_instants(1000.0, offsets, spec)
    gap = 1 / spec["load"]["rate"]
    assert instants == pytest.approx([1000.0, 1000.5 + gap, 999.75 + 2 * gap])
    # Each client runs rate/3, so their sends at t0 + i/rate + k·3/rate cover every 1/rate slot once.
    assert start_instants(1000.0, offsets, spec, compensate=False) == pytest.approx(
        [1000.0, 1000 + gap, 1000 + 2 * gap]
    )
    poisson = {**spec, "load": {**spec["load"], "arrivals": "poisson"}}
    assert start_instants(1000.0, offsets, poisson) == pytest.approx([1000.0, 1000.5, 999.75])
    # An offset within its uncertainty of zero is noise: a client on the controller's clock is not shifted.
    noise = [ClockOffset("client-0", 0.0004, 0.001), ClockOffset("client-1", -0.003, 0.001)]
    assert [o.correction_s for o in noise] == [0.0, -0.003]
    assert start_instants(1000.0, noise, poisson) == pytest.approx([1000.0, 999.997])


def test_the_clock_offset_comes_from_the_shortest_round_trip():
    samples = [(10.0, 15.2, 10.1), (11.0, 16.0301, 11.001), (12.0, 17.9, 12.5)]
    offset = estimate("client-0", samples)
    assert offset.offset_s == pytest.approx(16.0301 - 11.0005)
    assert offset.uncertainty_s == pytest.approx(0.0005)
    with pytest.raises(ValueError):
        estimate("client-0", [])


def test_the_start_skew_bound():
    offsets = [ClockOffset("a", 0.002, 0.001), ClockOffset("b", -0.003, 0.0005), ClockOffset("c", 0.0, 0.0002)]
    assert skew_bound_s(offsets) == pytest.approx(0.0015)  # compensated: the two widest uncertainties
    assert skew_bound_s(offsets, compensate=False) == pytest.approx(0.003 - (-0.0035))
    assert check_skew(offsets, 0.010) == pytest.approx(0.0015)
    with pytest.raises(RunError, match=r"refused: a start skewed by up to 6\.5 ms.*a \+2\.0 ms"):
        check_skew(offsets, 0.005, compensate=False)
    slow = [ClockOffset("a", 0.0, 0.020), ClockOffset("b", 0.0, 0.001)]
    with pytest.raises(RunError, match=r"a ±20\.0 ms"):
        check_skew(slow, 0.010)


def test_a_measured_start_skew_is_in_the_controllers_clock(spec):
    runs = []
    gap = 1 / spec["load"]["rate"]
    for i, (offset, error) in enumerate(((0.5, 0.0), (-1.0, 0.0003))):
        run = ClientRun(f"client-{i}", "w", "h", spec, clock=ClockOffset(f"client-{i}", offset, 0.0001))
        run.result = {
            **fake_result(random.Random(i), 50.0)[0],
            "start": {"at_unix_s": 100.0 + i * gap + offset + error},
        }
        runs.append(run)
    assert measured_start_skew_ms(runs, 100.0, spec) == pytest.approx(0.3)


def test_verdicts_name_lost_and_failed_clients(spec):
    runs = [ClientRun(f"client-{i}", f"tcp://w{i}", "h", spec) for i in range(3)]
    for run in runs:
        run.result = {}
    assert verdict_of(runs)[0] == COMPLETE
    runs[1].result, runs[1].lost, runs[1].error = None, True, "its worker left the cluster mid-trial"
    verdict, message = verdict_of(runs)
    assert verdict == LOST
    assert message.startswith("lost client-1 (tcp://w1: its worker left the cluster mid-trial)")
    assert "2 of 3 clients finished" in message
    runs[1].lost, runs[1].error = False, "engine run failed"
    assert verdict_of(runs) == (
        FAILED,
        "client-1 failed: engine run failed; 2 of 3 clients finished (their merged results kept)",
    )


def test_a_worker_with_another_version_is_refused():
    controller = {"peakbench": "0.1.0", "engine": "0.1.0", "protocol": 1, "host": "c"}
    workers = {
        "tcp://a:1": dict(controller, host="a"),
        "tcp://b:1": dict(controller, engine="0.2.0", host="b"),
        "tcp://c:1": ModuleNotFoundError("No module named 'peakbench'"),
    }
    problems = version_mismatches(controller, workers)
    assert problems == [
        "worker tcp://b:1 on b has engine 0.2.0 (controller 0.1.0)",
        "worker tcp://c:1 could not run peakbench (ModuleNotFoundError: No module named 'peakbench');"
        " install the same peakbench on every worker",
    ]


def test_this_process_knows_its_identity(engine_path):
    mine = identity()
    assert mine["engine"] == "0.1.0" and mine["protocol"] >= 1 and mine["host"]


def test_a_workload_says_how_clients_split_its_file_set(tmp_path):
    from peakbench.workload import load_workload

    base = (find_workload("web-server").path).read_text()
    shared = tmp_path / "shared.toml"
    shared.write_text(base + '\n[cluster]\nfileset = "shared"\n')
    assert load_workload(shared).cluster_fileset == "shared"
    assert find_workload("web-server").cluster_fileset == "per-client"
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(base + '\n[cluster]\nfileset = "everyone"\n')
    with pytest.raises(InputError) as error:
        load_workload(wrong)
    assert "cluster.fileset" in str(error.value) and "per-client, shared" in str(error.value)
    assert error.value.line == base.count("\n") + 3


def test_clients_do_not_apply_to_a_simulated_server(cli):
    done = cli("search", "mail", "--target", "sim://?capacity=800", "--clients", "2")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "peakbench: field --clients: a simulated server runs in virtual time: --clients and --cluster do not apply"
    )


def test_one_progress_line_sums_the_clients(spec, monkeypatch):
    from peakbench.cluster.fanout import progress_event

    monkeypatch.setattr("time.time", lambda: 1002.0)  # 2 s after the start: measuring (1 s warm-up)
    latest = {
        "client-0": {"client": "client-0", "completed": 100, "outstanding": 2, "rate": 50.0, "lag_ms": 0.5},
        "client-1": {"client": "client-1", "completed": 120, "outstanding": 1, "rate": 60.0, "lag_ms": 1.5},
    }
    event = progress_event(spec, 1000.0, 2, 2, latest)
    assert event == {
        "phase": "measure",
        "elapsed_s": 2.0,
        "clients_running": 2,
        "clients": 2,
        "completed": 220,
        "outstanding": 3,
        "rate": 110.0,
        "lag_ms": 1.5,
    }
    assert progress_event(spec, 1003.0, 2, 2, {})["phase"] == "start"
