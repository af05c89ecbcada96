"""The load curve (SPECsfs style): achieved vs offered ops/s, and mean response time vs achieved.

Each point is one offered load: the mean over its measured trials, with the
lognormal (Cox) interval (at the report's confidence) as error bars when it
has two or more; at a search's loads, the interval the search states there
(its loads table's, at λ* its message's), so that the report and the search
never state two intervals for one load. A search's peak region (Rsat ± s) is
shaded and its peak marked; for a curve without a search, the peak is the
highest achieved rate (SPEC's meaning). The overall response time (ORT) is
SPEC's single figure: the area under the mean-response vs
achieved-throughput curve divided by the peak (highest) achieved throughput,
in ms. SPEC's curve starts at zero throughput:
below the first load point the response time is taken to be the first point's
(SPEC SFS run rules, "Overall response time calculation": constant below the
first valid data point); between points it is linear (trapezoids). So the ORT
is a throughput-weighted mean of the measured means and always lies between the
smallest and the largest of them.
"""

from __future__ import annotations

import itertools
import math

from ...controller.history import same_load
from ...controller.statistics import t_interval
from .. import figures
from ..histograms import merged, percentile_ms
from ..model import Column, Figure, LoadPoint, ReportData, ReportOptions, Section, Series, Table


def overall_response_time(points: list[tuple[float, float]]) -> float | None:
    """SPEC's ORT from (achieved ops/s, mean response ms) points; None below two points."""
    points = sorted(points)
    if len(points) < 2 or points[0][0] < 0 or points[-1][0] <= 0:
        return None
    first_x, first_y = points[0]
    below_first = first_x * first_y  # SPEC: constant at the first point's response from zero throughput
    area = below_first + math.fsum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in itertools.pairwise(points))
    return area / points[-1][0]


def peak_of(series: Series) -> tuple[float | None, str]:
    """The series' peak rate and what it means."""
    if series.kind == "search":
        result = series.search_result
        if result is None:
            return None, "no result stored, so no peak yet"
        if result.get("peak_rate") is not None:
            return result["peak_rate"], "peak rate λ* found by the search"
        return None, f"no peak ({result.get('verdict')})"
    points = series.done_points()
    if not points:
        return None, "no completed trials"
    best = max(points, key=lambda p: p.mean_achieved)
    return best.mean_achieved, "highest achieved throughput"


def section(data: ReportData, options: ReportOptions) -> Section | None:
    curves = [s for s in data.curves if s.done_points()]
    if not curves:
        return None
    blocks, summary = [], []
    for series in curves:
        points = series.done_points()
        ort = overall_response_time([(p.mean_achieved, p.mean_ms) for p in points])
        peak, meaning = peak_of(series)
        trials = sum(len(p.measured) for p in points)
        line = (
            f"{series.key}: {meaning}"
            + (f" {peak:,.1f} ops/s" if peak is not None else "")
            + (
                f"; overall response time {ort:.2f} ms over {len(points)} load points"
                if ort is not None
                else "; overall response time needs two or more load points"
            )
            + f" ({trials} measured trial{'s' if trials != 1 else ''})"
        )
        summary.append(line)
        blocks.append(_table(series, points, options.confidence_for(series)))
    blocks.insert(0, Figure("load-curve", _caption(curves, options), _draw(curves, options)))
    return Section("load-curve", "Load curve", blocks, summary)


def _caption(curves: list[Series], options: ReportOptions) -> str:
    """Says only what the figure draws: the band, the star and the crosses appear when they apply."""
    levels = sorted({f"{options.confidence_for(s):.0%}" for s in curves})
    peaks = {s.key: peak_of(s) for s in curves}
    found = [key for key, (peak, _) in peaks.items() if peak is not None]
    text = (
        "Left: achieved (successful) vs offered load (the dotted line is achieved = offered"
        + ("; the dashed line marks the peak)." if found else ").")
        + " Right: mean response time vs achieved load. Points are means over the measured trials at each offered"
        f" load; error bars are {'/'.join(levels)} lognormal (Cox) intervals of the trial means where a load has"
        " two or more trials (n per point in the table below); at a search's loads, the interval the search states"
        " there (its loads table's, and at the peak its message's), open-ended where it states only R̄ ≥ low."
    )
    if any(s.kind == "search" and "rsat_ms" in s.settings for s in curves):
        text += " The shaded band is the search's peak region (Rsat ± s)."
    if found:
        text += f" The star marks the peak{'' if len(curves) == 1 else ' of ' + ', '.join(found)}."
    for key, (peak, meaning) in peaks.items():
        if peak is None:
            text += f" {key} has no peak to mark: {meaning}."
    if any(r.generator_saturated for s in curves for p in s.done_points() for r in p.results()):
        text += (
            " A red cross marks a load where the load generator fell behind (it measures peakbench, not the target)."
        )
    return text


