"""Response surfaces: factors, D-optimal samples, the quadratic fit, mapping over the simulator."""

import math

import pytest

from peakbench.controller import SearchSettings
from peakbench.controller.design import Factor, coded, d_optimal, full_factorial
from peakbench.controller.surface import QuadraticSurface, map_surface, mape
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
