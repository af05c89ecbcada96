"""Files a command writes on request (--json, --csv): `-` means standard output.

A named file's directory is checked before any work starts, so a typo in a
path costs nothing; the file itself is written only when there is something
to write.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from .errors import InputError

STDOUT = Path("-")


def check_output(path: Path | None, option: str) -> None:
    """Refuse, before anything runs, an output file whose directory does not exist."""
    if path is None or path == STDOUT:
        return
    if not path.absolute().parent.is_dir():
        raise InputError(f"{path}: its directory does not exist", field=option)


@contextlib.contextmanager
def opened(path: Path, newline: str | None = None):
    """The file to write (text), or standard output for `-`."""
    if path == STDOUT:
        yield sys.stdout
        sys.stdout.flush()
        return
    with path.open("w", newline=newline) as file:
        yield file


def write_json(path: Path | None, data, default=None) -> None:
    if path is None:
        return
    with opened(path) as file:
        file.write(json.dumps(data, indent=2, default=default) + "\n")
