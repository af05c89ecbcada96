"""What a report is made of: the data a section reads, and the blocks a section returns.

Data (read from the store by selection.py, never from anywhere else):
- Series: one load-point curve: a peak-rate search, a `peakbench sfs` run, or
  loose trials of one workload on one target; or the trials of one access-log
  replay (kind "replay"), which have no offered load and form no load curve. Its trials are store rows
  (dicts: id, rate, status, error, notes, spec, result, sysinfo, ...).
- LoadPoint: the trials of a series at one offered load.
- ReportData: the series, every selected trial, and what is missing.

Blocks (rendered by html.py, terminal.py and csvout.py alike):
- Table: headings and rows of plain values (numbers stay numbers, so the HTML
  sorts them and the CSV keeps them exact); every table says what its
  statistics rest on (`basis`).
- Figure: a matplotlib figure with a caption.
- Html: a fragment only the HTML report shows (collapsible specs, notes). Blocks
  are rendered in order, so a <details> opened in one Html block may wrap the
  tables after it and close in a later one.
A Section is a titled list of blocks. Sections come from small functions
(sections/), each `section(data: ReportData, options: ReportOptions) -> Section | None`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from ..contract import TrialResult
from ..controller.history import same_load
from ..controller.statistics import ConfidenceInterval, response_interval


def result_of(trial: dict) -> TrialResult:
    """A done trial's stored result, typed."""
    return TrialResult.load(trial["result"])


@dataclasses.dataclass
class LoadPoint:
    requested: float  # offered ops/s
    trials: list[dict]  # done trials at this load, in the order run
    failed: list[dict]  # failed trials at this load

    @property
    def measured(self) -> list[dict]:
        """The trials whose means enter the interval: those of the longest runlength
        (a search's short scout trials only steered it)."""
        if not self.trials:
            return []
        longest = max(t["spec"]["load"]["runtime_s"] for t in self.trials)
        return [t for t in self.trials if t["spec"]["load"]["runtime_s"] == longest]

    def results(self) -> list[TrialResult]:
        """The measured trials' results."""
        return [result_of(t) for t in self.measured]

    def means_ms(self) -> list[float]:
        return [r.latency.mean_ms for r in self.results()]

    def achieved(self) -> list[float]:
        return [r.achieved_rate for r in self.results()]

    def interval(self, confidence: float) -> ConfidenceInterval | None:
        """R̄'s interval over the measured trials, the search's (statistics.response_interval: positive,
        holding its own point); None below two trials or when a trial measured no response."""
        means = self.means_ms()
        return response_interval(means, confidence) if len(means) >= 2 and all(m > 0 for m in means) else None

    def response_ms(self, confidence: float) -> float:
        """R̄ as the report shows it: the interval's own point where there is one, else the plain mean."""
        interval = self.interval(confidence)
        return interval.mean if interval is not None else self.mean_ms

    @property
    def mean_ms(self) -> float:
        means = self.means_ms()
        return math.fsum(means) / len(means)

    @property
    def mean_achieved(self) -> float:
        rates = self.achieved()
        return math.fsum(rates) / len(rates)


@dataclasses.dataclass
class Series:
    key: str  # "search 3", "sfs 1", "trials"
    kind: str  # "search", "sfs", "trials" or "replay"
    title: str
    record: dict | None  # the store's search or sfs_runs row
    trials: list[dict]  # all trials, done and failed, in the order run

    @property
    def settings(self) -> dict:
        return (self.record or {}).get("settings") or {}

    @property
    def search_result(self) -> dict | None:
        return (self.record or {}).get("result") if self.kind == "search" else None

    def points(self) -> list[LoadPoint]:
        """Load points in increasing offered load."""
        points: list[LoadPoint] = []
        for trial in sorted(self.trials, key=lambda t: t["rate"]):
            if not points or not same_load(points[-1].requested, trial["rate"]):
                points.append(LoadPoint(trial["rate"], [], []))
            (points[-1].trials if trial["status"] == "done" else points[-1].failed).append(trial)
        return points

    def done_points(self) -> list[LoadPoint]:
        return [p for p in self.points() if p.trials]


@dataclasses.dataclass
class ReportData:
    store_path: str
    series: list[Series]
    missing: list[str]  # what a partial selection lacks, said instead of failing
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # data of plug-in sections (harness, ...)

    @property
    def trials(self) -> list[dict]:
        return [t for s in self.series for t in s.trials]

    @property
    def curves(self) -> list[Series]:
        """The series that are load-point curves: all but replays (a closed-loop replay offers no load)."""
        return [s for s in self.series if s.kind != "replay"]

    @property
    def done_trials(self) -> list[dict]:
        return [t for t in self.trials if t["status"] == "done"]


@dataclasses.dataclass(frozen=True)
class ReportOptions:
    confidence: float | None = None  # of the intervals the report computes; None: a search's own, else 95%
    thresholds_ms: tuple[float, ...] = (10.0, 100.0)  # latency CDF: share of requests under each

    def confidence_for(self, series: Series) -> float:
        return self.confidence or series.settings.get("confidence") or 0.95


@dataclasses.dataclass
class Column:
    heading: str
    unit: str = ""  # shown after the heading: "mean (ms)"
    digits: int | None = None  # decimals for floats; None: a readable default

    @property
    def label(self) -> str:
        return f"{self.heading} ({self.unit})" if self.unit else self.heading

    @property
    def key(self) -> str:
        """The label as a machine-readable name, units in it: "90% CI low (ms)" -> "90pct_ci_low_ms"."""
        # ops/s -> ops_per_s (in a heading, O/H stays o_h); megabits keep apart from megabytes: mbit_per_s, mb
        unit = _slug(self.unit.replace("Mb/s", "Mbit/s").replace("/", " per "))
        return "_".join(part for part in (_slug(self.heading), unit) if part)


_SPELLED_OUT = {"%": " pct ", "ρ": "rho", "−": " minus ", "≤": " le ", "≥": " ge ", ".": " "}


def _slug(text: str) -> str:
    for sign, word in _SPELLED_OUT.items():
        text = text.replace(sign, word)
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


@dataclasses.dataclass
class Table:
    name: str  # file-name slug, for the CSV
    title: str
    columns: list[Column]
    rows: list[list[Any]]  # plain values: str, int, float or None
    basis: str  # what the statistics rest on, e.g. "n = 4 trials, 12,000 requests"
    terminal: bool = True  # printed on the terminal too

    def formatted(self, row: list[Any]) -> list[str]:
        return [format_value(value, column.digits) for value, column in zip(row, self.columns)]


@dataclasses.dataclass
class Figure:
    name: str  # file-name slug
    caption: str
    figure: Any  # matplotlib.figure.Figure


@dataclasses.dataclass
class Html:
    html: str  # a trusted fragment made with html.escape for every stored string


Block = Table | Figure | Html


@dataclasses.dataclass
class Section:
    name: str  # anchor slug
    title: str
    blocks: list[Block]
    summary: list[str] = dataclasses.field(default_factory=list)  # key sentences, on the terminal too


def format_value(value: Any, digits: int | None = None) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if digits is not None:
            return f"{value:,.{digits}f}"
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:,.1f}"
        if magnitude >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}" if magnitude >= 0.001 or value == 0 else f"{value:.2e}"
    return str(value)
