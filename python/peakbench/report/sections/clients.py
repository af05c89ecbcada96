"""Per-client figures of trials run by many load clients (--clients, --cluster): each client's
offered and achieved rate, latency and schedule lag, and whether it kept up."""

from __future__ import annotations

from ..model import Column, ReportData, ReportOptions, Section, Table, result_of

COLUMNS = [
    Column("trial"),
    Column("client"),
    Column("offered", "ops/s", 1),
    Column("achieved", "ops/s", 1),
    Column("sent"),
    Column("errors"),
    Column("mean", "ms", 3),
    Column("p99", "ms", 3),
    Column("schedule lag p99", "ms", 3),
    Column("late start", "ms", 2),
    Column("kept up"),
]


def section(data: ReportData, options: ReportOptions) -> Section | None:
    # A replay's result has "clients" too: the count of its closed-loop clients, not a list of load clients.
    distributed = [(t, r) for t in data.done_trials if (r := result_of(t)).client_summaries() is not None]
    if not distributed:
        return None
    rows, summary, clients = [], [], 0
    for trial, result in distributed:
        for client in result.client_summaries():
            clients += 1
            rows.append(
                [
                    trial["id"],
                    client.name,
                    client.requested_rate,
                    client.achieved_rate,
                    client.sent,
                    client.errors,
                    client.mean_ms,
                    client.p99_ms,
                    client.lag_p99_ms,
                    client.start_late_ms,
                    not client.lagged,
                ]
            )
            summary += [f"trial {trial['id']}: {client.name} lagged its schedule: {reason}" for reason in client.lagged]
        summary += [
            f"trial {trial['id']}: {name} was lost mid-trial; its figures are missing"
            for name in (result.cluster.lost if result.cluster else None) or []
        ]
    table = Table(
        "clients",
        "Load clients of each distributed trial",
        COLUMNS,
        rows,
        f"n = {len(distributed)} trials, {clients} client runs; each client's own engine result, before the merge",
    )
    return Section("clients", "Load clients", [table], summary)
