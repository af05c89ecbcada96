"""Response surfaces: the peak rate over samples of factors (the paper's Algorithm 1 and §4).

map_surface searches the peak of each given sample (seeded from the peak of
the nearest finished sample) and fits the quadratic model by weighted least
squares (numpy): each peak weighs 1/h², h the half-width of its search's
interval of the peak rate, so a loose peak counts less; a peak without an
interval weighs as little as the loosest one that has one (all weigh the same
when none has one). Weights are scaled to a mean of 1, so the residual
variance is that of a typical sample.

The error it reports is held out: leave-one-out cross-validated MAPE (each
measured peak predicted by the model fitted without it), beside the residual
degrees of freedom (samples − coefficients). With no residual freedom the
model interpolates its samples and nothing is known of its error: no MAPE, no
R², no prediction interval is claimed. Otherwise the prediction interval at a
point is the fitted value ± t(confidence, dof) × the standard error of
prediction of a new typical-weight peak there, sqrt(σ² + x'Cov(b)x); fitted
values and intervals stop at 0, since a peak rate is never negative.
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
from .statistics import t_quantile

PREDICTION_CONFIDENCE = 0.95  # of the prediction intervals, unless the caller names another
TIGHTEST_HALF_WIDTH = 0.001  # of the peak: an interval narrower than this weighs no more (no infinite weights)


@dataclasses.dataclass(frozen=True)
class QuadraticSurface:
    factors: tuple[Factor, ...]
    terms: tuple[str, ...]
    coefficients: tuple[float, ...]  # on coded factors, in `terms` order
    r_squared: float | None  # weighted; None when the fit has no residual degrees of freedom
    residual_dof: int = 0  # samples − coefficients
    # σ²·(X'WX)⁻¹, the coefficients' covariance (None without residual freedom), and σ², the residual
    # variance of a typical (weight 1) sample: what prediction intervals rest on.
    covariance: tuple[tuple[float, ...], ...] | None = None
    residual_variance: float | None = None

    @classmethod
    def fit(
        cls,
        factors: Sequence[Factor],
        samples: Sequence[Sample],
        peaks: Sequence[float],
        weights: Sequence[float] | None = None,
    ) -> QuadraticSurface:
        terms = quadratic_terms(factors)
        if len(samples) < len(terms):
            raise ValueError(
                f"a quadratic in {len(factors)} factors needs at least {len(terms)} "
                f"measured samples (got {len(samples)})"
            )
        regressors = np.array([quadratic_row(coded(factors, s)) for s in samples])
        y = np.asarray(peaks, dtype=float)
        w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
        w = w / w.mean()
        root = np.sqrt(w)
        coefficients, _, rank, _ = np.linalg.lstsq(regressors * root[:, None], y * root, rcond=None)
        if rank < len(terms):
            raise ValueError(
                f"the {len(samples)} samples do not determine the {len(terms)} coefficients of a"
                f" quadratic in {len(factors)} factors (rank {rank}): choose samples that vary"
                " every factor over three or more levels"
            )
        dof = len(y) - len(terms)
        if dof == 0:
            return cls(tuple(factors), tuple(terms), tuple(float(b) for b in coefficients), None, 0)
        residuals = y - regressors @ coefficients
        variance = float(np.sum(w * residuals**2) / dof)
        covariance = variance * np.linalg.inv(regressors.T @ (regressors * w[:, None]))
        centre = np.sum(w * y) / np.sum(w)
        total = float(np.sum(w * (y - centre) ** 2))
        r_squared = 1 - float(np.sum(w * residuals**2)) / total if total > 0 else None
        return cls(
            tuple(factors),
            tuple(terms),
            tuple(float(b) for b in coefficients),
            r_squared,
            dof,
            tuple(tuple(float(v) for v in row) for row in covariance),
            variance,
        )

    def predict(self, sample: Sample) -> float:
        # A peak rate is never negative, though a quadratic through scattered peaks can dip below 0.
        return max(0.0, float(np.dot(self.coefficients, quadratic_row(coded(self.factors, sample)))))

    def prediction_interval(
        self, sample: Sample, confidence: float = PREDICTION_CONFIDENCE
    ) -> tuple[float, float] | None:
        """Where a new peak measured at `sample` would fall; None without residual freedom."""
        if self.residual_dof <= 0 or self.covariance is None or self.residual_variance is None:
            return None
        row = np.array(quadratic_row(coded(self.factors, sample)))
        error = math.sqrt(self.residual_variance + float(row @ np.array(self.covariance) @ row))
        half = t_quantile(confidence, self.residual_dof) * error
        fitted = self.predict(sample)
        return max(0.0, fitted - half), fitted + half


def peak_weights(peaks: Sequence[float], half_widths: Sequence[float | None]) -> list[float]:
    """1/h² per peak (h: half-width of its interval, at least TIGHTEST_HALF_WIDTH of the peak); a peak
    without an interval gets the smallest weight of those with one; all 1 when none has one."""
    known = [max(h, TIGHTEST_HALF_WIDTH * abs(p)) for p, h in zip(peaks, half_widths) if h is not None]
    if not known:
        return [1.0] * len(peaks)
    loosest = max(known)
    return [
        1 / max(h, TIGHTEST_HALF_WIDTH * abs(p)) ** 2 if h is not None else 1 / loosest**2
        for p, h in zip(peaks, half_widths)
    ]


def leave_one_out(
    factors: Sequence[Factor], samples: Sequence[Sample], peaks: Sequence[float], weights: Sequence[float]
) -> tuple[float, int] | None:
    """(MAPE in percent, how many samples) of each peak predicted by the model fitted without it, over the
    samples whose removal leaves the quadratic determined; None when no sample's does."""
    errors = []
    for held in range(len(samples)):
        rest = [i for i in range(len(samples)) if i != held]
        try:
            model = QuadraticSurface.fit(
                factors, [samples[i] for i in rest], [peaks[i] for i in rest], [weights[i] for i in rest]
            )
        except ValueError:  # without this sample the rest do not determine every coefficient
            continue
        errors.append((model.predict(samples[held]), peaks[held]))
    return (mape(*zip(*errors)), len(errors)) if errors else None


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error, in percent."""
    if not measured:
        raise ValueError("MAPE needs at least one measured value")
    return 100 * sum(abs(p - m) / abs(m) for p, m in zip(predicted, measured)) / len(measured)


def describe_error(
    samples: int,
    coefficients: int,
    loo_mape: float | None,
    loo_samples: int | None,
    in_sample_mape: float | None,
    r_squared: float | None,
) -> str:
    """What is known of a fitted surface's error, in one clause; no figure at all without residual freedom."""
    dof = samples - coefficients
    if dof <= 0:
        return (
            f"no error estimate: {samples} measured peaks for {coefficients} coefficients leave no residual"
            " degrees of freedom, so the model passes through every sample (measure more samples)"
        )
    if loo_mape is None or not loo_samples:
        held = (
            f"no held-out error: without any one of its n={samples} samples the quadratic is undetermined"
            " (measure samples at three or more levels of every factor)"
        )
    elif loo_samples == samples:
        held = f"held-out error (leave-one-out MAPE) {loo_mape:.1f}% over n={samples} samples"
    else:
        held = (
            f"held-out error (leave-one-out MAPE) {loo_mape:.1f}% over the {loo_samples} of n={samples}"
            " samples whose removal leaves the quadratic determined"
        )
    parts = [held, f"{dof} residual degree{'s' if dof != 1 else ''} of freedom"]
    if in_sample_mape is not None:
        parts.append(f"in-sample MAPE {in_sample_mape:.1f}%")
    if r_squared is not None:
        parts.append(f"weighted R² {r_squared:.3f}")
    return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class SampleOutcome:
    sample: Sample
    seed_load: float | None
    result: SearchResult | None  # None when the trial runner could not be set up
    failure: str | None  # why no peak was measured, or None
    predicted: float | None  # the fitted surface's peak rate for this sample
    predicted_low: float | None = None  # its prediction interval (None without residual freedom)
    predicted_high: float | None = None


