"""The report's sections, in the order they appear.

A section is one function `section(data: ReportData, options: ReportOptions)
-> Section | None` (None: nothing to show for this selection). To add one
(harness tables, per-client figures...), write a module here and list its
function in SECTIONS; html.py, terminal.py and csvout.py render its blocks.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import ReportData, ReportOptions, Section
from . import clients, harness, latency, load_curve, operations, provenance, replay, search_trace, sfs_summary, surfaces

SectionFunction = Callable[[ReportData, ReportOptions], Section | None]

SECTIONS: list[SectionFunction] = [
    load_curve.section,
    search_trace.section,
    replay.section,
    operations.section,
    clients.section,
    latency.section,
    sfs_summary.section,
    surfaces.section,
    harness.section,
    provenance.section,
]
