"""Latency over several trials: merged HDR histograms (exact) and pooled moments.

Each trial stores, overall and per op, count, mean_ms, stddev_ms, total_ms and
an HDR histogram in nanoseconds (engine/SPEC.md). Across trials, the mean and
standard deviation are pooled from the exact per-trial moments (the
histogram's bucket midpoints would round them), and percentiles and the
distribution come from the merged histogram, which is exact to its 3
significant digits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np
from hdrh.histogram import HdrHistogram

from ..contract import OpStats

NS_PER_MS = 1e6


@dataclasses.dataclass(frozen=True)
class Pooled:
    count: int
    mean_ms: float | None
    stddev_ms: float | None
    total_ms: float


def pooled(records: Iterable[OpStats | None]) -> Pooled:
    """Count, mean, sample stddev and total time over latency records of several trials (None: no record)."""
    records = [r for r in records if r is not None and r.count]
    count = sum(r.count for r in records)
    total = math.fsum(r.total_ms or r.mean_ms * r.count for r in records)  # older results: no total_ms
    if count == 0:
        return Pooled(0, None, None, 0.0)
    mean = math.fsum(r.mean_ms * r.count for r in records) / count
    if count < 2:
        return Pooled(count, mean, None, total)
    # Σ(n_i − 1)s_i² + Σ n_i(m_i − m)²: the squared deviations of all requests from the overall mean.
    squares = math.fsum((r.count - 1) * (r.stddev_ms or 0.0) ** 2 + r.count * (r.mean_ms - mean) ** 2 for r in records)
    return Pooled(count, mean, math.sqrt(squares / (count - 1)), total)


@dataclasses.dataclass(frozen=True)
class Distribution:
    """Requests by latency: the distinct recorded values (ms, ascending; each the highest value of
    its histogram bucket, as HdrHistogram reports percentiles) and how many requests had each."""

    values_ms: np.ndarray
    counts: np.ndarray

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def percentile_ms(self, percentile: float) -> float:
        """HdrHistogram's value at a percentile: the first value whose cumulative count reaches
        round(percentile% of the total), at least 1."""
        target = max(int(min(percentile, 100.0) * self.total / 100 + 0.5), 1)
        return float(self.values_ms[np.searchsorted(np.cumsum(self.counts), target)])

    def cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """(latency ms, share of requests at or below it) at every recorded value."""
        return self.values_ms, np.cumsum(self.counts) / self.total

    def share_under(self, threshold_ms: float) -> float:
        """The share of requests that took at most threshold_ms (to the histograms' precision)."""
        return float(self.counts[self.values_ms <= threshold_ms].sum() / self.total)


def merged(records: Iterable[OpStats | None]) -> Distribution | None:
    """The requests of all records' histograms together (None: no record), or None when none has any."""
    totals: dict[int, int] = {}
    for record in records:
        if record is None or not record.hist or not record.count:
            continue
        histogram = HdrHistogram.decode(record.hist)
        counts = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]
        for index in np.flatnonzero(counts):
            value = histogram.get_highest_equivalent_value(histogram.get_value_from_index(int(index)))
            totals[value] = totals.get(value, 0) + int(counts[index])
    if not totals:
        return None
    values = sorted(totals)
    return Distribution(np.array(values, dtype=float) / NS_PER_MS, np.array([totals[v] for v in values]))


def percentile_ms(distribution: Distribution | None, percentile: float) -> float | None:
    return distribution.percentile_ms(percentile) if distribution is not None else None
