"""The table printed after a trial, in the style of Fstress's per-op breakdown (its Table 4).

One row per op: its share of the mix, how many completed, latency mean,
standard deviation, median and 99th percentile, its share of all time spent
waiting on the target, and its failures (errors, shed, timeouts, cancelled)
with their share. Below: offered vs achieved (successful) load, what became of
the window's requests, the overall mean ± stddev with its sample size, the
schedule lag, and a loud warning when the load generator rather than the
target was the bottleneck.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .contract import OpStats, TrialResult
from .engine import SHED_KINDS, SHED_LABEL, offered_rate, outcomes


def ops_with_error_counts(result: dict) -> dict:
    """A result's ops as stored, each with its total of failed requests (contract.OpStats.failed_count),
    for the JSON reports of run and replay."""
    return {name: {**op.dump(), "error_count": op.failed_count()} for name, op in TrialResult.load(result).ops.items()}


def _failures(op: OpStats) -> tuple[int, int, int, int]:
    """(errors, shed, timeouts, cancelled) of one op; shed replies an older engine counted as errors count as shed."""
    errors = op.errors or {}
    shed = (op.shed or 0) + sum(n for kind, n in errors.items() if kind in SHED_KINDS)
    return sum(errors.values()) - (shed - (op.shed or 0)), shed, op.timeouts or 0, op.cancellations or 0


def _count_share(count: int, of: int) -> str:
    return f"{count} ({count / of:.1%})" if count and of else str(count)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def op_table(spec: dict, result: dict) -> Table:
    ops = TrialResult.load(result).ops
    mix = spec.get("mix", {})
    total_ms = sum(op.total_ms for op in ops.values()) or 1.0
    table = Table(title="per-operation breakdown (latency in ms, from the intended send time)")
    for heading in (
        "op",
        "mix %",
        "count",
        "mean",
        "stddev",
        "p50",
        "p99",
        "% time",
        "errors",
        "shed",
        "timeouts",
        "cancelled",
        "failed %",
    ):
        table.add_column(heading, justify="left" if heading == "op" else "right")
    # Mix order, largest first, then anything the engine reports that was not asked for.
    names = sorted(mix, key=lambda name: -mix[name]) + sorted(set(ops) - set(mix))
    for name in names:
        op = ops.get(name) or OpStats(count=0)
        latency = (op.mean_ms, op.stddev_ms, op.p50_ms, op.p99_ms) if name in ops else (None,) * 4  # never sent: "-"
        failures = _failures(op)
        requests = op.count + (op.cancellations or 0)  # count: every request that got an answer
        failed = sum(failures)
        table.add_row(
            name,
            f"{mix.get(name, 0) * 100:.1f}",
            str(op.count),
            *(_ms(value) for value in latency),
            f"{op.total_ms / total_ms * 100:.1f}",
            *(Text(str(n), style="bold red" if n else "") for n in failures),
            Text(f"{failed / requests * 100:.1f}" if requests else "-", style="bold red" if failed else ""),
        )
    return table


def summary_lines(spec: dict, result: dict) -> list[Text]:
    lines = []
    typed = TrialResult.load(result)
    requested, achieved = typed.requested_rate, typed.achieved_rate
    load = spec.get("load", {})
    window = f"warm-up {typed.warmup_s:g} s, measured {typed.runtime_s:g} s"
    if requested is None:  # closed loop: no offered rate
        lines.append(
            Text(f"closed loop with {typed.clients} clients: achieved (successful) {achieved:.1f} ops/s  [{window}]")
        )
    else:
        lines.append(
            Text(
                f"offered {requested:.1f} ops/s, achieved (successful) {achieved:.1f} ops/s"
                f" ({achieved / requested * 100 if requested else 0:.1f}%)"
                f"  [{load.get('arrivals', 'uniform')} arrivals, {window}]"
            )
        )
    counts = outcomes(typed)
    requests = counts.succeeded + counts.errors + counts.shed + counts.timeouts + counts.cancelled
    if requests:
        completed = f" ({typed.completed_rate:.1f} ops/s completed)" if typed.completed_rate is not None else ""
        lines.append(
            Text(
                f"window's {requests} requests{completed}: {counts.succeeded} succeeded, errors {_count_share(counts.errors, requests)},"
                f" shed {_count_share(counts.shed, requests)}, timeouts {_count_share(counts.timeouts, requests)},"
                f" cancelled {_count_share(counts.cancelled, requests)}",
                style="red" if counts.failed_share else "",
            )
        )
        if counts.shed:
            lines.append(
                Text(
                    f"the target shed {counts.shed} requests ({SHED_LABEL}): it is saturated at this rate",
                    style="yellow",
                )
            )
    if typed.bytes:
        megabits = typed.output_mbit_s  # storage people read MB/s, network people Mb/s: both
        lines.append(
            Text(f"output {megabits / 8:.2f} MB/s = {megabits:.2f} Mb/s ({typed.bytes:,} bytes in the window)")
        )
    latency = typed.latency
    lines.append(
        Text(
            f"latency mean {_ms(latency.mean_ms)} ± {_ms(latency.stddev_ms)} ms (n={latency.count}),"
            f" p50 {_ms(latency.p50_ms)} ms, p99 {_ms(latency.p99_ms)} ms"
        )
    )
    moderation = typed.receive_moderation
    if moderation is not None and moderation.holds:
        policy = (
            f"{moderation.hold_fraction_of_latency:.0%} of the observed latency, at most {moderation.hold_cap_us:g} µs"
            if moderation.mode == "adaptive"
            else f"{moderation.hold_us:g} µs"
        )
        lines.append(
            Text(
                f"receive moderation ({moderation.mode}, {policy}, while 8+ calls were in flight):"
                f" {moderation.holds:,} of {moderation.reads:,} reads held replies back, mean"
                f" {moderation.mean_hold_us:.0f} µs, max {moderation.max_hold_us:.0f} µs"
                " (the latencies include it)",
                style="yellow",
            )
        )
    lag = typed.schedule_lag
    lines.append(Text(f"schedule lag mean {_ms(lag.mean_ms)} ms, p99 {_ms(lag.p99_ms)} ms, max {_ms(lag.max_ms)} ms"))
    failures = [
        f"{name} {kind}×{count}"
        for name, op in sorted(typed.ops.items())
        for kind, count in sorted(
            {
                **(op.errors or {}),
                "shed": op.shed or 0,
                "timeout": op.timeouts or 0,
                "cancelled": op.cancellations or 0,
            }.items()
        )
        if count
    ]
    if failures:
        lines.append(Text("errors: " + ", ".join(failures), style="red"))
    retransmitted = [f"{name} ×{op.retransmissions}" for name, op in sorted(typed.ops.items()) if op.retransmissions]
    if retransmitted:
        lines.append(Text("retransmissions: " + ", ".join(retransmitted), style="yellow"))
    outstanding = typed.outstanding
    if outstanding.cap_bound:
        lines.append(
            Text(
                f"the cap of {outstanding.cap} outstanding requests held back {outstanding.cap_bound} sends;"
                " their latency includes that wait",
                style="yellow",
            )
        )
    if typed.generator_saturated:
        reason = typed.saturation_reason or "the schedule lag kept growing"
        lines.append(
            Text(
                f"WARNING: THE LOAD GENERATOR SATURATED ({reason}). These numbers measure peakbench's"
                " limit on this machine, not the target's.",
                style="bold white on red",
            )
        )
    elif requested is not None and achieved < 0.95 * offered_rate(result):
        lines.append(
            Text(
                "the target completed under 95% of the offered load successfully: it is probably saturated at this rate",
                style="yellow",
            )
        )
    return lines


def print_trial(spec: dict, result: dict, console: Console | None = None) -> None:
    console = console or Console()
    console.print(op_table(spec, result))
    for line in summary_lines(spec, result):
        console.print(line)


def print_validation(result: dict, label: str, console: Console) -> None:
    """The engine's validate-target result: one row per check, then the verdict and the cleanup."""
    table = Table(title=f"validation of {label}")
    for heading in ("op", "result", "check", "detail"):
        table.add_column(heading, no_wrap=heading in ("op", "result"), overflow="fold")
    style = {"pass": "green", "fail": "bold red", "skipped": "yellow"}
    for check in result["checks"]:
        status = check["status"]
        table.add_row(check["op"], f"[{style[status]}]{status}[/{style[status]}]", check["check"], check["detail"])
    console.print(table)
    cleanup = (
        "scratch directory removed" if result["cleaned_up"] else f"[red]cleanup failed: {result['cleanup_error']}[/red]"
    )
    verdict = "[green]all operations passed[/green]" if result["ok"] else "[bold red]VALIDATION FAILED[/bold red]"
    console.print(f"{verdict}: {result['passed']} passed, {result['failed']} failed; {cleanup}")
