r"""SPECsfs rc files (sfs_rc), read as a peakbench load-point curve.

Lines are shell assignments, `NAME=value`, `NAME="a b c"` or `NAME='…'`;
blank lines and `#` comments are skipped. Every variable of the SPECsfs2008
User's Guide (§1.3, §3.3, §3.3.1; docs/sources.md, SPECsfs2008) is read here, and either
means what the guide says or is refused with the reason:

    LOAD         one load (ops/s), or an explicit list "100 300 700"
    INCR_LOAD    with a single LOAD: the step between load points ...
    NUM_RUNS     ... and how many load points
    CLIENTS      client names (their count splits the load)
    PROCS        load-generating processes per client (NUM_PROCS too)
    MNT_POINTS   one per proc, or one per proc per client (repeats allowed), each a
                 directory, `server:/path` (the NFS export nfs://server/path) or a URL;
                 or the name of a file of `client_name path path ...` lines (one per
                 client, relative to the rc file); with FS_PROTOCOL=cifs each is a share,
                 `\\server\share[\path]` or `\\server:port\share[\path]` (port 445 if none),
                 spoken to directly as smb://server[:port]/share[/path]
                 (peakbench also takes a single mount point for all procs)
    FS_PROTOCOL  nfs (the default) or cifs (SMB2/3; the workload is then specsfs2008-cifs)
    USERNAME, PASSWORD, DOMAIN   the CIFS login (USERNAME and PASSWORD required with cifs;
                 DOMAIN optional); refused with nfs
    SFS_NFS_USER_ID, SFS_NFS_GROUP_ID   the AUTH_SYS uid and gid of NFS mount points
    TCP          unset, 1 or on; UDP (0, off) is refused: the engine speaks TCP only
    BIOD_MAX_READS, BIOD_MAX_WRITES   0 to 32: transfers of one logical read or write in flight
                 (NFS mount points; 0 and 1 send one at a time, as a directory's reads do)
    WARMUP_TIME, RUNTIME   seconds (SPEC's defaults: 300 and 300)
    INIT_TIMEOUT the longest one load point's file-set build may take (seconds)
    BLOCK_SIZE   the largest NFS transfer (rsize and wsize), in KB, or with a unit
                 (64KiB); unset: negotiated from the server's FSINFO
    MIXFILE      an `SFS MIXFILE VERSION 2` file, relative to the rc file
    ACCESS_PCNT  percent of the files accessed for I/O (the workload's active_fraction)
    PRIME_MON_SCRIPT, PRIME_MON_ARGS   a program started at each measurement phase,
                 stopped after it; its output is kept with the load point
    DEBUG        SPEC's flag list ("3,4,8-10"); see DEBUG_FLAGS for those peakbench logs
    SFS_DIR, WORK_DIR   where SPEC's programs live: no meaning here, listed as ignored
    WORKLOAD     peakbench's own: the workload the mix applies to (default specsfs2008,
                 or specsfs2008-cifs with FS_PROTOCOL=cifs)

Variables from SPEC's rc templates outside the guide (SFS_DEBUG, SUT_HOST, ...)
are accepted and listed as ignored; any other name is an error, so a typo never
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
import os
import re
import shlex
from pathlib import Path
from urllib.parse import quote

from ..errors import InputError
from ..units import MAX_RATE, parse_duration, parse_size

USED = (
    "LOAD",
    "INCR_LOAD",
    "NUM_RUNS",
    "CLIENTS",
    "PROCS",
    "NUM_PROCS",
    "MNT_POINTS",
    "FS_PROTOCOL",
    "USERNAME",
    "PASSWORD",
    "DOMAIN",
    "SFS_NFS_USER_ID",
    "SFS_NFS_GROUP_ID",
    "TCP",
    "BIOD_MAX_READS",
    "BIOD_MAX_WRITES",
    "WARMUP_TIME",
    "RUNTIME",
    "INIT_TIMEOUT",
    "BLOCK_SIZE",
    "MIXFILE",
    "ACCESS_PCNT",
    "PRIME_MON_SCRIPT",
    "PRIME_MON_ARGS",
    "DEBUG",
    "WORKLOAD",
)
IGNORED = (  # SPEC's program and working directories, and template variables the guide does not describe
    "SFS_DIR",
    "WORK_DIR",
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
    "NUM_PREF_RUNS",
    "PMC",
    "WORK_DIR_NAME",
)
CIFS_ONLY = ("USERNAME", "PASSWORD", "DOMAIN")
CIFS_WORKLOAD = "specsfs2008-cifs"
# The SPEC DEBUG flags (guide §3.3.1, table 3) that have a peakbench log line; the rest are refused.
DEBUG_FLAGS = {
    4: "DEBUG_CHILD_ERROR: each load point's failed operations, by op and error",
    12: "DEBUG_CHILD_SETUP: each load point's file set (files, bytes, active share) and mix",
}
SPEC_DEBUG_RANGE = (1, 13)
MAX_BIOD = 32  # the guide's limit for BIOD_MAX_READS and BIOD_MAX_WRITES
SPEC_DEFAULT_SECONDS = 300.0
PER_PROC_GUIDANCE = (10.0, 250.0)  # ops/s per process SPEC recommends at the lowest and highest load
PUBLISHABLE_POINTS = 10  # NUM_RUNS: "minimum of 10 for a publishable result"
# Far more than any curve (SPEC's examples have 10); checked before the points are made.
MAX_LOAD_POINTS = 1000
MAX_PROCS = 1024  # processes per client, as a plan's threads
MAX_MOUNT_FILE_BYTES = 1 << 20

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")
_NFS_EXPORT = re.compile(r"([^/:\\\s]+):(/.*)")  # server:/path, as in SPEC's UNIX-style MNT_POINTS
# \\server\share[\path], with peakbench's :port after the server (SPEC's shares are on 445).
_CIFS_SHARE = re.compile(r"\\\\([^\\/:\s]+)(?::(\d{1,5}))?\\([^\\/]+)((?:\\[^\\/]+)*)\\?")


@dataclasses.dataclass(frozen=True)
class MountPoint:
    written: str  # as in the rc file or the mount-point file
    url: str  # what peakbench's --target takes: a directory, nfs://server/path, ...
    file: Path  # where it was written ...
    line: int | None  # ... and on which line


@dataclasses.dataclass(frozen=True)
class RcFile:
    path: Path
    requested: tuple[float, ...]  # aggregate loads as written (LOAD list, or LOAD + i·INCR_LOAD)
    clients: tuple[str, ...]
    procs: int
    mounts: tuple[MountPoint, ...]  # one per process: client 0's procs, then client 1's, ...
    mixfile: Path | None
    warmup_s: float
    runtime_s: float
    workload: str
    ignored: tuple[str, ...]  # variables set but without meaning here
    lines: dict[str, int]  # where each variable was set, for errors found later
    uid: int | None = None  # SFS_NFS_USER_ID
    gid: int | None = None  # SFS_NFS_GROUP_ID
    block_size: int | None = None  # BLOCK_SIZE in bytes
    biod_reads: int | None = None
    biod_writes: int | None = None
    init_timeout_s: float | None = None
    access_share: float | None = None  # ACCESS_PCNT / 100
    monitor: tuple[str, ...] = ()  # PRIME_MON_SCRIPT and its PRIME_MON_ARGS
    debug: frozenset[int] = frozenset()
    cifs_login: tuple[str, str, str] | None = None  # FS_PROTOCOL=cifs: USERNAME, PASSWORD, DOMAIN

    @property
    def processes(self) -> int:
        return len(self.clients) * self.procs

    @property
    def mount_points(self) -> tuple[str, ...]:
        return tuple(mount.url for mount in self.mounts)

    def error(self, name: str, message: str) -> InputError:
        """A one-line error at the line that set `name`."""
        return InputError(message, file=self.path, line=self.lines.get(name), field=name)

    def settings(self) -> dict:
        """The variables that change what runs, as the store keeps them."""
        return {
            "uid": self.uid,
            "gid": self.gid,
            "block_size": self.block_size,
            "biod_max_reads": self.biod_reads,
            "biod_max_writes": self.biod_writes,
            "init_timeout_s": self.init_timeout_s,
            "access_share": self.access_share,
            "monitor": list(self.monitor),
            "debug": sorted(self.debug),
        }

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
            values[name] = _words(raw)
        except ValueError as error:
            raise InputError(f"cannot read the value: {error}", file=path, line=number, field=name) from None
        lines[name] = number
    return _interpret(path, values, lines)


def _words(raw: str) -> list[str]:
    """The value with its quotes removed, split into SPEC's list words. A backslash is a character,
    not the shell's escape: CIFS shares are written \\\\server\\share."""
    lexer = shlex.shlex(raw, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    return [word for part in lexer for word in part.split()]


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

    def whole(name: str, default: int | None, most: int, least: int = 1) -> int | None:
        words = values.get(name)
        if not words:
            return default
        if len(words) != 1 or not words[0].isdigit() or int(words[0]) < least:
            raise fail(name, f"{' '.join(words)!r} is not a whole number of at least {least}")
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
    if len(set(clients)) != len(clients):
        raise fail("CLIENTS", "a client is listed twice")
    protocol = [word.lower() for word in values.get("FS_PROTOCOL", ["nfs"])]
    if protocol not in (["nfs"], ["cifs"]):
        raise fail("FS_PROTOCOL", f"{' '.join(protocol)!r}: must be nfs or cifs")
    cifs_login = None
    if protocol == ["cifs"]:
        login = []
        for name in CIFS_ONLY:
            words = values.get(name, [] if name == "DOMAIN" else None)
            if words is None:
                raise fail("FS_PROTOCOL", f"FS_PROTOCOL=cifs needs {name}, the SMB login")
            login.append(" ".join(words))  # a quoted value with spaces is one login
        cifs_login = tuple(login)
    else:
        for name in CIFS_ONLY:
            if name in values:
                raise fail(name, f"{name} is for CIFS shares (FS_PROTOCOL=cifs); NFS is accessed as SFS_NFS_USER_ID")
    tcp = [word.lower() for word in values.get("TCP", ["1"])]
    if tcp not in (["1"], ["on"]):
        raise fail("TCP", f"{' '.join(tcp)!r}: only TCP (1 or on) is supported, as in SPECsfs2008; UDP is not")
    mounts = _mount_points(path, values.get("MNT_POINTS", []), lines.get("MNT_POINTS"), clients, procs)
    for mount in mounts:
        if mount.url.startswith("smb://") != (cifs_login is not None):
            why = (
                "is a CIFS share; set FS_PROTOCOL=cifs"
                if cifs_login is None
                else "is not a CIFS share (\\\\server\\share) for FS_PROTOCOL=cifs"
            )
            raise InputError(f"{mount.written} {why}", file=mount.file, line=mount.line, field="MNT_POINTS")
    mixfile = None
    if values.get("MIXFILE") and cifs_login is not None:
        raise fail("MIXFILE", f"a CIFS run's op mix comes from {CIFS_WORKLOAD}'s Markov model, not a mix file")
    if values.get("MIXFILE"):
        if len(values["MIXFILE"]) != 1:
            raise fail("MIXFILE", "name one mix file")
        mixfile = (path.parent / values["MIXFILE"][0]).resolve()
    workload = values.get("WORKLOAD", [CIFS_WORKLOAD if cifs_login else "specsfs2008"])
    if len(workload) != 1:
        raise fail("WORKLOAD", "name one workload")
    uid, gid = whole("SFS_NFS_USER_ID", None, 2**32 - 1, 0), whole("SFS_NFS_GROUP_ID", None, 2**32 - 1, 0)
    local = [m for m in mounts if not m.url.startswith("nfs://")]
    biod_reads, biod_writes = whole("BIOD_MAX_READS", None, MAX_BIOD, 0), whole("BIOD_MAX_WRITES", None, MAX_BIOD, 0)
    nfs_only = (
        ("SFS_NFS_USER_ID", uid is not None),
        ("SFS_NFS_GROUP_ID", gid is not None),
        ("BLOCK_SIZE", "BLOCK_SIZE" in values),
        ("BIOD_MAX_READS", (biod_reads or 0) > 1),  # 0 or 1: one transfer at a time, as every target does
        ("BIOD_MAX_WRITES", (biod_writes or 0) > 1),
    )
    for name, set_here in nfs_only:
        if set_here and local:
            raise fail(name, f"{name} applies to NFS mount points (server:/path), and {local[0].written} is not one")
    access = numbers("ACCESS_PCNT")
    if len(access) > 1 or (access and access[0] > 100):
        raise fail("ACCESS_PCNT", f"{' '.join(values['ACCESS_PCNT'])!r} is not one percentage from above 0 to 100")
    init_timeout = seconds("INIT_TIMEOUT") if "INIT_TIMEOUT" in values else None
    if init_timeout is not None and init_timeout <= 0:
        raise fail("INIT_TIMEOUT", "the file set's build needs a time longer than 0")
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
        uid=uid,
        gid=gid,
        block_size=_block_size(values, fail),
        biod_reads=biod_reads,
        biod_writes=biod_writes,
        init_timeout_s=init_timeout,
        access_share=access[0] / 100 if access else None,
        monitor=_monitor(path, values, fail),
        debug=_debug_flags(values.get("DEBUG", []), fail),
        cifs_login=cifs_login,
    )


