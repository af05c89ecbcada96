"""The SPECsfs text summary (sfssum, docs/sources.md, SPECsfs2008): one row per load point.

Columns: requested and achieved ops/s, mean response time (over all requests,
as SPEC computes it: total time / total ops), total ops, run time, protocol,
transport, file set size, clients and processes, and the trials behind the row.

`sfssum_lines` gives the same points in SPEC's own file layout (User's Guide
§4.4): no header, fixed columns. The guide names the first nine: requested
ops/s, achieved ops/s, mean response time (ms/op), total logical ops, test time
(s), file server protocol, network protocol (T for TCP), IP version, file set
size (KB). Its sample line goes on with `4 10  2  2 2008`; the guide does not
name those, and peakbench writes them as clients, procs per client,
BIOD_MAX_READS, BIOD_MAX_WRITES and the benchmark's version, which is what the
sample's values fit (our choice). A local directory has no network: its
protocol is POSIX and its network and IP columns are `-`.
"""

from __future__ import annotations

import html
import ipaddress

from ..histograms import pooled
from ..model import Column, Html, ReportData, ReportOptions, Section, Series, Table

SPEC_VERSION = 2008
# The BIOD columns say what ran: unset, the engine sends the transfers of a logical I/O one at a
# time (SPECsfs2008 itself defaults to 2 when BIOD_MAX_READS/WRITES are unset).
ENGINE_TRANSFERS_IN_FLIGHT = 1
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
        results = point.results()
        latency = pooled(r.latency for r in results)
        fileset = max(r.fileset.bytes if r.fileset is not None else 0 for r in results)
        found.append(
            [
                point.requested,
                point.mean_achieved,
                latency.mean_ms,
                latency.count,
                sum(r.runtime_s for r in results),
                protocol,
                transport,
                round(fileset / 1024),
                len(clients) if isinstance(clients, list) else clients or 1,
                procs or 1,
                len(trials),
            ]
        )
    return found


def size_used(settings: dict) -> str:
    """Which file-set size the run used: SPEC's own, or a scaled-down one."""
    scale = settings.get("scale", 1.0)
    per_op = settings.get("bytes_per_op")
    if per_op is None:
        return f"scale {scale:g}"
    return f"{per_op * scale / 1e6:.4g} MB of file set per op/s (scale {scale:g}; SPECsfs2008 uses 120 MB)"


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


def _network(target: dict) -> tuple[str, str, str]:
    """SPEC's protocol, network and IP version columns for a target."""
    if target["kind"] == "nfs":
        try:
            version = str(ipaddress.ip_address(target["host"]).version)
        except ValueError:
            version = "4"  # a host name: the engine connects over IPv4 first
        return "NFS3", "T", version
    if target["kind"] == "http":
        return "HTTP", "T", "4"
    return target["kind"].upper(), "-", "-"


def sfssum_lines(series: Series) -> list[str]:
    """The run's done load points in SPEC's sfssum columns."""
    settings = series.settings
    biod = [settings.get(key) for key in ("biod_max_reads", "biod_max_writes")]
    reads, writes = (ENGINE_TRANSFERS_IN_FLIGHT if value is None else value for value in biod)
    clients = len(settings.get("clients") or ["localhost"])
    lines = []
    for point, row in zip(series.done_points(), rows(series)):
        protocol, network, ip = _network(point.measured[0]["spec"]["target"])
        requested, achieved, mean_ms, total_ops, seconds, _, _, fileset_kib = row[:8]
        lines.append(
            f"{requested:15.0f} {achieved:7.0f} {mean_ms:7.1f} {total_ops:8d} {seconds:4.0f} {protocol} {network}"
            f" {ip} {fileset_kib:10d} {clients:3d} {settings.get('procs', 1):2d} {reads:2d} {writes:2d}"
            f" {SPEC_VERSION:4d}"
        )
    return lines


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
                f" requests (total ops); run time summed over them; file set {size_used(series.settings)}",
            )
        )
        blocks.append(
            Html(
                f"<details><summary>sfssum text of {html.escape(series.key)}</summary>"
                f"<pre>{html.escape(chr(10).join(sfssum_lines(series)))}</pre></details>"
            )
        )
    if not blocks:
        return None
    return Section("sfs-summary", "SPECsfs summary", blocks)
