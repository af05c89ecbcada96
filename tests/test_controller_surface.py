"""Response surfaces: factors, D-optimal samples, the quadratic fit, mapping over the simulator."""

import math
import random

import numpy as np
import pytest
from peakbench.controller import SearchSettings
from peakbench.controller.design import Factor, coded, d_optimal, full_factorial, quadratic_row
from peakbench.controller.surface import (
    QuadraticSurface,
    describe_error,
    leave_one_out,
    map_surface,
    mape,
    peak_weights,
)
from peakbench.sim import DISKS, NFSDS, SURFACES, SimulatedTarget, simulate_surface

# The paper's Table 4 (MAPE %, for 6, 8 and 10 D-optimal samples of 32).
PAPER_TABLE_4 = {"db-tp": (14, 14, 15), "web-server": (9, 9, 9), "mail": (3.3, 2.8, 2.7)}


def test_factor_levels_parse_and_code():
    factor = Factor.parse("nfsds", "1, 2,4 8", scale="log")
    assert factor.levels == (1, 2, 4, 8)
    assert [factor.code(v) for v in factor.levels] == pytest.approx([-1, -1 / 3, 1 / 3, 1])
    with pytest.raises(ValueError, match="levels 'one,two' do not parse"):
        Factor.parse("disks", "one,two")
    with pytest.raises(ValueError, match="two distinct levels"):
        Factor("disks", (2, 2))
    with pytest.raises(ValueError, match="positive levels"):
        Factor("x", (0, 1), scale="log")


def test_full_factorial_and_d_optimal_subsets():
    candidates = full_factorial((DISKS, NFSDS))
    assert len(candidates) == 32
    for n in (6, 8, 10):
        chosen = d_optimal((DISKS, NFSDS), n, candidates)
        assert len(chosen) == n
        assert all(c in candidates for c in chosen)
        assert len({tuple(c.values()) for c in chosen}) == n
        # A D-optimal quadratic design reaches the corners of the region.
        corners = {tuple(coded((DISKS, NFSDS), c)) for c in chosen}
        assert (-1.0, -1.0) in corners and (1.0, 1.0) in corners
    with pytest.raises(ValueError, match="between 6 and 32"):
        d_optimal((DISKS, NFSDS), 5)


def test_quadratic_fit_recovers_a_quadratic():
    factors = (DISKS, NFSDS)

    def truth(s):
        x, y = coded(factors, s)
        return 500 + 100 * x - 40 * y + 30 * x * x - 20 * y * y + 10 * x * y

    samples = d_optimal(factors, 8)
    surface = QuadraticSurface.fit(factors, samples, [truth(s) for s in samples])
    for sample in full_factorial(factors):
        assert surface.predict(sample) == pytest.approx(truth(sample))
    assert surface.r_squared == pytest.approx(1.0)
    assert mape([110, 90], [100, 100]) == pytest.approx(10.0)


@pytest.mark.parametrize("name", sorted(SURFACES))
def test_surfaces_from_d_optimal_samples_reach_the_papers_mape(name):
    for n, paper in zip((6, 8, 10), PAPER_TABLE_4[name]):
        figures = simulate_surface(name, n, SearchSettings(), seed=3)
        assert figures.failures == 0
        assert figures.mape <= paper, (name, n, figures.mape)


def test_map_surface_seeds_from_the_nearest_sample_and_records_failures():
    surface = SURFACES["web-server"]
    samples = [{"disks": 1, "nfsds": 1}, {"disks": 1, "nfsds": 2}, {"disks": 4, "nfsds": 100}]

    def runner(sample):
        if sample["disks"] == 4:
            raise RuntimeError("configure command failed: exit status 1")
        return SimulatedTarget(surface.server(sample), seed=1)

    result = map_surface(surface.factors, samples, runner, SearchSettings())
    first, second, failed = result.outcomes
    assert first.seed_load is None and first.failure is None
    assert second.seed_load == first.result.peak_rate  # seeded from its nearest finished sample
    assert failed.result is None and "configure command failed" in failed.failure
    assert result.surface is None  # three samples cannot fit six coefficients
    assert math.isclose(result.cost_seconds, first.result.cost_seconds + second.result.cost_seconds)
    with pytest.raises(RuntimeError, match="configure"):
        map_surface(surface.factors, samples, runner, SearchSettings(), fail_fast=True)


def _noisy_quadratic(factors, samples, generator, sigma):
    def truth(s):
        x, y = coded(factors, s)
        return 500 + 100 * x - 40 * y + 30 * x * x - 20 * y * y + 10 * x * y

    return truth, [truth(s) + generator.gauss(0, sigma) for s in samples]


