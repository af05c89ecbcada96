"""Graphit's plots of a plan's results: `peakbench report plan:ID` draws each test's mean with its
interval and the metric over each loop variable, as files and inline in the HTML report, opened in
real headless Chromium; an imported GNU `time -v` plan's getstats shows there too."""

import subprocess

import pytest
from chromium import Page, find_chromium
from conftest import REPO
from peakbench.cli import main as peakbench
from peakbench.harness import importing
from peakbench.report import selection
from peakbench.report.model import Figure, ReportOptions
from peakbench.report.sections import harness
from peakbench.store import Store

ARTEFACTS = REPO / "test-artifacts"
# (fs, threads, ops, cpu): two runs at most points, one at xfs with 2 threads.
RUNS = [
    ("ext4", 1, 100, 1.0),
    ("ext4", 1, 110, 1.1),
    ("ext4", 2, 180, 2.0),
    ("ext4", 2, 200, 2.1),
    ("ext4", 4, 300, 3.0),
    ("ext4", 4, 320, 3.2),
    ("xfs", 1, 90, 1.0),
    ("xfs", 1, 96, 1.1),
    ("xfs", 2, 150, 3.0),
    ("xfs", 4, 240, 4.0),
    ("xfs", 4, 260, 4.1),
]


pytestmark = pytest.mark.integration  # plan import and report run as processes, the figures in Chromium


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """A store with plan 1: a tool's CSV over fs × threads; plan 2: real GNU time -v output."""
    root = tmp_path_factory.mktemp("plans")
    table = root / "tool.csv"
    table.write_text("fs,threads,ops,cpu\n" + "".join(f"{fs},{t},{ops},{cpu}\n" for fs, t, ops, cpu in RUNS))
    db = root / "s.db"
    assert importing.import_plan("tool", [table], "csv", db, "ops", ("fs", "threads"))[0] == 1
    for run in (1, 2, 3):
        subprocess.run(["/usr/bin/time", "-v", "-o", root / f"sleep-{run}.txt", "sleep", "0.01"], check=True)
    files = sorted(root.glob("sleep-*.txt"))
    assert importing.import_plan("gnu", files, "gnu-time", db, None)[0] == 2
    return root, db


@pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium (scripts/test.sh installs it)")
def test_plan_figures_as_files_and_in_a_real_browser_with_imported_getstats(plans, tmp_path):
    _, db = plans
    pages = {number: tmp_path / f"plan-{number}.html" for number in (1, 2)}
    out = tmp_path / "figures"
    files = ["--figures", str(out), "--format", "png,svg,pdf"]
    assert peakbench(["report", "plan:1", "--db", str(db), "--html", str(pages[1]), *files]) == 0
    assert peakbench(["report", "plan:2", "--db", str(db), "--html", str(pages[2])]) == 0
    stems = {path.stem for path in out.iterdir()}
    # Bars per test, and each metric over each loop variable grouped by the other; cpu (Auto-pilot's CPU time) too.
    assert stems == {
        f"plan-1-{metric}-{kind}" for metric in ("ops", "cpu") for kind in ("bars", "over-fs", "over-threads")
    }
    for stem in stems:
        assert (out / f"{stem}.png").read_bytes().startswith(b"\x89PNG")
        assert (out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert "<svg" in (out / f"{stem}.svg").read_text()
    look = """(() => {
      const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
      return {
        figures: Object.fromEntries([...document.querySelectorAll("figure")].map(f => [f.id, {
            size: box(f.querySelector("svg")),
            paths: f.querySelectorAll("svg path").length,
            caption: f.querySelector("figcaption").textContent}])),
        getstats: [...document.querySelectorAll("#table-getstats tbody tr")].map(
            r => [...r.cells].map(c => c.textContent)),
      };
    })()"""
    ARTEFACTS.mkdir(exist_ok=True)
    seen = {}
    with Page(width=1280, height=900) as page:
        for number, html in pages.items():
            page.open(html)
            seen[number] = page.evaluate(look)
            page.screenshot(ARTEFACTS / f"plan-{number}-report.png")
        problems, failed = page.problems(), page.failed_requests()
    assert problems == [] and failed == []

    tool = seen[1]["figures"]
    assert set(tool) >= {"fig-plan-1-ops-bars", "fig-plan-1-ops-over-threads", "fig-plan-1-ops-over-fs"}
    for figure in tool.values():
        width, height = figure["size"]
        assert width > 300 and height > 150 and figure["paths"] > 20  # drawn, not an empty box
    bars = tool["fig-plan-1-ops-bars"]
    assert "n = 1 to 2 runs per test" in bars["caption"] and "one run has no whisker" in bars["caption"]
    threads = tool["fig-plan-1-ops-over-threads"]
    assert "one line per fs" in threads["caption"]

    gnu = seen[2]
    rows = {(row[0], row[1]): row for row in gnu["getstats"]}
    assert rows[("sleep", "elapsed")][3] == "3"  # COUNT: the three imported runs
    assert "fig-plan-2-elapsed-bars" in gnu["figures"]
    assert "n = 3 runs per test" in gnu["figures"]["fig-plan-2-elapsed-bars"]["caption"]


def test_each_whisker_spans_its_tests_interval_and_a_single_run_has_none(plans):
    _, db = plans
    with Store(db, readonly=True) as store:
        data = selection.select(store, ["plan:1"])
    blocks = harness.section(data, ReportOptions()).blocks
    (bars,) = [b.figure for b in blocks if isinstance(b, Figure) and b.name == "plan-1-ops-bars"]
    rows = {r["test"]: r for r in data.extra["harness"]["getstats"] if r["metric"] == "ops"}
    labels = [tick.get_text() for tick in bars.axes[0].get_xticklabels()]
    (whiskers,) = [c for c in bars.axes[0].collections if len(c.get_segments())]
    spans = {labels[round(s[0][0])]: (s[0][1], s[1][1]) for s in whiskers.get_segments()}
    assert set(spans) == {test for test, row in rows.items() if row["count"] >= 2} and "tool-xfs-2" not in spans
    for test, (low, high) in spans.items():
        assert (low, high) == pytest.approx((max(rows[test]["low"], 0.0), rows[test]["high"]))
        assert low <= rows[test]["mean"] <= high