def _table(series: Series, points: list[LoadPoint], confidence: float) -> Table:
    classes = {round(load["load"], 6): load["classification"] for load in (series.search_result or {}).get("loads", [])}
    rows = []
    for point in points:
        low, high = _interval_of(series, point, confidence)
        results = point.results()
        histogram = merged(r.latency for r in results)
        rows.append(
            [
                point.requested,
                point.mean_achieved,
                len(point.measured),
                len(point.trials) - len(point.measured),
                _response_ms(series, point, confidence),
                low,
                high,
                percentile_ms(histogram, 99),
                sum(r.latency.count for r in results),
                classes.get(round(point.requested, 6), ""),
                sum(1 for r in results if r.generator_saturated) or None,
                len(point.failed) or None,
            ]
        )
    columns = [
        Column("offered", "ops/s"),
        Column("achieved", "ops/s"),
        Column("n trials"),
        Column("scouts"),
        Column("mean R", "ms"),
        Column(f"{confidence:.0%} CI low", "ms"),
        Column("CI high", "ms"),
        Column("p99", "ms"),
        Column("requests"),
        Column("class"),
        Column("gen. saturated"),
        Column("failed"),
    ]
    return Table(
        f"load-points-{series.key.replace(' ', '-')}",
        f"Load points of {series.title}",
        columns,
        rows,
        "each row: the measured trials at that load (n trials); scouts are short trials that only steered"
        " the search and are left out of the means; p99 from the merged histograms of all requests",
    )


def _draw(curves: list[Series], options: ReportOptions):
    with figures.style():
        figure, axes = figures.new_figure(1, 2, height_in=2.5, width_in=2 * figures.COLUMN_WIDTH_IN)
        throughput, response = axes[0]
        highest = 0.0
        shown_ms = []
        for colour, series in zip(figures.COLOURS * 4, curves):
            points = series.done_points()
            offered = [p.requested for p in points]
            achieved = [p.mean_achieved for p in points]
            confidence = options.confidence_for(series)
            means = [_response_ms(series, p, confidence) for p in points]
            shown_ms += means
            highest = max(highest, *offered, *achieved)
            achieved_err = [_error_bar(p.achieved(), p.mean_achieved, confidence) for p in points]
            mean_err = [_interval_bar(series, p, confidence) for p in points]
            label = series.key
            throughput.errorbar(
                offered,
                achieved,
                yerr=_bars(achieved_err),
                fmt="o-",
                color=colour,
                label=label,
                capsize=2,
                markersize=3,
            )
            response.errorbar(
                achieved, means, yerr=_bars(mean_err), fmt="o-", color=colour, label=label, capsize=2, markersize=3
            )
            limited = [p for p in points if any(r.generator_saturated for r in p.results())]
            if limited:  # these points measure the load generator, not the target: never let them pass unmarked
                for axis, xs, ys in (
                    (throughput, [p.requested for p in limited], [p.mean_achieved for p in limited]),
                    (response, [p.mean_achieved for p in limited], [p.mean_ms for p in limited]),
                ):
                    axis.plot(
                        xs,
                        ys,
                        "x",
                        color="#B91C1C",
                        markersize=7,
                        markeredgewidth=1.5,
                        linestyle="none",
                        label="generator saturated",
                    )
            peak, _ = peak_of(series)
            settings = series.settings
            if series.kind == "search" and "rsat_ms" in settings:
                low = settings["rsat_ms"] * (1 - settings["width"])
                high = settings["rsat_ms"] * (1 + settings["width"])
                shown_ms += [low, high]  # the axis shows the region too, however far from the points
                response.axhspan(
                    low, high, color=colour, alpha=0.15, linewidth=0, label=f"peak region {low:g}-{high:g} ms"
                )
            if peak is not None:
                throughput.axvline(peak, color=colour, linestyle="--", linewidth=0.8)
                nearest = min(points, key=lambda p: abs(p.requested - peak))
                at_peak = (series.search_result or {}).get("response_ms") or nearest.mean_ms
                response.plot(
                    [peak],
                    [at_peak],
                    marker="*",
                    markersize=10,
                    color=colour,
                    linestyle="none",
                    label=f"peak {peak:,.1f} ops/s",
                )
        throughput.plot([0, highest], [0, highest], ":", color="grey", linewidth=0.8)
        throughput.set_xlabel("offered load (ops/s)")
        throughput.set_ylabel("achieved (successful) throughput (ops/s)")
        throughput.set_xlim(left=0)
        throughput.set_ylim(bottom=0)
        response.set_xlabel("achieved (successful) throughput (ops/s)")
        response.set_ylabel("mean response time (ms)")
        response.set_xlim(left=0)
        positive = [m for m in shown_ms if m > 0]
        if positive and max(positive) / min(positive) > 30:
            # Bars reaching below zero run off the bottom: a log axis cannot show them.
            response.set_yscale("log")
            response.set_ylim(min(positive) / 3, max(positive) * 3)
        else:
            response.set_ylim(bottom=0)
        response.legend(loc="best", fontsize=6)
        throughput.legend(loc="best", fontsize=6)
    return figure


