"""Every table of the report as CSV (raw values, full precision), for a spreadsheet or a paper's plots.

Headers are machine-readable names with the unit in them (`achieved_ops_per_s`), not display labels."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from .model import Section, Table


def text(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([c.key for c in table.columns])
    writer.writerows([["" if v is None else v for v in row] for row in table.rows])
    return buffer.getvalue()


def write(sections: list[Section], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for section in sections:
        for table in (b for b in section.blocks if isinstance(b, Table)):
            path = directory / f"{table.name}.csv"
            path.write_text(text(table), encoding="utf-8")
            written.append(path)
    return written
