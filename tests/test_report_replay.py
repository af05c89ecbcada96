"""`peakbench report` on access-log replays: a replay trial is reported (it crashed the report), and a
data-set-size sweep run with --repeat is the Flash paper's bandwidth curve with intervals, read in Chromium."""

import csv
import json

import pytest
from chromium import Page, find_chromium
from conftest import run_cli
from peakbench import tracegen

SIZES = ("100KB", "400KB", "1200KB")
REPEAT = 2


@pytest.fixture(scope="module")
def sweep(engine_path, tmp_path_factory):
    """A log, its docroot, and a three-size sweep replayed twice (trials 1-6): (store, JSON rows)."""
    root = tmp_path_factory.mktemp("replay-report")
    log = tracegen.write(root / "access.log", tracegen.TraceShape(requests=3000, files=200, seed=7))
    docroot = root / "www"
    done = run_cli("replay", "--build-docroot", str(docroot), str(log))
    assert done.returncode == 0, done.stderr
    db, out = root / "p.db", root / "sweep.json"
    done = run_cli(
        "replay",
        str(log),
        "--target",
        str(docroot),
        "--dataset-size",
        ",".join(SIZES),
        "--repeat",
        str(REPEAT),
        "--clients",
        "2",
        "--warmup",
        "0",
        "--runtime",
        "0.5",
        "--db",
        str(db),
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    return db, json.loads(out.read_text())


def test_repeat_runs_the_sizes_in_rounds(sweep):
    _, rows = sweep
    kept = [row["replay"]["dataset_bytes"] for row in rows]
    assert len(rows) == len(SIZES) * REPEAT and kept[: len(SIZES)] == kept[len(SIZES) :]
    assert kept[0] < kept[1] < kept[2]


def test_a_replay_sweep_is_a_bandwidth_curve_with_intervals_in_a_browser(sweep, tmp_path):
    db, rows = sweep
    html = tmp_path / "replay.html"
    done = run_cli("report", "trial:1-6", "--db", str(db), "--html", str(html), "--csv", str(tmp_path / "csv"))
    assert done.returncode == 0, done.stderr
    # On the terminal too, and a closed loop offers no load: no load curve at "0 ops/s offered".
    assert "trials 1-6: 3 data-set sizes" in done.stdout and "Load curve" not in done.stdout
    with (tmp_path / "csv" / "replay-trials-1-6.csv").open() as file:
        table = list(csv.DictReader(file))
    for size_index, row in enumerate(table):
        mine = [r["output_mbit_s"] for r in rows[size_index :: len(SIZES)]]
        assert int(row["n_trials"]) == REPEAT
        low, mean, high = (float(row[k]) for k in ("ci_low_mbit_per_s", "output_mbit_per_s", "ci_high_mbit_per_s"))
        assert 0 < low <= mean <= high and low <= max(mine) and high >= min(mine)
        assert float(row["data_set_mb"]) * 1e6 == pytest.approx(rows[size_index]["replay"]["dataset_bytes"])
    if find_chromium() is None:
        pytest.skip("needs Debian's chromium (scripts/test.sh installs it)")
    with Page() as page:
        page.open(html)
        seen = page.evaluate("""(() => {
          const figure = document.getElementById("fig-replay-bandwidth-trials-1-6");
          const box = figure.querySelector("svg").getBoundingClientRect();
          return {
            sections: [...document.querySelectorAll("section h2")].map(h => h.textContent),
            figure: {width: box.width, height: box.height, paths: figure.querySelectorAll("svg path").length,
                     caption: figure.textContent},
            rows: document.getElementById("table-replay-trials-1-6").tBodies[0].rows.length,
          };
        })()""")
        problems = page.problems()
    assert problems == []
    assert "Access-log replay" in seen["sections"] and "Load curve" not in seen["sections"]
    assert seen["figure"]["width"] > 200 and seen["figure"]["height"] > 100 and seen["figure"]["paths"] > 20
    assert "n = 2" in seen["figure"]["caption"] and seen["rows"] == len(SIZES)
