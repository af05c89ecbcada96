"""Response surfaces (the workbench paper's §4): the fitted peak-rate model over two factors at a time.

Reads `data.extra["surfaces"]`: a list of SurfaceResult.to_dict() records
(controller/surface.py): factors, per-sample outcomes (sample, seed_load,
result, failure, predicted and its prediction interval), the fitted quadratic
(terms and coefficients on coded factors, weighted by the peaks' intervals),
its held-out (leave-one-out) MAPE and residual degrees of freedom, and cost.
For each pair of factors: a heat map of the model with the other factors at
their centre, the measured samples marked; then predicted (with prediction
intervals) vs measured peak rates, and the table of samples. Without residual
degrees of freedom no error and no interval is claimed.

A fixed-rate plan's record (kind "fixed-rate", searching.measure_planned_surface)
is each sample's mean response time at one offered load: drawn over the first
factor, one line per level of the second (Fstress Figure 9), and tabled.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...controller.design import Factor
from ...controller.surface import (
    PREDICTION_CONFIDENCE,
    QuadraticSurface,
    describe_error,
)
from .. import figures
from ..model import Column, Figure, ReportData, ReportOptions, Section, Table

GRID = 60  # model evaluations per factor axis


def section(data: ReportData, options: ReportOptions) -> Section | None:
    surfaces = data.extra.get("surfaces") or []
    if not surfaces:
        return None
    blocks, summary = [], []
    for number, record in enumerate(surfaces, start=1):
        factors = [Factor(f["name"], tuple(f["levels"]), f.get("scale", "linear")) for f in record["factors"]]
        if record.get("kind") == "fixed-rate":
            blocks += _fixed_rate(number, factors, record, summary)
            continue
        measured = [o for o in record["outcomes"] if o["failure"] is None and o["result"]]
        failed = [o for o in record["outcomes"] if o["failure"] is not None]
        fitted = record.get("surface")
        if fitted is None:
            summary.append(
                f"surface {number}: no model: {len(measured)} samples found a peak, too few for a"
                f" quadratic in {len(factors)} factors"
            )
        else:
            model = QuadraticSurface(
                tuple(factors),
                tuple(fitted["terms"]),
                tuple(fitted["coefficients"]),
                fitted.get("r_squared"),
                fitted.get("residual_dof", 0),
            )
            summary.append(
                f"surface {number}: quadratic in {', '.join(f.name for f in factors)} fitted through"
                f" {len(measured)} measured peaks, each weighted by its interval; "
                + describe_error(
                    len(measured),
                    len(model.terms),
                    record.get("loo_mape"),
                    record.get("loo_samples"),
                    record.get("mape"),
                    model.r_squared,
                )
                + f"; {len(failed)} sample(s) without a peak; cost {record['cost_seconds'] / 3600:.1f} h"
            )
            for a, b in itertools.combinations(range(len(factors)), 2):
                blocks.append(
                    Figure(
                        f"surface-{number}-{factors[a].name}-{factors[b].name}",
                        f"Surface {number}: predicted peak rate (ops/s) over {factors[a].name} and"
                        f" {factors[b].name}"
                        + (", other factors at their centre" if len(factors) > 2 else "")
                        + f"; dots: the {len(measured)} measured samples, labelled with their peak.",
                        _heat_map(model, a, b, measured),
                    )
                )
            confidence = record.get("confidence", PREDICTION_CONFIDENCE)
            bars = (
                f" Bars: {confidence:.0%} prediction intervals (t on {model.residual_dof} residual degrees of freedom)."
                if any(o.get("predicted_low") is not None for o in measured)
                else " No prediction intervals: the fit has no residual degrees of freedom."
            )
            blocks.append(
                Figure(
                    f"surface-{number}-fit",
                    f"Surface {number}: predicted vs measured peak rate of each"
                    f" measured sample (n = {len(measured)}); the line is predicted = measured." + bars,
                    _fit(measured),
                )
            )
        blocks.append(_table(number, factors, record["outcomes"], record.get("confidence", PREDICTION_CONFIDENCE)))
    return Section("surfaces", "Response surfaces", blocks, summary)


def _axis_values(factor: Factor) -> np.ndarray:
    low, high = min(factor.levels), max(factor.levels)
    return np.geomspace(low, high, GRID) if factor.scale == "log" else np.linspace(low, high, GRID)


def _centre(factor: Factor) -> float:
    low, high = min(factor.levels), max(factor.levels)
    return float(np.sqrt(low * high)) if factor.scale == "log" else (low + high) / 2


def _heat_map(model: QuadraticSurface, a: int, b: int, measured):
    factors = model.factors
    xs, ys = _axis_values(factors[a]), _axis_values(factors[b])
    base = {f.name: _centre(f) for f in factors}
    grid = np.array([[model.predict({**base, factors[a].name: x, factors[b].name: y}) for x in xs] for y in ys])
    with figures.style():
        figure, axes = figures.new_figure(height_in=2.8)
        axis = axes[0][0]
        shading = axis.contourf(xs, ys, grid, levels=14, cmap="viridis")
        axis.contour(xs, ys, grid, levels=7, colors="white", linewidths=0.4)
        colour_bar = figure.colorbar(shading, ax=axis)
        colour_bar.set_label("predicted peak rate (ops/s)")
        for outcome in measured:
            x, y = outcome["sample"][factors[a].name], outcome["sample"][factors[b].name]
            axis.plot([x], [y], "o", color="white", markeredgecolor="black", markersize=4, clip_on=False)
            axis.annotate(
                f"{outcome['result']['peak_rate']:,.0f}",
                (x, y),
                textcoords="offset points",
                xytext=(3, 3),
                fontsize=6,
                color="white",
            )
        for factor, set_scale in ((factors[a], axis.set_xscale), (factors[b], axis.set_yscale)):
            if factor.scale == "log":
                set_scale("log")
        axis.set_xlabel(factors[a].name)
        axis.set_ylabel(factors[b].name)
        axis.grid(False)
    return figure


def _fit(measured):
    peaks = [o["result"]["peak_rate"] for o in measured]
    predicted = [o["predicted"] for o in measured]
    with figures.style():
        figure, axes = figures.new_figure(height_in=2.8)
        axis = axes[0][0]
        top = max(peaks + predicted) * 1.05
        axis.plot([0, top], [0, top], ":", color="grey", linewidth=0.8)
        if all(o.get("predicted_low") is not None for o in measured):
            errors = [
                [p - o["predicted_low"] for p, o in zip(predicted, measured)],
                [o["predicted_high"] - p for p, o in zip(predicted, measured)],
            ]
            axis.errorbar(peaks, predicted, yerr=errors, fmt="o", color=figures.COLOURS[0], capsize=2)
            top = max(top, max(o["predicted_high"] for o in measured) * 1.05)
        else:
            axis.plot(peaks, predicted, "o", color=figures.COLOURS[0])
        axis.set_xlim(0, top)
        axis.set_ylim(0, top)
        axis.set_xlabel("measured peak rate (ops/s)")
        axis.set_ylabel("predicted peak rate (ops/s)")
    return figure


def _table(number: int, factors: list[Factor], outcomes: list[dict], confidence: float) -> Table:
    rows = []
    for outcome in outcomes:
        result = outcome["result"] or {}
        peak, predicted = result.get("peak_rate"), outcome["predicted"]
        error = abs(predicted - peak) / peak * 100 if peak and predicted is not None else None
        rows.append(
            [
                *[outcome["sample"][f.name] for f in factors],
                outcome["seed_load"],
                peak,
                predicted,
                outcome.get("predicted_low"),
                outcome.get("predicted_high"),
                error,
                result.get("trials"),
                result.get("cost_seconds"),
                outcome["failure"] or "",
            ]
        )
    columns = [
        *[Column(f.name) for f in factors],
        Column("seed load", "ops/s"),
        Column("measured peak", "ops/s"),
        Column("predicted", "ops/s"),
        Column(f"{confidence:.0%} PI low", "ops/s"),
        Column("PI high", "ops/s"),
        Column("in-sample error", "%", 1),
        Column("trials"),
        Column("cost", "s", 0),
        Column("failure"),
    ]
    return Table(
        f"surface-{number}-samples",
        f"Samples of surface {number}",
        columns,
        rows,
        "each measured peak is one search's λ* (its own confidence and accuracy); predicted from the"
        " quadratic fitted through all measured peaks (in-sample: the held-out error is in the summary);"
        " PI: where a new peak measured at that sample would fall, empty without residual freedom",
    )


def _fixed_rate(number: int, factors: list[Factor], record: dict, summary: list[str]) -> list:
    measured = [o for o in record["outcomes"] if o["failure"] is None and o["mean_ms"] is not None]
    confidence, rate = record["confidence"], record["rate"]
    counts = sorted({o["trials"] for o in measured}) or [0]
    n_text = f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]} to {counts[-1]}"
    summary.append(
        f"surface {number}: mean response time at {rate:g} ops/s offered over {', '.join(f.name for f in factors)};"
        f" {len(measured)} of {len(record['outcomes'])} samples measured ({n_text} trials each)"
    )
    rows = [
        [
            *[o["sample"][f.name] for f in factors],
            o["trials"],
            o["mean_ms"],
            o["ci_low_ms"],
            o["ci_high_ms"],
            o["achieved_rate"],
            o["failed_share"],
            " ".join(str(i) for i in o["trial_ids"]),
            o["failure"] or "",
        ]
        for o in record["outcomes"]
    ]
    columns = [
        *[Column(f.name) for f in factors],
        Column("n trials"),
        Column("mean response", "ms", 3),
        Column(f"{confidence:.0%} CI low", "ms", 3),
        Column("CI high", "ms", 3),
        Column("achieved", "ops/s", 1),
        Column("failed share", digits=4),
        Column("trials"),
        Column("failure"),
    ]
    table = Table(
        f"surface-{number}-samples",
        f"Samples of surface {number} at {rate:g} ops/s",
        columns,
        rows,
        f"each row: {record['trials_per_sample']} trials of {record['runlength_s']:g} s at one sample; the mean"
        f" response time over the trials' means with its {confidence:.0%} lognormal interval (two or more trials)",
    )
    if not measured:
        return [table]
    caption = (
        f"Surface {number}: mean response time at {rate:g} ops/s offered over {factors[0].name}"
        + (f", one line per level of {factors[1].name}" if len(factors) > 1 else "")
        + (", other factors at each of their levels as separate lines" if len(factors) > 2 else "")
        + f"; each point the mean of its trials ({n_text}), bars {confidence:.0%} intervals, cut at the"
        " axis where they reach beyond it (the table has them whole)."
    )
    return [Figure(f"surface-{number}-response", caption, _response_lines(factors, measured)), table]


def _response_lines(factors: list[Factor], measured: list[dict]):
    x_name = factors[0].name
    others = [f.name for f in factors[1:]]
    lines: dict[tuple, list[dict]] = {}
    for outcome in measured:
        lines.setdefault(tuple(outcome["sample"][name] for name in others), []).append(outcome)
    with figures.style():
        figure, axes = figures.new_figure(height_in=2.6)
        axis = axes[0][0]
        for colour, (key, points) in zip(figures.COLOURS * 4, sorted(lines.items())):
            points.sort(key=lambda o: o["sample"][x_name])
            bars = [
                [o["mean_ms"] - o["ci_low_ms"], o["ci_high_ms"] - o["mean_ms"]]
                if o["ci_low_ms"] is not None
                else [0.0, 0.0]
                for o in points
            ]
            axis.errorbar(
                [o["sample"][x_name] for o in points],
                [o["mean_ms"] for o in points],
                yerr=[[b[0] for b in bars], [b[1] for b in bars]],
                fmt="o-",
                color=colour,
                capsize=2,
                markersize=3,
                label=", ".join(f"{name} {value:g}" for name, value in zip(others, key)) or None,
            )
        if factors[0].scale == "log":
            axis.set_xscale("log")
        axis.set_xlabel(x_name)
        axis.set_ylabel("mean response time (ms)")
        means = [o["mean_ms"] for o in measured if o["mean_ms"] > 0]
        # The axis follows the means, not the bars: an interval from three noisy trials can be
        # thousands of times wider than the means, and would flatten every line.
        if means and max(means) / min(means) > 30:
            axis.set_yscale("log")
            axis.set_ylim(min(means) / 3, max(means) * 3)
        elif means:
            axis.set_ylim(0, max(means) * 1.5)
        if others:
            axis.legend(loc="best", fontsize=6)
    return figure