def _block_size(values: dict[str, list[str]], fail) -> int | None:
    """BLOCK_SIZE: KB as SPEC's sfs -b takes it, or a size with its unit; NFS allows 512 B to 1 MiB here."""
    words = values.get("BLOCK_SIZE")
    if not words:
        return None
    if len(words) != 1:
        raise fail("BLOCK_SIZE", f"{' '.join(words)!r} is not one size")
    try:
        size = float(words[0]) * 1024 if words[0].isdigit() else parse_size(words[0], "BLOCK_SIZE")
    except InputError as error:
        raise fail("BLOCK_SIZE", error.message) from None
    if not 512 <= size <= 1 << 20:
        raise fail("BLOCK_SIZE", f"{words[0]!r} ({size:g} bytes) is not from 512 bytes to 1 MiB")
    return int(size)


def _monitor(path: Path, values: dict[str, list[str]], fail) -> tuple[str, ...]:
    """PRIME_MON_SCRIPT (relative to the rc file, as SPEC keeps it in WORK_DIR) with PRIME_MON_ARGS."""
    script = values.get("PRIME_MON_SCRIPT")
    if not script:
        if values.get("PRIME_MON_ARGS"):
            raise fail("PRIME_MON_ARGS", "PRIME_MON_ARGS without PRIME_MON_SCRIPT")
        return ()
    if len(script) != 1:
        raise fail("PRIME_MON_SCRIPT", "name one program (its arguments go in PRIME_MON_ARGS)")
    program = path.parent / script[0]
    if not (program.is_file() and os.access(program, os.X_OK)):
        raise fail("PRIME_MON_SCRIPT", f"{program} is not an executable file")
    return (str(program.resolve()), *values.get("PRIME_MON_ARGS", []))


