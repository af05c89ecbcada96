"""Workload knobs as surface factors: Fstress Figure 9's experiment (mean response over proxy memory x disk
hit ratio at one offered load) and a peak-rate surface over a Zipf exponent, each one plan, on a real directory."""

import json
import sqlite3

import pytest
from conftest import run_cli
from peakbench.cli import main as peakbench
from peakbench.workload import find_workload
from peakbench.workloadknobs import with_knobs

FIGURE_9 = """
workload = "web-proxy"
target = "{target}"

[design]
kind = "full-factorial"

[search]
runlength_s = 0.5
warmup_s = 0

[fixed_rate]
rate = 60
trials = 2

[[factors]]
name = "memory_hit"
levels = {memory_levels}

[[factors]]
name = "disk_hit"
levels = [0, 1]
"""


def _trials(db) -> list[tuple[str, dict, dict]]:
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT workload, spec, result FROM trials ORDER BY id").fetchall()
    return [(workload, json.loads(spec), json.loads(result)) for workload, spec, result in rows]


def test_figure_9_is_one_fixed_rate_plan(tmp_path, engine_path, capsys):
    target = tmp_path / "fs"
    target.mkdir()
    plan = tmp_path / "figure9.toml"
    plan.write_text(FIGURE_9.format(target=target, memory_levels="[0, 1]"))
    db, out = tmp_path / "p.db", tmp_path / "figure9.json"
    done = run_cli("surface", str(plan), "--db", str(db), "--json", str(out))
    assert done.returncode == 0, done.stderr
    measured = json.loads(out.read_text())
    assert measured["kind"] == "fixed-rate" and len(measured["outcomes"]) == 4
    for outcome in measured["outcomes"]:
        assert outcome["failure"] is None and outcome["trials"] == 2 and len(outcome["trial_ids"]) == 2
        assert 0 < outcome["ci_low_ms"] <= outcome["mean_ms"] <= outcome["ci_high_ms"]
        assert outcome["achieved_rate"] == pytest.approx(60, rel=0.1)

    # Each sample's trials ran the model's mix at the plan's rate: all memory hits are time-stamp
    # checks only; all misses that miss the disk too create and write, and check no time stamp.
    base = find_workload("web-proxy")
    trials = _trials(db)
    assert len(trials) == 8
    for outcome in measured["outcomes"]:
        sample = outcome["sample"]
        for trial_id in outcome["trial_ids"]:
            workload, spec, result = trials[trial_id - 1]
            assert spec["load"]["rate"] == 60 and spec["mix"] == with_knobs(base, sample).mix
            assert workload == f"web-proxy[memory_hit={sample['memory_hit']:g},disk_hit={sample['disk_hit']:g}]"
            issued = set(result["ops"])
            if sample["memory_hit"] == 1:
                assert "getattr" in issued and not issued & {"lookup", "read", "write", "create"}
            elif sample["disk_hit"] == 0:
                assert {"lookup", "create", "write"} <= issued and not issued & {"getattr", "read"}

    # The report draws it as Fstress Figure 9: response over memory hit, a line per disk hit.
    figures = tmp_path / "figures"
    assert peakbench(["report", "surface:1", "--db", str(db), "--figures", str(figures), "--format", "svg"]) == 0
    svg = (figures / "surface-1-response.svg").read_text()
    assert svg.count("<path") > 20  # axes, two lines with error bars: drawn, not an empty box
    assert "mean response time at 60 ops/s" in capsys.readouterr().out
    assert peakbench(["results", "list", "--kind", "surface", "--db", str(db)]) == 0
    assert "4 samples" in capsys.readouterr().out  # its samples are trials, not searches


def test_a_level_a_knob_cannot_take_is_refused_before_anything_runs(tmp_path, capsys):
    target = tmp_path / "fs"
    target.mkdir()
    plan = tmp_path / "bad.toml"
    plan.write_text(FIGURE_9.format(target=target, memory_levels="[0, 1.5]"))
    assert peakbench(["surface", str(plan), "--db", str(tmp_path / "p.db")]) == 2
    err = capsys.readouterr().err
    assert "field factors[0].levels" in err and "memory_hit=1.5" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.db").exists() and list(target.iterdir()) == []


def test_a_peak_rate_surface_over_the_zipf_exponent_is_one_plan(tmp_path, engine_path):
    target = tmp_path / "fs"
    target.mkdir()
    plan = tmp_path / "zipf.toml"
    plan.write_text(
        f'workload = "web-server"\ntarget = "{target}"\n[design]\nkind = "full-factorial"\n'
        "[search]\nrunlength_s = 0.5\nwarmup_s = 0\nscout_runlength_s = 0.25\nmin_runlength_s = 0.5\n"
        "start_load = 50\nmax_total_trials = 2\n"
        '[[factors]]\nname = "zipf"\nlevels = [0.5, 1.2]\n'
    )
    db = tmp_path / "p.db"
    done = run_cli("surface", str(plan), "--db", str(db))
    assert done.returncode in (0, 3), done.stderr  # two trials per search find no peak: the wiring is tested
    with sqlite3.connect(db) as connection:
        searches = connection.execute("SELECT id, workload, sample FROM searches WHERE surface_id = 1").fetchall()
        trials = connection.execute("SELECT search_id, spec FROM trials").fetchall()
    assert [(w, json.loads(s)) for _, w, s in searches] == [
        ("web-server[zipf=0.5]", {"zipf": 0.5}),
        ("web-server[zipf=1.2]", {"zipf": 1.2}),
    ]
    alphas = {search_id: json.loads(spec)["fileset"]["file_popularity"]["alpha"] for search_id, spec in trials}
    assert alphas == {searches[0][0]: 0.5, searches[1][0]: 1.2}
