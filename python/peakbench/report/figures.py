"""Figures with matplotlib: one style for all, sized for a paper's column, out as SVG, PNG or PDF.

Figures are drawn without a display (the Agg backend). The HTML report embeds
each as inline SVG with its fonts turned into paths, so it renders the same
everywhere and needs nothing from the network. matplotlib is imported on the
first figure: it takes a second, which no other peakbench command should pay.
"""

from __future__ import annotations

import functools
import io
import re
from pathlib import Path

COLUMN_WIDTH_IN = 3.4  # one column of a two-column paper
FORMATS = ("png", "svg", "pdf")
PNG_DPI = 300

STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "legend.frameon": False,
    "svg.fonttype": "path",
    "pdf.fonttype": 42,  # TrueType in PDFs, which journals accept
    "svg.hashsalt": "peakbench",  # stable ids: the same data makes the same SVG
}

# Colour-blind-safe (Okabe-Ito), in the order series are drawn.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


@functools.cache
def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def palette(name: str):
    """A matplotlib colour map, e.g. "viridis" for loads from light to heavy."""
    return pyplot().colormaps[name]


def integer_ticks():
    """A tick locator for counts (trials): whole numbers only."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def new_figure(rows: int = 1, columns: int = 1, height_in: float = 2.4, width_in: float = COLUMN_WIDTH_IN):
    """A figure and its axes, in the report's style."""
    with pyplot().rc_context(STYLE):
        figure, axes = pyplot().subplots(
            rows, columns, figsize=(width_in, height_in), squeeze=False, layout="constrained"
        )
    return figure, axes


def style():
    """The report's style, as a context to draw in (matplotlib reads it as artists are made)."""
    return pyplot().rc_context(STYLE)


def to_svg(figure, prefix: str) -> str:
    """The figure as an <svg> element for inline HTML (no XML prolog or DOCTYPE).

    Every id inside (glyphs, markers, clip paths) gets `prefix`, because all
    inline SVGs share the page's one id space and matplotlib reuses names
    such as a glyph's in every figure.
    """
    with pyplot().rc_context(STYLE):
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    for ident in set(re.findall(r'\sid="([^"]+)"', text)):
        text = (
            text.replace(f'id="{ident}"', f'id="{prefix}-{ident}"')
            .replace(f'"#{ident}"', f'"#{prefix}-{ident}"')
            .replace(f"url(#{ident})", f"url(#{prefix}-{ident})")
        )
    return text


def save(figure, directory: Path, name: str, formats: tuple[str, ...]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    with pyplot().rc_context(STYLE):
        for kind in formats:
            path = directory / f"{name}.{kind}"
            figure.savefig(
                path,
                format=kind,
                dpi=PNG_DPI if kind == "png" else None,
                metadata={"Date": None} if kind in ("svg", "pdf") else None,
            )
            written.append(path)
    return written


def close(figure) -> None:
    pyplot().close(figure)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
