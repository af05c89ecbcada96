"""Plans: loading, expansion (vars, loops, when, includes, defaults) and line-precise errors."""

import textwrap

import pytest
from peakbench.errors import InputError
from peakbench.harness.expr import Expression, ExpressionError
from peakbench.harness.plan import load_plan, render


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_loops_ranges_when_vars_and_templates(tmp_path):
    plan = load_plan(
        write(
            tmp_path / "p.toml",
            """
        name = "demo"
        [vars]
        base = "/data"
        dir = "{base}/x"
        [env]
        WHERE = "{dir}"
        [[test]]
        name = "t-{fs}-{n}"
        loop = {fs = ["ext4", "xfs"], n = {from = 1, to = 32, factor = 2}}
        when = "not (fs == 'xfs' and n > 4)"
        threads = "{n}"
        command = ["echo", "{dir}/{fs}", "{thread}", "{{literal}}"]
        [[test]]
        name = "step-{k}"
        loop = {k = {from = 10, to = 0, step = -5}}
        command = ["true"]
    """,
        )
    )
    names = [t["name"] for t in plan.tests]
    assert names[:6] == [f"t-ext4-{n}" for n in (1, 2, 4, 8, 16, 32)]
    assert names[6:9] == ["t-xfs-1", "t-xfs-2", "t-xfs-4"]
    assert names[9:] == ["step-10", "step-5", "step-0"]
    first = plan.tests[0]
    assert first["command"] == ["echo", "/data/x/ext4", "{thread}", "{{literal}}"]  # run-time names wait
    assert plan.tests[5]["threads"] == 32
    assert first["env"]["WHERE"] == "/data/x"
    assert [t["seq"] for t in plan.tests] == list(range(12))
    assert render(first["command"][3], {}) == "{literal}"


def test_includes_and_defaults(tmp_path):
    write(
        tmp_path / "common.toml",
        """
        [vars]
        size = 5
        [defaults]
        stop = {min_runs = 2, max_runs = 4, until = "hw_pct < 10"}
        [[test]]
        name = "from-include"
        command = ["true"]
    """,
    )
    plan = load_plan(
        write(
            tmp_path / "p.toml",
            """
        include = ["common.toml"]
        [[test]]
        name = "main-{size}"
        command = ["true"]
        stop = {min_runs = 3}
    """,
        )
    )
    assert [t["name"] for t in plan.tests] == ["from-include", "main-5"]
    assert plan.tests[0]["stop"] == {"min_runs": 2, "max_runs": 4, "check_every": 1, "until": "hw_pct < 10"}
    assert plan.tests[1]["stop"]["min_runs"] == 3 and plan.tests[1]["stop"]["until"] == "hw_pct < 10"
    assert set(plan.sources) == {str(tmp_path / "p.toml"), str(tmp_path / "common.toml")}


def test_trial_tests(tmp_path):
    plan = load_plan(
        write(
            tmp_path / "p.toml",
            """
        [[test]]
        name = "mail-{rate}"
        loop = {rate = [100, 200]}
        workload = "mail"
        target = "null://"
        rate = "{rate}"
        clients = 2
        runtime = "2s"
    """,
        )
    )
    trial = plan.tests[1]
    assert trial["kind"] == "trial" and trial["threads"] == 2 and trial["metric"] == "mean_ms"
    assert trial["trial"]["rate"] == 200.0 and trial["trial"]["runtime_s"] == 2.0


def test_a_command_test_may_name_its_directory_under_test(tmp_path):
    plan = load_plan(
        write(
            tmp_path / "p.toml",
            """
        [[test]]
        name = "dd"
        target = "{mount}/data"
        fs = {type = "ext4"}
        command = ["true"]
    """,
        )
    )
    assert plan.tests[0]["target"] == "{mount}/data" and plan.tests[0]["fs"]["size_mb"] == 306


