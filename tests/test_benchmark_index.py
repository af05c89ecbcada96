"""benchmarks/results/INDEX.md lists exactly the files in benchmarks/results/ (no processes: file names only)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("benchmark_index", REPO / "benchmarks" / "index.py")
index = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(index)


def test_the_committed_index_lists_every_result_file_and_no_other():
    assert index.disagreements(index.RESULTS) == [], "run: python3 benchmarks/index.py"


def test_a_result_file_added_or_removed_after_indexing_is_reported(tmp_path):
    machine = {"date_utc": "2026-11-27T18:00:00+00:00", "git_commit": "abc1234", "cpu_model": "AMD EPYC", "cores": 2}
    (tmp_path / "floor.json").write_text(json.dumps({"benchmark": "floor", "machine": machine}))
    (tmp_path / "gone.txt").write_text("notes")
    (tmp_path / "INDEX.md").write_text(index.render(tmp_path))
    assert index.disagreements(tmp_path) == []
    assert "| `floor.json` | floor | 2026-11-27T18:00:00+00:00 | abc1234 | AMD EPYC, 2 cores |" in index.render(
        tmp_path
    )

    (tmp_path / "gone.txt").unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new.json").write_text("{}")
    assert index.disagreements(tmp_path) == [
        "not in INDEX.md: sub/new.json",
        f"in INDEX.md but not in {tmp_path.name}/: gone.txt",
    ]