def test_held_out_error_is_the_leave_one_out_refit():
    # For least squares, the residual of a sample left out of the fit is its residual in the full fit
    # divided by 1 − its leverage: an independent check of the n refits.
    factors = (DISKS, NFSDS)
    samples = d_optimal(factors, 10)
    _, peaks = _noisy_quadratic(factors, samples, random.Random(5), 20)
    x = np.array([quadratic_row(coded(factors, s)) for s in samples])
    leverage = np.diag(x @ np.linalg.inv(x.T @ x) @ x.T)
    full = QuadraticSurface.fit(factors, samples, peaks)
    held_out = [p - (p - full.predict(s)) / (1 - h) for s, p, h in zip(samples, peaks, leverage)]
    assert leave_one_out(factors, samples, peaks, [1.0] * len(samples)) == (
        pytest.approx(mape(held_out, peaks)),
        len(samples),
    )
    assert full.residual_dof == 4


def test_no_error_is_claimed_without_residual_degrees_of_freedom():
    surface = SURFACES["web-server"]
    chosen = d_optimal(surface.factors, 6)  # 6 samples, 6 coefficients
    result = map_surface(
        surface.factors, chosen, lambda s: SimulatedTarget(surface.server(s), seed=2), SearchSettings()
    )
    assert result.surface is not None and result.residual_dof == 0
    assert result.mape is None and result.loo_mape is None and result.surface.r_squared is None
    assert all(o.predicted_low is None and o.predicted_high is None for o in result.outcomes)
    text = describe_error(6, 6, result.loo_mape, result.loo_samples, result.mape, None)
    assert "MAPE" not in text and "no error estimate" in text


def test_a_loose_peak_counts_less():
    factors = (DISKS, NFSDS)
    samples = d_optimal(factors, 9)
    truth, _ = _noisy_quadratic(factors, samples, random.Random(1), 0)
    peaks = [truth(s) for s in samples]
    peaks[4] *= 1.5  # one peak far off, and its search said so: a wide interval
    half_widths = [5.0] * len(samples)
    half_widths[4] = 200.0
    weights = peak_weights(peaks, half_widths)
    weighted = QuadraticSurface.fit(factors, samples, peaks, weights)
    plain = QuadraticSurface.fit(factors, samples, peaks)
    others = [i for i in range(len(samples)) if i != 4]
    error = {
        name: mape([model.predict(samples[i]) for i in others], [peaks[i] for i in others])
        for name, model in (("weighted", weighted), ("plain", plain))
    }
    assert error["weighted"] < error["plain"] / 10, error
    # A peak without an interval weighs as little as the loosest one with an interval.
    assert peak_weights([100, 100, 100], [1.0, 4.0, None]) == pytest.approx([1, 1 / 16, 1 / 16])


def test_prediction_intervals_cover_new_peaks_at_their_confidence():
    factors = (DISKS, NFSDS)
    samples = d_optimal(factors, 10)
    candidates = full_factorial(factors)
    generator = random.Random(7)
    covered, total = 0, 0
    for _ in range(2000):
        truth, peaks = _noisy_quadratic(factors, samples, generator, 25)
        model = QuadraticSurface.fit(factors, samples, peaks)
        at = candidates[generator.randrange(len(candidates))]
        low, high = model.prediction_interval(at, 0.95)
        assert low <= model.predict(at) <= high
        covered += low <= truth(at) + generator.gauss(0, 25) <= high
        total += 1
    # 95% nominal; n = 2000 gives a binomial standard error of 0.5 points.
    assert 0.935 <= covered / total <= 0.965, covered / total


def test_predicted_peaks_and_their_intervals_never_go_below_zero():
    """A peak rate is never negative, though a quadratic through scattered peaks dips below 0. These are
    the 8 peaks Samba's surface found (BENCHMARKS.md §13, samba-surface.db93c7f.json), whose 95%
    prediction intervals reached down to -384 ops/s."""
    factors = (
        Factor("aio_size", (4096, 32768, 262144), "log"),
        Factor("cpu_percent", (10, 20, 40), "log"),
    )
    found = {
        (4096, 10): 112.6, (32768, 10): 143.2, (262144, 10): 178.3, (262144, 20): 408.2,
        (262144, 40): 461.7, (32768, 40): 242.9, (32768, 20): 245.8, (4096, 40): 601.8,
    }  # fmt: skip
    samples = [{"aio_size": a, "cpu_percent": c} for a, c in found]
    model = QuadraticSurface.fit(factors, samples, list(found.values()))
    for at in full_factorial(factors) + [{"aio_size": 4096, "cpu_percent": 5}]:
        low, high = model.prediction_interval(at, 0.95)
        assert 0 <= low <= model.predict(at) <= high, (at, low, model.predict(at), high)
