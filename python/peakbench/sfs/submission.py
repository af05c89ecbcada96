"""SPECsfs2008's outputs of a run, built from the store: the sfssum file and a submission-style report.

sfssum: one line per load point in SPEC's columns (report/sections/sfs_summary.py).

The submission report (text and XML; the guide's §5 fields we can know): the
system under test as the store's system snapshot records it, the rc settings,
the file-set size used, each load point, the peak achieved and the overall
response time, and the warnings SPEC's rules imply (fewer than 10 points is not
a publishable curve; ops/s per process outside 10-250).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from ..report.model import Series
from ..report.sections.load_curve import overall_response_time
from ..report.sections.sfs_summary import sfssum_lines, size_used
from .rcfile import CIFS_ONLY, PER_PROC_GUIDANCE, PUBLISHABLE_POINTS, USED

POINT_FIELDS = ("requested ops/s", "achieved ops/s", "mean response ms", "trials")
# The settings under the guide's rc variable names (§3.3, §3.3.1), as the run used them. INCR_LOAD
# and NUM_RUNS are shown expanded into LOAD's list (with NUM_RUNS its length), NUM_PROCS as PROCS;
# the CIFS-only USERNAME, PASSWORD and DOMAIN are refused, and WORKLOAD is peakbench's own.
RC_FIELDS = tuple(name for name in USED if name not in ("INCR_LOAD", "NUM_PROCS", *CIFS_ONLY))


def write_sfssum(series: Series, path: Path) -> Path:
    """The sfssum file, replaced whole (a reader never sees half of it)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(line + "\n" for line in sfssum_lines(series)), encoding="utf-8")
    os.replace(partial, path)
    return path


def warnings(series: Series) -> list[str]:
    """What keeps the curve from being a publishable SPECsfs2008 result, by SPEC's guidance."""
    settings = series.settings
    found = []
    points = len(series.done_points())
    if points < PUBLISHABLE_POINTS:
        found.append(f"{points} load points; a publishable SPECsfs2008 curve has at least {PUBLISHABLE_POINTS}")
    per_process = settings.get("per_process") or []
    if per_process and (min(per_process) < PER_PROC_GUIDANCE[0] or max(per_process) > PER_PROC_GUIDANCE[1]):
        found.append(
            f"{min(per_process):g} to {max(per_process):g} ops/s per process; SPEC recommends"
            f" {PER_PROC_GUIDANCE[0]:g} to {PER_PROC_GUIDANCE[1]:g}"
        )
    return found


def _report(series: Series) -> dict:
    """The submission's fields, in the order both formats show them."""
    record = series.record or {}
    settings = series.settings
    points = series.done_points()
    sysinfo = points[0].measured[0].get("sysinfo") or {} if points else {}
    ort = overall_response_time([(p.mean_achieved, p.mean_ms) for p in points])
    peak = max(points, key=lambda p: p.mean_achieved) if points else None
    return {
        "run": {
            "id": record.get("id"),
            "created": record.get("created"),
            "status": record.get("status"),
            "workload": record.get("workload"),
            "target": record.get("target"),
            "rcfile": settings.get("rcfile"),
            "file set size": size_used(settings),
            "spec rounding": settings.get("spec_rounding"),
        },
        "system under test": {
            key: value for key, value in sysinfo.items() if isinstance(value, (str, int, float)) and value is not None
        },
        "rc settings": rc_settings(settings),
        "load points": [
            dict(
                zip(
                    POINT_FIELDS,
                    (f"{p.requested:g}", f"{p.mean_achieved:.1f}", f"{p.mean_ms:.3f}", str(len(p.measured))),
                )
            )
            for p in points
        ],
        "result": {
            "peak achieved ops/s": f"{peak.mean_achieved:.1f} (at {peak.requested:g} requested)" if peak else "none",
            "overall response time ms": f"{ort:.3f}" if ort is not None else "none (no load point)",
            "load points": str(len(points)),
        },
        "warnings": warnings(series),
    }


def rc_settings(settings: dict) -> dict:
    """RC_FIELDS with the values the run used (unset ones empty)."""
    loads = settings.get("loads") or []
    monitor = settings.get("monitor") or []
    block = settings.get("block_size")
    access = settings.get("access_share")
    values = {
        "LOAD": [f"{load:g}" for load in loads],
        "NUM_RUNS": len(loads),
        "CLIENTS": settings.get("clients"),
        "PROCS": settings.get("procs"),
        "MNT_POINTS": settings.get("mount_points"),
        "FS_PROTOCOL": "nfs",  # the only one an rc file can run with until CIFS is supported
        "TCP": 1,  # UDP is refused
        "SFS_NFS_USER_ID": settings.get("uid"),
        "SFS_NFS_GROUP_ID": settings.get("gid"),
        "BIOD_MAX_READS": settings.get("biod_max_reads"),
        "BIOD_MAX_WRITES": settings.get("biod_max_writes"),
        "WARMUP_TIME": settings.get("warmup_s"),
        "RUNTIME": settings.get("runtime_s"),
        "INIT_TIMEOUT": settings.get("init_timeout_s"),
        "BLOCK_SIZE": f"{block / 1024:g}" if block else None,  # KB, as the rc file takes it
        "MIXFILE": settings.get("mixfile"),
        "ACCESS_PCNT": f"{access * 100:g}" if access is not None else None,
        "PRIME_MON_SCRIPT": monitor[0] if monitor else None,
        "PRIME_MON_ARGS": monitor[1:],
        "DEBUG": ",".join(str(flag) for flag in settings.get("debug") or []),
        "WORKLOAD": settings.get("workload"),
    }
    return {name: values[name] for name in RC_FIELDS}


def _shown(value) -> str:
    """A setting as written: lists as words, unset as empty."""
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(str(item) for item in value)
    return str(value)


def submission_text(series: Series) -> str:
    report = _report(series)
    out = [f"SPECsfs2008-style submission report of sfs run {report['run']['id']} (peakbench; not a SPEC result)"]
    for heading in ("run", "system under test", "rc settings", "result"):
        out += ["", heading.upper()]
        out += [f"  {key:<26} {_shown(value)}" for key, value in report[heading].items()]
    out += ["", "LOAD POINTS", "  " + "  ".join(f"{name:>17}" for name in POINT_FIELDS)]
    out += ["  " + "  ".join(f"{value:>17}" for value in point.values()) for point in report["load points"]]
    out += ["", "WARNINGS"] + [f"  {warning}" for warning in report["warnings"] or ["none"]]
    return "\n".join(out) + "\n"


def submission_xml(series: Series) -> str:
    report = _report(series)
    root = ET.Element("sfs_submission", {"benchmark": "SPECsfs2008-style", "tool": "peakbench"})
    for heading in ("run", "system under test", "rc settings", "result"):
        section = ET.SubElement(root, heading.replace(" ", "_"))
        for key, value in report[heading].items():
            ET.SubElement(section, "field", {"name": key}).text = _shown(value)
    points = ET.SubElement(root, "load_points")
    for point in report["load points"]:
        ET.SubElement(points, "point", {key.replace(" ", "_").replace("/", "_per_"): v for key, v in point.items()})
    warned = ET.SubElement(root, "warnings")
    for warning in report["warnings"]:
        ET.SubElement(warned, "warning").text = warning
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
