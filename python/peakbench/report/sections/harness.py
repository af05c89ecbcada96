"""Harness results (Auto-pilot's getstats, comparisons, anomalies), from `data.extra["harness"]`.

The harness (harness/) hands the report this shape; every key is optional:

    {"getstats": [{"test": str, "metric": str, "unit": str, "count": int, "mean": float, "median": float,
                   "low": float, "high": float, "min": float, "max": float, "sdev_pct": float,
                   "hw_pct": float, "overhead_pct": float | None}],      # low/high: the CI of the mean
     "comparisons": [{"a": str, "b": str, "metric": str, "difference": float, "ci_low": float,
                      "ci_high": float, "test": str, "p_value": float, "verdict": str}],
     "warnings": [{"kind": str, "message": str}],                      # outliers, drift, leaks, ...
     "plotted": [str],                      # metrics to draw (default: none); needs getstats
     "tests": [{"name": str, "vars": {str: value}}],                   # loop variables, for line plots
     "confidence": float, "name": str}                                 # of LOW/HIGH; figure-name prefix

For each plotted metric: a bar chart of every test's mean with its interval, and for each loop
variable that varies across the tests, a line plot of the mean over it, one line per value of the
other varying variables (Graphit's plots). A test of one run has a bar and no whisker.
"""

from __future__ import annotations

import html
import itertools

from .. import figures
from ..model import Column, Figure, Html, ReportData, ReportOptions, Section, Table

GETSTATS = (
    ("test", Column("test")),
    ("metric", Column("metric")),
    ("unit", Column("unit")),
    ("count", Column("COUNT")),
    ("mean", Column("MEAN")),
    ("median", Column("MEDIAN")),
    ("low", Column("LOW")),
    ("high", Column("HIGH")),
    ("min", Column("MIN")),
    ("max", Column("MAX")),
    ("sdev_pct", Column("SDEV%", digits=2)),
    ("hw_pct", Column("HW%", digits=2)),
    ("overhead_pct", Column("O/H%", digits=2)),
)
COMPARISONS = (
    ("a", Column("A")),
    ("b", Column("B")),
    ("metric", Column("metric")),
    ("difference", Column("B − A")),
    ("ci_low", Column("CI low")),
    ("ci_high", Column("CI high")),
    ("test", Column("test")),
    ("p_value", Column("p", digits=4)),
    ("verdict", Column("verdict")),
)


def section(data: ReportData, options: ReportOptions) -> Section | None:
    results = data.extra.get("harness")
    if not results:
        return None
    blocks = []
    warnings = results.get("warnings") or []
    if warnings:
        items = "".join(f"<li>{html.escape(w['kind'])}: {html.escape(w['message'])}</li>" for w in warnings)
        blocks.append(Html(f'<ul class="warnings">{items}</ul>'))
    if results.get("getstats"):
        blocks.append(
            _table(
                "getstats",
                "Statistics per test and metric (getstats)",
                GETSTATS,
                results["getstats"],
                "COUNT runs per row; LOW and HIGH bound the mean's confidence interval; HW% is its"
                " half-width as a share of the mean; O/H% against the first (baseline) test",
            )
        )
    blocks.extend(_figures(results))
    if results.get("comparisons"):
        blocks.append(
            _table(
                "comparisons",
                "Comparisons",
                COMPARISONS,
                results["comparisons"],
                "each verdict names the test it rests on; the CI is of the difference of the means",
            )
        )
    return Section(
        "harness", "Harness results", blocks, summary=[f"warning: {w['kind']}: {w['message']}" for w in warnings]
    )


def _table(name: str, title: str, layout, records: list[dict], basis: str) -> Table:
    return Table(
        name,
        title,
        [column for _, column in layout],
        [[record.get(key) for key, _ in layout] for record in records],
        basis,
    )


def _figures(results: dict) -> list[Figure]:
    rows = results.get("getstats") or []
    variables = {t["name"]: t.get("vars") or {} for t in results.get("tests") or []}
    prefix = figures.slug(results.get("name") or "harness")
    confidence = results.get("confidence", 0.95)
    drawn = []
    for metric in results.get("plotted") or []:
        chosen = [r for r in rows if r["metric"] == metric]
        if not chosen:
            continue
        drawn.append(_bars(chosen, metric, f"{prefix}-{figures.slug(metric)}-bars", confidence))
        for variable in _varying(chosen, variables):
            name = f"{prefix}-{figures.slug(metric)}-over-{figures.slug(variable)}"
            drawn.append(_lines(chosen, variables, metric, variable, name, confidence))
    return drawn


