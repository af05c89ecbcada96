"""peakbench.analysis: agreement with scipy to 1e-9, coverage of nominal intervals, A/A error rates."""

import math

import numpy as np
import pytest
from peakbench import analysis
from scipy import stats

A = [10.1, 10.4, 9.8, 10.0, 10.3, 10.2, 9.9]
B = [10.9, 11.4, 10.2, 11.8, 10.7, 11.1]


def test_summary_matches_numpy_and_scipy():
    s = analysis.summarize(A)
    assert s.count == 7
    assert s.mean == pytest.approx(np.mean(A), abs=1e-12)
    assert s.median == pytest.approx(np.median(A), abs=1e-12)
    assert s.sdev == pytest.approx(np.std(A, ddof=1), abs=1e-12)
    low, high = stats.t.interval(0.95, len(A) - 1, loc=np.mean(A), scale=stats.sem(A))
    assert s.low == pytest.approx(low, abs=1e-9) and s.high == pytest.approx(high, abs=1e-9)
    assert s.hw_pct == pytest.approx(100 * (high - low) / 2 / np.mean(A), abs=1e-9)
    assert s.sdev_pct == pytest.approx(100 * np.std(A, ddof=1) / np.mean(A), abs=1e-9)
    assert (s.min, s.max) == (min(A), max(A))
    one = analysis.summarize([5.0])
    assert one.count == 1 and one.mean == 5 and math.isinf(one.hw_pct)


def test_getstats_rows_have_the_columns_and_overhead_against_the_first():
    rows = analysis.getstats_rows(
        [
            {"test": "ext4", "metric": "elapsed", "values": [1.0, 1.1, 0.9]},
            {"test": "xfs", "metric": "elapsed", "values": [1.5, 1.6, 1.4]},
            {"test": "ext4", "metric": "tps", "values": [100, 110, 90]},
            {"test": "empty", "metric": "tps", "values": []},
        ]
    )
    assert [r["test"] for r in rows] == ["ext4", "xfs", "ext4"]
    assert set(analysis.GETSTATS_COLUMNS) <= set(rows[0])
    assert rows[0]["O/H"] is None and rows[2]["O/H"] is None  # baselines per metric
    assert rows[1]["O/H"] == pytest.approx(50.0)
    assert rows[1]["COUNT"] == 3 and rows[1]["MEDIAN"] == 1.5


def test_welch_agrees_with_scipy():
    w = analysis.welch(A, B)
    for alternative, key in (("two-sided", "p_two_sided"), ("less", "p_less"), ("greater", "p_greater")):
        expected = stats.ttest_ind(A, B, equal_var=False, alternative=alternative)
        assert w[key] == pytest.approx(expected.pvalue, abs=1e-9)
        assert w["t"] == pytest.approx(expected.statistic, abs=1e-9)
    ci = stats.ttest_ind(A, B, equal_var=False).confidence_interval(0.95)
    assert w["low"] == pytest.approx(ci.low, abs=1e-9) and w["high"] == pytest.approx(ci.high, abs=1e-9)


def test_variance_tests_rank_test_and_normality_agree_with_scipy():
    f = analysis.f_test(A, B)
    ratio = np.var(A, ddof=1) / np.var(B, ddof=1)
    d1, d2 = len(A) - 1, len(B) - 1
    expected = 2 * min(stats.f.cdf(ratio, d1, d2), stats.f.sf(ratio, d1, d2))
    assert f["F"] == pytest.approx(ratio, abs=1e-12) and f["p_value"] == pytest.approx(expected, abs=1e-9)
    assert analysis.levene(A, B)["p_value"] == pytest.approx(stats.levene(A, B).pvalue, abs=1e-9)
    rank = analysis.mann_whitney(A, B)
    assert rank["p_two_sided"] == pytest.approx(stats.mannwhitneyu(A, B).pvalue, abs=1e-9)
    assert analysis.normality(A)["p_value"] == pytest.approx(stats.shapiro(A).pvalue, abs=1e-9)


