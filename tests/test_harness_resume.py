"""Crash safety: SIGKILL the controller at random points (hooks, commands, trials, commits),
`plan resume` until it finishes; no completed run is repeated or lost, none is partial,
and the store passes SQLite's integrity check."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

from conftest import REPO
from peakbench.harness import stoprule

WORK = """
import json, os, random, sys, time
test, attempt = sys.argv[1], int(sys.argv[2])
time.sleep(random.uniform(0.05, 0.25))
token = random.getrandbits(40)
value = random.uniform(90, 110)
with open(sys.argv[3], "a") as ledger:
    ledger.write(f"{test} {attempt} {os.environ['PEAKBENCH_THREAD']} {token}\\n")
print(json.dumps({"token": token, "v": value}))
"""


def cli_process(*args, env_extra=None):
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "peakbench.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def started(db) -> bool:
    if not db.exists():
        return False
    connection = sqlite3.connect(db)
    try:
        return bool(connection.execute("SELECT COUNT(*) FROM plans").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return False
    finally:
        connection.close()


def resume_events(db) -> int:
    if not started(db):
        return 0
    connection = sqlite3.connect(db)
    try:
        return connection.execute(
            "SELECT COUNT(*) FROM plan_events WHERE kind = 'resume' AND test_id IS NULL"
        ).fetchone()[0]
    finally:
        connection.close()


def test_sigkill_at_random_points_then_resume(engine_path, tmp_path):
    ledger = tmp_path / "ledger.txt"
    script = tmp_path / "work.py"
    script.write_text(WORK)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        textwrap.dedent(f"""
        name = "crashy"
        [defaults]
        stop = {{min_runs = 3, max_runs = 7, until = "hw_pct < 2.5"}}
        hooks = {{presetup = [["sleep", "0.2"]], setup = [["sleep", "0.1"]], cleanup = [["sleep", "0.05"]]}}
        [[test]]
        name = "cmd-{{n}}"
        loop = {{n = {{from = 1, to = 2}}}}
        threads = "{{n}}"
        command = ["{sys.executable}", "{script}", "cmd-{{n}}", "{{run}}", "{ledger}"]
        parse = "json"
        metric = "v"
        [[test]]
        name = "trial"
        workload = "web-server"
        target = "null://"
        rate = 200
        warmup = 0
        runtime = "0.5s"
        stop = {{min_runs = 3, max_runs = 4}}
        [[test]]
        name = "cmd-last"
        command = ["{sys.executable}", "{script}", "cmd-last", "{{run}}", "{ledger}"]
        parse = "json"
        metric = "v"
    """)
    )
    db = tmp_path / "s.db"
    env = {"PEAKBENCH_TEST_COMMIT_DELAY": "0.05"}
    rng = random.Random(4)
    kills = 0
    process = cli_process("plan", "run", str(plan), "--db", str(db), env_extra=env)
    for round_number in range(40):
        try:
            # Once this controller is at work (the plan stored, or its resume recorded; starting
            # Python takes a while), let it run a random while, then kill it, unless it finished first.
            before = resume_events(db)
            deadline = time.monotonic() + 120
            while (
                process.poll() is None
                and time.monotonic() < deadline
                and not (started(db) and (round_number == 0 or resume_events(db) > before))
            ):
                time.sleep(0.02)
            process.wait(timeout=rng.uniform(0.1, 2.5) if round_number < 12 else 600)
            out, err = process.communicate()
            if process.returncode == 0:
                break
            assert "nothing to resume" not in err, err
            assert process.returncode == 0, err
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.communicate()
            kills += 1
        time.sleep(rng.uniform(0, 0.2))
        if started(db):
            process = cli_process("plan", "resume", "--db", str(db), env_extra=env)
        else:  # killed before the plan was stored: nothing to resume, start it again
            process = cli_process("plan", "run", str(plan), "--db", str(db), env_extra=env)
    else:
        raise AssertionError("the plan never finished")
    assert kills >= 5

    connection = sqlite3.connect(db)
    connection.row_factory = sqlite3.Row
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert connection.execute("SELECT status FROM plans").fetchone()[0] == "done"
    tests = connection.execute("SELECT * FROM plan_tests ORDER BY seq").fetchall()
    assert [t["name"] for t in tests] == ["cmd-1", "cmd-2", "trial", "cmd-last"]
    ledger_lines = [line.split() for line in ledger.read_text().splitlines()]
    for test in tests:
        assert test["status"] == "done", dict(test)
        settings = json.loads(test["settings"])
        runs = connection.execute(
            "SELECT * FROM plan_runs WHERE test_id = ? ORDER BY attempt", (test["id"],)
        ).fetchall()
        assert all(r["status"] == "done" for r in runs)
        assert [r["attempt"] for r in runs] == list(range(1, len(runs) + 1))  # none lost, none twice
        metrics = [json.loads(r["metrics"]) for r in runs]
        # The stop rule stopped exactly where it should on these stored runs: never earlier, never later.
        for count in range(1, len(metrics) + 1):
            decision, _ = stoprule.decide(settings["stop"], settings["metric"], metrics[:count])
            assert (decision is not None) == (count == len(metrics)), (test["name"], count, decision)
        if test["kind"] == "command":
            for run in runs:
                threads = json.loads(run["threads"])
                assert len(threads) == settings["threads"]  # no partial run: every thread is there
                for thread in threads:
                    token = str(int(thread["metrics"]["token"]))
                    key = [test["name"], str(run["attempt"]), str(thread["index"])]
                    executions = [line for line in ledger_lines if line[:3] == key]
                    # the stored execution is the last one of its attempt: nothing ran it again after it was kept
                    assert executions[-1][3] == token, (key, executions)
        else:
            for run in runs:
                trial_ids = json.loads(run["trial_ids"])
                assert len(trial_ids) == 1
                assert connection.execute("SELECT status FROM trials WHERE id = ?", trial_ids).fetchone()[0] == "done"
    # A trial is stored as soon as it is measured (the one trial path), before its run is committed. So
    # every trial belongs to a committed run, or to an attempt a kill cut short and resume ran again:
    # kept, not lost, and named by its note; never linked twice.
    linked = [i for (ids,) in connection.execute("SELECT trial_ids FROM plan_runs") for i in json.loads(ids)]
    assert len(linked) == len(set(linked))
    committed = {
        f"test {t['name']}, run {r['attempt']}"
        for t in tests
        for r in connection.execute("SELECT attempt FROM plan_runs WHERE test_id = ?", (t["id"],))
    }
    for trial_id, notes in connection.execute("SELECT id, notes FROM trials"):
        if trial_id not in linked:
            (note,) = json.loads(notes)
            assert note.split(", ", 1)[1] in committed, note
    assert resume_events(db) >= kills and connection.execute("SELECT COUNT(*) FROM plans").fetchone()[0] == 1
    connection.close()
