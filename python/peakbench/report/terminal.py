"""The report's key tables and sentences on the terminal (Rich), after the HTML is written."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from .model import Section, Table


def show(sections: list[Section], console: Console) -> None:
    for section in sections:
        tables = [b for b in section.blocks if isinstance(b, Table) and b.terminal]
        if not tables and not section.summary:
            continue
        console.rule(section.title)
        for line in section.summary:
            style = "yellow" if line.startswith("warning: ") else ""
            console.print(Text(line, style=style))
        for table in tables:
            console.print(rich_table(table))


def rich_table(table: Table) -> RichTable:
    shown = RichTable(title=table.title, caption=table.basis, caption_justify="left")
    for index, column in enumerate(table.columns):
        numeric = any(isinstance(row[index], (int, float)) and not isinstance(row[index], bool) for row in table.rows)
        shown.add_column(column.label, justify="right" if numeric else "left", overflow="fold")
    for row in table.rows:
        shown.add_row(*table.formatted(row))
    return shown
