"""Harness results (Auto-pilot's getstats, comparisons, anomalies), from `data.extra["harness"]`.

The harness (harness/) hands the report this shape; every key is optional:

    {"getstats": [{"test": str, "metric": str, "unit": str, "count": int, "mean": float, "median": float,
                   "low": float, "high": float, "min": float, "max": float, "sdev_pct": float,
                   "hw_pct": float, "overhead_pct": float | None}],      # low/high: the CI of the mean
     "comparisons": [{"a": str, "b": str, "metric": str, "difference": float, "ci_low": float,
                      "ci_high": float, "test": str, "p_value": float, "verdict": str}],
     "warnings": [{"kind": str, "message": str}]}                      # outliers, drift, leaks, ...
"""

from __future__ import annotations

import html

from ..model import Column, Html, ReportData, ReportOptions, Section, Table

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
