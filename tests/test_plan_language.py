"""The one plan language as a user runs it: IF/ELSE and a bounded WHILE decided from stored results,
search, surface, sfs and replay steps calling those commands, the reboot cache policy survived with
a kill -9 standing in for the reboot, and every example in docs/plans.md."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from peakbench import searching, surfaceplan
from peakbench.cli import main
from peakbench.errors import InputError
from peakbench.harness import importing, report, runner
from peakbench.harness.plan import load_plan
from peakbench.store import Store
from test_harness_run import query as rows
from test_harness_run import write

PY = sys.executable
DOC = Path(__file__).resolve().parents[1] / "docs" / "plans.md"
# Prints its name=value arguments as a JSON object (written without braces, which plans template).
EMIT = "import json, sys; print(json.dumps(dict((a.split('=')[0], float(a.split('=')[1])) for a in sys.argv[1:])))"


def stored_tests(db):
    found = rows(
        db,
        "SELECT t.name, t.status, t.stop_reason, r.metrics FROM plan_tests t"
        " LEFT JOIN plan_runs r ON r.test_id = t.id ORDER BY t.seq, r.attempt",
    )
    return {r["name"]: r for r in found}, found


def test_if_else_and_while_follow_the_stored_results(cli, tmp_path):
    plan = write(
        tmp_path / "flow.toml",
        f"""
        name = "flow"
        [defaults]
        parse = "json"
        stop = {{min_runs = 1}}

        [[test]]
        name = "probe"
        command = ["{PY}", "-c", "{EMIT}", "value=7"]
        metric = "value"

        [[test]]
        name = "big"
        if = "result('probe') > 5"
        command = ["{PY}", "-c", "{EMIT}", "branch=1"]
        metric = "branch"
        [test.else]
        command = ["{PY}", "-c", "{EMIT}", "branch=2"]

        [[test]]
        name = "small"
        if = "result('probe', 'max') > 100"
        command = ["{PY}", "-c", "{EMIT}", "branch=1"]
        metric = "branch"
        else = {{command = ["{PY}", "-c", "{EMIT}", "branch=2"]}}

        [[test]]
        name = "never"
        if = "result('probe') > 100"
        command = ["{PY}", "-c", "{EMIT}", "branch=1"]
        metric = "branch"

        [[test]]
        name = "grow-{{iteration}}"
        while = "last.value < 3"
        max_iterations = 10
        command = ["{PY}", "-c", "{EMIT}", "value={{iteration}}"]
        metric = "value"
        """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    named, found = stored_tests(db)
    assert json.loads(named["big"]["metrics"])["branch"] == 1
    assert json.loads(named["small"]["metrics"])["branch"] == 2  # the else branch ran
    assert named["never"]["status"] == "skipped" and named["never"]["metrics"] is None
    ran = [r["name"] for r in found if r["name"].startswith("grow") and r["status"] == "done"]
    assert ran == ["grow-1", "grow-2", "grow-3"]  # the third iteration made last.value < 3 false
    skipped = [r for r in found if r["name"].startswith("grow") and r["status"] == "skipped"]
    assert len(skipped) == 7
    assert "no longer held after iteration 3" in named["grow-4"]["stop_reason"]
    assert "skipped (the while loop ended" in done.stderr


@pytest.mark.parametrize(
    ("test", "field", "words"),
    [
        ("if = \"result('later') > 1\"", "test[0].if", "must name a test that runs earlier"),
        ('while = "last.x < 1"', "test[0].while", "needs max_iterations"),
        ('while = "last.x < 1"\nmax_iterations = 0', "test[0].max_iterations", "from 1 to 1,000"),
        ("else = {shell = true}", "test[0].else", "belongs to a test with if"),
        ('if = "nosuch > 1"', "test[0].if", "unknown name 'nosuch'"),
        ('cache = {policy = ["reboot"]}', "test[0].cache", "needs its command"),
        (
            'kind = "search"\nworkload = "mail"\ntarget = "sim://?capacity=100"\nargs = ["--rsat", "x"]',
            "test[0].args",
            "--rsat: 'x' is not a number",
        ),
        ('kind = "sfs"', "test[0]", "needs 'rcfile'"),
        (
            'kind = "surface"\nworkload = "mail"\ntarget = "sim://?capacity={n}"\nfactors = [{name = "n", levels = [1, 2]}]\n'
            'design = {kind = "full-factorial", samples = 3}',
            "test[0].design.samples",
            "samples is for d-optimal",
        ),
        ('log = "x.log"', "test[0].log", "belongs to a replay step"),
    ],
)
def test_mistakes_in_control_flow_and_steps_name_their_line(tmp_path, test, field, words):
    text = f'[[test]]\nname = "a"\ncommand = ["true"]\n{test}\n[[test]]\nname = "later"\ncommand = ["true"]\n'
    if "kind" in test:
        text = text.replace('command = ["true"]\n', "", 1)
    plan = write(tmp_path / "bad.toml", text)
    with pytest.raises(InputError) as caught:
        load_plan(plan)  # what `plan check` and `plan run` call first (exit 2 with this one line)
    error = str(caught.value)
    assert len(error.splitlines()) == 1, error
    assert re.match(rf"{re.escape(str(plan))}:\d+: ", error) and field in error and words in error, error


def test_search_surface_and_sfs_steps_run_those_commands_into_the_plans_store(engine_path, cli, tmp_path):
    target = tmp_path / "sfs"
    target.mkdir()
    write(tmp_path / "sfs_rc", f"LOAD=100\nMNT_POINTS={target}\nWARMUP_TIME=0.5\nRUNTIME=1\n")
    plan = write(
        tmp_path / "steps.toml",
        """
        name = "steps"
        [vars]
        capacity = 400

        [[test]]
        name = "peak"
        kind = "search"
        workload = "mail"
        target = "sim://?capacity={capacity}"
        args = ["--quick", "--seed", "5"]

        [[test]]
        name = "map"
        kind = "surface"
        workload = "mail"
        target = "sim://db-tp?disks={disks}&nfsds={nfsds}"
        design = {kind = "full-factorial"}
        search = {quick = true}
        factors = [{name = "disks", levels = [1, 2]}, {name = "nfsds", levels = [4, 8]}]
        configure = {argv = ["test", "{disks}", "-lt", "9"], timeout = "5s"}

        [[test]]
        name = "curve"
        kind = "sfs"
        rcfile = "sfs_rc"
        """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    named, _ = stored_tests(db)
    searches = rows(db, "SELECT id, surface_id, result FROM searches ORDER BY id")
    alone = [s for s in searches if s["surface_id"] is None]
    assert len(alone) == 1 and len(searches) == 5  # the search, and the surface's four samples
    peak = json.loads(alone[0]["result"])["peak_rate"]
    assert json.loads(named["peak"]["metrics"])["peak_rate"] == pytest.approx(peak)
    assert abs(peak - 400) / 400 < 0.15
    assert rows(db, "SELECT status FROM surfaces") == [{"status": "done"}]
    assert rows(db, "SELECT status FROM sfs_runs") == [{"status": "done"}]
    assert [r["rate"] for r in rows(db, "SELECT rate FROM trials")] == [100]  # its one load point
    # The same surface step is what `peakbench surface` maps from a plan file.
    text = plan.read_text()
    head, surface = text.split("[[test]]")[0], text.split("[[test]]")[2]
    only = write(tmp_path / "surface.toml", head + "[[test]]" + surface)
    mapped = surfaceplan.load_plan(only, searching.QUICK)
    assert mapped.target == "sim://db-tp?disks={disks}&nfsds={nfsds}" and len(mapped.samples) == 4
    assert mapped.configure.command == ("test", "{disks}", "-lt", "9") and mapped.configure.timeout_s == 5


REBOOT = """
import os, signal, sys
with open(sys.argv[1], "a") as log:
    log.write("reboot\\n")