def _error_bar(values: list[float], mean: float, confidence: float) -> tuple[float, float]:
    if len(values) < 2:
        return 0.0, 0.0
    interval = t_interval(values, confidence)
    return mean - interval.low, interval.high - mean


def _interval_bar(series: Series, point: LoadPoint, confidence: float) -> tuple[float, float]:
    low, high = _interval_of(series, point, confidence)
    mean = _response_ms(series, point, confidence)
    return (max(mean - low, 0.0) if low is not None else 0.0), (max(high - mean, 0.0) if high is not None else 0.0)


def _response_ms(series: Series, point: LoadPoint, confidence: float) -> float:
    """R̄ at a load point: where a search states an interval there, the point it states with it (at the claimed
    peak, that of the trials run after the claim, not of all the load's trials), else the report's own."""
    stated = _stated_load(series, point.requested, confidence)
    return stated["mean_ms"] if stated is not None else point.response_ms(confidence)


def _interval_of(series: Series, point: LoadPoint, confidence: float) -> tuple[float | None, float | None]:
    """R̄'s interval at a load point: where a search states one at this confidence, that one (stated_interval),
    else the report's own over the point's trials; (None, None) with none."""
    stated = stated_interval(series, point.requested, confidence)
    if stated is not None:
        return stated
    interval = point.interval(confidence)
    return (interval.low, interval.high) if interval is not None else (None, None)


def stated_interval(series: Series, load: float, confidence: float) -> tuple[float, float | None] | None:
    """R̄'s interval at a search's `load` as the search states it, in its loads table and at the peak in its
    message (search.stated_response): (low, high), high None where it states only R̄ ≥ low (trials still
    rising); None where it states none, or at another confidence than the report's."""
    stated = _stated_load(series, load, confidence)
    return (stated["ci_low_ms"], stated.get("ci_high_ms")) if stated is not None else None


def _stated_load(series: Series, load: float, confidence: float) -> dict | None:
    """The search's loads-table row at `load` where it states R̄'s interval at this confidence, else None."""
    result = series.search_result
    if result is None or result.get("confidence") != confidence:
        return None
    for stated in result.get("loads") or []:
        if same_load(stated["load"], load) and stated.get("ci_low_ms") is not None:
            return stated
    return None


def _bars(errors: list[tuple[float, float]]) -> list[list[float]]:
    return [[low for low, _ in errors], [high for _, high in errors]]