BAD = [
    # (plan text, line, fragment of the message)
    ('[[test]]\nname = "a"\ncommand = ["true"]\ncomand = 1\n', 4, "unknown key 'comand'; did you mean 'command'?"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\nthreads = "many"\n', 4, "field test[0].threads: must be a whole"),
    ('[[test]]\nname = "a"\ncommand = "true"\n', 3, "must be an argv list"),
    ('[[test]]\nname = "a-{n}"\nloop = {n = []}\ncommand = ["true"]\n', 3, "the loop expands to nothing"),
    (
        '[[test]]\nname = "a-{n}"\nloop = {n = {from = 8, to = 1, factor = 2}}\ncommand = ["true"]\n',
        3,
        "the loop expands to nothing",
    ),
    (
        '[[test]]\nname = "a"\ncommand = ["true"]\n[test.hooks]\nsetup = [\n  ["true"],\n  ["no-such-program-xyz"],\n]\n',
        7,
        "'no-such-program-xyz': no such program",
    ),
    ('[[test]]\nname = "a"\ncommand = ["true"]\n[test.stop]\nmin_runs = 2\nuntil = "hw_pct <"\n', 6, "does not parse"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\n[test.stop]\nuntil = "hw_pc < 5"\n', 5, "unknown name 'hw_pc'"),
    (
        '[[test]]\nname = "a"\ncommand = ["true"]\n[test.stop]\nmin_runs = 5\nmax_runs = 2\n',
        6,
        "must be at least min_runs",
    ),
    ('[[test]]\nname = "a"\ncommand = ["echo", "{nope}"]\n', 3, "unknown variable {nope}"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\nwhen = "fs == 1"\n', 4, "unknown name 'fs'"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\ncache = ["cold"]\n', 4, "unknown cache policy 'cold'"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\ncache = "remount"\n', 4, "remount needs"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\nfs = {type = "zfs"}\n', 4, "must be one of ext4, xfs, btrfs"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\n[[test]]\nname = "a"\ncommand = ["true"]\n', 5, "not unique"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\nmetric = "tps"\n', 4, "unknown metric 'tps'"),
    ('[[test]]\nname = "a"\ncommand = ["true"]\nmetrics = {tps = "rate: [0-9]+"}\n', 4, "needs a (group)"),
    ('[[test]]\nname = "a"\nworkload = "mail"\ntarget = "null://"\n', 1, "a trial test needs 'rate'"),
    ('[[test]]\nname = "a"\nworkload = "nosuch"\ntarget = "null://"\nrate = 5\n', 3, "unknown workload"),
    ('name = "x"\n[[test]]\nname = "a"\ncommand = ["true"\n', 4, "invalid TOML"),
    ('vars = 3\n[[test]]\nname = "a"\ncommand = ["true"]\n', 1, "must be a table"),
    ('include = ["missing.toml"]\n[[test]]\nname = "a"\ncommand = ["true"]\n', 1, "no such file to include"),
    ('name = "x"\n', None, "the plan has no [[test]]"),
]


@pytest.mark.parametrize("text,line,fragment", BAD)
def test_bad_plans_fail_with_file_line_and_field(tmp_path, text, line, fragment):
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(InputError) as caught:
        load_plan(path)
    message = str(caught.value)
    assert fragment in message, message
    if line is not None:
        assert message.startswith(f"{path}:{line}: "), message


def test_an_error_inside_an_include_names_the_included_file(tmp_path):
    write(tmp_path / "inc.toml", '[[test]]\nname = "x"\ncommand = ["true"]\nbogus = 1\n')
    path = write(tmp_path / "p.toml", 'include = "inc.toml"\n')
    with pytest.raises(InputError) as caught:
        load_plan(path)
    assert str(caught.value).startswith(f"{tmp_path / 'inc.toml'}:4: field test[0].bogus: unknown key")


def test_include_cycles_are_refused(tmp_path):
    write(tmp_path / "a.toml", 'include = "b.toml"\n')
    write(tmp_path / "b.toml", 'include = "a.toml"\n')
    with pytest.raises(InputError, match="include cycle"):
        load_plan(tmp_path / "a.toml")


def test_expressions_are_safe_and_checked():
    assert Expression("hw_pct < 5 or count >= 10").evaluate({"hw_pct": 4, "count": 1}) is True
    assert Expression("fs in ['ext4', 'xfs'] and n <= 4").evaluate({"fs": "xfs", "n": 2}) is True
    assert Expression("tps.hw_pct < 2").evaluate({"tps": {"hw_pct": 1.0}}) is True
    for bad in ("__import__('os')", "x[0]", "lambda: 1", "open('f')", "a if b else c"):
        with pytest.raises(ExpressionError):
            Expression(bad)


def test_cli_check_and_bad_plan_exit_2_writing_nothing(cli, tmp_path):
    good = write(tmp_path / "good.toml", '[[test]]\nname = "a-{n}"\nloop = {n = [1, 2]}\ncommand = ["true"]\n')
    done = cli("plan", "check", str(good))
    assert done.returncode == 0, done.stderr
    assert "a-1" in done.stdout and "a-2" in done.stdout
    bad = write(tmp_path / "bad.toml", '[[test]]\nname = "a"\ncommand = ["true"]\n[test.stop]\nuntil = "hw_pct <<"\n')
    db = tmp_path / "store.db"
    done = cli("plan", "run", str(bad), "--db", str(db))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"peakbench: {bad}:5: field test[0].stop.until:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "good.toml"]  # no store, no lock, no workdir
