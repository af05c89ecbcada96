"""The table printed after a trial, in the style of Fstress's per-op breakdown (its Table 4).

One row per op: its share of the mix, how many completed, latency mean,
standard deviation, median and 99th percentile, its share of all time spent
waiting on the target, and errors. Below: offered vs achieved load, the
overall mean ± stddev with its sample size, the schedule lag, and a loud
warning when the load generator rather than the target was the bottleneck.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .engine import offered_rate


def error_count(op: dict) -> int:
    """All failed requests of one op: errors by kind (errno, NFS status) plus timeouts and cancellations."""
    return sum(op.get("errors", {}).values()) + op.get("timeouts", 0) + op.get("cancellations", 0)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def op_table(spec: dict, result: dict) -> Table:
    ops = result.get("ops", {})
    mix = spec.get("mix", {})
    total_ms = sum(op.get("total_ms", 0.0) for op in ops.values()) or 1.0
    table = Table(title="per-operation breakdown (latency in ms, from the intended send time)")
    for heading in ("op", "mix %", "count", "mean", "stddev", "p50", "p99", "% time", "errors"):
        table.add_column(heading, justify="left" if heading == "op" else "right")
    # Mix order, largest first, then anything the engine reports that was not asked for.
    names = sorted(mix, key=lambda name: -mix[name]) + sorted(set(ops) - set(mix))
    for name in names:
        op = ops.get(name, {})
        errors = error_count(op)
        table.add_row(
            name,
            f"{mix.get(name, 0) * 100:.1f}",
            str(op.get("count", 0)),
            _ms(op.get("mean_ms")),
            _ms(op.get("stddev_ms")),
            _ms(op.get("p50_ms")),
            _ms(op.get("p99_ms")),
            f"{op.get('total_ms', 0.0) / total_ms * 100:.1f}",
            Text(str(errors), style="bold red" if errors else ""),
        )
    return table


def summary_lines(spec: dict, result: dict) -> list[Text]:
    lines = []
    requested, achieved = result["requested_rate"], result["achieved_rate"]
    load = spec.get("load", {})
    window = f"warm-up {result.get('warmup_s', 0):g} s, measured {result.get('runtime_s', 0):g} s"
    if requested is None:  # closed loop: no offered rate
        lines.append(Text(f"closed loop with {result.get('clients')} clients: achieved {achieved:.1f} ops/s  [{window}]"))
    else:
        lines.append(Text(
            f"offered {requested:.1f} ops/s, achieved {achieved:.1f} ops/s"
            f" ({achieved / requested * 100 if requested else 0:.1f}%)"
            f"  [{load.get('arrivals', 'uniform')} arrivals, {window}]"
        ))
    if result.get("bytes"):
        lines.append(Text(f"output {result['output_mbit_s']:.2f} Mb/s ({result['bytes']:,} bytes in the window)"))
    latency = result["latency"]
    samples = latency.get("count", result.get("completed", 0))
    lines.append(Text(
        f"latency mean {_ms(latency['mean_ms'])} ± {_ms(latency['stddev_ms'])} ms (n={samples}),"
        f" p50 {_ms(latency['p50_ms'])} ms, p99 {_ms(latency['p99_ms'])} ms"
    ))
    moderation = result.get("receive_moderation", {})
    if moderation.get("holds"):
        policy = (f"{moderation['hold_fraction_of_latency']:.0%} of the observed latency, at most"
                  f" {moderation['hold_cap_us']:g} µs" if moderation["mode"] == "adaptive" else f"{moderation['hold_us']:g} µs")
        lines.append(Text(f"receive moderation ({moderation['mode']}, {policy}, while 8+ calls were in flight):"
                          f" {moderation['holds']:,} of {moderation['reads']:,} reads held replies back, mean"
                          f" {moderation['mean_hold_us']:.0f} µs, max {moderation['max_hold_us']:.0f} µs"
                          " (the latencies include it)", style="yellow"))
    lag = result["schedule_lag"]
    lines.append(Text(
        f"schedule lag mean {_ms(lag.get('mean_ms'))} ms, p99 {_ms(lag.get('p99_ms'))} ms,"
        f" max {_ms(lag.get('max_ms'))} ms"
    ))
    failures = [
        f"{name} {kind}×{count}"
        for name, op in sorted(result.get("ops", {}).items())
        for kind, count in sorted({**op.get("errors", {}), "timeout": op.get("timeouts", 0),
                                   "cancelled": op.get("cancellations", 0)}.items())
        if count
    ]
    if failures:
        lines.append(Text("errors: " + ", ".join(failures), style="red"))
    retransmitted = [f"{name} ×{op['retransmissions']}" for name, op in sorted(result.get("ops", {}).items())
                     if op.get("retransmissions")]
    if retransmitted:
        lines.append(Text("retransmissions: " + ", ".join(retransmitted), style="yellow"))
    outstanding = result.get("outstanding") or {}
    if outstanding.get("cap_bound"):
        lines.append(Text(
            f"the cap of {outstanding['cap']} outstanding requests held back {outstanding['cap_bound']} sends;"
            " their latency includes that wait", style="yellow",
        ))
    if result.get("generator_saturated"):
        reason = result.get("saturation_reason") or "the schedule lag kept growing"
        lines.append(Text(
            f"WARNING: THE LOAD GENERATOR SATURATED ({reason}). These numbers measure peakbench's"
            " limit on this machine, not the target's.", style="bold white on red",
        ))
    elif requested is not None and achieved < 0.95 * offered_rate(result):
        lines.append(Text(
            "the target completed under 95% of the offered load: it is probably saturated at this rate",
            style="yellow",
        ))
    return lines


def print_trial(spec: dict, result: dict, console: Console | None = None) -> None:
    console = console or Console()
    console.print(op_table(spec, result))
    for line in summary_lines(spec, result):
        console.print(line)
