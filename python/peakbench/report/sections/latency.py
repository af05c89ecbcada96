"""Latency distributions (Fstress's Figure 7): the CDF of response time per load on a log time axis,
per op at the key load, and the share of requests under chosen thresholds.

Everything comes from the HDR histograms stored with each trial, merged over
the measured trials of a load, so the curves are exact to the histograms'
3 significant digits and rest on every request, not on trial means.
"""

from __future__ import annotations

import numpy as np

from .. import figures
from ..histograms import merged, percentile_ms
from ..model import Column, Figure, ReportData, ReportOptions, Section, Series, Table
from .operations import key_point

MAX_CURVES = 8  # more loads than this on one axis are unreadable: choose_loads picks them, all are tabled


def section(data: ReportData, options: ReportOptions) -> Section | None:
    blocks = []
    for series in data.curves:
        points = [(p, merged(r.latency for r in p.results())) for p in series.done_points()]
        points = [(p, h) for p, h in points if h is not None]
        if not points:
            continue
        main = key_point(series)
        shown = choose_loads(points, main)
        blocks.append(
            Figure(
                f"latency-cdf-{series.key.replace(' ', '-')}",
                f"{series.title}: cumulative distribution of response time at"
                + (
                    " each offered load"
                    if len(shown) == len(points)
                    else f" {len(shown)} of its {len(points)} offered loads"
                )
                + f" (log time axis; dashed lines at {', '.join(f'{t:g}' for t in options.thresholds_ms)}"
                " ms). Each curve merges the histograms of every request of the measured trials at"
                " that load." + _left_out(points, shown, main),
                _draw_loads(shown, options),
            )
        )
        if main is not None:
            results = main.results()
            per_op = {
                op: merged(r.ops.get(op) for r in results) for op in sorted({op for r in results for op in r.ops})
            }
            per_op = {op: h for op, h in per_op.items() if h is not None}
            drawn = dict(sorted(per_op.items(), key=lambda item: -item[1].total)[:MAX_CURVES])
            if drawn:
                left_out = (
                    f"; the {len(per_op) - len(drawn)} rarest ops are left out" if len(per_op) > len(drawn) else ""
                )
                blocks.append(
                    Figure(
                        f"latency-cdf-ops-{series.key.replace(' ', '-')}",
                        f"{series.key} at {main.requested:,.1f} ops/s offered: cumulative distribution of"
                        f" response time per operation (n per op in the legend{left_out}).",
                        _draw_ops(dict(sorted(drawn.items())), options),
                    )
                )
        blocks.append(_threshold_table(series, points, options))
    if not blocks:
        return None
    return Section("latency", "Latency distribution", blocks)


def _threshold_table(series: Series, points, options: ReportOptions) -> Table:
    rows = []
    for point, histogram in points:
        rows.append(
            [
                point.requested,
                len(point.measured),
                histogram.total,
                percentile_ms(histogram, 50),
                percentile_ms(histogram, 90),
                percentile_ms(histogram, 99),
                percentile_ms(histogram, 99.9),
                *[histogram.share_under(t) * 100 for t in options.thresholds_ms],
            ]
        )
    columns = [
        Column("offered", "ops/s"),
        Column("n trials"),
        Column("requests"),
        Column("p50", "ms"),
        Column("p90", "ms"),
        Column("p99", "ms"),
        Column("p99.9", "ms"),
        *[Column(f"≤ {t:g} ms", "%", 2) for t in options.thresholds_ms],
    ]
    return Table(
        f"latency-{series.key.replace(' ', '-')}",
        f"Response-time percentiles of {series.key}",
        columns,
        rows,
        "each row merges the histograms of all requests of the measured trials at that load",
    )


def _spread(items: list, count: int) -> list:
    """`count` of `items` evenly spaced, the first and last among them."""
    if len(items) <= count:
        return items
    if count <= 0:
        return []
    if count == 1:
        return [items[-1]]
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


SHORTFALL = 0.95  # a load whose achieved rate falls below this share of the offered one is overloaded


def choose_loads(points: list, key) -> list:
    """The loads drawn when there are more than MAX_CURVES: the lowest, the key load (the peak, or the best
    throughput) and every overloaded load (above the key load, or achieving under SHORTFALL of the offered
    rate), even if that makes more than MAX_CURVES; then an even spread of the rest up to MAX_CURVES. In
    offered-load order."""
    if len(points) <= MAX_CURVES:
        return points
    loads = [p.requested for p, _ in points]
    key_index = loads.index(key.requested) if key is not None and key.requested in loads else len(points) - 1
    chosen = {0, key_index}
    chosen.update(i for i, (p, _) in enumerate(points) if i > key_index or p.mean_achieved < SHORTFALL * p.requested)
    rest = [i for i in range(len(points)) if i not in chosen]
    chosen.update(_spread(rest, MAX_CURVES - len(chosen)))
    return [points[i] for i in sorted(chosen)]


def _left_out(points: list, shown: list, key) -> str:
    if len(shown) == len(points):
        return ""
    drawn = {id(p) for p, _ in shown}
    missing = [p.requested for p, _ in points if id(p) not in drawn]
    named = f" ({key.requested:,.0f} ops/s)" if key is not None else ""
    return (
        f" Drawn: the lowest load, the key load{named}, every overloaded load (above it, or achieving under"
        f" {SHORTFALL:.0%} of the offered rate) and an even spread of the rest; left out: {', '.join(f'{load:,.0f}' for load in missing)} ops/s (all are in the table"
        " below)."
    )


def _draw_loads(chosen, options: ReportOptions):
    palette = figures.palette("viridis")
    with figures.style():
        figure, axes = figures.new_figure(height_in=2.6)
        axis = axes[0][0]
        for index, (point, histogram) in enumerate(chosen):
            colour = palette(0.85 * index / max(len(chosen) - 1, 1))
            _step(axis, histogram, color=colour, label=f"{point.requested:,.0f} ops/s (n={histogram.total:,})")
        _finish(axis, options)
    return figure


def _draw_ops(per_op: dict, options: ReportOptions):
    with figures.style():
        figure, axes = figures.new_figure(height_in=2.6)
        axis = axes[0][0]
        for colour, (op, histogram) in zip(figures.COLOURS * 3, per_op.items()):
            _step(axis, histogram, color=colour, label=f"{op} (n={histogram.total:,})")
        _finish(axis, options)
    return figure


def _step(axis, distribution, **style) -> None:
    """The CDF as steps, rising from 0% at the fastest request."""
    values, shares = distribution.cdf()
    axis.step(np.r_[values[0], values], np.r_[0.0, shares] * 100, where="post", **style)


def _finish(axis, options: ReportOptions) -> None:
    for threshold in options.thresholds_ms:
        axis.axvline(threshold, color="grey", linestyle="--", linewidth=0.7)
    axis.set_xscale("log")
    axis.set_xlabel("response time (ms, log scale)")
    axis.set_ylabel("requests completed within (%)")
    axis.set_ylim(0, 100.5)
    axis.legend(loc="lower right", fontsize=6)
