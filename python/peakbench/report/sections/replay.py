"""Access-log replays (`peakbench replay`): output bandwidth against data-set size.

The Flash paper's figure (docs/sources.md, trace-based web-server experiments): as the data set outgrows the
server's cache, output bandwidth falls. Each point is one data-set size of one
replay mode: the trials at that size, their output bandwidth's mean and, with
two or more trials (`replay --repeat N`), its interval. Bandwidth is positive
and right-skewed, so the interval is the search's lognormal one
(statistics.response_interval: positive, holding its own point).
"""

from __future__ import annotations

import dataclasses
import math

from ...contract import TrialResult
from ...controller.statistics import response_interval
from ...replay import mode_text
from ...units import format_size
from .. import figures
from ..histograms import merged, percentile_ms
from ..model import Column, Figure, ReportData, ReportOptions, Section, Series, Table

COLUMNS = [
    Column("mode"),
    Column("data set", "MB", 2),
    Column("files"),
    Column("n trials"),
    Column("output", "Mb/s", 1),
    Column("CI low", "Mb/s", 1),
    Column("CI high", "Mb/s", 1),
    Column("requests/s", digits=1),
    Column("mean", "ms", 3),
    Column("p99", "ms", 3),
    Column("errors"),
    Column("trials"),
]


@dataclasses.dataclass
class SizePoint:
    """The done trials of one replay mode at one data-set size."""

    mode: str
    trials: list[dict]

    @property
    def dataset_bytes(self) -> int:
        return TrialResult.load(self.trials[0]["result"]).replay.dataset_bytes

    def bandwidths(self) -> list[float]:
        return [TrialResult.load(t["result"]).output_mbit_s for t in self.trials]

    def bandwidth(self, confidence: float) -> tuple[float, float | None, float | None]:
        """Output Mb/s and its interval (None, None below two trials or with an idle trial)."""
        values = self.bandwidths()
        if len(values) >= 2 and all(v > 0 for v in values):
            interval = response_interval(values, confidence)
            return interval.mean, interval.low, interval.high
        return math.fsum(values) / len(values), None, None


def size_points(series: Series) -> list[SizePoint]:
    """Per mode, per data-set size (the size kept from the log, which the engine reports), smallest first."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for trial in series.trials:
        if trial["status"] == "done":
            key = (mode_text(trial["spec"]), TrialResult.load(trial["result"]).replay.dataset_bytes)
            groups.setdefault(key, []).append(trial)
    return [SizePoint(mode, trials) for (mode, _), trials in sorted(groups.items())]


def _row(point: SizePoint, confidence: float) -> list:
    results = [TrialResult.load(t["result"]) for t in point.trials]
    mean, low, high = point.bandwidth(confidence)
    requests = sum(r.latency.count for r in results)
    return [
        point.mode,
        point.dataset_bytes / 1e6,
        results[0].replay.files,
        len(results),
        mean,
        low,
        high,
        math.fsum(r.achieved_rate for r in results) / len(results),
        math.fsum(r.latency.total_ms for r in results) / requests if requests else None,
        percentile_ms(merged(r.latency for r in results), 99),
        sum(r.outcomes.errors + r.outcomes.timeouts for r in results),
        " ".join(str(t["id"]) for t in point.trials),
    ]


def _draw(points: list[SizePoint], confidence: float):
    with figures.style():
        figure, axes = figures.new_figure()
        axis = axes[0][0]
        modes = list(dict.fromkeys(p.mode for p in points))
        for colour, mode in zip(figures.COLOURS * 4, modes):
            mine = [p for p in points if p.mode == mode]
            shown = [p.bandwidth(confidence) for p in mine]
            bars = [[0.0, 0.0] if low is None else [mean - low, high - mean] for mean, low, high in shown]
            axis.errorbar(
                [p.dataset_bytes / 1e6 for p in mine],
                [mean for mean, _, _ in shown],
                yerr=[[b[0] for b in bars], [b[1] for b in bars]],
                fmt="o-",
                color=colour,
                label=mode,
                capsize=2,
                markersize=3,
            )
        axis.set_xlabel("data-set size (MB)")
        axis.set_ylabel("output bandwidth (Mb/s)")
        axis.set_xlim(left=0)
        axis.set_ylim(bottom=0)
        axis.legend(loc="best", fontsize=6)
    return figure


def section(data: ReportData, options: ReportOptions) -> Section | None:
    replays = [s for s in data.series if s.kind == "replay"]
    blocks, summary = [], []
    for series in replays:
        points = size_points(series)
        if not points:
            continue
        confidence = options.confidence_for(series)
        slug = series.key.replace(" ", "-")
        counts = sorted({len(p.trials) for p in points})
        n_text = f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]} to {counts[-1]}"
        blocks.append(
            Table(
                f"replay-{slug}",
                f"Replay of {series.title}",
                COLUMNS,
                [_row(p, confidence) for p in points],
                f"each row: the done trials of one mode at one data-set size ({n_text} trials per row);"
                f" output is their mean bandwidth with its {confidence:.0%} lognormal interval (two or more"
                " trials; replay --repeat N runs more); mean response over all their requests, p99 from"
                " their merged histograms",
            )
        )
        sizes = {p.dataset_bytes for p in points}
        if len(sizes) > 1:
            blocks.append(
                Figure(
                    f"replay-bandwidth-{slug}",
                    f"{series.title}: output bandwidth against data-set size, one line per replay mode."
                    f" Each point is the mean over its trials ({n_text}); bars are {confidence:.0%} intervals"
                    " where a point has two or more trials.",
                    _draw(points, confidence),
                )
            )
        best = max(points, key=lambda p: p.bandwidth(confidence)[0])
        summary.append(
            f"{series.key}: {len(points)} data-set size{'s' if len(points) > 1 else ''} from"
            f" {format_size(min(sizes))} to {format_size(max(sizes))}; highest output"
            f" {best.bandwidth(confidence)[0]:,.1f} Mb/s at {format_size(best.dataset_bytes)}"
            f" (n = {len(best.trials)} trials)"
        )
    if not blocks:
        return None
    return Section("replay", "Access-log replay", blocks, summary)
