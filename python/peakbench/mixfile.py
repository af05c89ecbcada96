"""SPECsfs mix files (`SFS MIXFILE VERSION 2`), read as peakbench op mixes.

The format (SPECsfs2008 User's Guide, docs/sources.md, SPECsfs2008): the first line
is exactly `SFS MIXFILE VERSION 2`; every later line is a comment (`#` in the
first column) or `opname NN%` with one to three digits; the percentages must
total exactly 100. We also accept blank lines and spaces around the fields,
which SPEC's own examples show.

SPEC's op names are NFS procedures, mostly our vocabulary already. The rest:
- root, wrcache: NFSv2 procedures that servers answer without doing any work
  (RFC 1094: ROOT is obsolete, WRITECACHE was reserved for a later revision),
  so they become `null`, the do-nothing round trip.
- mknod: makes device nodes and FIFOs; the engine has no such op, so a
  non-zero share is an error rather than a silently different workload.
An op listed at 0% is accepted whatever it is: it asks for nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import InputError

HEADER = "SFS MIXFILE VERSION 2"
SPEC_OPS = (
    "null",
    "getattr",
    "setattr",
    "root",
    "lookup",
    "readlink",
    "read",
    "wrcache",
    "write",
    "create",
    "remove",
    "rename",
    "link",
    "symlink",
    "mkdir",
    "rmdir",
    "readdir",
    "fsstat",
    "access",
    "commit",
    "fsinfo",
    "mknod",
    "pathconf",
    "readdirplus",
)
RENAMED = {"root": "null", "wrcache": "null"}
UNSUPPORTED = {"mknod": "the engine cannot make device nodes or FIFOs"}

_OP_LINE = re.compile(r"\s*([A-Za-z]+)\s+([0-9]{1,3})%\s*")


def read_mixfile(path: Path) -> dict[str, float]:
    """Percent per peakbench op (zero shares left out); the total is 100."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read mixfile: {error}", file=path) from None
    if not lines or lines[0].rstrip("\r") != HEADER:
        raise InputError(f"the first line must be exactly {HEADER!r}", file=path, line=1)

    percents: dict[str, float] = {}
    seen: set[str] = set()
    total = 0
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith("#") or not line.strip():
            continue
        match = _OP_LINE.fullmatch(line)
        if match is None:
            raise InputError(f"expected 'opname NN%' or a '# comment', got {line.strip()!r}", file=path, line=number)
        name, percent = match.group(1).lower(), int(match.group(2))
        if name not in SPEC_OPS:
            raise InputError(f"unknown op {name!r}; SPECsfs ops are: {' '.join(SPEC_OPS)}", file=path, line=number)
        if name in seen:
            raise InputError(f"op {name!r} is listed twice", file=path, line=number)
        seen.add(name)
        if percent and name in UNSUPPORTED:
            raise InputError(f"op {name!r} at {percent}%: {UNSUPPORTED[name]}", file=path, line=number)
        total += percent
        if percent:
            ours = RENAMED.get(name, name)
            percents[ours] = percents.get(ours, 0) + percent
    if total != 100:
        raise InputError(f"the percentages total {total}%, not 100%", file=path, line=len(lines))
    return percents
