"""Sections fed from outside the store's trials: a response surface mapped on simulated servers, and
harness results in the documented shape (report/sections/harness.py)."""

import json

import pytest
from peakbench import sim
from peakbench.cli import main as peakbench
from peakbench.controller import SearchSettings
from peakbench.controller.design import d_optimal
from peakbench.controller.surface import map_surface
from peakbench.report.model import format_value

HARNESS = {
    "getstats": [
        {
            "test": "ext4",
            "metric": "elapsed",
            "unit": "s",
            "count": 10,
            "mean": 12.5,
            "median": 12.4,
            "low": 12.1,
            "high": 12.9,
            "min": 11.8,
            "max": 13.6,
            "sdev_pct": 4.1,
            "hw_pct": 3.2,
            "overhead_pct": None,
        },
        {
            "test": "xfs",
            "metric": "elapsed",
            "unit": "s",
            "count": 8,
            "mean": 14.0,
            "median": 14.1,
            "low": 13.5,
            "high": 14.5,
            "min": 13.1,
            "max": 14.9,
            "sdev_pct": 3.0,
            "hw_pct": 3.5,
            "overhead_pct": 12.0,
        },
    ],
    "comparisons": [
        {
            "a": "ext4",
            "b": "xfs",
            "metric": "elapsed",
            "difference": 1.5,
            "ci_low": 0.9,
            "ci_high": 2.1,
            "test": "Welch t",
            "p_value": 0.0004,
            "verdict": "REJECT u1 = u2",
        }
    ],
    "warnings": [{"kind": "outlier", "message": "run 7 of ext4: elapsed z = 2.4"}],
}


@pytest.fixture(scope="module")
def one_trial(engine_path, tmp_path_factory):
    db = tmp_path_factory.mktemp("sections") / "p.db"
    assert (
        peakbench(
            ["run", "mail", "--target", "null://", "--rate", "200", "--warmup", "0", "--runtime", "1", "--db", str(db)]
        )
        == 0
    )
    return db


def test_a_surface_and_harness_results_are_reported(one_trial, tmp_path, capsys):
    surface = sim.SURFACES["db-tp"]
    settings = SearchSettings(runlength_s=60, warmup_s=10)
    mapped = map_surface(
        surface.factors,
        d_optimal(surface.factors, 8),
        lambda s: sim.SimulatedTarget(surface.server(s), warmup_s=10, seed=3),
        settings,
    )
    (tmp_path / "surface.json").write_text(json.dumps(mapped.to_dict()))
    (tmp_path / "harness.json").write_text(json.dumps(HARNESS))
    html = tmp_path / "report.html"
    capsys.readouterr()
    assert (
        peakbench(
            [
                "report",
                "--db",
                str(one_trial),
                "--html",
                str(html),
                "--surface",
                str(tmp_path / "surface.json"),
                "--harness",
                str(tmp_path / "harness.json"),
                "--figures",
                str(tmp_path / "fig"),
                "--format",
                "svg",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    measured = [o for o in mapped.outcomes if o.failure is None]
    assert (
        f"fitted through {len(measured)} measured peaks, each weighted by its interval; held-out error"
        f" (leave-one-out MAPE) {mapped.loo_mape:.1f}% over n={len(measured)} samples;"
        f" {len(measured) - 6} residual degrees of freedom" in " ".join(out.split())
    )
    assert f"{len(mapped.outcomes) - len(measured)} sample(s) without a peak" in out
    assert "warning: outlier: run 7 of ext4" in out
    for heading in ("COUNT", "MEAN", "MEDIAN", "LOW", "HIGH", "MIN", "MAX", "SDEV%", "HW%", "O/H%"):
        assert heading in out
    assert "REJECT u1 = u2" in out and "Welch t" in out
    page = html.read_text()
    assert 'id="fig-surface-1-disks-nfsds"' in page and 'id="fig-surface-1-fit"' in page
    assert (tmp_path / "fig" / "surface-1-disks-nfsds.svg").exists()
    # Every sample's prediction in the table is the fitted model's, next to its measured peak.
    # ... and its prediction interval, which contains the prediction.
    # Compared as the table formats them: "93.0" passed only while some other number happened to hold it.
    for outcome in measured:
        assert f">{format_value(outcome.predicted)}<" in page, outcome.predicted
        assert f">{format_value(outcome.result.peak_rate)}<" in page, outcome.result.peak_rate
        assert outcome.predicted_low < outcome.predicted < outcome.predicted_high
        assert (
            f">{format_value(outcome.predicted_low)}<" in page and f">{format_value(outcome.predicted_high)}<" in page
        )
    assert "95% prediction intervals (t on 2 residual degrees of freedom)" in page


def test_a_surface_without_residual_freedom_claims_no_error(one_trial, tmp_path, capsys):
    surface = sim.SURFACES["web-server"]
    mapped = map_surface(
        surface.factors,
        d_optimal(surface.factors, 6),
        lambda s: sim.SimulatedTarget(surface.server(s), seed=3),
        SearchSettings(),
    )
    (tmp_path / "surface.json").write_text(json.dumps(mapped.to_dict()))
    html = tmp_path / "report.html"
    capsys.readouterr()
    assert (
        peakbench(["report", "--db", str(one_trial), "--html", str(html), "--surface", str(tmp_path / "surface.json")])
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    page = html.read_text()
    assert "no error estimate: 6 measured peaks for 6 coefficients leave no residual degrees of freedom" in out
    assert "MAPE" not in out and "MAPE" not in page and "R²" not in page
    assert "No prediction intervals: the fit has no residual degrees of freedom." in page


def test_unreadable_attachments_are_one_line_errors(one_trial, tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    for option, path in (("--surface", tmp_path / "bad.json"), ("--harness", tmp_path / "none.json")):
        assert peakbench(["report", "--db", str(one_trial), option, str(path)]) == 2
        error = capsys.readouterr().err
        assert f"{path}: field {option}: " in error and len(error.strip().splitlines()) == 1
