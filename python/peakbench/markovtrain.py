"""`peakbench workloads train-markov CAPTURE --output MODEL`: a Markov model (markov.py's format)
counted from a packet capture of real SMB2 client sessions, so a site can model its own clients as
SPEC modelled theirs.

tshark reads the SMB2 messages out of the capture. Each TCP connection is one client, starting with no
handle open. Its requests, in the order it sent them, become ops of the CIFS workload's vocabulary:

    CREATE = open (its FileId is followed until its CLOSE = close)
    READ = read, WRITE = write, FLUSH = commit, LOCK = lock (one per request, unlock included), ECHO = null
    QUERY_INFO: file class = fgetattr, file-system class = fsinfo, security class = getsecurity
    SET_INFO (any class) = fsetattr

Two shapes a client uses for one path op are folded into it, as the engine sends them (target/smb):
a CREATE, QUERY_INFO or SET_INFO and CLOSE in one related compound is getattr (file info), fsinfo,
access (security), setattr or lookup (CREATE + CLOSE alone); and a handle a client lists a directory
through (QUERY_DIRECTORY) is one readdir, whatever else it does. Requests the server answered with an
error, requests on handles opened before the capture began, and session commands (NEGOTIATE, SESSION_SETUP,
TREE_CONNECT, IOCTL, ...) are left out and counted in the model's source. Handles still open when a
connection's capture ends are closed there, so the chain can leave every state it entered.
The weight of each transition is how often it was taken.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from . import markov
from .errors import InputError, RunError
from .workloadknobs import _toml_value

TSHARK_TIMEOUT_S = 600
# An SMB2 message on TCP: a 4-byte length, then the protocol id; byte 20 of the payload holds its flags,
# whose lowest bit marks a response. The first request found names the server's port.
REQUEST_FILTER = "tcp.payload[4:4] == fe:53:4d:42 && !(tcp.payload[20] & 1)"
CREATE, CLOSE, FLUSH, READ, WRITE, LOCK, ECHO, QUERY_DIRECTORY, QUERY_INFO, SET_INFO = 5, 6, 7, 8, 9, 10, 13, 14, 16, 17
ON_FILE = {READ: "read", WRITE: "write", FLUSH: "commit", LOCK: "lock"}
INFO_CLASS = {"0x01": "fgetattr", "0x02": "fsinfo", "0x03": "getsecurity"}
# A whole-path compound (CREATE, its middle, CLOSE) by what its middle asks.
PATH_OP = {"0x01": "getattr", "0x02": "fsinfo", "0x03": "access"}
STATUS_PENDING = 0x103
STATE_NAMES = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclasses.dataclass
class Message:
    frame: int
    stream: int
    command: int
    response: bool
    related: bool
    msg_id: int
    fid: str | None
    info_class: str | None
    status: int


@dataclasses.dataclass
class Counts:
    """What a capture comes to: transitions (handles before, op) -> times, and what was left out."""

    transitions: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    ops: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    handles: int = 0
    clients: int = 0
    failed: int = 0
    before_capture: int = 0
    session: int = 0
    closed_at_end: int = 0


def train(capture: Path, output: Path) -> Counts:
    """Count `capture` into a model written to `output` whole (built beside it, validated, renamed)."""
    messages = read_messages(capture)
    counts = count(messages)
    if not counts.ops:
        raise InputError("the capture's SMB2 requests hold no file operation to model", file=capture)
    text = model_text(capture, counts)
    partial = output.with_name(f".{output.name}.writing-{os.getpid()}.toml")
    try:
        partial.write_text(text, encoding="utf-8")
        markov.load_model(partial)
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return counts


def _tshark(capture: Path, *args: str) -> str:
    tshark = shutil.which("tshark")
    if tshark is None:
        raise RunError("tshark is not installed (Debian: apt-get install tshark); train-markov reads captures with it")
    try:
        done = subprocess.run(
            [tshark, "-n", "-r", str(capture), *args], capture_output=True, text=True, timeout=TSHARK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise RunError(f"{capture}: tshark took longer than {TSHARK_TIMEOUT_S} s") from None
    # tshark reports a file it cannot read, or one cut short mid-packet, on stderr (exit 2).
    problem = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("Running as user")]
    if done.returncode != 0 or problem:
        reason = problem[-1].strip() if problem else f"tshark exited {done.returncode}"
        if "cut short" in reason:
            reason = "the capture is truncated (cut short in the middle of a packet)"
        elif "isn't a capture file" in reason or "unknown file format" in reason.lower():
            reason = "not a packet capture tshark can read"
        raise InputError(reason.rstrip("."), file=capture)
    return done.stdout


def read_messages(capture: Path) -> list[Message]:
    if not capture.is_file():
        raise InputError("no such capture file", file=capture)
    ports = sorted(
        {int(p) for p in _tshark(capture, "-Y", REQUEST_FILTER, "-T", "fields", "-e", "tcp.dstport").split()}
    )
    if not ports:
        raise InputError("no SMB2 request in the capture", file=capture)
    decode = [arg for port in ports for arg in ("-d", f"tcp.port=={port},nbss")]
    text = _tshark(capture, *decode, "-Y", "smb2", "-T", "json", "-J", "tcp smb2", "--no-duplicate-keys")
    messages = []
    for frame, packet in enumerate(json.loads(text or "[]")):
        layers = packet["_source"]["layers"]
        stream = int(_first(layers["tcp"], "tcp.stream"))
        frame_messages = layers["smb2"] if isinstance(layers["smb2"], list) else [layers["smb2"]]
        for tree in frame_messages:
            header = tree["SMB2 Header"]
            flags = header.get("smb2.flags_tree", {})
            status = _first(header, "smb2.nt_status")
            messages.append(
                Message(
                    frame=frame,
                    stream=stream,
                    command=int(header["smb2.cmd"]),
                    response=flags.get("smb2.flags.response") == "1",
                    related=flags.get("smb2.flags.chained") == "1",
                    msg_id=int(header["smb2.msg_id"]),
                    fid=_first(tree, "smb2.fid"),
                    info_class=_first(tree, "smb2.class"),
                    status=int(status, 16) if status else 0,
                )
            )
    return messages


def _first(tree, key: str):
    """The first value of `key` anywhere in tshark's nested JSON tree."""
    if isinstance(tree, dict):
        if key in tree:
            value = tree[key]
            return value[0] if isinstance(value, list) else value
        tree = list(tree.values())
    if isinstance(tree, list):
        for child in tree:
            found = _first(child, key)
            if found is not None:
                return found
    return None


