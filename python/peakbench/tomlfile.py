"""Reading a TOML file so that every error points at a line.

Syntax errors come from tomllib with their position; errors found while
interpreting the document (a bad value, an unknown key) carry a dotted field
name, and the scanner in tomlpos.py finds the line where that key was written.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from .errors import InputError
from .tomlpos import Positions

T = TypeVar("T")


def load(path: Path, parse: Callable[[dict], T], what: str) -> T:
    """Read `path`, parse the document with `parse`, and place any InputError at the line
    of its field; `what` names the kind of file in the error when it cannot be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {what}: {error}", file=path) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise syntax_error(path, error, text) from None
    try:
        return parse(document)
    except InputError as error:
        raise error.located(path, line_of(Positions(text), error.field)) from None


def syntax_error(path: Path, error: tomllib.TOMLDecodeError, text: str) -> InputError:
    # tomllib puts the position at the end of its message: "... (at line 3, column 7)".
    match = re.search(r"\(at line (\d+), column (\d+)\)$", str(error))
    if match is None:
        end = re.search(r"\s*\(at end of document\)$", str(error))
        if end is not None:
            return InputError(
                f"invalid TOML: {str(error)[: end.start()]} (at the end of the file)",
                file=path,
                line=len(text.splitlines()) or 1,
            )
        return InputError(f"invalid TOML: {error}", file=path)
    message = str(error)[: match.start()].rstrip()
    return InputError(f"invalid TOML: {message} (column {match.group(2)})", file=path, line=int(match.group(1)))


def line_of(positions: Positions, field: str | None) -> int | None:
    """The line of a dotted field such as "fileset.file_sizes.mean" or "factors[1].levels"
    (or of its nearest written ancestor)."""
    if not field:
        return None
    path: list = []
    for part in field.split("."):
        indexed = re.fullmatch(r"(\w+)\[(\d+)\]", part)
        path += [indexed.group(1), int(indexed.group(2))] if indexed else [part]
    return positions.line_of(tuple(path))


def check_keys(table: dict, allowed: Collection[str], prefix: str) -> None:
    """Refuse a key the format does not know, suggesting the nearest known one."""
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            raise InputError(f"unknown key {key!r}; {hint}", field=f"{prefix}{key}")