def test_slope_agrees_with_linregress_and_warns_on_a_leak():
    rng = np.random.default_rng(3)
    free = [1000 - 5 * i + rng.normal(0, 1) for i in range(12)]
    fit = analysis.slope(free)
    expected = stats.linregress(range(1, 13), free)
    assert fit.slope == pytest.approx(expected.slope, abs=1e-9)
    assert fit.p_value == pytest.approx(expected.pvalue, abs=1e-9)
    half = stats.t.ppf(0.975, 10) * expected.stderr
    assert fit.low == pytest.approx(expected.slope - half, abs=1e-9)
    warning = analysis.drift_warning(free, "mon_mem_available_end_mb", "t1")
    assert warning["kind"] == "leak" and "memory leak" in warning["message"]
    rising = analysis.drift_warning([1.0 + 0.05 * i for i in range(10)], "elapsed", "t1")
    assert rising["kind"] == "drift" and "rises" in rising["message"]
    assert analysis.drift_warning(list(rng.normal(10, 1, 20)), "elapsed") is None


def test_outliers_name_the_run():
    values = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 3.0]
    warnings = analysis.outliers(values, [f"attempt {i}" for i in range(1, 11)], metric="elapsed", test="ext4")
    assert len(warnings) == 1 and warnings[0]["run"] == "attempt 10"
    assert "attempt 10" in warnings[0]["message"] and warnings[0]["z"] > 2
    assert analysis.outliers([1.0, 1.0, 1.0]) == []


def test_compare_verdicts():
    result = analysis.compare(A, B, names=("ext4", "xfs"))
    assert result["differ"] and result["rests_on"] == "welch-t"
    assert "xfs is larger than ext4" in result["verdict"]
    decisions = {h["null"]: h["decision"] for h in result["hypotheses"]}
    assert decisions == {"u1 <= u2": "ACCEPT", "u1 >= u2": "REJECT", "u1 = u2": "REJECT"}
    same = analysis.compare(A, A[::-1])
    assert not same["differ"] and "indistinguishable" in same["verdict"]
    # A clearly non-normal small sample: the verdict rests on the rank test and says so.
    skewed = [1, 1, 1, 1, 1, 1, 1, 50.0]
    result = analysis.compare(skewed, [2, 2.1, 1.9, 2, 2.05, 1.95, 2, 2.02])
    assert result["rests_on"] == "mann-whitney" and "rank test" in result["verdict"]


def test_nominal_95_percent_intervals_cover_the_true_mean_93_to_97_percent():
    rng = np.random.default_rng(20240501)
    trials, covered = 2000, 0
    for _ in range(trials):
        sample = rng.normal(50.0, 7.0, size=rng.integers(3, 15))
        s = analysis.summarize(sample)
        covered += s.low <= 50.0 <= s.high
    assert 0.93 <= covered / trials <= 0.97


def test_a_a_comparisons_reject_about_5_percent():
    rng = np.random.default_rng(77)
    trials, rejected, welch_rejected = 1000, 0, 0
    for _ in range(trials):
        a, b = rng.normal(10, 2, 8), rng.normal(10, 2, 8)
        result = analysis.compare(a, b, alpha=0.05)
        rejected += result["differ"]
        welch_rejected += result["welch"]["p_two_sided"] < 0.05
    assert 0.03 <= welch_rejected / trials <= 0.07
    assert 0.03 <= rejected / trials <= 0.07


def test_a_significant_verdict_states_its_level_not_a_chance_of_being_right():
    result = analysis.compare(A, B, names=("ext4", "xfs"))
    # 1 - p is not the probability that xfs is really larger: the verdict claims only the test's level.
    assert " sure" not in result["verdict"]
    assert "significant at alpha = 0.05" in result["verdict"]
    assert "at most 5% are declared different" in result["verdict"]


@pytest.mark.parametrize("alpha", [0.01, 0.10])
def test_compare_declares_equal_small_samples_different_at_most_alpha_of_the_time(alpha):
    # Plans often stop at 3-5 runs per test, where the normality check sends many pairs to the rank test.
    rng = np.random.default_rng(round(alpha * 1000))
    pairs = 800
    declared = sum(
        analysis.compare(rng.normal(10, 2, 5), rng.normal(10, 2, 5), alpha=alpha)["differ"] for _ in range(pairs)
    )
    allowed = alpha + 3 * math.sqrt(alpha * (1 - alpha) / pairs)  # three binomial standard errors
    assert declared / pairs <= allowed, (declared, pairs, alpha)
