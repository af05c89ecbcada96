"""Reading a TOML file so that every error points at a line.

Syntax errors come from tomllib with their position; errors found while
interpreting the document (a bad value, an unknown key) carry a dotted field
name, and `KeyLines` finds the line where that key was written.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from .errors import InputError

T = TypeVar("T")


def load(path: Path, tables: Collection[str], parse: Callable[[dict], T], what: str) -> T:
    """Read `path`, parse the document with `parse`, and place any InputError at its line.

    `tables` are the top-level table names of the format, so that a field
    "fileset.file_sizes" is looked for inside `[fileset]`; `what` names the
    kind of file in the error when it cannot be read.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {what}: {error}", file=path) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise syntax_error(path, error) from None
    try:
        return parse(document)
    except InputError as error:
        raise error.located(path, KeyLines(text, tables).line_of(error.field)) from None


def syntax_error(path: Path, error: tomllib.TOMLDecodeError) -> InputError:
    # tomllib puts the position at the end of its message: "... (at line 3, column 7)".
    match = re.search(r"\(at line (\d+), column (\d+)\)$", str(error))
    if match is None:
        return InputError(f"invalid TOML: {error}", file=path)
    message = str(error)[: match.start()].rstrip()
    return InputError(f"invalid TOML: {message} (column {match.group(2)})", file=path, line=int(match.group(1)))


class KeyLines:
    """Finds the line where a key was written, so semantic errors can point at it.

    A field "fileset.file_sizes.mean" is looked up as key `file_sizes` inside
    the `[fileset]` table (an inline table sits on its key's line); failing
    that, as a dotted key `fileset.file_sizes = ...`, then the table's header.
    A field "factors[2].levels" is the key `levels` in the third `[[factors]]`.
    """

    _HEADER = re.compile(r"\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(#.*)?")
    _INDEXED = re.compile(r"(\w+)\[(\d+)\]")

    def __init__(self, text: str, tables: Collection[str]):
        self.lines = text.splitlines()
        self.tables = tables

    def line_of(self, field: str | None) -> int | None:
        if not field:
            return None
        head, _, rest = field.partition(".")
        indexed = self._INDEXED.fullmatch(head)
        occurrence = int(indexed.group(2)) if indexed else 0
        name = indexed.group(1) if indexed else head
        if name in self.tables:
            table, key = name, rest.split(".")[0] or None
        else:
            table, key = "", head
        current, seen = "", -1
        header_line = None
        for number, line in enumerate(self.lines, start=1):
            header = self._HEADER.fullmatch(line)
            if header:
                current = header.group(1).replace('"', "").replace("'", "")
                if table == "" and current == key:  # a misspelt table: [lod]
                    return number
                if current == table:
                    seen += 1
                    if seen == occurrence:
                        header_line = number
                        if key is None:
                            return number
                continue
            if current == table and (not table or seen == occurrence) and self._assigns(line, key):
                return number
            if current == "" and table and self._assigns(line, f"{table}.{key}"):
                return number
        return header_line

    @staticmethod
    def _assigns(line: str, key: str) -> bool:
        return re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line) is not None


def check_keys(table: dict, allowed: Collection[str], prefix: str) -> None:
    """Refuse a key the format does not know, suggesting the nearest known one."""
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            raise InputError(f"unknown key {key!r}; {hint}", field=f"{prefix}{key}")
