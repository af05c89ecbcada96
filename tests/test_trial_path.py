"""The one trial path: what a user gets back when the store refuses, is read-only or is busy.

Read-only stores are real read-only bind mounts (root), and a busy store is a
second SQLite connection holding the write lock, as another peakbench would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli


@contextlib.contextmanager
def read_only(directory: Path):
    """`directory` bind-mounted read-only onto itself: not even root can write there."""
    subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(directory)], check=True)
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=True)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="read-only bind mounts need root")


@needs_root
def test_a_store_that_cannot_be_written_is_refused_before_anything_is_measured(engine_path, tmp_path):
    (tmp_path / "archive").mkdir()
    target = tmp_path / "target"
    target.mkdir()
    with read_only(tmp_path / "archive") as archive:
        started = time.monotonic()
        done = run_cli(
            "run",
            "mail",
            "--target",
            str(target),
            "--rate",
            "50",
            "--warmup",
            "0",
            "--runtime",
            "60",
            "--db",
            str(archive / "peakbench.db"),
        )
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "peakbench.db" in done.stderr and "cannot write the store" in done.stderr
    assert took < 45, "the trial ran before the store was refused"
    assert not any(target.iterdir()), "a file set was built for a trial that cannot be kept"


@needs_root
def test_a_read_only_store_can_be_listed_and_reported(engine_path, tmp_path):
    store = tmp_path / "archive" / "peakbench.db"
    store.parent.mkdir()
    made = run_cli(
        "run", "mail", "--target", "null://", "--rate", "200", "--warmup", "0", "--runtime", "1", "--db", str(store)
    )
    assert made.returncode == 0, made.stderr
    with read_only(store.parent):
        listed = run_cli("results", "list", "--db", str(store), "--json", "-")
        report = run_cli("report", "trial:1", "--db", str(store), "--html", str(tmp_path / "r.html"))
    assert listed.returncode == 0, listed.stderr
    (job,) = json.loads(listed.stdout)
    assert job["kind"] == "trial" and job["status"] == "done" and job["verdict"].startswith("achieved")
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r.html").stat().st_size > 10_000


def _ends_on_a_busy_store(run: subprocess.Popen, blocker: sqlite3.Connection) -> tuple[str, str]:
    """Let `run` finish while `blocker` holds the store's write lock, then release it; its (stdout,
    stderr), having checked that it failed saying the store could not take the trial."""
    try:
        out, err = run.communicate(timeout=120)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert run.returncode == 1, err
    assert "could not take the trial" in err and "database is locked" in err
    return out, err


def test_a_measured_trial_the_store_cannot_take_is_written_out(engine_path, tmp_path):
    """The store is busy (another process holds its write lock) when the trial ends: the result goes
    to --json and to a file beside the store, and the user is told where; nothing measured is lost."""
    store = tmp_path / "peakbench.db"
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    command = [
        sys.executable,
        "-m",
        "peakbench.cli",
        "run",
        "mail",
        "--target",
        "null://",
        "--rate",
        "300",
        "--warmup",
        "0",
        "--runtime",
        "3",
        "--db",
        str(store),
        "--json",
        str(tmp_path / "out.json"),
    ]
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while True:  # wait until the run has opened (created) the store, then take its write lock
        assert time.monotonic() < deadline and run.poll() is None, run.communicate()
        try:
            blocker = sqlite3.connect(store, timeout=0.1, isolation_level=None)
            if blocker.execute("SELECT count(*) FROM sqlite_master WHERE name = 'trials'").fetchone()[0]:
                blocker.execute("BEGIN EXCLUSIVE")
                break
            blocker.close()
        except sqlite3.OperationalError:
            pass
        time.sleep(0.05)
    out, err = _ends_on_a_busy_store(run, blocker)
    saved = sorted(tmp_path.glob("peakbench-unstored-trial-*.json"))
    assert len(saved) == 1 and str(saved[0]) in err
    kept = json.loads(saved[0].read_text())
    assert kept["result"]["latency"]["count"] > 500 and kept["spec"]["load"]["rate"] == 300
    reported = json.loads((tmp_path / "out.json").read_text())
    assert reported["trial_id"] is None and reported["latency"]["count"] == kept["result"]["latency"]["count"]
    assert "per-operation breakdown" in out  # the figures were printed too


@pytest.mark.integration
def test_a_simulated_search_is_stored_and_listed(tmp_path):
    store = tmp_path / "s.db"
    done = run_cli("search", "mail", "--target", "sim://?capacity=800", "--quick", "--db", str(store), "--json", "-")
    assert done.returncode in (0, 3), done.stderr
    printed = json.loads(done.stdout)
    assert isinstance(printed["search_id"], int)
    listed = run_cli("results", "list", "--kind", "search", "--db", str(store), "--json", "-")
    (job,) = json.loads(listed.stdout)
    assert job["kind"] == "search" and job["id"] == printed["search_id"]
    assert job["verdict"] == printed["message"] and job["target"] == "sim://?capacity=800"
    assert run_cli("results", "list", "--kind", "trial", "--db", str(store), "--json", "-").stdout.strip() == "[]"


def test_version_names_peakbench_and_its_engine(engine_path):
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("peakbench 0.") and "peakbench-engine" in done.stdout


def as_a_terminal_job() -> None:
    """In the child: take SIGINT's default, as a shell does for a job it runs in the foreground. A
    test run started in the background of a non-interactive shell inherits SIGINT ignored, and a
    Python started so never sees a Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _measuring_run(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    """`peakbench run` of a 60 s trial on null:// in its own session, as a terminal's foreground job,
    once its measured window has begun; (the process, its store, its --json file)."""
    store, out = tmp_path / "p.db", tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "peakbench.cli",
            "run",
            "mail",
            "--target",
            "null://",
            "--rate",
            "300",
            "--warmup",
            "0",
            "--runtime",
            "60",
            "--db",
            str(store),
            "--json",
            str(out),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_a_terminal_job,
    )
    deadline = time.monotonic() + 60
    while "measure" not in (progress := run.stderr.readline()):  # the measured window has begun
        assert progress and time.monotonic() < deadline, "the trial never started measuring"
    return run, store, out


