"""Many load clients on a Dask LocalCluster of worker processes: split, synchronized start, exact merge,
and the faults (a worker killed mid-trial, an unreachable scheduler, a worker of another version)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import threading
import time
import uuid
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from peakbench.cluster import LOST, ClientsLost, DistributedEngine, connect
from peakbench.errors import RunError
from peakbench.workload import find_workload, trial_spec

CLIENTS = 3
# These tests check the split, the merge and the faults, not this machine's scheduling: a shared
# two-core machine under load delays round trips and wake-ups by milliseconds.
TOLERANCE_S = 0.05


@pytest.fixture(scope="module")
def cluster(engine_path):
    with connect(clients=CLIENTS) as cluster:
        yield cluster


@pytest.fixture
def shm_dir():
    path = Path("/dev/shm") / f"peakbench-cluster-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _check_split_and_merge(trial, spec, clients):
    assert trial.complete, trial.message
    merged = trial.result
    parts = [c.result for c in trial.clients]
    rate = spec["load"]["rate"]
    assert [p["requested_rate"] for p in parts] == [rate / clients] * clients
    assert merged["requested_rate"] == pytest.approx(rate)
    assert merged["achieved_rate"] == pytest.approx(sum(p["achieved_rate"] for p in parts))
    assert merged["achieved_rate"] == pytest.approx(rate, rel=0.02)  # the aggregate was achieved
    assert merged["sent"] == sum(p["sent"] for p in parts)
    assert merged["latency"]["count"] == sum(p["latency"]["count"] for p in parts)
    merged_hist = HdrHistogram.decode(merged["latency"]["hist"])
    assert merged_hist.get_total_count() == merged["latency"]["count"]
    assert merged["lagging"] == [] and not merged["generator_saturated"]
    info = merged["cluster"]
    assert info["clients"] == clients and info["verdict"] == "complete"
    assert set(info["clock"]) == {f"client-{i}" for i in range(clients)}
    assert all(abs(c["offset_ms"]) < 50 for c in info["clock"].values())  # one host: one clock
    assert info["start_skew_ms"] < TOLERANCE_S * 1e3, info  # they started together
    assert all(p["start"]["late_ms"] < TOLERANCE_S * 1e3 for p in parts)
    # ...and stopped together: every engine measured the same window length.
    assert {p["runtime_s"] for p in parts} == {spec["load"]["runtime_s"]}


def test_an_aggregate_rate_on_null_is_split_achieved_and_merged(cluster):
    spec = trial_spec(find_workload("mail"), {"kind": "null"}, rate=3000.0, warmup_s=0.5, runtime_s=2.0)
    engine = DistributedEngine(cluster, clock_tolerance_s=TOLERANCE_S)
    engine.validate(spec)
    trial = engine.run_trial(spec)
    _check_split_and_merge(trial, spec, CLIENTS)
    assert trial.result["sent"] == pytest.approx(3000 * 2, abs=CLIENTS)
    # The per-client seeds differ, so the clients' op sequences do too.
    assert len({json.dumps(c.result["mix_actual"], sort_keys=True) for c in trial.clients}) > 1


def test_per_client_file_sets_on_dev_shm(cluster, shm_dir):
    spec = trial_spec(
        find_workload("mail"), {"kind": "posix", "path": str(shm_dir)}, rate=600.0, warmup_s=0.5, runtime_s=2.0
    )
    engine = DistributedEngine(cluster, clock_tolerance_s=TOLERANCE_S)
    prepared = engine.prepare(spec)
    assert prepared["clients"] == CLIENTS
    assert prepared["fileset"]["files"] >= spec["fileset"]["files"]
    manifest = json.loads((shm_dir / ".peakbench-manifest.json").read_text())
    assert len(manifest["filesets"]) == CLIENTS  # three disjoint parts, one per client
    trial = engine.run_trial(spec)
    _check_split_and_merge(trial, spec, CLIENTS)
    errors = sum(sum(op["errors"].values()) for op in trial.result["ops"].values())
    assert errors == 0
    assert trial.result["restore"]["done"]
    assert trial.result["fileset"]["files"] == sum(c.spec["fileset"]["files"] for c in trial.clients)


def test_a_shared_read_only_file_set(cluster, shm_dir):
    spec = trial_spec(
        find_workload("web-server"), {"kind": "posix", "path": str(shm_dir)}, rate=600.0, warmup_s=0.5, runtime_s=2.0
    )
    engine = DistributedEngine(cluster, shared_fileset=True, clock_tolerance_s=TOLERANCE_S)
    engine.prepare(spec)
    manifest = json.loads((shm_dir / ".peakbench-manifest.json").read_text())
    assert len(manifest["filesets"]) == 1
    trial = engine.run_trial(spec)
    _check_split_and_merge(trial, spec, CLIENTS)
    assert trial.result["fileset"] == trial.clients[0].result["fileset"]


def test_clock_offsets_are_measured_compensated_and_refused_beyond_tolerance(cluster):
    spec = trial_spec(find_workload("mail"), {"kind": "null"}, rate=300.0, warmup_s=0.0, runtime_s=1.0)
    # Every worker's clock reads 5 s ahead of the controller's.
    ahead = lambda: __import__("time").time() + 5.0  # noqa: E731 (pickled by value to the workers)
    trial = DistributedEngine(cluster, clock=ahead, clock_tolerance_s=TOLERANCE_S).run_trial(spec)
    assert trial.complete, trial.message
    offsets = trial.result["cluster"]["clock"]
    assert all(o["offset_ms"] == pytest.approx(5000, abs=20) for o in offsets.values())
    # ...yet they started together, because each was handed the instant in its own clock.
    assert trial.result["cluster"]["start_skew_ms"] < TOLERANCE_S * 1e3
    skewed = {}

    def one_behind():
        import os
        import time

        return time.time() - (0.5 if os.getpid() == skewed["pid"] else 0.0)

    skewed["pid"] = cluster.clients[1].pid
    engine = DistributedEngine(cluster, clock=one_behind, compensate_clocks=False)
    with pytest.raises(
        RunError, match=r"refused: a start skewed by up to (49\d|5\d\d)\.\d ms.*client-1 -(499|500)\.\d ms"
    ):
        engine.run_trial(spec)


def test_run_with_clients_on_the_command_line(engine_path, cli, tmp_path):
    out, db = tmp_path / "trial.json", tmp_path / "p.db"
    done = cli(
        "run",
        "mail",
        "--target",
        "null://",
        "--rate",
        "800",
        "--warmup",
        "0.5",
        "--runtime",
        "1.5",
        "--clients",
        "2",
        "--clock-tolerance",
        "50",
        "--db",
        str(db),
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert "cluster: 2 load clients (local worker processes)" in done.stderr
    assert "per client" in done.stdout and "client-1" in done.stdout and "start skew" in done.stdout
    # Live progress: the clients' engine progress lines, summed, on the controller's terminal.
    assert any("ops/s" in line for line in done.stderr.splitlines() if line.startswith(("measure", "drain")))
    result = json.loads(out.read_text())
    assert result["requested_rate"] == 800.0
    assert [c["requested_rate"] for c in result["clients"]] == [400.0, 400.0]
    assert result["cluster"]["clients"] == 2
    with sqlite3.connect(db) as connection:
        rate, status = connection.execute("SELECT rate, status FROM trials").fetchone()
    assert (rate, status) == (800.0, "done")


def test_search_with_clients_on_the_command_line(engine_path, cli, tmp_path):
    out, db = tmp_path / "search.json", tmp_path / "p.db"
    done = cli(
        "search",
        "mail",
        "--target",
        "null://",
        "--clients",
        "2",
        "--quick",
        "--runlength",
        "1",
        "--warmup",
        "0",
        "--start-rate",
        "200",
        "--max-rate",
        "400",
        "--max-trials",
        "3",
        "--clock-tolerance",
        "50",
        "--db",
        str(db),
        "--json",
        str(out),
    )
    assert done.returncode in (0, 3), done.stderr  # null:// never saturates: no peak below --max-rate
    result = json.loads(out.read_text())
    assert result["trials"] >= 1
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT result FROM trials WHERE search_id = 1").fetchall()
    assert rows and all(json.loads(r)["cluster"]["clients"] == 2 for (r,) in rows)


def test_a_worker_killed_mid_trial_ends_the_trial_naming_it(engine_path):
    spec = trial_spec(find_workload("mail"), {"kind": "null"}, rate=400.0, warmup_s=0.5, runtime_s=4.0)
    with connect(clients=2) as cluster:
        victim = cluster.clients[1]
        engine = DistributedEngine(cluster, clock_tolerance_s=TOLERANCE_S)
        killer = threading.Timer(2.5, os.kill, (victim.pid, signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        try:
            trial = engine.run_trial(spec)
        finally:
            killer.cancel()
        took = time.monotonic() - started
    assert took < 30, f"a lost client took {took:.0f} s to notice"
    assert trial.verdict == LOST
    assert trial.lost == ["client-1"]
    assert "lost client-1" in trial.message and "1 of 2 clients finished" in trial.message
    # The survivor's results are kept, merged alone.
    assert trial.result["cluster"]["finished"] == ["client-0"]
    assert trial.result["requested_rate"] == 200.0
    assert trial.result["achieved_rate"] == pytest.approx(200.0, rel=0.02)
    with pytest.raises(ClientsLost, match="lost client-1"):
        raise ClientsLost(trial)


class IdentityTimesOut:
    """The client's scheduler RPC, except that `identity` (the poll of which workers are alive) times
    out, as a round trip now and then does on a machine under heavy load. A fake, because the real
    scheduler cannot be made to time out on cue; every other call goes to the real one."""

    def __init__(self, scheduler):
        self.scheduler = scheduler

    def __getattr__(self, name):
        if name != "identity":
            return getattr(self.scheduler, name)

        async def timed_out(**kwargs):
            raise TimeoutError("injected: the scheduler did not answer in time")

        return timed_out


def test_a_liveness_poll_that_times_out_loses_no_client(cluster):
    spec = trial_spec(find_workload("mail"), {"kind": "null"}, rate=600.0, warmup_s=0.5, runtime_s=1.5)
    engine = DistributedEngine(cluster, clock_tolerance_s=TOLERANCE_S)
    time.sleep(2.5)  # the client's periodic refresh has cached the scheduler's identity without workers
    real = cluster.client.scheduler
    cluster.client.scheduler = IdentityTimesOut(real)
    try:
        trial = engine.run_trial(spec)
    finally:
        cluster.client.scheduler = real
    assert trial.complete, trial.message  # not "lost" because the poll went unanswered
    assert trial.result["cluster"]["finished"] == [f"client-{i}" for i in range(CLIENTS)]
    assert trial.result["achieved_rate"] == pytest.approx(600.0, rel=0.02)


def test_an_unreachable_scheduler_is_one_line(engine_path, cli):
    started = time.monotonic()
    done = cli(
        "run",
        "mail",
        "--target",
        "null://",
        "--rate",
        "100",
        "--cluster",
        "tcp://127.0.0.1:9",
        "--db",
        "/dev/null/never",
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 60
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("peakbench: cannot reach the Dask scheduler at tcp://127.0.0.1:9")


def test_workers_with_another_engine_version_are_refused_before_any_load(engine_path, tmp_path):
    fake = tmp_path / "peakbench-engine"
    marker = tmp_path / "ran"
    fake.write_text(
        f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'peakbench-engine 9.9.9' && exit 0\ntouch {marker}\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(RunError) as refused:
        connect(clients=2, worker_env={"PEAKBENCH_ENGINE": str(fake)})
    message = str(refused.value)
    assert message.startswith("refused before any load started: worker tcp://")
    assert "engine 9.9.9 (controller 0.1.0)" in message
    assert not marker.exists()  # no engine ran on any worker


def test_an_interrupted_trial_stops_the_engines_on_the_workers(cluster):
    import psutil

    spec = trial_spec(find_workload("mail"), {"kind": "null"}, rate=300.0, warmup_s=0.5, runtime_s=20.0)
    engine = DistributedEngine(cluster, clock_tolerance_s=TOLERANCE_S)

    def interrupt(event):
        if event["phase"] == "measure":
            raise KeyboardInterrupt

    def engines():
        found = []
        for client in cluster.clients:
            for child in psutil.Process(client.pid).children(recursive=True):
                try:
                    if child.name() == "peakbench-engine":
                        found.append(child)
                except psutil.NoSuchProcess:  # it exited between the listing and the look: not running
                    pass
        return found

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        engine.run_trial(spec, on_progress=interrupt)
    assert time.monotonic() - started < 15
    deadline = time.monotonic() + 10
    while engines() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engines() == []


def test_an_engine_whose_task_starts_after_the_interrupt_is_stopped_as_it_starts(cluster):
    # A client's task can start late (its worker was busy): the interrupt's sweep then finds no
    # engine, and the engine it starts afterwards must stop at once, not run its whole trial.
    from peakbench.cluster.fanout import run_on_worker, stop_engines_on_worker

    worker = cluster.clients[0].worker
    spec = trial_spec(find_workload("mail"), {"kind": "null"}, rate=300.0, warmup_s=0.0, runtime_s=20.0)
    busy = cluster.client.submit(time.sleep, 2.0, workers=[worker], allow_other_workers=False, pure=False)
    late = cluster.client.submit(
        run_on_worker,
        spec,
        workers=[worker],
        allow_other_workers=False,
        pure=False,
        key=f"peakbench-run-late-{uuid.uuid4().hex[:8]}",
    )
    assert cluster.client.run(stop_engines_on_worker, [late.key], workers=[worker]) == {worker: 0}
    started = time.monotonic()
    with pytest.raises(RunError, match=r"failed \(signal"):
        late.result(timeout=60)
    assert time.monotonic() - started < 10  # the 20 s trial did not run
    busy.result()
