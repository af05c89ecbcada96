"""The search trace (the workbench paper's Figures 3 and 7) and the search's verdict.

Left: the load factor ρ = λ/λ* of every trial against the cumulative
benchmarking cost, scouts hollow. Middle: trials per test load. Right: the
interval of R̄ at each carefully measured load as trials were added (how the
CI narrowed), against the peak region. A search without a result (still
running, or killed) is rebuilt from its stored trials: cost is then warm-up +
runlength per trial and the y axis is the offered load, since λ* is unknown.
"""

from __future__ import annotations

import dataclasses

from ...contract import TrialResult
from ...controller.history import same_load
from ...controller.settings import SearchSettings
from ...controller.statistics import response_interval
from .. import figures
from ..model import Column, Figure, ReportData, ReportOptions, Section, Series, Table


@dataclasses.dataclass(frozen=True)
class Step:
    trial: int
    load: float
    load_factor: float | None
    scout: bool
    mean_ms: float
    cumulative_cost_s: float
    runlength_s: float


def steps(series: Series) -> list[Step]:
    result = series.search_result
    if result is not None:
        return [
            Step(
                t["trial"],
                t["load"],
                t["load_factor"],
                t["purpose"] == "scout",
                t["observation"]["mean_ms"],
                t["cumulative_cost_s"],
                t["runlength_s"],
            )
            for t in result["trace"]
        ]
    done = [t for t in series.trials if t["status"] == "done"]
    settings = SearchSettings.from_stored(series.settings)
    rebuilt, cost = [], 0.0
    for number, trial in enumerate(done, start=1):
        load = trial["spec"]["load"]
        cost += load.get("warmup_s", 0.0) + load["runtime_s"]
        scout = settings.scout_runlength < settings.runlength_s and load["runtime_s"] == settings.scout_runlength
        rebuilt.append(
            Step(
                number,
                trial["rate"],
                None,
                scout,
                TrialResult.load(trial["result"]).latency.mean_ms,
                cost,
                load["runtime_s"],
            )
        )
    return rebuilt


def section(data: ReportData, options: ReportOptions) -> Section | None:
    searches = [s for s in data.series if s.kind == "search" and s.trials]
    if not searches:
        return None
    blocks, summary = [], []
    for series in searches:
        trace = steps(series)
        result = series.search_result
        settings = series.settings
        if result is not None:
            summary.append(
                f"{series.key}: {result['verdict']}: {result['message']} ({result['trials']} trials,"
                f" {result['cost_seconds']:,.0f} s of benchmarking, confidence {result['confidence']:.0%},"
                f" required accuracy {result['target_accuracy']:.0%})"
            )
        else:
            summary.append(f"{series.key}: no result stored; {len(trace)} trials so far")
        blocks.append(
            Figure(
                f"search-trace-{series.key.replace(' ', '-')}",
                _caption(series, settings, trace),
                _draw(series, trace, settings),
            )
        )
        if result is not None and result["loads"]:
            blocks.append(_loads_table(series, result))
    return Section("search-trace", "Search trace", blocks, summary)


def _caption(series: Series, settings: dict, trace: list[Step]) -> str:
    lengths = sorted({step.runlength_s for step in trace if not step.scout})
    asked = settings.get("runlength_s")
    shorter = (
        f", shorter than the runlength of {asked:g} s asked for (the policy chose them from the noise it saw)"
        if lengths and asked is not None and lengths[0] < asked * (1 - 1e-9)
        else ""
    )
    runlengths = ", ".join(f"{length:.3g}" for length in lengths) or "-"
    factors_known = bool(trace) and all(step.load_factor is not None for step in trace)
    left = (
        "load factor ρ = λ/λ* of every trial"
        if factors_known
        else "offered load of every trial (no load factor: the search found no peak λ*)"
    )
    return (
        f"{series.title}. Left: {left} against cumulative benchmarking cost"
        f" (filled: careful trials of {runlengths} s{shorter}; hollow: scouts). Middle:"
        f" trials per test load. Right: {settings.get('confidence', 0.95):.0%} lognormal (Cox) interval of the"
        f" mean response time over the first n careful trials at each load (the search's final claim at λ* uses"
        f" its two-stage Stein form), and the peak region."
    )


def _loads_table(series: Series, result: dict) -> Table:
    rows = [
        [
            load["load"],
            load["load_factor"],
            load["classification"],
            load["mean_ms"],
            load["ci_low_ms"],
            load["ci_high_ms"],
            load["trials"],
            load["cost_s"],
            load["reason"],
        ]
        for load in result["loads"]
    ]
    columns = [
        Column("load", "ops/s"),
        Column("ρ", digits=2),
        Column("class"),
        Column("mean R", "ms"),
        Column("CI low", "ms"),
        Column("CI high", "ms"),
        Column("trials"),
        Column("cost", "s", 1),
        Column("why"),
    ]
    return Table(
        f"search-loads-{series.key.replace(' ', '-')}",
        f"Test loads of {series.key}",
        columns,
        rows,
        f"intervals at the search's confidence {result['confidence']:.0%} over the careful trials of each"
        " load, of its steady-state mean response (below four trials the deviation floored by the trials' halves;"
        " both ends raised, in proportion to the squared spread of the trials' log means, for the low read of"
        " trials begun on an empty queue, and the upper end by how much the trials still rose within themselves;"
        " the why column quotes the interval the search steered by); a load with no CI high had trials still"
        " rising (not in steady state): R̄ ≥ CI low, no confidence claimed"
        f" (trials counts scouts too); {result['trials']} trials in all",
    )


