"""Confidence intervals of a mean over independent trials, and accuracy.

`t_interval`/`stein_interval`: Student's t, for quantities that may take any
sign (differences, throughputs). `response_interval`: for a positive, skewed
quantity such as a trial's mean response time, whose trial-to-trial spread
explodes and turns right-skewed near saturation; a t-interval of the raw
means there reaches below zero. With x̄ the plain mean of the n trial means
and s the deviation of their logs,
    point  x̄
    bounds x̄·exp(±t·√(s0²/n + s0⁴/(2(n−1))))     (Cox's half-width of a lognormal mean)
which is positive, holds its own point, and in Stein's two-stage form takes
s0 and t's degrees of freedom from the pilot stage alone, so the number of
trials fixed from the pilot does not bias the width. It claims: the
steady-state mean response at this load lies in [low, high] with the stated
confidence, for trials as long as these. Two departures from Cox's
interval, each measured in simulated queues near saturation (BENCHMARKS §7):
the point is the plain mean, not exp(ȳ + s²/2), because there the logs of
trial means are themselves right-skewed, which puts the lognormal point and
the whole interval low; and below STEIN_PILOT trials s is at least the
deviation the trials' own quarters imply for a trial mean (batch means,
`batch_log_deviation`), because one or two degrees of freedom let two or
three trials that happen to agree (right-skewed trials that all missed the
tail) claim a narrow interval their own windows contradict, and the search
looks at its interval after every trial. From the pilot on the trials'
spread alone sets s: batch means of correlated quarters understate it less
than they overstate it on long trials, where a floor over-covered.
"""

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


def log_half_width(log_deviation: float, count: int, pilot_size: int, confidence: float) -> float:
    """The half-width, on the log scale, of `response_interval` over `count` values."""
    variance = log_deviation**2 / count + log_deviation**4 / (2 * max(count - 1, 1))
    return t_quantile(confidence, pilot_size - 1) * math.sqrt(variance)


def stein_trials(log_deviation: float, confidence: float, accuracy: float, pilot: int) -> int:
    """Stein's total trials: the fewest N ≥ pilot whose `response_interval`, with the pilot's
    deviation s0 of the log trial means, reaches `accuracy` (1 − tanh of the log half-width)."""
    allowed = math.atanh(1 - accuracy)
    bound = t_quantile(confidence, pilot - 1) * log_deviation / allowed
    count = max(pilot, math.ceil(bound**2))
    while log_half_width(log_deviation, count, pilot, confidence) > allowed:
        count = max(count + 1, math.ceil(count * 1.01))
    return count


def sample_deviation(values: Sequence[float]) -> float:
    """The sample standard deviation (n − 1 in the denominator) of at least two values."""
    if len(values) < 2:
        raise ValueError("a deviation needs at least two values")
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def t_interval(values: Sequence[float], confidence: float) -> ConfidenceInterval:
    """The t-based interval of the mean of `values` (at least two) at `confidence`."""
    return stein_interval(values, sample_deviation(values), len(values), confidence)


def stein_interval(
    values: Sequence[float], pilot_deviation: float, pilot_size: int, confidence: float
) -> ConfidenceInterval:
    """Stein's two-stage interval: the mean of all values ± t(pilot−1)·s_pilot/√n.

    Exact at `confidence` for normal values when n was fixed from the pilot's
    deviation alone; with n = pilot it is the ordinary t-interval.
    """
    count = len(values)
    mean = math.fsum(values) / count
    half_width = t_quantile(confidence, pilot_size - 1) * pilot_deviation / math.sqrt(count)
    return ConfidenceInterval(mean, mean - half_width, mean + half_width, confidence, count)


def response_interval(
    values: Sequence[float],
    confidence: float,
    pilot_log_deviation: float | None = None,
    pilot_size: int | None = None,
    quarters: Sequence[Sequence[float]] = (),
) -> ConfidenceInterval:
    """The interval of the mean of positive `values` (at least two trial means), see the module doc.

    Without a pilot, the deviation and degrees of freedom are those of all values; `quarters`, the
    quarter means of those trials where all four are known (`known_quarters`), floor the deviation
    below STEIN_PILOT values.
    """
    if any(not v > 0 for v in values):
        raise ValueError("a response interval needs positive values")
    count = len(values)
    if pilot_log_deviation is None:
        pilot_log_deviation, pilot_size = log_deviation(values), count
        if count < STEIN_PILOT and quarters:
            pilot_log_deviation = max(pilot_log_deviation, batch_log_deviation(quarters))
    mean = math.fsum(values) / count
    half_width = log_half_width(pilot_log_deviation, count, pilot_size, confidence)
    return ConfidenceInterval(mean, mean * math.exp(-half_width), mean * math.exp(half_width), confidence, count)


def known_quarters(quarter_means: Sequence[float | None] | None) -> tuple[float, ...] | None:
    """A trial's four quarter means when all are known and positive, else None (engines from before them)."""
    if not quarter_means or len(quarter_means) != 4 or any(q is None or not q > 0 for q in quarter_means):
        return None
    return tuple(quarter_means)


def batch_log_deviation(quarters: Sequence[Sequence[float]]) -> float:
    """The deviation of a trial's log mean that its quarters imply, as batch means do: the root of the
    mean over trials of (the variance of the log quarter means) / 4."""
    variances = [sample_deviation([math.log(q) for q in trial]) ** 2 for trial in quarters]
    return math.sqrt(math.fsum(variances) / len(variances) / 4)


def log_deviation(values: Sequence[float]) -> float:
    """The sample deviation of the logs of positive values: about their coefficient of variation."""
    return sample_deviation([math.log(v) for v in values])
