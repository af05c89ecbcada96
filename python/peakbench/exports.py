"""Stored results in formats other tools read: HdrHistogram interval logs and OpenMetrics text.

- `hlog`: an HdrHistogram interval log (format 1.2, as HdrHistogram's HistogramLogProcessor,
  wrk2 users' scripts and the Python `hdrhistogram` package read it). One interval per
  trial: its measured window, every op together; values in nanoseconds, the Interval_Max
  column in milliseconds. The engine keeps one histogram per window, not per second, so
  an interval is a trial, never a part of one.
- `openmetrics`: the OpenMetrics text format (what Prometheus scrapes and dashboards
  read): per trial its offered and successful rates, failed share and latency quantiles
  (a summary in seconds, with count and sum); per search its peak rate and interval.
"""

from __future__ import annotations

import datetime
import io

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

from .contract import TrialResult

NS_PER_MS = 1e6
QUANTILES = {"0.5": "p50_ms", "0.9": "p90_ms", "0.99": "p99_ms", "0.999": "p999_ms"}
LATENCY_HELP = "response time from the intended send time"


def _window_start_s(trial: dict, result: TrialResult) -> float:
    """Wall-clock start of a trial's measured window: the engine's time zero plus its warm-up.
    A replay has no scheduled start; the store's creation time stands in (to the second)."""
    if result.start is None:
        return datetime.datetime.fromisoformat(trial["created"]).timestamp()
    return result.start.at_unix_s + result.warmup_s


def _measured(trials: list[dict]) -> list[tuple[dict, TrialResult]]:
    """The trials that have a result, each with its result typed."""
    return [(trial, TrialResult.load(trial["result"])) for trial in trials if trial.get("result")]


def hlog(trials: list[dict]) -> str:
    """One interval per trial, in window-start order, relative to the first window's start."""
    done = sorted(((t, r) for t, r in _measured(trials) if r.latency.hist), key=lambda pair: _window_start_s(*pair))
    out = io.StringIO()
    writer = HistogramLogWriter(out)
    writer.output_comment("[peakbench trials " + ", ".join(str(t["id"]) for t, _ in done) + "]")
    writer.output_log_format_version()
    base_s = _window_start_s(*done[0]) if done else 0.0
    # Written here: the package's own output_start_time fails on any real time (it reads seconds as ms).
    when = datetime.datetime.fromtimestamp(base_s, datetime.UTC).isoformat(" ")
    out.write(f"#[StartTime: {base_s:.3f} (seconds since epoch), {when}]\n")
    writer.output_legend()
    for trial, result in done:
        histogram = HdrHistogram.decode(result.latency.hist)
        start_s = _window_start_s(trial, result) - base_s
        # The writer treats a 0 start as "take it from the histogram": the first window starts at 0 exactly.
        start_s = start_s or 1e-6
        writer.output_interval_histogram(histogram, start_s, start_s + result.runtime_s, NS_PER_MS)
    return out.getvalue()


def _labels(**labels: object) -> str:
    def escaped(value: object) -> str:
        return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{key}="{escaped(value)}"' for key, value in labels.items()) + "}"


def openmetrics(trials: list[dict], searches: list[dict]) -> str:
    """Gauges and summaries of the given trials and searches, ending in the required `# EOF`."""
    families: dict[str, tuple[str, str, list[str]]] = {}

    def add(name: str, kind: str, help_text: str, sample: str) -> None:
        families.setdefault(name, (kind, help_text, []))[2].append(sample)

    for trial, result in _measured(trials):
        who = {"trial": trial["id"], "workload": trial["workload"], "target": trial["target"]}
        rates = {"offered": result.requested_rate, "achieved": result.achieved_rate}
        for which, rate in rates.items():
            name = f"peakbench_{which}_rate"
            add(
                name,
                "gauge",
                f"{which} operations per second (achieved: successful only)",
                f"{name}{_labels(**who)} {rate}",
            )
        failed = result.outcomes.failed_share if result.outcomes is not None else None
        if failed is not None:
            add(
                "peakbench_failed_ratio",
                "gauge",
                "share of the window's requests that did not succeed",
                f"peakbench_failed_ratio{_labels(**who)} {failed}",
            )
        for op, figures in [("all", result.latency), *sorted(result.ops.items())]:
            if not figures.count:
                continue
            name = "peakbench_latency_seconds"
            for quantile, key in QUANTILES.items():
                sample = f"{name}{_labels(**who, op=op, quantile=quantile)} {getattr(figures, key) / 1e3}"
                add(name, "summary", LATENCY_HELP, sample)
            add(name, "summary", LATENCY_HELP, f"{name}_count{_labels(**who, op=op)} {figures.count}")
            add(
                name,
                "summary",
                LATENCY_HELP,
                f"{name}_sum{_labels(**who, op=op)} {figures.mean_ms * figures.count / 1e3}",
            )
    for search in (s for s in searches if s.get("result") and s["result"].get("peak_rate") is not None):
        found = search["result"]
        who = {"search": search["id"], "workload": search["workload"], "target": search["target"]}
        for key, what in (("peak_rate", "peak"), ("ci_low", "peak_interval_low"), ("ci_high", "peak_interval_high")):
            if found.get(key) is not None:
                name = f"peakbench_{what}_rate"
                help_text = f"the search's {what.replace('_', ' ')}, operations per second"
                add(name, "gauge", help_text, f"{name}{_labels(**who, confidence=found['confidence'])} {found[key]}")
    lines = []
    for name, (kind, help_text, samples) in families.items():
        lines += [f"# TYPE {name} {kind}", f"# HELP {name} {help_text}", *samples]
    return "\n".join([*lines, "# EOF"]) + "\n"
