"""The per-operation breakdown (Fstress's Table 4) at the peak, and at every other load on request.

Per op, over all measured trials at one load: its share of the requested mix
and of what was actually issued, requests completed, mean and standard
deviation (pooled from the trials' exact moments), median and 99th
percentile (from the merged histograms), share of the total time spent
waiting on the target, errors and timeouts.
"""

from __future__ import annotations

import html

from ..histograms import merged, percentile_ms, pooled
from ..model import Column, Html, LoadPoint, ReportData, ReportOptions, Section, Series, Table
from .load_curve import peak_of


def key_point(series: Series) -> LoadPoint | None:
    """The load a reader asks about first: the peak (or the highest load below it), else the best throughput."""
    points = series.done_points()
    if not points:
        return None
    peak, _ = peak_of(series)
    if peak is None:
        return max(points, key=lambda p: p.mean_achieved)
    at_or_below = [p for p in points if p.requested <= peak * 1.001]
    return max(at_or_below, key=lambda p: p.requested) if at_or_below else points[0]


def op_table(series: Series, point: LoadPoint, terminal: bool = True) -> Table:
    trials = point.measured
    mix = trials[0]["spec"].get("mix", {})
    names = sorted(mix, key=lambda name: -mix[name])
    results = point.results()
    names += sorted({op for r in results for op in r.ops} - set(mix))
    per_op = {name: [r.ops.get(name) for r in results] for name in names}
    moments = {name: pooled(records) for name, records in per_op.items()}
    issued = sum(m.count for m in moments.values()) or 1
    total_ms = sum(m.total_ms for m in moments.values()) or 1.0
    rows = []
    for name in names:
        records = [r for r in per_op[name] if r]
        histogram = merged(records)
        m = moments[name]
        rows.append(
            [
                name,
                mix.get(name, 0.0) * 100,
                m.count / issued * 100,
                m.count,
                m.mean_ms,
                m.stddev_ms,
                percentile_ms(histogram, 50),
                percentile_ms(histogram, 99),
                m.total_ms / total_ms * 100,
                sum(sum((r.errors or {}).values()) for r in records),
                sum(r.timeouts or 0 for r in records),
            ]
        )
    columns = [
        Column("op"),
        Column("mix", "%", 1),
        Column("issued", "%", 1),
        Column("count"),
        Column("mean", "ms"),
        Column("stddev", "ms"),
        Column("p50", "ms"),
        Column("p99", "ms"),
        Column("time", "%", 1),
        Column("errors"),
        Column("timeouts"),
    ]
    achieved = point.mean_achieved
    return Table(
        f"operations-{series.key.replace(' ', '-')}-{point.requested:g}",
        f"Per-operation breakdown, {series.key} at {point.requested:,.1f} ops/s offered ({achieved:,.1f} achieved)",
        columns,
        rows,
        f"n = {len(trials)} trial{'s' if len(trials) != 1 else ''}, {issued:,} requests; latency from the"
        " intended send time; mean and stddev pooled over all requests, percentiles from merged histograms",
        terminal=terminal,
    )


def section(data: ReportData, options: ReportOptions) -> Section | None:
    blocks = []
    for series in data.curves:
        main = key_point(series)
        if main is None:
            continue
        blocks.append(op_table(series, main))
        others = [p for p in series.done_points() if p.requested != main.requested]
        if others:
            blocks.append(
                Html(
                    f"<details><summary>Per-operation breakdown at the other {len(others)} loads of"
                    f" {html.escape(series.key)}</summary>"
                )
            )
            blocks.extend(op_table(series, point, terminal=False) for point in others)
            blocks.append(Html("</details>"))
    if not blocks:
        return None
    return Section("operations", "Per-operation breakdown", blocks)
