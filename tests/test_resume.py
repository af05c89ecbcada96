"""`peakbench resume` after kill -9 at random points: a search, an sfs run, a replay sweep and a surface
each finish with every finished trial kept once and none lost (DESIGN: every long job resumes after kill -9)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from peakbench import tracegen

KILLS = 10  # at least this many kill points per job kind


def start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.Popen(
        [sys.executable, "-m", "peakbench.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def working(lock: Path, process: subprocess.Popen) -> bool:
    """The job's lock names this process: its controller is at work (locks.py writes the holder's pid;
    reading the file takes no lock, so the test never stands in the job's way)."""
    try:
        return f"pid {process.pid} " in lock.read_text()
    except FileNotFoundError:
        return False


def kill_and_resume(first: subprocess.Popen, db: Path, job: str, seed: int) -> int:
    """Kill the job at random moments while it works, resuming it each time, until it ends; the kills."""
    rng = random.Random(seed)
    lock = Path(f"{db}.{job.replace(' ', '-')}.lock")
    table = {"search": "searches", "sfs": "sfs_runs", "replay": "replay_sweeps", "surface": "surfaces"}[job.split()[0]]
    process, kills = first, 0
    while True:
        deadline = time.monotonic() + 120
        while not working(lock, process) and process.poll() is None:
            assert time.monotonic() < deadline, "the job never started working"
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 1.5 if kills < KILLS else 3))
        if process.poll() is not None:
            _, err = process.communicate()
            assert process.returncode in (0, 3), err
            return kills
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
        with sqlite3.connect(db) as connection:  # killed after its job was finished: nothing left to resume
            (status,) = connection.execute(f"SELECT status FROM {table} WHERE id = 1").fetchone()
        if status == "done":
            return kills
        process = start("resume", "--db", str(db))


def test_a_search_killed_at_random_points_resumes_without_losing_or_repeating_a_trial(engine_path, tmp_path):
    db = tmp_path / "search.db"
    # A long, cheap search (20 loads of two 0.3 s trials against the engine's null target), so that
    # the kills land in every phase: start-up, prepare, trials, store writes, and resumes.
    first = start(
        "search",
        "mail",
        "--target",
        "null://",
        "--policy",
        "linear",
        "--runlength",
        "0.3",
        "--warmup",
        "0",
        "--start-rate",
        "20",
        "--max-rate",
        "400",
        "--db",
        str(db),
    )
    kills = kill_and_resume(first, db, "search 1", seed=1)
    assert kills >= KILLS
    connection = sqlite3.connect(db)
    status, result = connection.execute("SELECT status, result FROM searches WHERE id = 1").fetchone()
    assert status == "done"
    result = json.loads(result)
    trials = [
        (json.loads(spec), cost)
        for spec, cost in connection.execute(
            "SELECT spec, cost_s FROM trials WHERE search_id = 1 AND status = 'done' ORDER BY id"
        )
    ]
    # Every trial the search rests on is stored once, in the order it ran: none repeated, none lost.
    assert [(t["load"], t["runlength_s"]) for t in result["trace"]] == [
        (spec["load"]["rate"], spec["load"]["runtime_s"]) for spec, _ in trials
    ]
    assert len({spec["seed"] for spec, _ in trials}) == len(trials), "two stored trials share a seed"
    assert all(cost > 0 for _, cost in trials)
    # The null target's responses are microseconds of scheduling jitter: on a busy machine the
    # search may call them too noisy to settle. Either way it ended, with every trial kept once.
    assert result["verdict"] in ("not-saturated", "generator-bound", "noisy")