def _debug_flags(words: list[str], fail) -> frozenset[int]:
    """SPEC's list of flag numbers and ranges, "3,4,8-10"; a flag with no peakbench log line is refused."""
    flags: set[int] = set()
    for part in ",".join(words).split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or not (high or low).isdigit() or int(low) > int(high or low):
            raise fail("DEBUG", f"{part!r} is not a flag number or a range such as 8-10")
        flags.update(range(int(low), int(high or low) + 1))
    for flag in sorted(flags):
        if not SPEC_DEBUG_RANGE[0] <= flag <= SPEC_DEBUG_RANGE[1]:
            raise fail("DEBUG", f"flag {flag}: SPEC's flags are {SPEC_DEBUG_RANGE[0]} to {SPEC_DEBUG_RANGE[1]}")
        if flag not in DEBUG_FLAGS:
            logged = ", ".join(f"{number} ({line.split(':')[0]})" for number, line in DEBUG_FLAGS.items())
            raise fail("DEBUG", f"flag {flag} has no peakbench log line; peakbench logs flags {logged}")
    return frozenset(flags)


def _mount_points(
    path: Path, words: list[str], line: int | None, clients: tuple[str, ...], procs: int
) -> tuple[MountPoint, ...]:
    """One mount point per process (client by client), from the rc file's list or a mount-point file."""

    def fail(message: str, file: Path = path, at: int | None = line) -> InputError:
        return InputError(message, file=file, line=at, field="MNT_POINTS")

    if not words:
        raise fail("MNT_POINTS is required: the directories or exports to load")
    listed = path.parent / words[0]
    if len(words) == 1 and listed.is_file():
        return _mount_file(listed, clients, procs)
    mounts = [_mount_point(word, path, line) for word in words]
    if len(mounts) == 1:
        return tuple(mounts * procs * len(clients))
    if len(mounts) == procs:  # each mount point is used by one proc on every client
        return tuple(mounts * len(clients))
    if len(mounts) == procs * len(clients):  # the first PROCS for the first client, and so on
        return tuple(mounts)
    raise fail(
        f"{len(mounts)} mount points for {procs} procs on {len(clients)} clients; list"
        f" one for all, {procs} (one per proc) or {procs * len(clients)} (one per proc"
        " per client), or name a file of `client_name path ...` lines"
    )


