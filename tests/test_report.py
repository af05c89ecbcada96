"""`peakbench report` over a store filled by real runs (an sfs curve, a finished search, a search killed
mid-way), opened in real headless Chromium the way a reader opens it; plus its files and bad input."""

import base64
import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chromium import Page, find_chromium
from conftest import REPO, run_cli
from peakbench.cli import main as peakbench
from peakbench.store import SCHEMA_VERSION, Store

ARTEFACTS = REPO / "test-artifacts"
SFS_LOADS = (20.0, 40.0, 80.0)


def _kill_after_trials(db: Path, target: Path, trials: int) -> None:
    """A search, SIGKILLed once it has stored `trials` trials: a search with no result."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    process = subprocess.Popen(
        # Far from done after one trial: it has loads up to 400 ops/s to climb through first.
        [
            sys.executable,
            "-m",
            "peakbench.cli",
            "search",
            "mail",
            "--target",
            str(target),
            "--db",
            str(db),
            "--runlength",
            "1",
            "--warmup",
            "0.2",
            "--start-rate",
            "30",
            "--max-rate",
            "400",
            "--min-rate",
            "10",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            with sqlite3.connect(db) as connection:
                try:
                    (count,) = connection.execute("SELECT count(*) FROM trials WHERE search_id = 2").fetchone()
                except sqlite3.OperationalError:  # not created yet
                    count = 0
            if count >= trials:
                break
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def store(engine_path, tmp_path_factory):
    """sfs:1 (three load points), search:1 (finished: never saturated below its maximum), search:2 (killed)."""
    root = tmp_path_factory.mktemp("report")
    db = root / "p.db"
    for name in ("sfs", "search", "killed"):
        (root / name).mkdir()
    rc = root / "sfs_rc"
    rc.write_text(
        f'# a small curve\nLOAD="{" ".join(f"{load:g}" for load in SFS_LOADS)}"\nPROCS=2\n'
        f'MNT_POINTS="{root / "sfs"} {root / "sfs"}"\nWARMUP_TIME=0.5\nRUNTIME=1.5\nTCP=on\n'
    )
    done = run_cli("sfs", str(rc), "--db", str(db))
    assert done.returncode == 0, done.stderr
    # Rsat well under a millisecond, so this fast directory has a peak region to search for: careful
    # trials with intervals, whatever the verdict (a peak, or noisy when the trial budget runs out).
    done = run_cli(
        "search",
        "mail",
        "--target",
        str(root / "search"),
        "--db",
        str(db),
        "--runlength",
        "1",
        "--warmup",
        "0.2",
        "--start-rate",
        "30",
        "--max-rate",
        "120",
        "--min-rate",
        "10",
        "--rsat",
        "0.3",
        "--width",
        "0.5",
        "--max-trials",
        "10",
    )
    assert done.returncode in (0, 3), done.stderr
    _kill_after_trials(db, root / "killed", trials=1)
    return db


@pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium (scripts/test.sh installs it)")
def test_the_report_reads_well_in_a_real_browser(store, tmp_path):
    html = tmp_path / "report.html"
    done = run_cli("report", "sfs:1", "search:1", "search:2", "--db", str(store), "--html", str(html))
    assert done.returncode == 0, done.stderr
    assert "report written to" in done.stderr

    ARTEFACTS.mkdir(exist_ok=True)
    with Page(width=1280, height=900) as page:
        page.open(html)
        seen = page.evaluate("""(() => {
          const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
          return {
            sections: [...document.querySelectorAll("section h2")].map(h => h.textContent),
            figures: [...document.querySelectorAll("figure")].map(f => ({
                id: f.id, size: box(f.querySelector("svg")), paths: f.querySelectorAll("svg path").length})),
            tables: [...document.querySelectorAll("table")].map(t => ({
                id: t.id, rows: t.tBodies[0].rows.length, visible: box(t)[1] > 0})),
            warnings: [...document.querySelectorAll("ul.warnings li")].map(li => li.textContent),
            csv: decodeURIComponent(document.querySelector("#table-sfs-summary-sfs-1 ~ p a.csv").href.split(",").slice(1).join(",")),
            text: document.body.innerText,
          };
        })()""")
        # Sorting: a click on the first heading of the sfs summary orders its rows by that column.
        order = page.evaluate("""(() => {
          const table = document.getElementById("table-sfs-summary-sfs-1");
          const head = table.querySelector("th");
          const column = () => [...table.tBodies[0].rows].map(r => parseFloat(r.cells[0].dataset.v));
          head.click(); const up = column(); head.click(); const down = column();
          return {up, down};
        })()""")
        page.screenshot(ARTEFACTS / "report.png")
        # Printed, the collapsed parts (every trial's spec) open up.
        spec_shown = 'document.querySelector("details.spec pre").checkVisibility()'
        on_screen = page.evaluate(spec_shown)
        page.call("Emulation.setEmulatedMedia", {"media": "print"}, session=True)
        in_print = page.evaluate(spec_shown)
        (ARTEFACTS / "report.pdf").write_bytes(base64.b64decode(page.call("Page.printToPDF", {}, session=True)["data"]))
        problems, urls, failed = page.problems(), page.requested_urls(), page.failed_requests()

    assert problems == []
    assert urls == [html.absolute().as_uri()] and failed == []  # nothing but the file itself
    assert seen["sections"] == [
        "Load curve",
        "Search trace",
        "Per-operation breakdown",
        "Latency distribution",
        "SPECsfs summary",
        "Provenance and warnings",
    ]
    figures = {f["id"]: f for f in seen["figures"]}
    for name in (
        "fig-load-curve",
        "fig-search-trace-search-1",
        "fig-search-trace-search-2",
        "fig-latency-cdf-sfs-1",
        "fig-latency-cdf-ops-sfs-1",
    ):
        width, height = figures[name]["size"]
        assert width > 300 and height > 100, (name, figures[name])
        assert figures[name]["paths"] > 20  # axes, ticks, curves: drawn, not an empty box
    visible = [t for t in seen["tables"] if t["visible"]]
    assert len(visible) >= 8 and all(t["rows"] > 0 for t in seen["tables"])
    assert order["up"] == sorted(SFS_LOADS) and order["down"] == sorted(SFS_LOADS, reverse=True)
    # The killed search is reported with what it has, and the reader is told what is missing.
    assert any("search 2 has no result yet" in w for w in seen["warnings"])
    assert "overall response time" in seen["text"] and "n = " in seen["text"]
    # Each table's data travels with the page, as the same CSV `--csv` writes.
    lines = seen["csv"].splitlines()
    assert lines[0].startswith("requested_ops_per_s,achieved_ops_per_s,") and len(lines) == 1 + len(SFS_LOADS)
    assert (ARTEFACTS / "report.png").stat().st_size > 50_000
    assert on_screen is False and in_print is True
    assert (ARTEFACTS / "report.pdf").read_bytes().startswith(b"%PDF")


def test_figures_and_tables_come_out_as_files(store, tmp_path):
    figures, tables = tmp_path / "figures", tmp_path / "tables"
    done = run_cli(
        "report",
        "sfs:1",
        "--db",
        str(store),
        "--figures",
        str(figures),
        "--format",
        "png,svg,pdf",
        "--csv",
        str(tables),
    )
    assert done.returncode == 0, done.stderr
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}
    for name in ("load-curve", "latency-cdf-sfs-1", "latency-cdf-ops-sfs-1"):
        for kind, start in magic.items():
            assert (figures / f"{name}.{kind}").read_bytes().startswith(start), (name, kind)

    # The CSV holds the stored numbers themselves, one row per load point.
    with (tables / "sfs-summary-sfs-1.csv").open() as file:
        rows = list(csv.DictReader(file))
    with Store(store) as opened:
        trials = opened.sfs_run_trials(1)
    assert [float(r["requested_ops_per_s"]) for r in rows] == list(SFS_LOADS)
    assert [float(r["achieved_ops_per_s"]) for r in rows] == [t["result"]["achieved_rate"] for t in trials]
    assert [int(r["total_ops"]) for r in rows] == [t["result"]["latency"]["count"] for t in trials]

    # The terminal gets the key tables: the SPECsfs summary, one row per load point.
    summary = done.stdout[done.stdout.index("SPECsfs summary") :]
    for load in SFS_LOADS:
        assert f"{load:.1f}" in summary
    assert "POSIX" in summary and "Per-operation breakdown" in done.stdout


def test_a_killed_search_is_reported_with_what_it_has(store):
    done = run_cli("report", "search:2", "--db", str(store))
    assert done.returncode == 0, done.stderr
    assert "search 2 has no result yet (still running, or killed)" in done.stdout
    assert "stored trials" in done.stdout
    assert "Search trace" in done.stdout and "Per-operation breakdown" in done.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["trial:999"], "no trial 999 in the store"),
        (["search:7"], "no search 7 in the store"),
        (["sfs:9"], "no sfs run 9 in the store"),
        (["runs:1"], "is not a selector"),
        (["sfs:1", "--format", "png,gif"], "field --format: unknown figure format gif"),
        (["sfs:1", "--thresholds", "10,x"], "field --thresholds"),
    ],
)
def test_bad_selections_are_one_line_errors(store, tmp_path, capsys, args, words):
    assert peakbench(["report", *args, "--db", str(store), "--html", str(tmp_path / "r.html")]) == 2
    stderr = capsys.readouterr().err
    assert words in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_empty_missing_and_newer_stores_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty.db"
    Store(empty).close()
    newer = tmp_path / "newer.db"
    Store(newer).close()
    with sqlite3.connect(newer) as connection:
        connection.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    for db, words in (
        (empty, "holds no trials yet"),
        (tmp_path / "none.db", "no such store"),
        (newer, "newer than this peakbench understands"),
    ):
        assert peakbench(["report", "--db", str(db), "--html", str(tmp_path / "r.html")]) == 2
        stderr = capsys.readouterr().err
        assert words in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "none.db").exists()


def test_a_curve_cut_short_names_its_missing_load_points(store, tmp_path):
    # The state a SIGKILL during the last point leaves: the run still 'running', that point's trial absent
    # (a trial is stored only whole). Made from a copy of the real curve rather than by racing a kill.
    cut = tmp_path / "cut.db"
    with sqlite3.connect(store) as source, sqlite3.connect(cut) as copy:
        source.backup(copy)
        copy.execute("UPDATE sfs_runs SET status = 'running' WHERE id = 1")
        copy.execute("DELETE FROM trials WHERE sfs_run_id = 1 AND rate = ?", (SFS_LOADS[-1],))
    done = run_cli("report", "sfs:1", "--db", str(cut), "--html", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert (
        f"sfs 1 (still running, or killed) has no result at 1 of its {len(SFS_LOADS)} load points:"
        f" {SFS_LOADS[-1]:g} ops/s"
    ) in done.stdout
    summary = done.stdout[done.stdout.index("SPECsfs summary") :]
    assert f"{SFS_LOADS[0]:.1f}" in summary and f"{SFS_LOADS[-1]:.1f}" not in summary