def _kept_as_interrupted(run: subprocess.Popen, store: Path, out: Path) -> None:
    """`run`, stopped 2 s into its window, stored, wrote and printed the part it measured."""
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 130, stderr
    assert "interrupted after" in stderr and "stored as interrupted trial 1" in stderr
    assert "per-operation breakdown" in stdout
    kept = json.loads(out.read_text())
    assert kept["interrupted"] is True and kept["trial_id"] == 1
    assert 1.5 < kept["runtime_s"] < 30
    assert kept["latency"]["count"] > 300 and abs(kept["achieved_rate"] - 300) < 30
    status, result = sqlite3.connect(store).execute("SELECT status, result FROM trials WHERE id = 1").fetchone()
    assert status == "interrupted" and json.loads(result)["runtime_s"] == kept["runtime_s"]


def test_ctrl_c_during_a_run_keeps_and_prints_what_was_measured(engine_path, tmp_path):
    """Ctrl-C (SIGINT to the foreground process group, as a terminal sends it) ends the window early:
    the engine reports the part measured, marked interrupted, and peakbench stores and prints it. The
    engine gets the signal twice (from the terminal, and passed on by peakbench) and stops once."""
    run, store, out = _measuring_run(tmp_path)
    time.sleep(2)
    os.killpg(run.pid, signal.SIGINT)
    _kept_as_interrupted(run, store, out)


def test_sigint_to_peakbench_alone_keeps_what_was_measured(engine_path, tmp_path):
    """`kill -INT` of peakbench's own pid reaches it and not its engine: peakbench passes the stop on,
    so the window ends early and is kept, rather than the engine measuring to its end unheard."""
    run, store, out = _measuring_run(tmp_path)
    time.sleep(2)
    stopped = time.monotonic()
    run.send_signal(signal.SIGINT)
    _kept_as_interrupted(run, store, out)
    assert time.monotonic() - stopped < 20, "the engine was not told to stop"


def _plan_process(tmp_path: Path, runtime: str, clients: int = 1) -> tuple[subprocess.Popen, Path]:
    """`peakbench plan run` of one trial test on null:// with `clients` load clients, in its own session,
    waiting until its window is being measured; (the process, its store)."""
    plan, store = tmp_path / "plan.toml", tmp_path / "p.db"
    plan.write_text(
        "[[test]]\n"
        'name = "null"\nworkload = "mail"\ntarget = "null://"\nrate = 300\nwarmup = 0\n'
        f'runtime = "{runtime}"\nthreads = {clients}\nstop = {{min_runs = 1, max_runs = 1}}\n'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    command = [sys.executable, "-m", "peakbench.cli", "plan", "run", str(plan), "--db", str(store)]
    run = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_a_terminal_job,
    )
    deadline = time.monotonic() + 60
    while "measure" not in (progress := run.stderr.readline()):  # the measured window has begun
        assert progress and time.monotonic() < deadline, "the trial never started measuring"
    return run, store


