"""The two kinds of failure peakbench reports to a user.

InputError: something the user wrote is wrong (a workload file, a histogram
file, a mixfile, a command-line value, a target). It renders as one line that
points at the place to fix, and the CLI exits with status 2 before anything is
written to the store or the target.

RunError: the input was fine but the trial could not run (the engine failed,
timed out, ...). The CLI exits with status 1.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(eq=False)
class InputError(Exception):
    message: str
    file: str | Path | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        # FILE:LINE: field FIELD: message, leaving out the parts we do not know.
        place = ""
        if self.file is not None:
            place = str(self.file) + (f":{self.line}" if self.line is not None else "") + ": "
        what = f"field {self.field}: " if self.field else ""
        return f"{place}{what}{self.message}"

    def located(self, file: str | Path, line: int | None) -> InputError:
        """The same error, placed in `file` at `line` unless it already names a file.

        Parsers of values (units, distributions) know the field but not where it
        was written; the reader of the file fills that in on the way out.
        """
        if self.file is not None:
            return self
        return dataclasses.replace(self, file=file, line=line)


class TrialInterrupted(KeyboardInterrupt):
    """Ctrl-C during a trial: the engine ended its window early and reported what it measured
    (`result`, marked interrupted); the trial path stores it (`trial_id`) before passing it on."""

    def __init__(self, result: dict, trial_id: int | None = None):
        super().__init__()
        self.result = result
        self.trial_id = trial_id


class RunError(Exception):
    """The trial could not be run; the message is one line for the user."""


def import_extra(module: str, extra: str, field: str):
    """`module`, which only the `extra` install of peakbench brings; without it, an InputError
    that says which install to run, for the option (`field`) that needed it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(
            f"needs {module.split('.')[0]}, which peakbench installs as an extra: pip install 'peakbench[{extra}]'",
            field=field,
        ) from None