def _mount_file(path: Path, clients: tuple[str, ...], procs: int) -> tuple[MountPoint, ...]:
    """SPEC's mount-point file: `client_name path path ...`, one line per client of CLIENTS."""
    try:
        if path.stat().st_size > MAX_MOUNT_FILE_BYTES:
            raise InputError(f"larger than {MAX_MOUNT_FILE_BYTES:,} bytes; not a mount-point file", file=path)
        text = path.read_bytes().decode("utf-8")  # as written: read_text would hide carriage returns
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the mount-point file: {error}", file=path) from None
    by_client: dict[str, list[MountPoint]] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if "\r" in line:
            raise InputError(
                "a carriage return: the file must have Unix line ends, as SPEC requires", file=path, line=number
            )
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        client, paths = words[0], words[1:]
        if client not in clients:
            raise InputError(f"client {client!r} is not in CLIENTS ({' '.join(clients)})", file=path, line=number)
        if client in by_client:
            raise InputError(f"client {client!r} has a second line", file=path, line=number)
        if len(paths) != procs:
            raise InputError(f"{len(paths)} mount points for {client}'s {procs} procs", file=path, line=number)
        by_client[client] = [_mount_point(word, path, number) for word in paths]
    missing = [client for client in clients if client not in by_client]
    if missing:
        raise InputError(f"no line for client(s) {' '.join(missing)} of CLIENTS", file=path)
    return tuple(mount for client in clients for mount in by_client[client])


def _mount_point(word: str, file: Path, line: int | None) -> MountPoint:
    if word.startswith("\\\\"):
        share = _CIFS_SHARE.fullmatch(word)
        if share is None or (share.group(2) and not 1 <= int(share.group(2)) <= 65535):
            raise InputError(
                f"{word} is not a CIFS share: write \\\\server\\share[\\path] or \\\\server:port\\share",
                file=file,
                line=line,
                field="MNT_POINTS",
            )
        server, port, name, below = share.groups()
        url = f"smb://{server}{f':{port}' if port else ''}/{quote(name)}{quote(below.replace(chr(92), '/'))}"
        return MountPoint(word, url, file, line)
    export = _NFS_EXPORT.fullmatch(word)
    url = f"nfs://{export.group(1)}{export.group(2)}" if export else word
    return MountPoint(word, url, file, line)
