"""`peakbench report [SELECTOR ...] --html FILE [--figures DIR --format png,svg,pdf] [--csv DIR]`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console

from .. import store as store_module
from ..errors import InputError
from ..output import check_output
from ..sfs import submission
from . import build, csvout, figures, html, selection, terminal
from .model import Figure, ReportOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "selectors",
        nargs="*",
        metavar="SELECTOR",
        help="search:ID, sfs:ID, trial:ID or trial:FIRST-LAST (default: the newest search or sfs run)",
    )
    parser.add_argument("--html", type=Path, metavar="FILE", help="write the self-contained HTML report here")
    parser.add_argument("--figures", type=Path, metavar="DIR", help="also write every figure into DIR")
    parser.add_argument(
        "--format",
        default="png,svg,pdf",
        metavar="LIST",
        help="figure formats for --figures: any of png, svg, pdf (default png,svg,pdf)",
    )
    parser.add_argument("--csv", type=Path, metavar="DIR", help="also write every table as CSV into DIR")
    parser.add_argument(
        "--thresholds",
        default="10,100",
        metavar="MS,...",
        help="latency thresholds for the share of requests under each (default 10,100 ms)",
    )
    parser.add_argument(
        "--surface",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="also show a response surface: a SurfaceResult JSON file (map_surface(...).to_dict())",
    )
    parser.add_argument(
        "--harness",
        type=Path,
        metavar="FILE",
        help="also show harness results: getstats, comparisons, warnings (JSON, see report/sections/harness.py)",
    )
    parser.add_argument(
        "--submission",
        type=Path,
        metavar="PREFIX",
        help="an sfs run's SPECsfs2008-style submission report as PREFIX.txt and PREFIX.xml",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        metavar="C",
        help="confidence of the intervals the report computes (default: a search's own, else 0.95)",
    )


def _submission(data, prefix: Path) -> int:
    """The text and XML submission reports of the one sfs run selected, each written whole."""
    runs = [series for series in data.series if series.kind == "sfs"]
    if len(data.series) != 1 or not runs:
        raise InputError("select exactly one sfs run (sfs:ID) for a submission report", field="--submission")
    check_output(prefix, "--submission")
    written = []
    for suffix, render in ((".txt", submission.submission_text), (".xml", submission.submission_xml)):
        path = prefix.with_name(prefix.name + suffix)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(render(runs[0]), encoding="utf-8")
        os.replace(partial, path)
        written.append(str(path))
    print(f"submission report written to {' and '.join(written)}", file=sys.stderr)
    return 0


def _formats(text: str) -> tuple[str, ...]:
    chosen = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    unknown = [f for f in chosen if f not in figures.FORMATS]
    if unknown or not chosen:
        raise InputError(
            f"unknown figure format {', '.join(unknown) or repr(text)}; choose from png, svg, pdf", field="--format"
        )
    return chosen


def _thresholds(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise InputError(f"{text!r}: write thresholds in ms such as 10,100", field="--thresholds") from None
    if not values or any(not v > 0 for v in values):
        raise InputError(f"{text!r}: thresholds must be positive numbers of ms", field="--thresholds")
    return values


def _json_file(path: Path, option: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"cannot read it: {error.strerror}", file=path, field=option) from None
    except ValueError as error:
        raise InputError(f"not JSON: {error}", file=path, field=option) from None


def run(args: argparse.Namespace, console: Console) -> int:
    formats = _formats(args.format)
    if args.confidence is not None and not 0 < args.confidence < 1:
        raise InputError(f"{args.confidence}: must lie strictly between 0 and 1", field="--confidence")
    options = ReportOptions(confidence=args.confidence, thresholds_ms=_thresholds(args.thresholds))
    for path, option in ((args.html, "--html"), (args.figures, "--figures"), (args.csv, "--csv")):
        check_output(path, option)
    surfaces = [_json_file(path, "--surface") for path in args.surface]
    harness = _json_file(args.harness, "--harness") if args.harness else None
    with store_module.Store(args.db, readonly=True) as store:
        data = selection.select(store, args.selectors)
    if args.submission is not None:
        return _submission(data, args.submission)
    data.extra["surfaces"] = data.extra.get("surfaces", []) + surfaces
    if harness is not None:
        data.extra["harness"] = harness
    sections = build(data, options)
    drawn = [block for section in sections for block in section.blocks if isinstance(block, Figure)]
    if args.html:
        title = "peakbench report: " + "; ".join(s.key for s in data.series)
        subtitle = " · ".join(s.title for s in data.series)
        # Written whole or not at all: a reader never opens half a report.
        partial = args.html.with_name(args.html.name + ".partial")
        partial.write_text(html.render(title, subtitle, sections), encoding="utf-8")
        os.replace(partial, args.html)
    saved = (
        [path for figure in drawn for path in figures.save(figure.figure, args.figures, figure.name, formats)]
        if args.figures
        else []
    )
    tables = csvout.write(sections, args.csv) if args.csv else []
    for figure in drawn:
        figures.close(figure.figure)
    terminal.show(sections, console)
    if args.html:
        print(f"report written to {args.html.absolute()}", file=sys.stderr)
    if saved:
        print(f"{len(saved)} figure files written to {args.figures}", file=sys.stderr)
    if tables:
        print(f"{len(tables)} tables written to {args.csv} as CSV", file=sys.stderr)
    return 0