def _draw(series: Series, trace: list[Step], settings: dict):
    with figures.style():
        figure, axes = figures.new_figure(1, 3, height_in=2.4, width_in=2 * figures.COLUMN_WIDTH_IN)
        cost_axis, count_axis, ci_axis = axes[0]
        factors_known = all(step.load_factor is not None for step in trace)
        hours = trace and trace[-1].cumulative_cost_s > 2 * 3600
        scale, unit = (3600, "h") if hours else (60, "min")
        y = [step.load_factor if factors_known else step.load for step in trace]
        x = [step.cumulative_cost_s / scale for step in trace]
        cost_axis.plot(x, y, "-", color="grey", linewidth=0.6)
        for scout, style in (
            (False, dict(color=figures.COLOURS[0])),
            (True, dict(markerfacecolor="white", color=figures.COLOURS[0])),
        ):
            chosen = [(a, b) for a, b, step in zip(x, y, trace) if step.scout == scout]
            if chosen:
                cost_axis.plot(
                    *zip(*chosen), "o", markersize=3.5, linestyle="none", label="scout" if scout else "careful", **style
                )
        if factors_known:
            cost_axis.axhline(1.0, color=figures.COLOURS[1], linestyle="--", linewidth=0.8)
        cost_axis.set_xlabel(f"cumulative benchmarking cost ({unit})")
        cost_axis.set_ylabel("load factor ρ = λ/λ*" if factors_known else "offered load (ops/s)")
        cost_axis.set_ylim(bottom=0)
        cost_axis.set_xlim(left=0)
        cost_axis.legend(loc="best")

        loads = sorted({step.load for step in trace})
        counts = [sum(1 for step in trace if same_load(step.load, load)) for load in loads]
        classes = {
            round(load["load"], 6): load["classification"] for load in (series.search_result or {}).get("loads", [])
        }
        colours = {
            "below": figures.COLOURS[2],
            "peak": figures.COLOURS[1],
            "above": figures.COLOURS[0],
            "undecided": "grey",
        }
        labels = [f"{load:,.0f}" for load in loads]
        decided = [classes.get(round(load, 6), "undecided") for load in loads]
        bar_colours = [colours[name] for name in decided]
        count_axis.bar(range(len(loads)), counts, color=bar_colours)
        count_axis.set_xticks(range(len(loads)), labels, rotation=60, ha="right")
        count_axis.yaxis.set_major_locator(figures.integer_ticks())
        count_axis.set_xlabel("test load (ops/s)")
        count_axis.set_ylabel("trials")
        shown = [name for name in colours if name in decided]
        for name in shown:
            count_axis.bar([0], [0], color=colours[name], label=name)
        if shown:
            count_axis.legend(loc="upper left")

        confidence = settings.get("confidence", 0.95)
        top = None
        if "rsat_ms" in settings:
            low, high = settings["rsat_ms"] * (1 - settings["width"]), settings["rsat_ms"] * (1 + settings["width"])
            ci_axis.axhspan(low, high, color=figures.COLOURS[1], alpha=0.2, linewidth=0, label="peak region")
            top = 3 * high  # saturated loads far above the region would squash it; their bars run off the top
        careful_loads = [
            load for load in loads if sum(1 for step in trace if same_load(step.load, load) and not step.scout) >= 2
        ]
        for index, load in enumerate(careful_loads):
            careful = [
                step.mean_ms for step in trace if same_load(step.load, load) and not step.scout and step.mean_ms > 0
            ]
            intervals = [response_interval(careful[:n], confidence) for n in range(2, len(careful) + 1)]
            offset = (index - (len(careful_loads) - 1) / 2) * 0.08
            ci_axis.errorbar(
                [n + offset for n in range(2, len(careful) + 1)],
                [i.mean for i in intervals],
                yerr=[[i.mean - i.low for i in intervals], [i.high - i.mean for i in intervals]],
                fmt="o-",
                capsize=2,
                markersize=2.5,
                color=figures.COLOURS[index % len(figures.COLOURS)],
                label=f"{load:,.1f} ops/s",
            )
        ci_axis.xaxis.set_major_locator(figures.integer_ticks())
        ci_axis.set_xlabel("careful trials at the load (n)")
        ci_axis.set_ylabel("mean response time R̄ (ms)")
        ci_axis.set_ylim(0, top)
        if not careful_loads:
            ci_axis.text(
                0.5,
                0.5,
                "no load has two careful trials yet",
                transform=ci_axis.transAxes,
                ha="center",
                va="center",
                fontsize=7,
                color="grey",
            )
        if careful_loads or top:
            ci_axis.legend(loc="best", fontsize=6)
    return figure
