"""Confidence intervals of a mean over independent trials (Student's t), and accuracy."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import lru_cache



@dataclasses.dataclass(frozen=True)
class ConfidenceInterval:
    mean: float
    low: float
    high: float
    confidence: float
    count: int

    @property
    def accuracy(self) -> float:
        """The paper's accuracy: 1 − (high − low)/(high + low)."""
        return accuracy(self.low, self.high)


def accuracy(low: float, high: float) -> float:
    if high + low <= 0:
        return 0.0
    return 1 - (high - low) / (high + low)


@lru_cache(maxsize=1024)
def t_quantile(confidence: float, degrees_of_freedom: int) -> float:
    """The two-sided Student-t critical value for `confidence`."""
    from scipy import stats  # here, not at the top: scipy.stats takes seconds to import and most commands never need it

    return float(stats.t.ppf(0.5 + confidence / 2, degrees_of_freedom))


STEIN_PILOT = 4  # first-stage trials of Stein's procedure (at least min_trials)


def stein_trials(trial_cv: float, confidence: float, half_width: float, pilot: int) -> int:
    """Stein's total trials N = max(pilot, ⌈(t(pilot−1)·cv/h)²⌉) for a relative half-width h."""
    return max(pilot, math.ceil((t_quantile(confidence, pilot - 1) * trial_cv / half_width) ** 2))


def sample_deviation(values: Sequence[float]) -> float:
    """The sample standard deviation (n − 1 in the denominator) of at least two values."""
    if len(values) < 2:
        raise ValueError("a deviation needs at least two values")
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def t_interval(values: Sequence[float], confidence: float) -> ConfidenceInterval:
    """The t-based interval of the mean of `values` (at least two) at `confidence`."""
    return stein_interval(values, sample_deviation(values), len(values), confidence)


def stein_interval(values: Sequence[float], pilot_deviation: float, pilot_size: int,
                   confidence: float) -> ConfidenceInterval:
    """Stein's two-stage interval: the mean of all values ± t(pilot−1)·s_pilot/√n.

    Exact at `confidence` for normal values when n was fixed from the pilot's
    deviation alone; with n = pilot it is the ordinary t-interval.
    """
    count = len(values)
    mean = math.fsum(values) / count
    half_width = t_quantile(confidence, pilot_size - 1) * pilot_deviation / math.sqrt(count)
    return ConfidenceInterval(mean, mean - half_width, mean + half_width, confidence, count)
