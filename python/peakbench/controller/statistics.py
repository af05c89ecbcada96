"""Confidence intervals of a mean over independent trials, and accuracy.

`t_interval`/`stein_interval`: Student's t, for quantities that may take any
sign (differences, throughputs). `response_interval`: for a positive, skewed
quantity such as a trial's mean response time, whose trial-to-trial spread
explodes and turns right-skewed near saturation; a t-interval of the raw
means there reaches below zero. It is Cox's interval of a lognormal mean:
with y = ln(trial mean), ȳ and s² over the trials,
    point  exp(ȳ + s²/2)
    bounds exp(ȳ + s²/2 ± t·√(s0²/n + s0⁴/(2(n−1))))
which is positive, holds its own point, and in Stein's two-stage form takes
s0 and t's degrees of freedom from the pilot stage alone, so the number of
trials fixed from the pilot does not bias the width.
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
    return trials_for_half_width(log_deviation, confidence, math.atanh(1 - accuracy), pilot)


def trials_for_half_width(log_deviation: float, confidence: float, allowed: float, pilot: int) -> int:
    """The fewest N ≥ pilot whose `response_interval`, with the pilot's deviation s0 of the log trial
    means, has a log half-width of at most `allowed` (> 0)."""
    bound = t_quantile(confidence, pilot - 1) * log_deviation / allowed
    count = max(pilot, math.ceil(min(bound**2, 1e9)))
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
    values: Sequence[float], confidence: float, pilot_log_deviation: float | None = None, pilot_size: int | None = None
) -> ConfidenceInterval:
    """Cox's lognormal interval of the mean of positive `values` (at least two), see the module doc.

    Without a pilot, the deviation and degrees of freedom are those of all values.
    """
    if any(not v > 0 for v in values):
        raise ValueError("a response interval needs positive values")
    logs = [math.log(v) for v in values]
    count = len(logs)
    deviation = sample_deviation(logs)
    if pilot_log_deviation is None:
        pilot_log_deviation, pilot_size = deviation, count
    centre = math.fsum(logs) / count + deviation**2 / 2
    half_width = log_half_width(pilot_log_deviation, count, pilot_size, confidence)
    return ConfidenceInterval(
        math.exp(centre), math.exp(centre - half_width), math.exp(centre + half_width), confidence, count
    )


# A trial that starts on an empty queue reads R̄ low by its queue's deficit while filling, about the queue's
# relaxation time over the trial's length; the squared deviation s² of the log trial means measures the same
# ratio (a mean over r seconds of a process correlated over τ has cv² ≈ 2τ/r), so the stated interval takes the
# low read to lie between these multiples of s² on the log scale. Measured, not derived: on the simulated M/M/1
# queue they hold quick (c 90%) and careful (c 95%) cells within c ± 2 points (BENCHMARKS.md §7).
TRANSIENT_BIAS_LOW = 0.8
TRANSIENT_BIAS_HIGH = 3.0


def stated_response_interval(
    values: Sequence[float], drifts: Sequence[float], confidence: float, claimed_on_pilot: bool = False
) -> ConfidenceInterval:
    """R̄'s interval as a report states it, from the trial means `values` and the trials' drifts
    d = log(second half's mean / first half's): `response_interval` of all values, with three changes
    (four for a load claimed as the peak on its pilot stage, `claimed_on_pilot`).

    - Below STEIN_PILOT trials the deviation is floored by the trials' halves (floored_log_deviation), as the
      search's own classification does (about zero, so a systematic rise widens it too).
    - Trials that start from an empty queue near saturation read low together, by more the more their means
      vary (see TRANSIENT_BIAS_LOW): the low end is raised by exp(TRANSIENT_BIAS_LOW·s²) and the upper end
      by exp(TRANSIENT_BIAS_HIGH·s²). Far from saturation, or with long trials, s² is small and so is this.
    - A rising trial's second half shows how far it still had to go, so the upper end is raised by a
      further exp(2·mean d) when that is positive. The factor 2 is measured, not derived (BENCHMARKS.md §7).
    - `claimed_on_pilot`: the search claims a load on its first stage (Stein's pilot) when the trial means happen
      to agree, so their deviation s is the very statistic the claim selected on, and an interval on s alone is
      too narrow there (it held the true mean in 66-95% of such simulated claims at c = 95%, BENCHMARKS.md §7).
      The trials' halves estimate the same spread independently of s, and the claim did not select on them:
      the width rests on the two pooled (claim_deviation), with t on their degrees of freedom together.
    Positive, and holds its point (the low end never passes it).
    """
    deviation = floored_log_deviation(values, drifts)
    if claimed_on_pilot and len(drifts) >= 2:
        # response_interval takes t's degrees of freedom as its pilot's size − 1
        pooled_size = len(values) + len(drifts) - 1
        interval = response_interval(values, confidence, claim_deviation(deviation, len(values), drifts), pooled_size)
    else:
        interval = response_interval(values, confidence, deviation, len(values))
    rise = max(math.fsum(drifts) / len(drifts), 0.0) if drifts else 0.0
    spread = deviation**2
    return dataclasses.replace(
        interval,
        low=min(interval.low * math.exp(TRANSIENT_BIAS_LOW * spread), interval.mean),
        high=interval.high * math.exp(2 * rise + TRANSIENT_BIAS_HIGH * spread),
    )


# The halves' estimate enters claim_deviation times this. Measured, not derived: halves of one trial are not
# independent near saturation, and the pooled interval covers differently with trial length and load factor.
# Chosen from 0.5-1.0 on some seeds of the simulated queue (the most of 12 cells within c ± 2 points, then the least
# excess) and checked on held-out seeds (BENCHMARKS.md §7 says which); at 1.0 quick claims at ρ 0.95 held 92.7%.
CLAIM_HALVES_WEIGHT = 0.85


def claim_deviation(deviation: float, count: int, drifts: Sequence[float]) -> float:
    """The deviation `deviation` of `count` log trial means pooled with what at least two drifts
    d = log(second half's mean / first half's) show of the same spread, times CLAIM_HALVES_WEIGHT, each by its
    degrees of freedom: for independent halves var(log trial mean) ≈ var(d)/4, d's deviation taken about its
    own mean so that a rise common to the trials does not count as spread."""
    halves = CLAIM_HALVES_WEIGHT * sample_deviation(drifts) / 2
    freedom = count - 1, len(drifts) - 1
    return math.sqrt((freedom[0] * deviation**2 + freedom[1] * halves**2) / sum(freedom))


def floored_log_deviation(values: Sequence[float], drifts: Sequence[float]) -> float:
    """The deviation of the log trial means `values`, below STEIN_PILOT trials at least what the trials'
    drifts d = log(second half's mean / first half's) show: for independent halves var(log trial mean)
    ≈ var(d)/4, so s ≥ √(mean d²)/2. One or two degrees of freedom let two trials that happen to agree
    give an interval far too narrow (a real search read 32.847 and 32.847 ms: "95% CI [32.8, 32.8]")."""
    deviation = log_deviation(values)
    if len(values) < STEIN_PILOT and drifts:
        deviation = max(deviation, math.sqrt(math.fsum(d * d for d in drifts) / len(drifts)) / 2)
    return deviation


def log_deviation(values: Sequence[float]) -> float:
    """The sample deviation of the logs of positive values: about their coefficient of variation."""
    return sample_deviation([math.log(v) for v in values])
