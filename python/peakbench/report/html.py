"""One self-contained HTML file: inline CSS, inline SVG figures, a few lines of inline script.

Nothing is fetched when it opens (no fonts, scripts or images from anywhere),
so it can be mailed or attached to a review. Tables sort on a click on their
heading (numbers as numbers: each cell keeps its raw value in data-v); all
collapsed parts open for printing.
"""

from __future__ import annotations

import datetime
import html
import math
from urllib.parse import quote

from . import csvout, figures
from .model import Figure, Html, Section, Table

CSS = """
:root { --ink: #1b1b1b; --muted: #5b5b5b; --rule: #d0d0d0; --accent: #0072B2; --warn: #9a3412; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink);
       max-width: 1240px; margin: 0 auto; padding: 1.5rem 1.25rem 4rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; padding-bottom: .2rem; border-bottom: 2px solid var(--rule); }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
p.meta { color: var(--muted); margin: 0 0 1rem; }
nav { font-size: .9rem; margin: .5rem 0 1rem; }
nav a { margin-right: .9rem; color: var(--accent); text-decoration: none; }
ul.summary { padding-left: 1.2rem; }
ul.warnings { border-left: 4px solid var(--warn); background: #fff7ed; padding: .6rem .6rem .6rem 1.8rem; }
ul.warnings li { color: var(--warn); }
p.ok { border-left: 4px solid #15803d; background: #f0fdf4; padding: .5rem .8rem; }
figure { margin: 1rem 0 1.6rem; }
figure.column { display: inline-block; vertical-align: top; width: 49%; margin-right: 1%; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { font-size: .85rem; color: var(--muted); margin-top: .3rem; }
.table-wrap { overflow-x: auto; margin: .4rem 0 1.4rem; }
table { border-collapse: collapse; font-size: .82rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding-bottom: .3rem; }
th, td { padding: .22rem .55rem; border-bottom: 1px solid var(--rule); white-space: nowrap; }
td.num { text-align: right; }
td.text { white-space: normal; min-width: 12rem; }
th { position: sticky; top: 0; background: #f4f4f4; text-align: left; cursor: pointer; user-select: none; }
th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: .7em; }
th[aria-sort="descending"]::after { content: " \\25BC"; font-size: .7em; }
tbody tr:nth-child(even) { background: #fafafa; }
p.basis { font-size: .8rem; color: var(--muted); margin: .2rem 0 0; }
a.csv { color: var(--accent); }
@media print { a.csv { display: none; } }
details { margin: .4rem 0; }
summary { cursor: pointer; color: var(--accent); }
pre { background: #f6f6f6; padding: .6rem; overflow-x: auto; font-size: .78rem; }
code { font-size: .88em; }
@media print {
  body { max-width: none; font-size: 10pt; padding: 0; }
  nav, th::after { display: none; }
  h2 { break-after: avoid; }
  figure, .table-wrap { break-inside: avoid; }
  th { position: static; }
  details::details-content { content-visibility: visible; display: block; }
}
"""

SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th, column) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[th.cellIndex].dataset.v, y = b.cells[th.cellIndex].dataset.v;
      var nx = parseFloat(x), ny = parseFloat(y), order;
      if (x === "" && y !== "") order = 1; else if (y === "" && x !== "") order = -1;
      else if (!isNaN(nx) && !isNaN(ny)) order = nx - ny; else order = x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
window.addEventListener("beforeprint", function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
});
"""


SCREEN_PX_PER_INCH = 150  # figures are drawn for a paper's column; on screen they get this much room


def render(title: str, subtitle: str, sections: list[Section]) -> str:
    generated = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    nav = "".join(f'<a href="#{s.name}">{html.escape(s.title)}</a>' for s in sections)
    body = "".join(_section(s) for s in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No network, ever: the page may only use what it carries inline.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline';"
        " script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="meta">{html.escape(subtitle)} · generated {generated} UTC</p>'
        f"<nav>{nav}</nav>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def _section(section: Section) -> str:
    parts = [f'<section id="{section.name}"><h2>{html.escape(section.title)}</h2>']
    if section.summary:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in section.summary if not line.startswith("warning: "))
        if items:
            parts.append(f'<ul class="summary">{items}</ul>')
    for block in section.blocks:
        if isinstance(block, Table):
            parts.append(table(block))
        elif isinstance(block, Figure):
            width_in = block.figure.get_figwidth()
            # Column-wide figures sit two to a row; wider ones get a row of their own.
            kind = "column" if width_in <= figures.COLUMN_WIDTH_IN else "wide"
            parts.append(
                f'<figure id="fig-{block.name}" class="{kind}"'
                f' style="max-width: {round(width_in * SCREEN_PX_PER_INCH)}px">'
                f"{figures.to_svg(block.figure, block.name)}"
                f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
            )
        elif isinstance(block, Html):
            parts.append(block.html)
    parts.append("</section>")
    return "".join(parts)


def table(block: Table) -> str:
    head = "".join(f'<th scope="col">{html.escape(c.label)}</th>' for c in block.columns)
    rows = []
    for row in block.rows:
        cells = []
        for value, text in zip(row, block.formatted(row)):
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            raw = "" if value is None else (repr(value) if numeric and math.isfinite(value) else str(value))
            kind = "num" if numeric else ("text" if isinstance(value, str) and len(value) > 40 else "")
            cells.append(f'<td class="{kind}" data-v="{html.escape(raw)}">{html.escape(text)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    # The table's data travels with the page: a CSV download from a data: URI, no server needed.
    download = f"data:text/csv;charset=utf-8,{quote(csvout.text(block))}"
    return (
        f'<div class="table-wrap"><table class="sortable" id="table-{block.name}">'
        f"<caption>{html.escape(block.title)}</caption><thead><tr>{head}</tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table><p class="basis">{html.escape(block.basis)}'
        f' · <a class="csv" download="{block.name}.csv" href="{html.escape(download)}">CSV</a></p></div>'
    )
