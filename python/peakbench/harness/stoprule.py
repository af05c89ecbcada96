"""Stop rules: how many runs a test needs (Auto-pilot's TEST min-runs check-every predicate).

A test runs at least min_runs times; from then on, every check_every runs,
the `until` predicate is evaluated over the statistics of the runs so far and
the test stops when it holds; it never runs more than max_runs times. Without
`until` a test runs max_runs (default min_runs) times.

The decision is a pure function of the stored runs, so a resumed plan makes
exactly the decision the killed one would have made.
"""

from __future__ import annotations

import math

from .. import analysis
from .expr import Expression, ExpressionError


def statistics_of(values: list[float], confidence: float) -> dict:
    """The names a predicate can use, for one metric's values."""
    if not values:
        return {
            "count": 0,
            "mean": math.nan,
            "median": math.nan,
            "sdev": math.nan,
            "sdev_pct": math.inf,
            "hw": math.inf,
            "hw_pct": math.inf,
            "min": math.nan,
            "max": math.nan,
            "slope": 0.0,
            "slope_pct": 0.0,
            "drifting": False,
        }
    s = analysis.summarize(values, confidence)
    fit = analysis.slope(values, confidence)
    return {
        "count": s.count,
        "mean": s.mean,
        "median": s.median,
        "sdev": s.sdev,
        "sdev_pct": s.sdev_pct,
        "hw": s.hw,
        "hw_pct": s.hw_pct,
        "min": s.min,
        "max": s.max,
        "slope": fit.slope,
        "slope_pct": fit.slope_pct,
        "drifting": fit.significant,
    }


def predicate_values(
    stop_metric: str, counted: list[dict], attempts: int, failures: int, elapsed: float, confidence: float
) -> dict:
    """Variables for the predicate: the stop metric's statistics as bare names, every metric as metric.field."""
    names: set[str] = set()
    for run in counted:
        names.update(run)
    per_metric = {
        name: statistics_of([float(r[name]) for r in counted if name in r], confidence) for name in sorted(names)
    }
    primary = per_metric.get(stop_metric, statistics_of([], confidence))
    return {**per_metric, **primary, "elapsed": elapsed, "runs": attempts, "failures": failures}


def decide(
    stop: dict,
    metric: str,
    counted: list[dict],
    attempts: int = 0,
    failures: int = 0,
    elapsed: float = 0.0,
    confidence: float = 0.95,
) -> tuple[str | None, str | None]:
    """(why the test stops, or None to go on; a warning if the predicate could not be evaluated).

    `counted` holds the metrics dicts of the runs that count (done, not discarded), in order.
    """
    count = len(counted)
    if count >= stop["max_runs"]:
        return f"max_runs ({stop['max_runs']}) reached", None
    if count < stop["min_runs"]:
        return None, None
    if stop.get("until") is None:
        return (f"{count} runs done" if count >= stop["max_runs"] else None), None
    if (count - stop["min_runs"]) % stop["check_every"] != 0:
        return None, None
    variables = predicate_values(metric, counted, attempts, failures, elapsed, confidence)
    try:
        held = bool(Expression(stop["until"]).evaluate(variables))
    except ExpressionError as error:
        return None, f"stop rule not evaluated after {count} runs: {error}"
    if held:
        hw = variables.get("hw_pct")
        detail = f" ({metric} HW% {hw:.2f})" if isinstance(hw, float) and math.isfinite(hw) else ""
        return f"until {stop['until']!r} held after {count} runs{detail}", None
    return None, None
