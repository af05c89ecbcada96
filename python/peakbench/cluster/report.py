"""The per-client table printed under a merged trial, and the lines that name lagging or lost clients."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text


def client_table(result: dict) -> Table:
    cluster = result.get("cluster", {})
    clock = cluster.get("clock", {})
    hosts = cluster.get("hosts", {})
    table = Table(
        title=f"per client ({len(result.get('clients', []))} of {cluster.get('clients', '?')} finished; latency in ms)"
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
    for client in result.get("clients", []):
        offset = clock.get(client["name"], {})
        lagged = client.get("lagged", [])
        table.add_row(
            client["name"],
            hosts.get(client["name"], "-"),
            f"{client['requested_rate']:.1f}" if client["requested_rate"] is not None else "-",  # closed loop
            f"{client['achieved_rate']:.1f}",
            str(client["sent"]),
            str(client["unsent"]),
            Text(str(client["errors"]), style="bold red" if client["errors"] else ""),
            f"{client['mean_ms']:.3f}",
            f"{client['p99_ms']:.3f}",
            f"{client['lag_p99_ms']:.3f}",
            f"{offset['offset_ms']:+.2f} ±{offset['uncertainty_ms']:.2f}" if offset else "-",
            f"{client['start_late_ms']:.2f}",
            Text("no" if lagged else "yes", style="bold red" if lagged else ""),
        )
    return table


def summary_lines(result: dict) -> list[Text]:
    cluster = result.get("cluster", {})
    lines = []
    skew = cluster.get("start_skew_ms")
    if skew is not None:
        lines.append(
            Text(
                f"start skew {skew:.3f} ms (bound from the clock check {cluster.get('skew_bound_ms', 0):.2f}"
                f" ms); results merged in {cluster.get('merge_s', 0) * 1e3:.0f} ms"
            )
        )
    for client in result.get("clients", []):
        for reason in client.get("lagged", []):
            lines.append(Text(f"{client['name']} lagged its schedule: {reason}", style="bold yellow"))
    for name in cluster.get("lost", []):
        lines.append(
            Text(f"{name} was lost mid-trial: the figures above are the other clients' only", style="bold red")
        )
    for name in cluster.get("failed", []):
        lines.append(Text(f"{name} failed: the figures above are the other clients' only", style="bold red"))
    return lines


def print_clients(result: dict, console: Console) -> None:
    if not isinstance(result.get("clients"), list):  # one engine (a replay's "clients" is its closed loop's count)
        return
    console.print(client_table(result))
    for line in summary_lines(result):
        console.print(line)
