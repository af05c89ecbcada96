"""SPECsfs rc files (sfs_rc), read as a peakbench load-point curve.

Lines are shell assignments, `NAME=value`, `NAME="a b c"` or `NAME='…'`;
blank lines and `#` comments are skipped. Read here (SPECsfs2008 User's
Guide, REFERENCE.md §2):

    LOAD         one load (ops/s), or an explicit list "100 300 700"
    INCR_LOAD    with a single LOAD: the step between load points ...
    NUM_RUNS     ... and how many load points
    CLIENTS      client names (their count splits the load)
    PROCS        load-generating processes per client (NUM_PROCS too)
    MNT_POINTS   directories: one per proc, or one per proc per client; repeats allowed
                 (peakbench also takes a single one for all procs)
    MIXFILE      an `SFS MIXFILE VERSION 2` file, relative to the rc file
    WARMUP_TIME, RUNTIME   seconds (SPEC's defaults: 300 and 300)
    WORKLOAD     peakbench's own: the workload the mix applies to (default specsfs2008)

SPEC's other variables (TCP, BIOD_MAX_*, SFS_DIR, PRIME_MON_SCRIPT, ...) are
accepted and listed as ignored; any other name is an error, so a typo never
silently falls back to a default.

SPEC splits the aggregate load over CLIENTS × PROCS processes and floors each
process's rate, so LOAD=200, INCR_LOAD=200, NUM_RUNS=10 on 4 × 8 processes
runs 192 384 … 1984 ops/s. `spec_rounding=True` reproduces that; by default
the split is exact and the aggregate is what was asked for.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import shlex
from pathlib import Path

from ..errors import InputError
from ..units import MAX_RATE, parse_duration

USED = (
    "LOAD",
    "INCR_LOAD",
    "NUM_RUNS",
    "CLIENTS",
    "PROCS",
    "NUM_PROCS",
    "MNT_POINTS",
    "MIXFILE",
    "WARMUP_TIME",
    "RUNTIME",
    "WORKLOAD",
)
IGNORED = (
    "TCP",
    "BIOD_MAX_READS",
    "BIOD_MAX_WRITES",
    "SFS_DIR",
    "WORK_DIR",
    "PRIME_MON_SCRIPT",
    "PRIME_MON_ARGS",
    "INIT_TIMEOUT",
    "BLOCK_SIZE",
    "FS_PROTOCOL",
    "USERNAME",
    "PASSWORD",
    "DOMAIN",
    "DEBUG",
    "SFS_DEBUG",
    "SFS_USER",
    "SUT_HOST",
    "PRIME_SLEEP",
    "PRIME_TIMEOUT",
    "PRIME_CLIENT",
    "CLIENTS_MNT_FILE",
    "DUMP",
    "POPULATE",
    "LAT_GRAPH",
    "IPV6_ENABLE",
    "FSTEST_OPTS",
    "SFS_NFS_USER_ID",
    "SFS_NFS_GROUP_ID",
    "NUM_PREF_RUNS",
    "PMC",
    "WORK_DIR_NAME",
)
SPEC_DEFAULT_SECONDS = 300.0
PER_PROC_GUIDANCE = (10.0, 250.0)  # ops/s per process SPEC recommends at the lowest and highest load
# Far more than any curve (SPEC's examples have 10); checked before the points are made.
MAX_LOAD_POINTS = 1000
MAX_PROCS = 1024  # processes per client, as a plan's threads

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")


@dataclasses.dataclass(frozen=True)
class RcFile:
    path: Path
    requested: tuple[float, ...]  # aggregate loads as written (LOAD list, or LOAD + i·INCR_LOAD)
    clients: tuple[str, ...]
    procs: int
    mount_points: tuple[str, ...]
    mixfile: Path | None
    warmup_s: float
    runtime_s: float
    workload: str
    ignored: tuple[str, ...]  # SPEC variables set but without meaning here
    lines: dict[str, int]  # where each variable was set, for errors found later

    @property
    def processes(self) -> int:
        return len(self.clients) * self.procs

    def loads(self, spec_rounding: bool = False) -> list[float]:
        """The aggregate load of each point: exact, or floored per process as SPEC does."""
        if not spec_rounding:
            return list(self.requested)
        rounded = []
        for load in self.requested:
            per_process = math.floor(load / self.processes)
            if per_process < 1:
                raise InputError(
                    f"{load:g} ops/s over {self.processes} processes rounds down to 0 ops/s per"
                    " process; raise LOAD or use fewer CLIENTS x PROCS",
                    file=self.path,
                    line=self.lines.get("LOAD"),
                    field="LOAD",
                )
            rounded.append(float(per_process * self.processes))
        return rounded

    def guidance(self, loads: list[float]) -> str | None:
        """SPEC's advice on ops/s per process, when these loads fall outside it."""
        low, high = loads[0] / self.processes, loads[-1] / self.processes
        if low < PER_PROC_GUIDANCE[0] or high > PER_PROC_GUIDANCE[1]:
            return (
                f"{low:g} to {high:g} ops/s per process; SPEC recommends {PER_PROC_GUIDANCE[0]:g} to"
                f" {PER_PROC_GUIDANCE[1]:g} (change CLIENTS or PROCS)"
            )
        return None


