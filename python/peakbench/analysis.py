"""Statistics of repeated runs: Auto-pilot's getstats table, outliers, drift and
leaks, and the comparison of two results (Welch's t, F and Levene, normality,
a rank test when normality fails).

Every function here is pure: plain lists of numbers (and labels) in, plain
dicts and dataclasses out, no store, no printing. The harness's report
(harness/report.py), `peakbench compare` and the HTML report all call these.

Conventions: the standard deviation is the sample one (n − 1); a confidence
interval of a mean is Student's t (controller/statistics.py); SDEV% and HW%
are percentages of the mean; p-values are those of scipy.stats for the same
test (checked in tests/test_analysis.py to 1e-9).
"""

from __future__ import annotations

import dataclasses
import math
import statistics as pystats
from collections.abc import Sequence

from .controller.statistics import sample_deviation, t_interval, t_quantile


def _scipy_stats():
    """scipy.stats, imported on first use: it takes seconds to import, and every command's
    parser loads this module while few commands test anything."""
    from scipy import stats

    return stats


DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05
DEFAULT_Z = 2.0
# Shapiro-Wilk needs 3 values; at 30 and more the t-test leans on the central limit theorem.
NORMALITY_MIN = 3
SMALL_SAMPLE = 30
# A/A false-positive rate of this comparison at alpha 0.05, 5 runs a side, for runs of one `cp` measured back to
# back (BENCHMARKS.md §9, benchmarks/aa_compare.py): the rate a verdict on runs that were not interleaved stands on.
BACK_TO_BACK_AA_RATE = 0.108
BACK_TO_BACK_AA_PAIRS = 1600


@dataclasses.dataclass(frozen=True)
class Summary:
    """One getstats row's numbers for one series of values."""

    count: int
    mean: float
    median: float
    low: float  # lower end of the confidence interval of the mean (= mean for one value)
    high: float
    min: float
    max: float
    sdev: float  # sample standard deviation (0 for one value)
    sdev_pct: float  # sdev as a % of |mean| (nan when the mean is 0)
    hw: float  # half-width of the interval
    hw_pct: float  # hw as a % of |mean| (inf for one value: nothing is known yet)
    confidence: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _pct(part: float, whole: float) -> float:
    if whole == 0:
        return math.nan if part == 0 or math.isnan(part) else math.inf
    return 100.0 * part / abs(whole)


