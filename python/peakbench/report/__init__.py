"""`peakbench report`: tables, figures and one self-contained HTML file, all from the store.

    data = selection.select(store, ["search:3"])      # what to report on
    sections = build(data, ReportOptions())           # sections/: one function each
    html.render(...), terminal.show(...), csvout.write(...), figures.save(...)

Nothing here runs a trial or reads anything but the store, so any report can
be rebuilt at any time from any past run.
"""

from __future__ import annotations

from .model import ReportData, ReportOptions, Section
from .sections import SECTIONS


def build(data: ReportData, options: ReportOptions) -> list[Section]:
    return [section for make in SECTIONS if (section := make(data, options)) is not None]