os.kill(os.getppid(), signal.SIGKILL)   # the controller dies as it would in a reboot
"""


def test_a_reboot_is_a_checkpoint_resumed_when_peakbench_next_starts(cli, tmp_path):
    script = write(tmp_path / "reboot.py", REBOOT)
    log = tmp_path / "reboots.log"
    plan = write(
        tmp_path / "cold.toml",
        f"""
        name = "cold"
        [[test]]
        name = "cold-read"
        command = ["{PY}", "-c", "{EMIT}", "value=1"]
        parse = "json"
        metric = "value"
        stop = {{min_runs = 2}}
        cache = {{policy = ["reboot"], reboot = ["{PY}", "{script}", "{log}"], reboot_wait = "20s"}}
        """,
    )
    db = tmp_path / "s.db"
    first = cli("plan", "run", str(plan), "--db", str(db))
    assert first.returncode == -9, first.stderr  # killed at its first reboot
    assert "plan resume --after-reboot" in first.stderr
    for _ in range(4):  # what a boot script does each time the machine comes back
        again = cli("plan", "resume", "--after-reboot", "--db", str(db))
        if again.returncode != -9:
            break
    assert again.returncode == 0, again.stderr
    # Each run rebooted once, its measurement followed the resume, and no run was repeated.
    assert log.read_text().splitlines() == ["reboot", "reboot"]
    runs = rows(db, "SELECT attempt, status, cache FROM plan_runs ORDER BY attempt")
    assert [(r["attempt"], r["status"]) for r in runs] == [(1, "done"), (2, "done")]
    for run in runs:
        (done_cache,) = json.loads(run["cache"])
        assert done_cache["policy"] == "reboot" and done_cache["resumed_after"]
        assert done_cache["booted"] is False  # a kill -9 stood in for the reboot: same boot
    assert not runner.waiting_for_reboot(db)  # so the next boot's `resume --after-reboot` does nothing


def test_every_example_in_the_plan_doc_loads(tmp_path):
    text = DOC.read_text()
    plans = re.findall(r"```toml\n(.*?)```", text, re.S)
    surfaces = re.findall(r"```toml surface\n(.*?)```", text, re.S)
    assert len(plans) >= 15 and len(surfaces) == 1
    (tmp_path / "common.toml").write_text('[vars]\nroot = "/tmp"\n')
    for number, example in enumerate(plans):
        path = write(tmp_path / f"example{number}.toml", example)
        try:
            loaded = load_plan(path, check_programs=False)
        except InputError as error:
            raise AssertionError(f"example {number} in docs/plans.md: {error}\n{example}") from None
        for test in loaded.tests:
            if test["kind"] == "surface":  # its search settings take the plan's durations
                surface = surfaceplan.parse_document(test["step"]["surface"], path, searching.QUICK)
                assert surface.settings.runlength_s == 4 and len(surface.samples) == 8
    old_form = surfaceplan.load_plan(write(tmp_path / "surface.toml", surfaces[0]), searching.QUICK)
    assert len(old_form.samples) == 4 and old_form.configure.timeout_s == 60


@pytest.mark.integration  # runs `peakbench plan import` and `plan report`
def test_other_programs_results_are_imported_with_file_and_line_errors(tmp_path):
    for fs in ("ext4", "xfs"):
        for run in (1, 2, 3):  # real GNU time -v output, one file per run
            subprocess.run(["/usr/bin/time", "-v", "-o", tmp_path / f"{fs}-{run}.txt", "true"], check=True)
    files = sorted(tmp_path.glob("*.txt"))
    db = tmp_path / "s.db"
    plan_id, tests, runs = importing.import_plan("gnu", files, "gnu-time", db, None)
    assert (tests, runs) == (2, 6)
    with Store(db, readonly=True) as store:
        data = report.plan_analysis(store, plan_id)
    rows = {(r["test"], r["metric"]): r for r in data["getstats"]}
    assert rows[("ext4", "elapsed")]["COUNT"] == 3 and rows[("xfs", "cpu")]["COUNT"] == 3
    parsed = importing.read_runs([files[0]], "gnu-time")[0][2]
    assert parsed["cpu"] == pytest.approx(parsed["user"] + parsed["system"]) and parsed["exit_status"] == 0
    assert parsed["max_rss_kb"] > 0

    bad = {
        "h.csv": ("ops,cpu\n1,2\n3,abc\n", "csv", "h.csv:3: field cpu: 'abc' is not a number"),
        "short.csv": ("ops,cpu\n1\n", "csv", "short.csv:2: 1 cells for 2 columns"),
        "t.txt": ("hello\n", "gnu-time", "t.txt:1: not GNU `time -v` output"),
        "r.json": ('{"ops": 1}\n{"ops": }\n', "json", "r.json:2: invalid JSON"),
        "s.json": ('{"name": "x"}', "json", "s.json:1: a run with no numbers in it"),
    }
    for name, (text, fmt, message) in bad.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InputError) as caught:
            importing.import_plan("bad", [path], fmt, db, None)
        assert str(caught.value) == f"{tmp_path}/{message}" or message in str(caught.value), caught.value
    with Store(db, readonly=True) as store:  # nothing half-written
        assert [p["name"] for p in store.connection.execute("SELECT name FROM plans")] == ["gnu"]


@pytest.mark.integration  # runs `peakbench plan import` and `plan report`
def test_report_derives_selects_and_groups_by_variables(tmp_path):
    table = tmp_path / "tool.csv"
    table.write_text(
        "fs,threads,ops,cpu\n"
        + "".join(
            f"{fs},{t},{ops},{cpu}\n"
            for fs, t, ops, cpu in [
                ("ext4", 1, 100, 1),
                ("ext4", 2, 180, 2),
                ("ext4", 2, 200, 2),
                ("ext4", 4, 300, 3),
                ("xfs", 1, 90, 1),
                ("xfs", 2, 150, 3),
                ("xfs", 4, 240, 4),
                ("xfs", 4, 260, 4),
            ]
        )
    )
    db, out = tmp_path / "s.db", tmp_path / "r.json"
    plan_id, tests, _ = importing.import_plan("tool", [table], "csv", db, "ops", ("fs", "threads"))
    assert tests == 6  # one test per (fs, threads)
    status = main(
        [
            "plan",
            "report",
            str(plan_id),
            "--db",
            str(db),
            "--derive",
            "ops_per_cpu=ops / cpu",
            "--where",
            "threads > 1",
            "--group-by",
            "fs",
            "--json",
            str(out),
        ]
    )  # the command line, in this process
    assert status == 0
    rows = {(r["test"], r["metric"]): r for r in json.loads(out.read_text())["getstats"]}
    ext4, xfs = rows[("fs=ext4", "ops_per_cpu")], rows[("fs=xfs", "ops_per_cpu")]
    assert ext4["COUNT"] == 3 and ext4["MEAN"] == pytest.approx((90 + 100 + 100) / 3)
    assert xfs["COUNT"] == 3 and xfs["MEAN"] == pytest.approx((50 + 60 + 65) / 3)
    assert ("fs=ext4", "ops") in rows and not any(test.startswith("tool") for test, _ in rows)
