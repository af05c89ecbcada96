"""Running plans: command tests behind a barrier, metrics, hooks, stop rules, cache policies,
monitors, fast-fail and notify, trials, the store lock, report and compare."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from peakbench.cli import main
from peakbench.errors import RunError
from peakbench.locks import StoreLock

ROOT = os.geteuid() == 0


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def query(db, sql, *args):
    connection = sqlite3.connect(db)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in connection.execute(sql, args)]
    finally:
        connection.close()


def runs_of(db, test):
    rows = query(
        db,
        "SELECT r.* FROM plan_runs r JOIN plan_tests t ON t.id = r.test_id WHERE t.name = ? ORDER BY r.attempt",
        test,
    )
    for row in rows:
        for key in ("metrics", "threads", "hooks", "cache", "monitor", "sysinfo"):
            row[key] = json.loads(row[key]) if row[key] else None
    return rows


PY = sys.executable

THREAD_SCRIPT = """
import json, os, sys, time
start = time.time()
x = 0
while time.process_time() < 0.05:
    x += 1
print(json.dumps({"start": start, "index": int(sys.argv[1]), "env": int(os.environ["APTHREAD"]), "ops": 10}))
print("rate: 12.5 ops/s")
"""


def test_threads_start_together_and_aggregate_like_auto_pilot(cli, tmp_path):
    script = write(tmp_path / "work.py", THREAD_SCRIPT)
    plan = write(
        tmp_path / "plan.toml",
        f"""
        name = "threads"
        [[test]]
        name = "t{{n}}"
        loop = {{n = [4]}}
        threads = "{{n}}"
        command = ["{PY}", "{script}", "{{thread}}"]
        parse = "json"
        metrics = {{rate = 'rate: ([0-9.]+) ops/s'}}
        stop = {{min_runs = 2}}
    """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    runs = runs_of(db, "t4")
    assert len(runs) == 2
    for run in runs:
        threads = run["threads"]
        assert sorted(t["metrics"]["index"] for t in threads) == [1, 2, 3, 4]
        assert all(t["metrics"]["index"] == t["metrics"]["env"] == t["index"] for t in threads)
        starts = [t["metrics"]["start"] for t in threads]
        assert max(starts) - min(starts) < 0.5  # released together (generous: CI machines are busy)
        metrics = run["metrics"]
        assert metrics["elapsed"] == pytest.approx(max(t["elapsed"] for t in threads))
        assert metrics["cpu"] == pytest.approx(sum(t["user"] + t["system"] for t in threads))
        assert metrics["cpu"] >= 4 * 0.05
        assert metrics["ops"] == 40 and metrics["rate"] == 50  # parsed metrics add up over threads
        assert metrics["exit_status"] == 0
        assert "rate: 12.5" in threads[0]["stdout"]  # output kept
        assert run["sysinfo"]["kernel"] and run["monitor"]["summary"]["samples"] >= 2
    assert "getstats" in done.stdout and "COUNT" in done.stdout


def test_stop_rule_hooks_and_warm_cache(cli, tmp_path):
    log = tmp_path / "log.txt"
    values = tmp_path / "values.txt"
    # A metric that settles: 10, 30, 10, 10, 10, 10 ... (the first one is a discarded warm-up)
    values.write_text("\n".join(["99", "10", "30", "10", "10", "10", "10", "10", "10", "10"]) + "\n")
    script = write(
        tmp_path / "value.py",
        f"""
        import sys
        lines = open("{values}").read().split()
        print("value=" + lines[int(sys.argv[1]) - 1])
    """,
    )
    plan = write(
        tmp_path / "plan.toml",
        f"""
        name = "rules"
        [[test]]
        name = "settle"
        command = ["{PY}", "{script}", "{{run}}"]
        metrics = {{v = 'value=([0-9.]+)'}}
        metric = "v"
        cache = "warm"
        [test.stop]
        min_runs = 3
        check_every = 2
        until = "sdev_pct < 70 and count >= 5"
        max_runs = 8
        [test.hooks]
        presetup = [["sh", "-c", "echo presetup >> {log}"]]
        setup = [["sh", "-c", "echo setup {{run}} >> {log}"]]
        cleanup = [{{command = "echo cleanup {{run}} >> {log}; echo cleaned", shell = true}}]
        postcleanup = [["sh", "-c", "echo postcleanup >> {log}"]]
    """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    runs = runs_of(db, "settle")
    assert [r["discarded"] for r in runs] == [1, 0, 0, 0, 0, 0]
    # counted: 10 30 10 (checked at 3: count < 5) 10 10 (checked at 5: holds)
    assert [r["metrics"]["v"] for r in runs] == [99, 10, 30, 10, 10, 10]
    test = query(db, "SELECT * FROM plan_tests")[0]
    assert test["status"] == "done" and "held after 5 runs" in test["stop_reason"]
    lines = log.read_text().split("\n")
    assert lines[0] == "presetup" and lines[1] == "setup 1" and lines[2] == "cleanup 1"
    assert lines[-2] == "postcleanup" and lines.count("presetup") == 1
    assert runs[0]["hooks"][0]["phase"] == "setup" and runs[0]["hooks"][0]["exit_status"] == 0
    events = query(db, "SELECT * FROM plan_events WHERE kind = 'hook'")
    assert any("cleaned" in json.loads(e["detail"])["stdout"] for e in events)


def test_max_runs_bounds_a_rule_that_never_holds(cli, tmp_path):
    plan = write(
        tmp_path / "plan.toml",
        f"""
        [[test]]
        name = "noisy"
        command = ["{PY}", "-c", "import random; print('x=', random.random())"]
        metrics = {{x = 'x= ([0-9.e-]+)'}}
        metric = "x"
        stop = {{min_runs = 2, max_runs = 4, until = "hw_pct < 0.0001"}}
    """,
    )
    db = tmp_path / "s.db"
    assert cli("plan", "run", str(plan), "--db", str(db)).returncode == 0
    assert len(runs_of(db, "noisy")) == 4
    assert query(db, "SELECT stop_reason FROM plan_tests")[0]["stop_reason"] == "max_runs (4) reached"


def test_fast_fail_stops_the_plan_and_notifies(cli, tmp_path):
    note = tmp_path / "notified.txt"
    plan = write(
        tmp_path / "plan.toml",
        f"""
        notify = ["sh", "-c", "echo \\"$PEAKBENCH_TEST: {{error}}\\" > {note}"]
        [[test]]
        name = "ok"
        command = ["true"]
        stop = {{min_runs = 1}}
        [[test]]
        name = "broken"
        command = ["sh", "-c", "echo doomed >&2; exit 3"]
        [[test]]
        name = "never"
        command = ["true"]
    """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 1
    assert "broken" in done.stderr and "exit status 3: doomed" in done.stderr
    assert note.read_text().strip() == "broken: exit status 3: doomed"
    tests = {t["name"]: t["status"] for t in query(db, "SELECT * FROM plan_tests")}
    assert tests == {"ok": "done", "broken": "failed", "never": "pending"}
    assert query(db, "SELECT status FROM plans")[0]["status"] == "failed"
    failed = runs_of(db, "broken")
    assert failed[0]["status"] == "failed" and "doomed" in failed[0]["threads"][0]["stderr"]


def test_on_failure_continue_goes_on_and_timeouts_fail_a_run(cli, tmp_path):
    plan = write(
        tmp_path / "plan.toml",
        """
        [[test]]
        name = "slow"
        command = ["sleep", "30"]
        timeout = "0.5s"
        on_failure = "continue"
        [[test]]
        name = "after"
        command = ["true"]
        stop = {min_runs = 1}
    """,
    )
    db = tmp_path / "s.db"
    started = time.monotonic()
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert time.monotonic() - started < 20
    assert done.returncode == 1, done.stderr
    assert "timed out" in done.stderr
    tests = {t["name"]: t["status"] for t in query(db, "SELECT * FROM plan_tests")}
    assert tests == {"slow": "failed", "after": "done"}


def test_a_hook_that_fails_or_hangs_fails_its_test(cli, tmp_path):
    plan = write(
        tmp_path / "plan.toml",
        """
        [[test]]
        name = "bad-setup"
        command = ["true"]
        hooks = {setup = [{argv = ["sleep", "30"], timeout = "0.3s"}]}
    """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 1 and "setup hook 1 (sleep 30) failed: timed out" in done.stderr


def _busy_named(name: bytes):
    code = (
        "import ctypes, time\n"
        f"ctypes.CDLL(None).prctl(15, {name!r}, 0, 0, 0)\n"
        "end = time.time() + 60\n"
        "while time.time() < end: pass\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def test_monitors_sample_cpu_memory_and_named_processes(cli, tmp_path):
    server = _busy_named(b"pbserver")
    try:
        time.sleep(0.3)
        plan = write(
            tmp_path / "plan.toml",
            """
            [[test]]
            name = "watch"
            command = ["sleep", "1"]
            monitor = {interval = "0.1s", processes = ["pbserver"]}
            stop = {min_runs = 1}
        """,
        )
        db = tmp_path / "s.db"
        assert cli("plan", "run", str(plan), "--db", str(db)).returncode == 0
    finally:
        server.kill()
        server.wait()
    run = runs_of(db, "watch")[0]
    summary = run["monitor"]["summary"]
    assert summary["samples"] >= 8
    assert 0.05 < summary["proc_cpu_s"]["pbserver"] <= 1.3  # it spun (as much as a busy machine let it)
    assert summary["cpu_busy_pct"] > 20 and summary["mem_available_end_mb"] > 0
    assert run["metrics"]["mon_cpu_s_pbserver"] == summary["proc_cpu_s"]["pbserver"]
    assert len(run["monitor"]["series"]) >= 8


def test_trial_tests_with_clients_split_as_the_cluster_does_start_together_and_merge(engine_path, cli, tmp_path):
    plan = write(
        tmp_path / "plan.toml",
        """
        [[test]]
        name = "null-{rate}"
        loop = {rate = [400]}
        workload = "web-server"
        target = "null://"
        rate = "{rate}"
        clients = 2
        max_outstanding = 8
        warmup = 0
        runtime = "1s"
        stop = {min_runs = 2}
    """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    runs = runs_of(db, "null-400")
    assert len(runs) == 2
    for run in runs:
        # One trial per run, stored by the one trial path as `run --clients 2` stores it: merged, with
        # each client's own figures beside the merged ones.
        (trial_id,) = json.loads(run["trial_ids"])
        (trial,) = query(db, "SELECT * FROM trials WHERE id = ?", trial_id)
        result = json.loads(trial["result"])
        assert [c["requested_rate"] for c in result["clients"]] == [200.0, 200.0]
        # "Clients" as in `run --clients`: the in-flight cap split too, and one start instant with the
        # two metronomes interleaved (client 2 starts half an aggregate interval after client 1).
        clients = run["threads"]
        assert [c["rate"] for c in clients] == [200.0, 200.0]
        assert [c["max_outstanding"] for c in clients] == [4, 4]
        assert clients[1]["start_at_unix_s"] - clients[0]["start_at_unix_s"] == pytest.approx(1 / 400, abs=1e-6)
        assert all(c["start_late_ms"] < 50 for c in result["clients"])  # each started at its instant
        assert run["metrics"]["completed"] == result["completed"] == sum(c["completed"] for c in result["clients"])
        assert run["metrics"]["achieved_rate"] == pytest.approx(400, rel=0.1)
        assert run["metrics"]["mean_ms"] >= 0 and "p99_ms" in run["metrics"]
        assert run["sysinfo"]["engine_version"]
    assert len(query(db, "SELECT id FROM trials")) == 2


def test_two_plans_cannot_share_a_store(tmp_path):
    db = tmp_path / "s.db"
    first = StoreLock(db)
    first.acquire("running plan one")
    try:
        with pytest.raises(RunError, match="in use by another peakbench plan .*running plan one"):
            StoreLock(db).acquire("running plan two")
    finally:
        first.release()
    second = StoreLock(db)
    second.acquire("now free")
    second.release()


def test_report_and_compare_from_the_store(cli, tmp_path):
    plan = write(
        tmp_path / "plan.toml",
        f"""
        [[test]]
        name = "v-{{mean}}"
        loop = {{mean = [10, 20]}}
        command = ["{PY}", "-c", "import random; print('v=%f' % random.gauss({{mean}}, 0.5))"]
        metrics = {{v = 'v=([0-9.]+)'}}
        metric = "v"
        stop = {{min_runs = 6}}
    """,
    )
    db = tmp_path / "s.db"
    assert cli("plan", "run", str(plan), "--db", str(db)).returncode == 0
    out = tmp_path / "report.json"
    done = cli("plan", "report", "--db", str(db), "--json", str(out))
    assert done.returncode == 0 and "v-20" in done.stdout
    data = json.loads(out.read_text())
    rows = [r for r in data["getstats"] if r["metric"] == "v"]
    assert [r["test"] for r in rows] == ["v-10", "v-20"]
    assert rows[0]["O/H"] is None and rows[1]["O/H"] == pytest.approx(100, abs=15)
    compared = tmp_path / "cmp.json"
    done = cli("compare", "v-10", "v-20", "--db", str(db), "--json", str(compared))
    assert done.returncode == 0, done.stderr
    assert "verdict" in done.stdout and "v-20 (plan 1) is larger" in done.stdout
    result = json.loads(compared.read_text())
    assert result["differ"] and result["welch"]["high"] < 0
    numbers = tmp_path / "a.txt"
    numbers.write_text("1 2 3\n4\n")
    assert cli("compare", str(numbers), str(numbers)).returncode == 0
    bad = cli("compare", "v-10", "nope", "--db", str(db))
    assert bad.returncode == 2 and "no test 'nope'" in bad.stderr
    listing = cli("plan", "list", "--db", str(db))
    assert listing.returncode == 0 and "2/2" in listing.stdout


@pytest.mark.skipif(not ROOT, reason="drop_caches and chill need root")
def test_drop_caches_and_chill(cli, tmp_path):
    plan = write(
        tmp_path / "plan.toml",
        """
        [[test]]
        name = "cold"
        command = ["true"]
        cache = {policy = ["drop", "chill"], chill = "64MiB"}
        stop = {min_runs = 1}
    """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    cache = runs_of(db, "cold")[0]["cache"]
    assert [c["policy"] for c in cache] == ["drop", "chill"]
    assert 0 < cache[1]["allocated_mb"] <= 64


def test_a_second_plan_on_a_busy_store_is_refused(cli, tmp_path):
    slow = write(tmp_path / "slow.toml", '[[test]]\nname = "slow"\ncommand = ["sleep", "600"]\nstop = {min_runs = 1}\n')
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")}
    first = subprocess.Popen(
        [sys.executable, "-m", "peakbench.cli", "plan", "run", str(slow), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            db.exists()
            and query(db, "SELECT 1 FROM sqlite_master WHERE name = 'plans'")
            and query(db, "SELECT id FROM plans")
        ):
            time.sleep(0.05)
        second = cli("plan", "run", str(slow), "--db", str(db))
        assert second.returncode == 1
        assert "is in use by another peakbench plan (pid" in second.stderr and second.stderr.count("\n") == 1
        resumed = cli("plan", "resume", "--db", str(db))
        assert resumed.returncode == 1 and "in use" in resumed.stderr
    finally:
        first.kill()
        first.communicate(timeout=120)
    assert len(query(db, "SELECT * FROM plans")) == 1 and query(db, "SELECT * FROM plan_runs") == []


@pytest.mark.integration
def test_a_plan_of_several_tests_runs_them_in_turn(tmp_path, capsys):
    # Tests compared with each other share the machine's drift only when their runs alternate: back to
    # back, equal tests were declared different in 10% of A/A pairs at alpha 5% (BENCHMARKS §9), so a plan
    # without if/while interleaves unless told not to.
    log = tmp_path / "order.log"
    tests = "".join(
        f"""
        [[test]]
        name = "{name}"
        command = ["sh", "-c", "echo {name} >> {log}"]
        stop = {{min_runs = 3, max_runs = 3}}
        """
        for name in ("a", "b")
    )
    plan = write(tmp_path / "plan.toml", textwrap.dedent(tests))  # no `interleave`: the default
    db = tmp_path / "s.db"
    assert main(["plan", "run", str(plan), "--db", str(db)]) == 0
    assert log.read_text().split() == ["a", "b"] * 3
    assert [len(runs_of(db, name)) for name in ("a", "b")] == [3, 3]
    capsys.readouterr()
    assert main(["compare", "a", "b", "--metric", "elapsed", "--db", str(db)]) == 0
    verdict = capsys.readouterr().out
    assert "verdict" in verdict and "interleave" not in verdict


@pytest.mark.integration
def test_compare_of_runs_back_to_back_states_the_measured_aa_rate(tmp_path, capsys):
    # interleave = false keeps each test's runs together; compare's alpha then understates its A/A rate.
    tests = "".join(
        f"""
        [[test]]
        name = "{name}"
        command = ["true"]
        stop = {{min_runs = 3, max_runs = 3}}
        """
        for name in ("a", "b")
    )
    plan = write(tmp_path / "plan.toml", "interleave = false\n" + textwrap.dedent(tests))
    db = tmp_path / "s.db"
    assert main(["plan", "run", str(plan), "--db", str(db)]) == 0
    assert [r["test_id"] for r in query(db, "SELECT test_id FROM plan_runs ORDER BY id")] == [1, 1, 1, 2, 2, 2]
    capsys.readouterr()
    assert main(["compare", "a", "b", "--metric", "elapsed", "--db", str(db), "--json", str(tmp_path / "c.json")]) == 0
    verdict = " ".join(capsys.readouterr().out.split())
    assert "rests on runs run back to back" in verdict and "10.8% of 1600 at alpha 0.05" in verdict
    assert json.loads((tmp_path / "c.json").read_text())["interleaved"] is False


def test_an_interleaved_plan_with_a_condition_is_refused_with_its_line(cli, tmp_path):
    # A condition reads earlier tests' results, which interleaved tests have not finished when it comes up.
    plan = write(
        tmp_path / "plan.toml",
        """
        interleave = true
        [[test]]
        name = "a"
        command = ["true"]
        [[test]]
        name = "b"
        command = ["true"]
        if = "result('a', 'count') > 0"
        """,
    )
    checked = cli("plan", "check", str(plan))
    assert checked.returncode == 2
    assert "plan.toml:8" in checked.stderr and "interleave" in checked.stderr