def summarize(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Summary:
    """COUNT MEAN MEDIAN LOW HIGH MIN MAX SDEV SDEV% HW HW% of `values` (at least one)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("a summary needs at least one value")
    count = len(values)
    mean = math.fsum(values) / count
    if count == 1:
        sdev, hw = 0.0, math.inf
        low, high = mean, mean
    else:
        sdev = sample_deviation(values)
        interval = t_interval(values, confidence)
        low, high, hw = interval.low, interval.high, interval.high - interval.mean
    return Summary(
        count,
        mean,
        float(pystats.median(values)),
        low,
        high,
        min(values),
        max(values),
        sdev,
        _pct(sdev, mean),
        hw,
        _pct(hw, mean) if count > 1 else math.inf,
        confidence,
    )


GETSTATS_COLUMNS = ("test", "metric", "COUNT", "MEAN", "MEDIAN", "LOW", "HIGH", "MIN", "MAX", "SDEV%", "HW%", "O/H")


def getstats_rows(series: Sequence[dict], confidence: float = DEFAULT_CONFIDENCE) -> list[dict]:
    """Auto-pilot's getstats table: one row per (test, metric) series.

    `series` is a list of {"test": str, "metric": str, "values": [float, ...]} in
    report order. O/H is the overhead in % of each mean over the first series of
    the same metric (the baseline), None for the baseline itself.
    Rows carry the GETSTATS_COLUMNS keys plus "summary" (the Summary as a dict).
    """
    baselines: dict[str, float] = {}
    rows = []
    for item in series:
        values = list(item["values"])
        if not values:
            continue
        s = summarize(values, confidence)
        metric = item["metric"]
        overhead = None
        if metric in baselines:
            base = baselines[metric]
            overhead = _pct(s.mean - base, base)
        else:
            baselines[metric] = s.mean
        rows.append(
            {
                "test": item["test"],
                "metric": metric,
                "COUNT": s.count,
                "MEAN": s.mean,
                "MEDIAN": s.median,
                "LOW": s.low,
                "HIGH": s.high,
                "MIN": s.min,
                "MAX": s.max,
                "SDEV%": s.sdev_pct,
                "HW%": s.hw_pct,
                "O/H": overhead,
                "summary": s.as_dict(),
            }
        )
    return rows


def z_scores(values: Sequence[float]) -> list[float]:
    """(x − mean)/sdev of each value; all 0 when the values do not vary."""
    if len(values) < 2:
        return [0.0] * len(values)
    mean = math.fsum(values) / len(values)
    sdev = sample_deviation(values)
    if sdev == 0:
        return [0.0] * len(values)
    return [(v - mean) / sdev for v in values]


def outliers(
    values: Sequence[float],
    labels: Sequence[object] | None = None,
    threshold: float = DEFAULT_Z,
    metric: str = "value",
    test: str = "",
) -> list[dict]:
    """Warnings for the runs whose |z| exceeds `threshold`, each naming its run (label).

    Returns [{"kind": "outlier", "test", "metric", "run", "value", "z", "message"}].
    """
    labels = list(labels) if labels is not None else list(range(1, len(values) + 1))
    warnings = []
    for label, value, z in zip(labels, values, z_scores(values)):
        if abs(z) > threshold:
            where = f"{test}: " if test else ""
            warnings.append(
                {
                    "kind": "outlier",
                    "test": test,
                    "metric": metric,
                    "run": label,
                    "value": value,
                    "z": z,
                    "message": f"{where}run {label}: {metric} = {value:.6g} is an outlier (z = {z:+.2f},"
                    f" |z| > {threshold:g})",
                }
            )
    return warnings


@dataclasses.dataclass(frozen=True)
class Slope:
    """Least-squares line of the values over their repetition number 1..n."""

    slope: float  # change per repetition
    intercept: float
    low: float  # confidence interval of the slope (nan below 3 values)
    high: float
    p_value: float  # two-sided, for slope = 0
    slope_pct: float  # slope as a % of the mean per repetition
    count: int
    confidence: float

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.count >= 3 and (self.low > 0 or self.high < 0)

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "significant": self.significant}


def slope(
    values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE, positions: Sequence[float] | None = None
) -> Slope:
    """The least-squares slope over repetitions with its t-interval (n − 2 degrees of freedom)."""
    ys = [float(v) for v in values]
    n = len(ys)
    xs = [float(x) for x in positions] if positions is not None else [float(i) for i in range(1, n + 1)]
    if n < 2:
        return Slope(0.0, ys[0] if ys else math.nan, math.nan, math.nan, math.nan, 0.0, n, confidence)
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    b = sxy / sxx
    a = my - b * mx
    if n < 3:
        return Slope(b, a, math.nan, math.nan, math.nan, _pct(b, my), n, confidence)
    residual = math.fsum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(residual / (n - 2) / sxx)
    if se == 0:
        p = 0.0 if b != 0 else 1.0
        return Slope(b, a, b, b, p, _pct(b, my), n, confidence)
    half = t_quantile(confidence, n - 2) * se
    p = float(2 * _scipy_stats().t.sf(abs(b / se), n - 2))
    return Slope(b, a, b - half, b + half, p, _pct(b, my), n, confidence)


# Metrics whose drift has a name: memory falling is a leak, time rising a degradation.
LEAK_HINTS = ("mem_free", "mem_available", "free_memory", "memfree", "memavailable")


DEFAULT_DRIFT_MIN_PCT = 1.0


def drift_warning(
    values: Sequence[float],
    metric: str,
    test: str = "",
    confidence: float = DEFAULT_CONFIDENCE,
    min_change_pct: float = DEFAULT_DRIFT_MIN_PCT,
) -> dict | None:
    """A warning when the slope's interval excludes zero, else None.

    A slope so small that over all the runs it moves the metric by less than
    `min_change_pct` % of its mean is statistically real but harmless (free memory
    wanders by a few MB on any machine), so it does not warn; 0 warns on any.

    {"kind": "leak" | "drift", "test", "metric", "slope": Slope as a dict, "message"}.
    """
    fit = slope(values, confidence)
    if not fit.significant:
        return None
    if abs(fit.slope_pct) * (len(values) - 1) < min_change_pct:
        return None
    leaky = any(hint in metric.lower() for hint in LEAK_HINTS)
    if leaky and fit.slope < 0:
        kind, what = "leak", "falls"
    else:
        kind, what = "drift", "rises" if fit.slope > 0 else "falls"
    where = f"{test}: " if test else ""
    label = "memory leak? " if kind == "leak" else ""
    return {
        "kind": kind,
        "test": test,
        "metric": metric,
        "slope": fit.as_dict(),
        "message": f"{where}{label}{metric} {what} by {fit.slope:.4g} per run ({fit.slope_pct:+.2f}% of the mean;"
        f" {confidence:.0%} interval {fit.low:.4g} .. {fit.high:.4g}, p = {fit.p_value:.3g})",
    }


def normality(values: Sequence[float], alpha: float = DEFAULT_ALPHA) -> dict:
    """Shapiro-Wilk: {"test", "statistic", "p_value", "normal": bool | None} (None: too few or constant)."""
    values = [float(v) for v in values]
    if len(values) < NORMALITY_MIN or max(values) == min(values):
        return {"test": "shapiro-wilk", "statistic": None, "p_value": None, "normal": None}
    result = _scipy_stats().shapiro(values)
    return {
        "test": "shapiro-wilk",
        "statistic": float(result.statistic),
        "p_value": float(result.pvalue),
        "normal": bool(result.pvalue >= alpha),
    }


def welch(a: Sequence[float], b: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> dict:
    """Welch's t-test of mean(a) − mean(b): t, Welch–Satterthwaite df, the three p-values, the CI."""
    n1, n2 = len(a), len(b)
    m1, m2 = math.fsum(a) / n1, math.fsum(b) / n2
    v1, v2 = sample_deviation(a) ** 2, sample_deviation(b) ** 2
    q1, q2 = v1 / n1, v2 / n2
    se = math.sqrt(q1 + q2)
    diff = m1 - m2
    if se == 0:
        same = diff == 0
        return {
            "difference": diff,
            "se": 0.0,
            "t": math.nan if same else math.copysign(math.inf, diff),
            "df": math.nan,
            "low": diff,
            "high": diff,
            "p_two_sided": 1.0 if same else 0.0,
            "p_less": 1.0 if diff >= 0 else 0.0,
            "p_greater": 1.0 if diff <= 0 else 0.0,
        }
    df = (q1 + q2) ** 2 / (q1**2 / (n1 - 1) + q2**2 / (n2 - 1))
    t = diff / se
    half = float(_scipy_stats().t.ppf(0.5 + confidence / 2, df)) * se
    return {
        "difference": diff,
        "se": se,
        "t": t,
        "df": df,
        "low": diff - half,
        "high": diff + half,
        "p_two_sided": float(2 * _scipy_stats().t.sf(abs(t), df)),
        "p_less": float(_scipy_stats().t.cdf(t, df)),  # H1: mean(a) < mean(b)
        "p_greater": float(_scipy_stats().t.sf(t, df)),  # H1: mean(a) > mean(b)
    }


def f_test(a: Sequence[float], b: Sequence[float]) -> dict:
    """F = var(a)/var(b) with (n1−1, n2−1) df; two-sided p-value for equal variances."""
    v1, v2 = sample_deviation(a) ** 2, sample_deviation(b) ** 2
    d1, d2 = len(a) - 1, len(b) - 1
    if v2 == 0:
        return {"F": math.inf if v1 > 0 else math.nan, "df1": d1, "df2": d2, "p_value": 0.0 if v1 > 0 else 1.0}
    ratio = v1 / v2
    p = 2 * min(_scipy_stats().f.cdf(ratio, d1, d2), _scipy_stats().f.sf(ratio, d1, d2))
    return {"F": ratio, "df1": d1, "df2": d2, "p_value": float(min(1.0, p))}


def levene(a: Sequence[float], b: Sequence[float]) -> dict:
    """Brown–Forsythe/Levene (median-centred): robust to non-normal data."""
    if max(a) == min(a) and max(b) == min(b):
        return {"W": math.nan, "p_value": 1.0}
    result = _scipy_stats().levene(a, b, center="median")
    return {"W": float(result.statistic), "p_value": float(result.pvalue)}


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> dict:
    """The rank test (two-sided and the two one-sided p-values), for non-normal samples."""
    two = _scipy_stats().mannwhitneyu(a, b, alternative="two-sided")
    return {
        "U": float(two.statistic),
        "p_two_sided": float(two.pvalue),
        "p_less": float(_scipy_stats().mannwhitneyu(a, b, alternative="less").pvalue),
        "p_greater": float(_scipy_stats().mannwhitneyu(a, b, alternative="greater").pvalue),
    }


def compare(
    a: Sequence[float],
    b: Sequence[float],
    alpha: float = DEFAULT_ALPHA,
    confidence: float | None = None,
    names: tuple[str, str] = ("A", "B"),
    interleaved: bool | None = None,
) -> dict:
    """Do two results differ, by how much, and at what level?

    The verdict's alpha holds for independent runs: measured on the same machine one side after the other,
    runs share its drift and equal results are declared different more often (BENCHMARKS.md §9, A/A rate);
    a plan interleaves its tests' runs by default so that both sides share the drift. `interleaved`: whether
    the runs alternated (None: not known, as for files of numbers); unless True the verdict says its p-value
    rests on runs that were not interleaved and gives the measured back-to-back A/A rate beside alpha.

    Each of a and b needs at least two values. Returns plain data:
      summaries       the Summary of each (as dicts)
      welch           welch() of a − b, with its CI at `confidence` (default 1 − alpha)
      hypotheses      for u1 ≤ u2, u1 ≥ u2 and u1 = u2 (u1 = mean of a): the p-value of the
                      test the verdict rests on and ACCEPT/REJECT at alpha
      variances       F-test and Levene, and whether the variances differ
      normality       Shapiro-Wilk of each; "normal_enough" is False when a small sample
                      (< 30) fails it, and then the verdict rests on Mann-Whitney
      rank            mann_whitney()
      rests_on        "welch-t" or "mann-whitney"
      verdict         one line: which is larger, by how much (and %), at what level, on what test
    """
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        raise ValueError("each side of a comparison needs at least two values")
    confidence = 1 - alpha if confidence is None else confidence
    sa, sb = summarize(a, confidence), summarize(b, confidence)
    w = welch(a, b, confidence)
    norm_a, norm_b = normality(a, alpha), normality(b, alpha)
    small = min(len(a), len(b)) < SMALL_SAMPLE
    normal_enough = not (small and (norm_a["normal"] is False or norm_b["normal"] is False))
    rank = mann_whitney(a, b)
    rests_on = "welch-t" if normal_enough else "mann-whitney"
    source = w if rests_on == "welch-t" else rank
    hypotheses = []
    for label, key in (("u1 <= u2", "p_greater"), ("u1 >= u2", "p_less"), ("u1 = u2", "p_two_sided")):
        # H0 is rejected when the data favour the opposite alternative strongly enough.
        p = source[key]
        hypotheses.append({"null": label, "p_value": p, "decision": "REJECT" if p < alpha else "ACCEPT"})
    f = f_test(a, b)
    lev = levene(a, b)
    variance_test = "F" if normal_enough else "levene"
    variance_p = f["p_value"] if normal_enough else lev["p_value"]
    differ = source["p_two_sided"] < alpha
    diff = sa.mean - sb.mean
    relative = _pct(diff, sb.mean)
    na, nb = names
    if differ:
        bigger, smaller = (na, nb) if diff > 0 else (nb, na)
        # 1 − p is not the chance that the difference is real; what holds is the test's level alpha.
        verdict = (
            f"{bigger} is larger than {smaller}: mean difference {diff:+.6g} ({relative:+.2f}% of {nb}),"
            f" {confidence:.0%} CI {w['low']:+.6g} .. {w['high']:+.6g}; p = {source['p_two_sided']:.3g}"
            f" (two-sided, {rests_on}), significant at alpha = {alpha:g}: of equal results measured"
            f" independently, at most {alpha:.0%} are declared different"
        )
    else:
        verdict = (
            f"{na} and {nb} are indistinguishable at alpha = {alpha:g}: mean difference {diff:+.6g}"
            f" ({relative:+.2f}%), {confidence:.0%} CI {w['low']:+.6g} .. {w['high']:+.6g} contains 0"
            if w["low"] <= 0 <= w["high"]
            else f"{na} and {nb} are indistinguishable at alpha = {alpha:g}: mean difference {diff:+.6g}"
            f" ({relative:+.2f}%)"
        )
        verdict += f"; p = {source['p_two_sided']:.3g} (two-sided, {rests_on})"
    if not normal_enough:
        verdict += "; a small sample failed the normality check, so the verdict rests on the rank test"
    if not interleaved:
        order = "run back to back" if interleaved is False else "in an order not known to be interleaved"
        verdict += (
            f"; the p-value rests on runs {order}: such A/A pairs were declared different in"
            f" {BACK_TO_BACK_AA_RATE:.1%} of {BACK_TO_BACK_AA_PAIRS} at alpha 0.05 (BENCHMARKS §9), so alpha"
            " understates the false-positive rate; interleave the runs (a plan's default)"
        )
    return {
        "names": list(names),
        "alpha": alpha,
        "confidence": confidence,
        "summaries": [sa.as_dict(), sb.as_dict()],
        "welch": w,
        "hypotheses": hypotheses,
        "variances": {
            "f_test": f,
            "levene": lev,
            "rests_on": variance_test,
            "p_value": variance_p,
            "differ": variance_p < alpha,
        },
        "normality": [norm_a, norm_b],
        "normal_enough": normal_enough,
        "rank": rank,
        "rests_on": rests_on,
        "differ": differ,
        "interleaved": interleaved,
        "relative_difference_pct": relative,
        "verdict": verdict,
    }
