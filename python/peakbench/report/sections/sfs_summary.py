"""The SPECsfs text summary (sfssum, REFERENCE.md §2): one row per load point.

Columns: requested and achieved ops/s, mean response time (over all requests,
as SPEC computes it: total time / total ops), total ops, run time, protocol,
transport, file set size, clients and processes, and the trials behind the row.
"""

from __future__ import annotations

import html

from ..histograms import pooled
from ..model import Column, Html, ReportData, ReportOptions, Section, Series, Table

PROTOCOLS = {
    "posix": ("POSIX", "local"),
    "nfs": ("NFSv3", "TCP"),
    "nfs3": ("NFSv3", "TCP"),
    "http": ("HTTP", "TCP"),
    "null": ("null", "-"),
}


def rows(series: Series) -> list[list]:
    settings = series.settings
    clients = settings.get("clients")
    procs = settings.get("procs")
    found = []
    for point in series.done_points():
        trials = point.measured
        spec = trials[0]["spec"]
        protocol, transport = PROTOCOLS.get(spec["target"]["kind"], (spec["target"]["kind"], "-"))
        latency = pooled(t["result"]["latency"] for t in trials)
        fileset = max(t["result"].get("fileset", {}).get("bytes", 0) for t in trials)
        found.append(
            [
                point.requested,
                point.mean_achieved,
                latency.mean_ms,
                latency.count,
                sum(t["result"].get("runtime_s", spec["load"]["runtime_s"]) for t in trials),
                protocol,
                transport,
                round(fileset / 1024),
                len(clients) if isinstance(clients, list) else clients or 1,
                procs or 1,
                len(trials),
            ]
        )
    return found


COLUMNS = [
    Column("requested", "ops/s", 1),
    Column("achieved", "ops/s", 1),
    Column("mean response", "ms/op", 2),
    Column("total ops"),
    Column("run time", "s", 1),
    Column("protocol"),
    Column("transport"),
    Column("file set", "KiB"),
    Column("clients"),
    Column("procs"),
    Column("n trials"),
]


def sfssum_text(table_rows: list[list]) -> str:
    """The rows in SPEC's fixed-width sfssum layout."""
    lines = [
        f"{'requested':>10} {'achieved':>10} {'msec/op':>8} {'total ops':>10} {'run s':>7} {'proto':>6}"
        f" {'trans':>6} {'fileset KiB':>12} {'clients':>7} {'procs':>5}"
    ]
    for r in table_rows:
        lines.append(
            f"{r[0]:>10.0f} {r[1]:>10.1f} {r[2]:>8.2f} {r[3]:>10d} {r[4]:>7.0f} {r[5]:>6} {r[6]:>6}"
            f" {r[7]:>12d} {r[8]:>7} {r[9]:>5}"
        )
    return "\n".join(lines)


def section(data: ReportData, options: ReportOptions) -> Section | None:
    blocks = []
    for series in data.series:
        if series.kind != "sfs":  # SPEC's summary describes an sfs run's load points, not a search or a trial
            continue
        found = rows(series)
        if not found:
            continue
        blocks.append(
            Table(
                f"sfs-summary-{series.key.replace(' ', '-')}",
                f"SPECsfs summary of {series.title}",
                COLUMNS,
                found,
                "each row: the measured trials at that load (n trials); mean response over all their"
                " requests (total ops); run time summed over them",
            )
        )
        blocks.append(
            Html(
                f"<details><summary>sfssum text of {html.escape(series.key)}</summary>"
                f"<pre>{html.escape(sfssum_text(found))}</pre></details>"
            )
        )
    if not blocks:
        return None
    return Section("sfs-summary", "SPECsfs summary", blocks)
