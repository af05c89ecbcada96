"""Stored trials exported for other tools: an HdrHistogram interval log that the `hdrhistogram`
package reads back with the same percentiles, and OpenMetrics text that Prometheus' own parser
accepts, both from two real trials against a local directory."""

import json

import pytest
from conftest import run_cli
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from prometheus_client.openmetrics.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration  # the module's store is filled by real trials


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    where = tmp_path_factory.mktemp("exports")
    (where / "target").mkdir()
    db = where / "p.db"
    for rate in ("40", "0.08k"):  # the second also checks a rate written with a suffix
        done = run_cli(
            "run", "web-server", "--target", str(where / "target"), "--db", str(db), "--rate", rate, "--runtime", "1"
        )
        assert done.returncode == 0, done.stderr
    return db


def stored_trials(db):
    exported = run_cli("results", "export", "--json", "-", "--db", str(db))
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout)


def test_the_hdrhistogram_log_reads_back_with_the_stored_percentiles(store, tmp_path):
    log = tmp_path / "trials.hlog"
    done = run_cli("results", "export", "--hlog", str(log), "--db", str(store))
    assert done.returncode == 0, done.stderr
    reader = HistogramLogReader(str(log), HdrHistogram(1, 60 * 10**9, 3))
    trials = stored_trials(store)
    assert [t["rate"] for t in trials] == [40.0, 80.0]
    for trial in trials:  # one interval per trial, in the order they ran
        interval = reader.get_next_interval_histogram()
        stored = HdrHistogram.decode(trial["result"]["latency"]["hist"])
        assert interval.get_total_count() == stored.get_total_count() == trial["result"]["latency"]["count"]
        for percentile in (50, 90, 99, 99.9):
            assert interval.get_value_at_percentile(percentile) == stored.get_value_at_percentile(percentile)
    assert reader.get_next_interval_histogram() is None


def test_openmetrics_export_parses_and_carries_the_stored_figures(store):
    done = run_cli("results", "export", "--openmetrics", "-", "trial:2", "--db", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(done.stdout)}
    trial = stored_trials(store)[1]
    achieved = families["peakbench_achieved_rate"].samples
    assert [(s.labels["trial"], s.value) for s in achieved] == [("2", trial["result"]["achieved_rate"])]
    latency = families["peakbench_latency_seconds"]
    assert latency.type == "summary"
    overall = {s.name + s.labels.get("quantile", ""): s.value for s in latency.samples if s.labels["op"] == "all"}
    assert overall["peakbench_latency_seconds_count"] == trial["result"]["latency"]["count"]
    assert overall["peakbench_latency_seconds0.99"] == pytest.approx(trial["result"]["latency"]["p99_ms"] / 1e3)
