"""`peakbench surface PLAN.toml` as a user runs it: a D-optimal surface over a simulated
server's factors, a configure hook that fails or a server that never becomes ready
for one sample, and plans with mistakes in them."""

import json
import sqlite3
import textwrap

import pytest
from peakbench import searching
from peakbench.sim import SURFACES
from peakbench.surfaceplan import load_plan

PLAN = """\
workload = "mail"
target = "sim://db-tp?disks={{disks}}&nfsds={{nfsds}}"
{extra}
[design]
kind = "d-optimal"
samples = 8

[[factors]]
name = "disks"
levels = [1, 2, 3, 4]

[[factors]]
name = "nfsds"
levels = "1,2,4,8,16,32,64,100"
scale = "log"
{configure}"""


def write_plan(tmp_path, extra="", configure=""):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(extra=extra, configure=textwrap.dedent(configure)))
    return path


def test_a_surface_is_mapped_and_a_failing_configure_is_recorded(cli, tmp_path):
    # The D-optimal design can differ between machines where the exchange's criterion ties,
    # so the sample whose configure fails is taken from the design this machine computes.
    samples = load_plan(write_plan(tmp_path), searching.QUICK).samples
    doomed = samples[3]
    doomed_word = f"{doomed['disks']:g}:{doomed['nfsds']:g}"
    plan = write_plan(
        tmp_path,
        configure=f"""
        [configure]
        command = ["test", "{{disks}}:{{nfsds}}", "!=", "{doomed_word}"]
        timeout_s = 5
        """,
    )
    db, out = tmp_path / "p.db", tmp_path / "surface.json"
    done = cli("surface", str(plan), "--db", str(db), "--json", str(out))
    assert done.returncode == 3, done.stderr  # a sample failed; the rest went on
    result = json.loads(out.read_text())
    failed = [o for o in result["outcomes"] if o["failure"]]
    assert [o["sample"] for o in failed] == [doomed]
    assert f"test {doomed_word} != {doomed_word} failed with exit status 1" in failed[0]["failure"]
    # The seven other samples found their peaks, each close to the simulated truth, and the
    # quadratic through them predicts them well.
    truth = SURFACES["db-tp"]
    found = [o for o in result["outcomes"] if not o["failure"]]
    assert len(found) == 7
    for o in found:
        assert abs(o["result"]["peak_rate"] - truth.peak(o["sample"])) / truth.peak(o["sample"]) <= 0.10
    assert result["mape"] < 10 and result["surface"] is not None
    # Every later sample was seeded from the peak of a finished one.
    assert all(o["seed_load"] is not None for o in result["outcomes"][1:])
    assert "MAPE" in done.stdout and "n=7" in done.stdout
    with sqlite3.connect(db) as connection:
        surfaces = connection.execute("SELECT status FROM surfaces").fetchall()
        searches = connection.execute("SELECT status, sample FROM searches WHERE surface_id = 1").fetchall()
    assert surfaces == [("done",)]
    assert sorted(status for status, _ in searches) == ["done"] * 7 + ["failed"]
    # Every sample of the design got a search of its own.
    as_key = lambda sample: tuple(sorted(sample.items()))  # noqa: E731
    assert sorted(as_key(json.loads(sample)) for _, sample in searches) == sorted(map(as_key, samples))


def test_a_server_that_never_becomes_ready_fails_its_sample_or_the_plan(cli, tmp_path):
    configure = """
        [configure]
        command = ["true"]
        ready = ["test", "{nfsds}", "-lt", "50"]
        ready_timeout_s = 1
        """
    done = cli(
        "surface",
        str(write_plan(tmp_path, configure=configure)),
        "--db",
        str(tmp_path / "a.db"),
        "--json",
        str(tmp_path / "a.json"),
    )
    assert done.returncode == 3
    failures = [o["failure"] for o in json.loads((tmp_path / "a.json").read_text())["outcomes"] if o["failure"]]
    assert failures and all("never became ready within 1 s" in f for f in failures)

    fast = write_plan(tmp_path, extra="fail_fast = true\n", configure=configure)
    done = cli("surface", str(fast), "--db", str(tmp_path / "b.db"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("peakbench: the server never became ready within 1 s")


def line_of(path, text):
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    "extra, configure, wrong, words",
    [
        ("colour = 3\n", "", "colour", "field colour: unknown key 'colour'"),
        ('policy = "fastest"\n', "", "fastest", "field policy: must be one of"),
        (
            "[search]\nconfidence = 1.5\n",
            "",
            "1.5",
            "field search.confidence: confidence must lie strictly between 0 and 1",
        ),
        (
            "",
            "[configure]\ncommand = \"sh -c 'x'\"\n",
            "sh -c",
            "field configure.command: must be a command as a non-empty list",
        ),
        ("", '[configure]\ncommand = ["echo", "{threads}"]\n', "threads", "{threads} names no factor"),
    ],
)
def test_a_bad_plan_is_a_one_line_error_at_its_line(cli, tmp_path, extra, configure, wrong, words):
    plan = write_plan(tmp_path, extra=extra, configure=configure)
    line = line_of(plan, wrong)
    done = cli("surface", str(plan), "--db", str(tmp_path / "p.db"))
    assert done.returncode == 2
    assert f"{plan}:{line}: " in done.stderr and words in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.db").exists()


def test_bad_levels_and_designs_name_their_field(cli, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(extra="", configure="").replace('"1,2,4,8,16,32,64,100"', '"one,two"'))
    done = cli("surface", str(plan))
    assert (
        done.returncode == 2
        and f"{plan}:{line_of(plan, 'one,two')}: field factors[1].levels: factor nfsds: levels 'one,two' do not parse"
        in done.stderr
    )
    plan.write_text(PLAN.format(extra="", configure="").replace("samples = 8", "samples = 40"))
    done = cli("surface", str(plan))
    assert (
        done.returncode == 2
        and f"{plan}:{line_of(plan, 'samples = 40')}: field design.samples: " in done.stderr
        and "between 6 and 32" in done.stderr
    )
