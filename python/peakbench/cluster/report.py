"""The per-client table printed under a merged trial, and the lines that name lagging or lost clients."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..contract import ClusterRun, TrialResult


def client_table(result: TrialResult) -> Table:
    cluster = result.cluster or ClusterRun()
    clock = cluster.clock or {}
    hosts = cluster.hosts or {}
    clients = result.client_summaries() or []
    table = Table(
        title=f"per client ({len(clients)} of {cluster.clients if cluster.clients is not None else '?'} finished;"
        " latency in ms)"
    )
    for heading in (
        "client",
        "host",
        "offered",
        "achieved",
        "sent",
        "unsent",
        "errors",
        "mean",
        "p99",
        "lag p99",
        "clock offset",
        "late start",
        "kept up",
    ):
        table.add_column(heading, justify="left" if heading in ("client", "host", "kept up") else "right")
    for client in clients:
        offset = clock.get(client.name, {})
        table.add_row(
            client.name,
            hosts.get(client.name, "-"),
            f"{client.requested_rate:.1f}" if client.requested_rate is not None else "-",  # closed loop
            f"{client.achieved_rate:.1f}",
            str(client.sent),
            str(client.unsent),
            Text(str(client.errors), style="bold red" if client.errors else ""),
            f"{client.mean_ms:.3f}",
            f"{client.p99_ms:.3f}",
            f"{client.lag_p99_ms:.3f}",
            f"{offset['offset_ms']:+.2f} ±{offset['uncertainty_ms']:.2f}" if offset else "-",
            f"{client.start_late_ms:.2f}",
            Text("no" if client.lagged else "yes", style="bold red" if client.lagged else ""),
        )
    return table


def summary_lines(result: TrialResult) -> list[Text]:
    cluster = result.cluster or ClusterRun()
    lines = []
    if cluster.start_skew_ms is not None:
        lines.append(
            Text(
                f"start skew {cluster.start_skew_ms:.3f} ms (bound from the clock check"
                f" {cluster.skew_bound_ms or 0:.2f} ms); results merged in {(cluster.merge_s or 0) * 1e3:.0f} ms"
            )
        )
    for client in result.client_summaries() or []:
        for reason in client.lagged:
            lines.append(Text(f"{client.name} lagged its schedule: {reason}", style="bold yellow"))
    for name in cluster.lost or []:
        lines.append(
            Text(f"{name} was lost mid-trial: the figures above are the other clients' only", style="bold red")
        )
    for name in cluster.failed or []:
        lines.append(Text(f"{name} failed: the figures above are the other clients' only", style="bold red"))
    return lines


def print_clients(result: dict, console: Console) -> None:
    typed = TrialResult.load(result)
    if typed.client_summaries() is None:  # one engine (a replay's "clients" is its closed loop's count)
        return
    console.print(client_table(typed))
    for line in summary_lines(typed):
        console.print(line)
