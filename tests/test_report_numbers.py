"""The report's own arithmetic: pooling trials, merging histograms, SPEC's overall response time."""

import math
import random

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from peakbench.contract import OpStats
from peakbench.report.histograms import merged, pooled
from peakbench.report.sections.load_curve import overall_response_time


def trial_record(latencies_ms: list[float]) -> OpStats:
    """What the engine stores for one trial: moments and an HDR histogram in nanoseconds."""
    histogram = HdrHistogram(1, 3_600_000_000_000, 3)
    for value in latencies_ms:
        histogram.record_value(round(value * 1e6))
    values = np.array(latencies_ms)
    return OpStats.load(
        {
            "count": len(values),
            "mean_ms": float(values.mean()),
            "stddev_ms": float(values.std(ddof=1)),
            "total_ms": float(values.sum()),
            "hist": histogram.encode().decode(),
        }
    )


@pytest.fixture
def trials():
    rng = random.Random(7)
    # Three trials of different sizes and speeds, like loads of a search.
    return [
        [rng.lognormvariate(math.log(scale), 1.0) for _ in range(count)]
        for scale, count in ((0.2, 500), (1.5, 1200), (30.0, 80))
    ]


def test_pooled_moments_equal_those_of_every_request(trials):
    together = np.concatenate(trials)
    moments = pooled(trial_record(t) for t in trials)
    assert moments.count == len(together)
    assert moments.mean_ms == pytest.approx(together.mean(), rel=1e-12)
    assert moments.stddev_ms == pytest.approx(together.std(ddof=1), rel=1e-9)
    assert moments.total_ms == pytest.approx(together.sum(), rel=1e-12)


def test_merged_percentiles_and_shares_agree_with_hdrhistogram(trials):
    records = [trial_record(t) for t in trials]
    distribution = merged(records)
    reference = HdrHistogram.decode(records[0].hist)
    for record in records[1:]:
        reference.add(HdrHistogram.decode(record.hist))
    assert distribution.total == sum(len(t) for t in trials)
    for percentile in (0.1, 50, 90, 99, 99.9, 100):
        assert distribution.percentile_ms(percentile) == reference.get_value_at_percentile(percentile) / 1e6
    together = np.concatenate(trials)
    for threshold in (0.5, 10, 100):
        exact = (together <= threshold).mean()
        assert distribution.share_under(threshold) == pytest.approx(exact, abs=0.005)  # 3 significant digits
    values, shares = distribution.cdf()
    assert list(values) == sorted(values) and shares[-1] == 1.0


def test_a_record_without_requests_adds_nothing(trials):
    empty = OpStats.load({"count": 0, "mean_ms": 0.0, "stddev_ms": 0.0, "total_ms": 0.0, "hist": None})
    assert merged([empty, None]) is None
    assert pooled([empty]).count == 0 and pooled([empty]).mean_ms is None


def test_overall_response_time_is_the_area_under_the_curve_from_zero_over_the_peak():
    # SPEC's curve starts at zero throughput, flat at the first point's response: 0-100 ops/s at 1 ms (100),
    # then trapezoids 100-200 (150) and 200-400 (1200): 1450 ms·ops/s over the peak 400 ops/s.
    assert overall_response_time([(400, 10.0), (100, 1.0), (200, 2.0)]) == pytest.approx(1450 / 400)
    # The curves of the issue: a tmpfs sfs run (100·0.04 + 100·0.045 + 100·0.055 = 14, over 300), and a flat one.
    assert overall_response_time([(100, 0.04), (200, 0.05), (300, 0.06)]) == pytest.approx(14 / 300)
    assert overall_response_time([(100, 1.0), (200, 1.0), (300, 1.0)]) == pytest.approx(1.0)
    assert overall_response_time([(100, 1.0)]) is None


def test_overall_response_time_lies_between_the_smallest_and_largest_measured_mean():
    generator = random.Random(14)
    for _ in range(2000):
        points = [(generator.uniform(0, 5000), generator.lognormvariate(0, 2)) for _ in range(generator.randint(2, 12))]
        ort = overall_response_time(points)
        means = [mean for _, mean in points]
        assert min(means) * (1 - 1e-12) <= ort <= max(means) * (1 + 1e-12), points
