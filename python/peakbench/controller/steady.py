"""Whether a load's trials can have reached steady state: its relaxation time against warm-up and runlength.

Near saturation a trial's mean response is neither unbiased nor near-normal
unless the trial is long against the queue's relaxation time τ. A trial that
starts from an idle server after a warm-up shorter than τ is still filling,
so its mean is biased low in the same way in every trial; and a trial only
a few τ long is the area under a few busy periods, a distribution so skewed
that four to sixteen trial means put the interval below the truth (the
simulated M/M/1 from empty, 1,000 sets each: Cox's 95% interval covers 88–92%
at runlength/τ = 2.6–10, 93–95% at 20–30; BENCHMARKS-history.md §7). Selecting the
trial sets whose own means vary little makes it worse, not better (those are
the sets that missed the long busy periods), so the test here uses the
response curve, not the trials' spread.

τ is estimated as for a single-server queue, R = S/(1 − ρ): S from the
lightest load measured, taken as R0/(1 + λ0·R0) (exact for M/M/1 at any
load, ≈ R0 at light load), ρ ≈ 1 − S/R̄ at the load, μ = λ/ρ and
τ = 1/(μ(1 − √ρ)²), the M/M/1 relaxation time. A server with many workers
relaxes faster than the single queue with its curve, so the estimate errs
towards longer trials; with no light load measured, S from the load itself
(ρ = L/(1 + L), L = λR̄ by Little's law) errs further that way.
"""

from __future__ import annotations

import math

# A trial's measured window must span this many relaxation times, per confidence of the interval (the
# nearest level at or above the search's applies). Cox's interval of 4 trial means from the simulated M/M/1
# (ρ 0.875-0.95, warm-up τ, n = 1,000 intervals per cell; BENCHMARKS-history.md §7): at 95% it covers 91.7% at 5τ
# and 93-95% from 10τ (30τ kept: 94.2-94.8% there); at 90% it covers 85-86% at 5-10τ and reaches its
# plateau of 87.5-89.5% from 15τ, where longer trials add nothing measurable (60τ: 87.8%).
RUNLENGTHS_PER_RELAXATION = ((0.90, 15.0), (1.0, 30.0))
WARMUPS_PER_RELAXATION = 1.0  # and its warm-up at least this many
HIGHEST_UTILISATION = 0.9999  # ρ estimates are clamped here (τ grows without bound as ρ → 1)


def service_estimate_ms(load: float, mean_ms: float) -> float:
    """The zero-load response S of the single-server queue whose mean response at `load` is `mean_ms`."""
    return mean_ms / (1 + load * mean_ms / 1000)


def relaxation_time_s(load: float, mean_ms: float, service_ms: float) -> float:
    """τ at `load` (ops/s) with mean response `mean_ms` on a curve whose zero-load response is `service_ms`."""
    if not (load > 0 and mean_ms > service_ms > 0):
        return 0.0
    utilisation = min(1 - service_ms / mean_ms, HIGHEST_UTILISATION)
    rate = load / utilisation  # μ
    return 1 / (rate * (1 - math.sqrt(utilisation)) ** 2)


def runlengths_per_relaxation(confidence: float) -> float:
    """How many relaxation times a trial must span for intervals at `confidence` (RUNLENGTHS_PER_RELAXATION)."""
    return next(multiple for level, multiple in RUNLENGTHS_PER_RELAXATION if confidence <= level + 1e-9)


def needed_runlength_s(relaxation_s: float, confidence: float) -> float:
    return runlengths_per_relaxation(confidence) * relaxation_s


def needed_warmup_s(relaxation_s: float) -> float:
    return WARMUPS_PER_RELAXATION * relaxation_s