def count(messages: list[Message]) -> Counts:
    counts = Counts()
    replies: dict[tuple[int, int], Message] = {}
    for m in messages:
        # An interim STATUS_PENDING is followed by the final answer, which replaces it.
        if m.response and not (m.status == STATUS_PENDING and (m.stream, m.msg_id) in replies):
            replies[(m.stream, m.msg_id)] = m
    by_stream: dict[int, list[list[Message]]] = collections.defaultdict(list)
    for m in messages:
        if m.response:
            continue
        units = by_stream[m.stream]
        # A related message belongs to the compound before it (sent in the same frame).
        if m.related and units and units[-1][-1].frame == m.frame:
            units[-1].append(m)
        else:
            units.append([m])
    for stream in sorted(by_stream):
        _count_client(by_stream[stream], replies, counts)
    return counts


def _failed(m: Message, replies: dict) -> bool:
    reply = replies.get((m.stream, m.msg_id))
    return reply is not None and reply.status >> 30 == 3  # severity "error"; warnings (end of listing) are answers


def _count_client(units: list[list[Message]], replies: dict, counts: Counts) -> None:
    handle_fids = {}  # the FileId a CREATE returned -> whether the handle is a directory listing
    for unit in units:
        for m in unit:
            reply = replies.get((m.stream, m.msg_id))
            if m.command == CREATE and reply is not None and reply.fid:
                handle_fids[reply.fid] = False
    listing = {m.fid for unit in units for m in unit if m.command == QUERY_DIRECTORY and m.fid in handle_fids}
    listed: set[str] = set()
    open_now: list[str] = []
    ops: list[str] = []

    def emit(op: str) -> None:
        have = len(open_now)
        counts.transitions[(have, op)] += 1
        counts.ops[op] += 1
        ops.append(op)

    for unit in units:
        path_op = _path_op(unit)
        if path_op is not None:
            if _failed(unit[0], replies):
                counts.failed += len(unit)
            else:
                emit(path_op)
            continue
        for before, m in zip([None, *unit], unit):
            if m.command == LOCK and before is not None and before.command == LOCK:
                continue  # a LOCK compound (lock, then unlock) is one lock
            if m.command == CREATE:
                reply = replies.get((m.stream, m.msg_id))
                if reply is None or _failed(m, replies) or not reply.fid:
                    counts.failed += 1
                elif reply.fid not in listing:
                    emit("open")
                    open_now.append(reply.fid)
                    counts.handles += 1
                continue
            fid = m.fid
            if fid == "ffffffff-ffff-ffff-ffff-ffffffffffff":  # "the handle the compound's CREATE made"
                fid = _compound_fid(unit, replies)
            op = _handle_op(m)
            if op is None:
                counts.session += 1
            elif fid in listing:
                if m.command == QUERY_DIRECTORY and fid not in listed:
                    listed.add(fid)
                    emit("readdir")
            elif op in ("null", "fsinfo") and fid not in open_now:
                if _failed(m, replies):
                    counts.failed += 1
                else:
                    emit(op)  # ECHO names no file
            elif fid not in open_now:
                counts.before_capture += 1
            elif _failed(m, replies):
                counts.failed += 1
            elif op == "close":
                emit("close")
                open_now.remove(fid)
            else:
                emit(op)
    counts.closed_at_end += len(open_now)
    while open_now:
        emit("close")
        open_now.pop()
    if ops:
        counts.clients += 1