@pytest.mark.slow  # a soak of a minute: scripts/test.sh -m slow
def test_an_sfs_run_killed_at_random_points_resumes_every_load_point_once(engine_path, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    loads = list(range(20, 260, 20))
    rc = tmp_path / "sfs_rc"
    rc.write_text(f'LOAD="{" ".join(map(str, loads))}"\nMNT_POINTS={target}\nWORKLOAD=mail\nWARMUP_TIME=0\nRUNTIME=1\n')
    db = tmp_path / "sfs.db"
    kills = kill_and_resume(start("sfs", str(rc), "--db", str(db)), db, "sfs 1", seed=2)
    assert kills >= KILLS
    connection = sqlite3.connect(db)
    assert connection.execute("SELECT status FROM sfs_runs WHERE id = 1").fetchone()[0] == "done"
    done = [
        rate
        for (rate,) in connection.execute(
            "SELECT rate FROM trials WHERE sfs_run_id = 1 AND status = 'done' ORDER BY rate"
        )
    ]
    assert done == loads, "a load point was lost or measured twice"


@pytest.mark.slow  # a soak of a minute: scripts/test.sh -m slow
def test_a_replay_sweep_killed_at_random_points_resumes_every_data_set_size_once(engine_path, cli, tmp_path):
    log = tracegen.write(tmp_path / "access.log.gz", tracegen.TraceShape(requests=2000, files=100, seed=3))
    docroot = tmp_path / "www"
    built = cli("replay", "--build-docroot", str(docroot), str(log))
    assert built.returncode == 0, built.stderr
    sizes = [f"{kib}KiB" for kib in range(64, 64 * 21, 64)]  # 20 data-set sizes of 0.4 s trials
    db = tmp_path / "replay.db"
    args = ["--target", str(docroot), "--rate", "200", "--warmup", "0", "--runtime", "0.4", "--db", str(db)]
    first = start("replay", str(log), *args, "--dataset-size", ",".join(sizes))
    kills = kill_and_resume(first, db, "replay 1", seed=3)
    assert kills >= KILLS
    connection = sqlite3.connect(db)
    assert connection.execute("SELECT status FROM replay_sweeps WHERE id = 1").fetchone()[0] == "done"
    measured = [
        json.loads(spec)["replay"]["dataset_bytes"]
        for (spec,) in connection.execute(
            "SELECT spec FROM trials WHERE replay_sweep_id = 1 AND status = 'done' ORDER BY id"
        )
    ]
    assert measured == [64 * 1024 * n for n in range(1, 21)], "a data-set size was lost or measured twice"


SURFACE = """\
workload = "web-server"
target = "null://"
policy = "linear"

[search]
runlength_s = 0.3
warmup_s = 0
start_load = 50
max_load = 250

[design]
kind = "d-optimal"
samples = 6

[[factors]]
name = "a"
levels = [1, 2, 3]

[[factors]]
name = "b"
levels = [1, 2, 3]
"""


@pytest.mark.slow  # a soak of a minute: scripts/test.sh -m slow
def test_a_surface_killed_at_random_points_resumes_every_sample_without_repeating_a_trial(engine_path, tmp_path):
    # Six samples' searches of about five 0.3 s trials each against the engine's null target.
    plan = tmp_path / "surface.toml"
    plan.write_text(SURFACE)
    db = tmp_path / "surface.db"
    kills = kill_and_resume(start("surface", str(plan), "--db", str(db)), db, "surface 1", seed=4)
    assert kills >= KILLS
    connection = sqlite3.connect(db)
    assert connection.execute("SELECT status FROM surfaces WHERE id = 1").fetchone()[0] == "done"
    searches = connection.execute("SELECT id, sample, status, result FROM searches WHERE surface_id = 1").fetchall()
    assert len({sample for _, sample, _, _ in searches}) == len(searches) == 6, "a sample was searched twice"
    for search_id, _, status, result in searches:
        assert status == "done"
        trace = [(t["load"], t["runlength_s"]) for t in json.loads(result)["trace"]]
        specs = connection.execute(
            "SELECT spec FROM trials WHERE search_id = ? AND status = 'done' ORDER BY id", (search_id,)
        )
        stored = [(json.loads(spec)["load"]["rate"], json.loads(spec)["load"]["runtime_s"]) for (spec,) in specs]
        assert trace == stored, f"search {search_id}: a trial was repeated or lost"