def read_rcfile(path: Path) -> RcFile:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the rc file: {error}", file=path) from None
    values: dict[str, list[str]] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ASSIGNMENT.fullmatch(stripped)
        if match is None:
            raise InputError(f"expected NAME=value, got {stripped!r}", file=path, line=number)
        name, raw = match.group(1).upper(), match.group(2)
        if name not in USED and name not in IGNORED:
            close = difflib.get_close_matches(name, USED + IGNORED, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise InputError(
                f"unknown rc variable{hint}; peakbench reads {', '.join(USED)}", file=path, line=number, field=name
            )
        try:
            # The shell's value (quotes removed), then SPEC's lists: words split on white space.
            values[name] = " ".join(shlex.split(raw, comments=True)).split()
        except ValueError as error:
            raise InputError(f"cannot read the value: {error}", file=path, line=number, field=name) from None
        lines[name] = number
    return _interpret(path, values, lines)


def _interpret(path: Path, values: dict[str, list[str]], lines: dict[str, int]) -> RcFile:
    def fail(name: str, message: str) -> InputError:
        return InputError(message, file=path, line=lines.get(name), field=name)

    def numbers(name: str) -> list[float]:
        found = []
        for word in values.get(name, []):
            try:
                number = float(word)
            except ValueError:
                raise fail(name, f"{word!r} is not a number") from None
            if not (math.isfinite(number) and number > 0):
                raise fail(name, f"{word!r} must be a number above 0")
            if number > MAX_RATE:
                raise fail(name, f"{word!r} is above {MAX_RATE:,} ops/s, more than one engine can schedule")
            found.append(number)
        return found

    def whole(name: str, default: int | None, most: int) -> int | None:
        words = values.get(name)
        if not words:
            return default
        if len(words) != 1 or not words[0].isdigit() or int(words[0]) < 1:
            raise fail(name, f"{' '.join(words)!r} is not a whole number of at least 1")
        if int(words[0]) > most:
            raise fail(name, f"{words[0]} is more than {most:,}")
        return int(words[0])

    def seconds(name: str) -> float:
        words = values.get(name)
        if not words:
            return SPEC_DEFAULT_SECONDS
        if len(words) != 1:
            raise fail(name, f"{' '.join(words)!r} is not one duration")
        try:
            duration = parse_duration(words[0], field=name)
        except InputError as error:
            raise error.located(path, lines.get(name)) from None
        if name == "RUNTIME" and duration <= 0:
            raise fail(name, "the measured time must be longer than 0")
        return duration

    loads = numbers("LOAD")
    if not loads:
        raise fail("LOAD", "LOAD is required: one load (with INCR_LOAD and NUM_RUNS) or a list of loads")
    if len(loads) == 1 and "INCR_LOAD" in values:
        (step,) = numbers("INCR_LOAD") or [None]
        runs = whole("NUM_RUNS", None, MAX_LOAD_POINTS)
        if step is None or runs is None:
            raise fail("INCR_LOAD", "INCR_LOAD needs NUM_RUNS, the number of load points")
        if loads[0] + (runs - 1) * step > MAX_RATE:
            raise fail(
                "INCR_LOAD", f"the last load point, {loads[0] + (runs - 1) * step:g} ops/s, is above {MAX_RATE:,} ops/s"
            )
        loads = [loads[0] + i * step for i in range(runs)]
    elif len(loads) > 1 and sorted(loads) != loads:
        raise fail("LOAD", "an explicit LOAD list must increase")
    if len(loads) > MAX_LOAD_POINTS:
        raise fail("LOAD", f"{len(loads):,} load points, more than {MAX_LOAD_POINTS:,}")
    procs = whole("NUM_PROCS", None, MAX_PROCS) or whole("PROCS", 1, MAX_PROCS)
    clients = tuple(values.get("CLIENTS") or ["localhost"])
    mounts = tuple(values.get("MNT_POINTS", []))
    if not mounts:
        raise fail("MNT_POINTS", "MNT_POINTS is required: the directories to load")
    if len(mounts) not in (1, procs, procs * len(clients)):
        raise fail(
            "MNT_POINTS",
            f"{len(mounts)} mount points for {procs} procs on {len(clients)} clients; list"
            f" one for all, {procs} (one per proc) or {procs * len(clients)} (one per proc"
            " per client)",
        )
    mixfile = None
    if values.get("MIXFILE"):
        if len(values["MIXFILE"]) != 1:
            raise fail("MIXFILE", "name one mix file")
        mixfile = (path.parent / values["MIXFILE"][0]).resolve()
    workload = values.get("WORKLOAD", ["specsfs2008"])
    if len(workload) != 1:
        raise fail("WORKLOAD", "name one workload")
    return RcFile(
        path,
        tuple(loads),
        clients,
        procs,
        mounts,
        mixfile,
        seconds("WARMUP_TIME"),
        seconds("RUNTIME"),
        workload[0],
        tuple(name for name in values if name in IGNORED),
        lines,
    )
