"""Response surfaces: the peak rate over samples of factors (the paper's Algorithm 1 and §4).

map_surface searches the peak of each given sample (seeded from the peak of
the nearest finished sample), fits the quadratic model with statsmodels and
reports predicted vs measured and the mean absolute percentage error.
A sample whose search fails, or whose trial runner raises (a configure
command failed, a server never became ready), is recorded with the reason
and the rest go on, unless fail_fast.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from .design import Factor, Sample, coded, quadratic_row, quadratic_terms
from .policies import DEFAULT_POLICY
from .result import PEAK, SearchResult
from .search import Progress, RunTrial, find_peak
from .settings import SearchSettings


@dataclasses.dataclass(frozen=True)
class QuadraticSurface:
    factors: tuple[Factor, ...]
    terms: tuple[str, ...]
    coefficients: tuple[float, ...]  # on coded factors, in `terms` order
    r_squared: float | None  # None when the fit has no residual degrees of freedom

    @classmethod
    def fit(cls, factors: Sequence[Factor], samples: Sequence[Sample], peaks: Sequence[float]) -> QuadraticSurface:
        terms = quadratic_terms(factors)
        if len(samples) < len(terms):
            raise ValueError(f"a quadratic in {len(factors)} factors needs at least {len(terms)} "
                             f"measured samples (got {len(samples)})")
        import statsmodels.api as sm  # here, not at the top: it takes seconds to import

        regressors = np.array([quadratic_row(coded(factors, s)) for s in samples])
        fitted = sm.OLS(np.asarray(peaks, dtype=float), regressors).fit()
        r_squared = float(fitted.rsquared) if fitted.df_resid > 0 else None
        return cls(tuple(factors), tuple(terms), tuple(float(b) for b in fitted.params), r_squared)

    def predict(self, sample: Sample) -> float:
        return float(np.dot(self.coefficients, quadratic_row(coded(self.factors, sample))))


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error, in percent."""
    if not measured:
        raise ValueError("MAPE needs at least one measured value")
    return 100 * sum(abs(p - m) / abs(m) for p, m in zip(predicted, measured)) / len(measured)


@dataclasses.dataclass(frozen=True)
class SampleOutcome:
    sample: Sample
    seed_load: float | None
    result: SearchResult | None  # None when the trial runner could not be set up
    failure: str | None  # why no peak was measured, or None
    predicted: float | None  # the fitted surface's peak rate for this sample


@dataclasses.dataclass(frozen=True)
class SurfaceResult:
    factors: tuple[Factor, ...]
    outcomes: list[SampleOutcome]
    surface: QuadraticSurface | None  # None when too few samples found a peak
    mape: float | None  # over the measured samples (in-sample), percent
    cost_seconds: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def visiting_order(factors: Sequence[Factor], samples: Sequence[Sample]) -> list[Sample]:
    """Each next sample is the nearest unvisited one, so every search has a near seed."""
    remaining = list(samples)
    order = [remaining.pop(0)] if remaining else []
    while remaining:
        last = coded(factors, order[-1])
        nearest = min(range(len(remaining)), key=lambda i: math.dist(last, coded(factors, remaining[i])))
        order.append(remaining.pop(nearest))
    return order


def map_surface(factors: Sequence[Factor], samples: Sequence[Sample],
                trial_runner_for: Callable[[Sample], RunTrial],
                settings: SearchSettings | None = None, policy: str = DEFAULT_POLICY,
                seeding: bool = True, fail_fast: bool = False,
                progress: Callable[[Sample], Progress | None] | None = None) -> SurfaceResult:
    """Search the peak of every sample and fit the quadratic surface through the peaks found."""
    factors = tuple(factors)
    settings = settings or SearchSettings()
    finished: list[tuple[Sample, float]] = []
    searched: list[tuple[Sample, float | None, SearchResult | None, str | None]] = []
    for sample in visiting_order(factors, samples):
        seed = None
        if seeding and finished:
            here = coded(factors, sample)
            seed = min(finished, key=lambda f: math.dist(here, coded(factors, f[0])))[1]
        try:
            result = find_peak(trial_runner_for(sample), settings, policy, seed_load=seed,
                               progress=progress(sample) if progress else None)
        except Exception as error:  # a configure command or readiness check failed
            if fail_fast:
                raise
            searched.append((sample, seed, None, f"{type(error).__name__}: {error}"))
            continue
        if result.verdict == PEAK:
            finished.append((sample, result.peak_rate))
            searched.append((sample, seed, result, None))
        elif fail_fast:
            raise RuntimeError(f"sample {sample}: {result.message}")
        else:
            searched.append((sample, seed, result, f"{result.verdict}: {result.message}"))
    return surface_from_searches(factors, searched)


def surface_from_searches(factors: Sequence[Factor],
                          searched: Sequence[tuple[Sample, float | None, SearchResult | None, str | None]]
                          ) -> SurfaceResult:
    """Fit and report over finished searches: (sample, seed load, result or None, failure or None) each.
    Shared by map_surface and the cluster's pool of servers (peakbench.cluster.pool)."""
    factors = tuple(factors)
    finished = [(sample, result.peak_rate) for sample, _, result, failure in searched if failure is None]
    surface = None
    if len(finished) >= len(quadratic_terms(factors)):
        surface = QuadraticSurface.fit(factors, [s for s, _ in finished], [p for _, p in finished])
    outcomes = [SampleOutcome(sample, seed, result, failure,
                              surface.predict(sample) if surface is not None else None)
                for sample, seed, result, failure in searched]
    measured = [(o.predicted, o.result.peak_rate) for o in outcomes if o.failure is None]
    in_sample = mape(*zip(*measured)) if surface is not None else None
    cost = sum(o.result.cost_seconds for o in outcomes if o.result is not None)
    return SurfaceResult(factors, outcomes, surface, in_sample, cost)