def _handle_op(m: Message) -> str | None:
    if m.command in ON_FILE:
        return ON_FILE[m.command]
    if m.command == ECHO:
        return "null"
    if m.command == CLOSE:
        return "close"
    if m.command == QUERY_INFO:
        return INFO_CLASS.get(m.info_class)
    if m.command == SET_INFO:
        return "fsetattr"
    if m.command == QUERY_DIRECTORY:
        return "readdir"
    return None


def _compound_fid(unit: list[Message], replies: dict) -> str | None:
    for m in unit:
        reply = replies.get((m.stream, m.msg_id))
        if m.command == CREATE and reply is not None:
            return reply.fid
    return None


def _path_op(unit: list[Message]) -> str | None:
    """The path op a related CREATE, [QUERY_INFO | SET_INFO], CLOSE compound is, if it is one."""
    commands = [m.command for m in unit]
    if len(unit) < 2 or commands[0] != CREATE or commands[-1] != CLOSE or not all(m.related for m in unit[1:]):
        return None
    middle = unit[1:-1]
    if not middle:
        return "lookup"
    if len(middle) == 1 and middle[0].command == QUERY_INFO:
        return PATH_OP.get(middle[0].info_class)
    if len(middle) == 1 and middle[0].command == SET_INFO:
        return "setattr"
    return None


def model_text(capture: Path, counts: Counts) -> str:
    most = max(have for have, _ in counts.transitions) + 1
    names = [STATE_NAMES[i] if i < len(STATE_NAMES) else f"h{i}" for i in range(most + 1)]
    total = sum(counts.ops.values())
    digest = hashlib.sha256(capture.read_bytes()).hexdigest()
    mix = ", ".join(f"{op} {n}" for op, n in counts.ops.most_common())
    source = (
        f"Trained by `peakbench workloads train-markov` from {capture.name} (sha256 {digest}): {total} ops"
        f" over {counts.handles} handles on {counts.clients} connections; ops counted: {mix}. Left out:"
        f" {counts.failed} requests the server answered with an error, {counts.before_capture} on handles opened"
        f" before the capture began, {counts.session} session and other commands; {counts.closed_at_end} handles"
        " still open when their connection's capture ended were closed there. Each weight is how often that"
        " transition was taken."
    )
    lines = [
        f"name = {_toml_value(capture.stem)}",
        f"description = {_toml_value(f'A chain over handle states counted from the SMB2 capture {capture.name}.')}",
        f"source = {_toml_value(source)}",
        'start = "none"',
    ]
    for have in range(most + 1):
        taken = sorted(
            ((op, n) for (h, op), n in counts.transitions.items() if h == have and n > 0), key=lambda item: -item[1]
        )
        if not taken:
            continue
        lines += ["", f"[states.{names[have]}]", f"handles = {have}", "next = ["]
        for op, n in taken:
            to = have + 1 if op == "open" else have - 1 if op == "close" else have
            lines.append(f"  {{op = {_toml_value(op)}, weight = {n}, to = {_toml_value(names[to])}}},")
        lines.append("]")
    return "\n".join(lines) + "\n"