@dataclasses.dataclass(frozen=True)
class SurfaceResult:
    factors: tuple[Factor, ...]
    outcomes: list[SampleOutcome]
    surface: QuadraticSurface | None  # None when too few samples found a peak
    mape: float | None  # in-sample, percent; None without residual freedom (the fit interpolates: 0 by design)
    cost_seconds: float
    loo_mape: float | None = None  # held out (leave-one-out), percent; None without residual freedom
    loo_samples: int | None = None  # how many samples loo_mape rests on (see leave_one_out)
    residual_dof: int | None = None  # samples − coefficients of the fit; None without a fit
    confidence: float = PREDICTION_CONFIDENCE  # of the outcomes' prediction intervals

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


def map_surface(
    factors: Sequence[Factor],
    samples: Sequence[Sample],
    trial_runner_for: Callable[[Sample], RunTrial],
    settings: SearchSettings | None = None,
    policy: str = DEFAULT_POLICY,
    seeding: bool = True,
    fail_fast: bool = False,
    progress: Callable[[Sample], Progress | None] | None = None,
) -> SurfaceResult:
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
            result = find_peak(
                trial_runner_for(sample),
                settings,
                policy,
                seed_load=seed,
                progress=progress(sample) if progress else None,
            )
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


def surface_from_searches(
    factors: Sequence[Factor],
    searched: Sequence[tuple[Sample, float | None, SearchResult | None, str | None]],
    confidence: float = PREDICTION_CONFIDENCE,
) -> SurfaceResult:
    """Fit and report over finished searches: (sample, seed load, result or None, failure or None) each.
    Shared by map_surface and the cluster's pool of servers (peakbench.cluster.pool)."""
    factors = tuple(factors)
    finished = [(sample, result) for sample, _, result, failure in searched if failure is None]
    samples = [sample for sample, _ in finished]
    peaks = [result.peak_rate for _, result in finished]
    weights = peak_weights(
        peaks,
        [(r.ci_high - r.ci_low) / 2 if r.ci_low is not None and r.ci_high is not None else None for _, r in finished],
    )
    surface = loo = None
    if len(finished) >= len(quadratic_terms(factors)):
        surface = QuadraticSurface.fit(factors, samples, peaks, weights)
        loo = leave_one_out(factors, samples, peaks, weights) if surface.residual_dof > 0 else None
    outcomes = []
    for sample, seed, result, failure in searched:
        predicted = surface.predict(sample) if surface is not None else None
        interval = surface.prediction_interval(sample, confidence) if surface is not None else None
        outcomes.append(SampleOutcome(sample, seed, result, failure, predicted, *(interval or (None, None))))
    in_sample = None
    if surface is not None and surface.residual_dof > 0:
        in_sample = mape([o.predicted for o in outcomes if o.failure is None], peaks)
    cost = sum(o.result.cost_seconds for o in outcomes if o.result is not None)
    return SurfaceResult(
        factors,
        outcomes,
        surface,
        in_sample,
        cost,
        loo[0] if loo else None,
        loo[1] if loo else None,
        surface.residual_dof if surface is not None else None,
        confidence,
    )
