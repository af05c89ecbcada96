"""`peakbench report surface:ID` and `plan:ID`: a response surface and an experiment plan's
statistics, both read back from the store they were written to."""

import sys
import textwrap

SURFACE_PLAN = """\
workload = "mail"
target = "sim://mail?disks={disks}&nfsds={nfsds}"
[design]
kind = "d-optimal"
samples = 6
[[factors]]
name = "disks"
levels = [1, 2, 3, 4]
[[factors]]
name = "nfsds"
levels = [1, 4, 16, 64]
scale = "log"
"""


def test_a_stored_surface_and_a_stored_plan_are_reported(cli, tmp_path):
    db, page = tmp_path / "p.db", tmp_path / "report.html"
    (tmp_path / "surface.toml").write_text(SURFACE_PLAN)
    assert cli("surface", str(tmp_path / "surface.toml"), "--db", str(db)).returncode == 0
    (tmp_path / "plan.toml").write_text(
        textwrap.dedent(f"""
        [[test]]
        name = "echo-{{size}}"
        loop = {{size = [1, 2]}}
        command = ["{sys.executable}", "-c", "import random; print('x=', {{size}} + random.random() / 10)"]
        metrics = {{x = 'x= ([0-9.]+)'}}
        metric = "x"
        stop = {{min_runs = 5, max_runs = 5}}
        """)
    )
    assert cli("plan", "run", str(tmp_path / "plan.toml"), "--db", str(db)).returncode == 0

    done = cli("report", "surface:1", "plan:1", "--db", str(db), "--html", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    # The surface: its samples, the fitted model's error, from the stored SurfaceResult.
    assert "Response surfaces" in text and "fitted through 6 measured peaks" in done.stdout
    # The plan: Auto-pilot's getstats table, a row per test and metric, with its run count and mean.
    assert "getstats" in text
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in done.stdout.splitlines() if "│" in line]
    rows = [row for row in cells if len(row) > 4 and row[0].startswith("echo-") and row[1] == "x"]
    assert [(row[0], row[3]) for row in rows] == [("echo-1", "5"), ("echo-2", "5")]
    assert 1 < float(rows[0][4]) < 2 < float(rows[1][4]) < 3
    # ... and each test compared with the first, as `peakbench compare` judges them (five runs each:
    # when Shapiro-Wilk doubts normality the comparison is Mann-Whitney's, which three runs can never
    # make significant).
    compared = [row for row in cells if row[:3] == ["echo-1", "echo-2", "x"]]
    assert len(compared) == 1 and "echo-2 is larger than echo-1" in text

    missing = cli("report", "surface:9", "--db", str(db))
    assert missing.returncode == 2 and "no surface 9 in the store" in missing.stderr