def _varying(rows: list[dict], variables: dict[str, dict]) -> list[str]:
    """The loop variables that take two or more values across these rows' tests (all tests have them)."""
    names: list[str] = []
    for row in rows:
        for name in variables.get(row["test"], {}):
            if name not in names:
                names.append(name)
    kept = []
    for name in names:
        values = [variables.get(row["test"], {}).get(name) for row in rows]
        if None not in values and len({repr(v) for v in values}) >= 2:
            kept.append(name)
    return kept


def _whiskers(axis, xs: list[float], rows: list[dict], colour: str) -> None:
    """Each mean's interval as a whisker; none for a test of one run. A quantity no run took below
    0 has its interval cut at 0, where the quantity ends."""
    shown = [(x, row) for x, row in zip(xs, rows) if row["count"] >= 2]
    if not shown:
        return
    lows = [max(row["low"], 0.0) if row["min"] >= 0 else row["low"] for _, row in shown]
    axis.errorbar(
        [x for x, _ in shown],
        [row["mean"] for _, row in shown],
        yerr=[
            [row["mean"] - low for (_, row), low in zip(shown, lows)],
            [row["high"] - row["mean"] for _, row in shown],
        ],
        fmt="none",
        ecolor=colour,
        capsize=3,
        lw=0.8,
    )


def _runs(rows: list[dict]) -> str:
    counts = sorted({row["count"] for row in rows})
    return f"n = {counts[0]} runs per test" if len(counts) == 1 else f"n = {counts[0]} to {counts[-1]} runs per test"


def _interval_words(rows: list[dict], confidence: float) -> str:
    words = f"whiskers: the mean's {confidence:.0%} confidence interval"
    if any(row["count"] < 2 for row in rows):
        words += "; a test of one run has no whisker"
    return words


def _bars(rows: list[dict], metric: str, name: str, confidence: float) -> Figure:
    width = max(figures.COLUMN_WIDTH_IN, 0.35 * len(rows) + 1.2)
    figure, axes = figures.new_figure(width_in=width, height_in=2.6)
    axis = axes[0][0]
    with figures.style():
        positions = list(range(len(rows)))
        axis.bar(positions, [r["mean"] for r in rows], color=figures.COLOURS[0], width=0.7)
        _whiskers(axis, positions, rows, "black")
        axis.set_xticks(list(positions), [r["test"] for r in rows], rotation=30 if len(rows) > 3 else 0, ha="right")
        axis.set_ylabel(metric)
        axis.set_title(f"{metric}: mean per test")
    caption = f"{metric}, mean of each test's runs ({_runs(rows)}); {_interval_words(rows, confidence)}"
    return Figure(name, caption, figure)


def _lines(
    rows: list[dict], variables: dict[str, dict], metric: str, variable: str, name: str, confidence: float
) -> Figure:
    others = [v for v in _varying(rows, variables) if v != variable]
    xs = [variables[row["test"]][variable] for row in rows]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    levels = sorted(set(xs)) if numeric else list(dict.fromkeys(str(x) for x in xs))
    groups: dict[str, list[tuple[float, dict]]] = {}
    for row, x in zip(rows, xs):
        label = " ".join(f"{o}={variables[row['test']][o]}" for o in others) or metric
        groups.setdefault(label, []).append((x if numeric else levels.index(str(x)), row))
    figure, axes = figures.new_figure()
    axis = axes[0][0]
    with figures.style():
        # Each line a little aside from the others, so no interval hides another.
        spread = (max(levels) - min(levels) if numeric else len(levels) - 1) or 1
        for index, (colour, (label, points)) in enumerate(zip(itertools.cycle(figures.COLOURS), groups.items())):
            points.sort(key=lambda p: p[0])
            chosen = [row for _, row in points]
            xs = [x + (index - (len(groups) - 1) / 2) * 0.015 * spread for x, _ in points]
            axis.plot(xs, [row["mean"] for row in chosen], marker="o", color=colour, label=label)
            _whiskers(axis, xs, chosen, colour)
        # Ticks at the levels the tests ran: 1, 2 and 4 threads, not 1.5.
        axis.set_xticks(levels if numeric else range(len(levels)), [str(level) for level in levels])
        axis.set_xlabel(variable)
        axis.set_ylabel(metric)
        if others:
            axis.legend()
    caption = (
        f"{metric} over {variable}"
        + (f", one line per {', '.join(others)}" if others else "")
        + f"; points: means ({_runs(rows)}); {_interval_words(rows, confidence)}"
    )
    return Figure(name, caption, figure)