@pytest.mark.integration
def test_a_plan_trial_the_store_cannot_take_is_written_out_and_the_plan_resumes(engine_path, tmp_path):
    """The store is busy when a plan's trial ends: the trial goes to a file beside the store, the plan
    stops saying where, and `plan resume` finishes it once the store is free."""
    run, store = _plan_process(tmp_path, "3s")
    blocker = sqlite3.connect(store, timeout=10, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    _, err = _ends_on_a_busy_store(run, blocker)
    (saved,) = tmp_path.glob("peakbench-unstored-trial-*.json")
    assert str(saved) in err
    kept = json.loads(saved.read_text())
    assert kept["result"]["latency"]["count"] > 500 and kept["notes"] == ["plan 1 (plan), test null, run 1"]
    resumed = run_cli("plan", "resume", "--db", str(store), timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    (trial_ids,) = sqlite3.connect(store).execute("SELECT trial_ids FROM plan_runs").fetchone()
    assert json.loads(trial_ids) == [1]


@pytest.mark.integration
def test_ctrl_c_during_a_plan_trial_keeps_what_it_measured(engine_path, tmp_path):
    """Ctrl-C in a plan's trial: the part measured is stored as an interrupted trial named after its
    plan, test and run; the run itself is not committed, so `plan resume` runs it again."""
    run, store = _plan_process(tmp_path, "60s")
    time.sleep(2)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=90)
    assert run.returncode == 130, err
    assert "null run 1: interrupted after " in err and "what it measured is stored as interrupted trial 1" in err
    connection = sqlite3.connect(store)
    status, result, notes = connection.execute("SELECT status, result, notes FROM trials").fetchone()
    assert status == "interrupted" and json.loads(notes) == ["plan 1 (plan), test null, run 1"]
    measured = json.loads(result)
    assert measured["interrupted"] is True and 1.5 < measured["runtime_s"] < 30
    assert measured["latency"]["count"] > 300
    assert connection.execute("SELECT COUNT(*) FROM plan_runs").fetchone()[0] == 0
    assert connection.execute("SELECT status FROM plans").fetchone()[0] == "running"


@pytest.mark.integration
def test_ctrl_c_during_a_two_client_plan_trial_keeps_both_clients_window(engine_path, tmp_path):
    """Ctrl-C reaches two load clients' engines milliseconds apart: what both measured is stored as one
    interrupted trial over the window they share, its figures printed, and the plan stays resumable."""
    run, store = _plan_process(tmp_path, "60s", clients=2)
    time.sleep(2)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=90)
    assert run.returncode == 130, err
    connection = sqlite3.connect(store)
    status, result = connection.execute("SELECT status, result FROM trials").fetchone()
    assert status == "interrupted"
    merged = json.loads(result)
    window = merged["window"]
    assert merged["interrupted"] is True and len(window["clients_runtime_s"]) == 2
    assert merged["runtime_s"] == min(window["clients_runtime_s"]) and 1.5 < merged["runtime_s"] < 30
    assert window["to_unix_s"] - window["from_unix_s"] == pytest.approx(merged["runtime_s"], abs=0.05)
    assert [client["name"] for client in merged["clients"]] == ["client1", "client2"]
    assert merged["latency"]["count"] == sum(client["completed"] for client in merged["clients"]) > 300
    assert 250 < merged["achieved_rate"] < 350  # 300 ops/s offered, split in two
    line = f"interrupted after {merged['runtime_s']:.1f} of 60 s measured (the window all 2 clients measured)"
    assert f"null run 1: {line}: {merged['achieved_rate']:.1f} ops/s achieved" in err
    assert connection.execute("SELECT COUNT(*) FROM plan_runs").fetchone()[0] == 0
    assert connection.execute("SELECT status FROM plans").fetchone()[0] == "running"


class LosesAClosedLoopClient:
    """An engine whose run loses one of two closed-loop load clients (as a replay with --load-clients
    runs): a fake, because which client a real cluster loses, and when, cannot be chosen."""

    def __init__(self, survivor: dict):
        self.survivor = survivor

    def run(self, spec: dict, on_progress=None) -> dict:
        from peakbench.cluster.fanout import ClientRun, ClientsLost, DistributedTrial
        from peakbench.cluster.merge import merge_results

        merged = merge_results([self.survivor], ["client-0"])
        runs = [ClientRun("client-0", "w0", "host", spec, self.survivor), ClientRun("client-1", "w1", "host", spec)]
        runs[1].lost = True
        raise ClientsLost(DistributedTrial(spec, runs, merged, "lost-clients", "lost client-1"))


def test_a_lost_closed_loop_client_is_stored_as_failed_naming_what_the_other_achieved(tmp_path):
    """A closed loop offers no rate: the failed trial's note says what the survivor achieved, instead of
    the note's formatting of the missing offered rate ending the command with a TypeError."""
    import random

    from peakbench.store import Store
    from peakbench.trials import TrialFailed, TrialRecord, run_trial
    from test_cluster_merge import fake_result

    survivor, _, _ = fake_result(random.Random(3), 100.0)
    survivor["requested_rate"] = None  # closed loop
    spec = {"load": {"rate": 0.0, "clients": 2, "warmup_s": 0.0, "runtime_s": 1.0}}
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(TrialFailed, match="lost client-1") as failed:
            run_trial(
                spec, LosesAClosedLoopClient(survivor), store, TrialRecord("replay", "http://x", {}), prepare=False
            )
        (trial,) = store.trials()
    assert trial["id"] == failed.value.trial_id and trial["status"] == "failed"
    assert f"client-0 achieved {survivor['achieved_rate']:.1f} ops/s" in " ".join(trial["notes"])
