"""Every table of the report as a CSV file (raw values, full precision), for a spreadsheet or a paper's plots."""

from __future__ import annotations

import csv
from pathlib import Path

from .model import Section, Table


def write(sections: list[Section], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for section in sections:
        for table in (b for b in section.blocks if isinstance(b, Table)):
            path = directory / f"{table.name}.csv"
            with path.open("w", newline="") as file:
                writer = csv.writer(file)
                writer.writerow([c.label for c in table.columns])
                writer.writerows([["" if v is None else v for v in row] for row in table.rows])
            written.append(path)
    return written
