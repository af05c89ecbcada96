"""Targets named on the command line, turned into the engine's target object.

Accepted: a directory path, `file:///absolute/path`, `null://` (a target
that does nothing, to measure the engine's own floor), an NFSv3 export
`nfs://host[:port]/export?option=value&...` that the engine speaks to directly
over ONC-RPC (options in NFS_OPTIONS), or `http://host:port/path/` (a web
server; `docroot` names the directory it serves when the file set is to be
built there rather than through WebDAV PUTs). A directory must exist
and be writable, and is checked here so that a typo fails in a second with one
line instead of after the engine has started.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from .errors import InputError
from .mix import HANDLE_OPS
from .units import format_size, parse_duration

FIELD = "--target"
MANIFEST = ".peakbench-manifest.json"  # the engine's mark on a directory it prepared


# nfs:// URL options: name -> (engine field, parser, help).
NFS_OPTIONS = {
    "mountport": ("mount_port", "port", "MOUNT's port (default: ask the portmapper)"),
    "uid": ("uid", "id", "AUTH_SYS uid (default 0)"),
    "gid": ("gid", "id", "AUTH_SYS gid (default 0)"),
    "rsize": ("rsize", "xfer", "READ transfer size in bytes (default: FSINFO's)"),
    "wsize": ("wsize", "xfer", "WRITE transfer size in bytes (default: FSINFO's)"),
    "biod_reads": (
        "biod_reads",
        "biod",
        "READs of one logical read in flight, 0-32 (SPECsfs's BIOD_MAX_READS; default 1)",
    ),
    "biod_writes": ("biod_writes", "biod", "WRITEs of one logical write in flight, 0-32 (BIOD_MAX_WRITES; default 1)"),
    "conns": ("connections", "conns", "TCP connections (default 1)"),
    "max_outstanding": ("max_outstanding", "count", "cap on RPCs in flight (default: none)"),
    "timeout": ("timeout_ms", "duration", "per-attempt RPC timeout, e.g. 500ms, 5s (default 5s)"),
    "retrans": ("retrans", "retrans", "retransmissions before a call times out (default 2)"),
    "recv_wait": (
        "recv_wait_us",
        "wait",
        "receive moderation: with 8+ calls in flight, wait this long after a read"
        " that found few replies, e.g. 100us, or 0 for off (default: a tenth of the observed latency,"
        " at most 200us; the result reports what was held)",
    ),
}
MAX_RECV_WAIT_US = 1000  # the engine's limit (spec.rs)


def _nfs_number(text: str, name: str, kind: str, label: str) -> float | int:
    if kind == "duration":
        seconds = parse_duration(text if text[-1:].isalpha() else text + "ms", field=FIELD)
        if seconds <= 0:
            raise InputError(f"{label}: {name}={text} must be longer than 0", field=FIELD)
        return seconds * 1000.0
    if kind == "wait":
        try:
            # Rounded to a thousandth of a µs: 100 × 1e-6 s is not exactly 100 µs in binary.
            micros = round(parse_duration(text if text[-1:].isalpha() else text + "us", field=FIELD) * 1e6, 3)
        except InputError:
            micros = None
        if micros is None or micros > MAX_RECV_WAIT_US:
            raise InputError(
                f"{label}: {name}={text} must be 0 to {MAX_RECV_WAIT_US}us (e.g. 100us, 0.2ms)", field=FIELD
            )
        return micros
    bounds = {
        "port": (1, 65535),
        "id": (0, 2**32 - 1),
        "xfer": (512, 1 << 20),
        "conns": (1, 1024),
        "count": (1, 2**32),
        "retrans": (0, 100),
        "biod": (0, 32),
    }[kind]
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{label}: {name}={text} is not a whole number", field=FIELD) from None
    if not bounds[0] <= value <= bounds[1]:
        raise InputError(f"{label}: {name}={text} must be {bounds[0]} to {bounds[1]}", field=FIELD)
    return value


def parse_nfs(text: str) -> dict:
    """`nfs://host[:port]/export?opt=v&...` as the engine's NFS target object."""
    url = urlsplit(text)
    try:
        host, port = url.hostname, url.port
    except ValueError:
        raise InputError(f"{text}: the port is not a number from 1 to 65535", field=FIELD) from None
    if not host:
        raise InputError(f"{text}: no server; write nfs://SERVER/EXPORT", field=FIELD)
    export = unquote(url.path).rstrip("/") or "/"
    if not url.path or url.path == "/":
        raise InputError(f"{text}: no export path; write nfs://SERVER/EXPORT", field=FIELD)
    target = {"kind": "nfs", "host": host, "export": export, "url": text}
    if port is not None:
        target["port"] = port
    seen = set()
    for name, value in parse_qsl(url.query, keep_blank_values=True, strict_parsing=False):
        if name not in NFS_OPTIONS:
            known = ", ".join(sorted(NFS_OPTIONS))
            raise InputError(f"{text}: unknown option {name!r} (known: {known})", field=FIELD)
        if name in seen:
            raise InputError(f"{text}: option {name!r} given twice", field=FIELD)
        seen.add(name)
        field, kind, _ = NFS_OPTIONS[name]
        target[field] = _nfs_number(value, name, kind, text)
    return target


# smb:// URL options: name -> (engine field, parser, help).
SMB_OPTIONS = {
    "domain": ("domain", "text", "NTLM domain (default: none)"),
    "conns": ("connections", "conns", "TCP connections, each with its own session (default 1)"),
    "max_outstanding": ("max_outstanding", "count", "cap on requests in flight (default: none)"),
    "timeout": ("timeout_ms", "duration", "per-request timeout, e.g. 500ms, 5s (default 5s)"),
    "dialect": ("dialect", "dialect", "SMB dialect to offer: 2.1, 3.0, 3.0.2 or 3.1.1 (default: all four)"),
    "signing": (
        "signing",
        "signing",
        "message signing: off, if-offered (when the server requires it; the default) or required",
    ),
    "encrypt": (
        "encrypt",
        "encrypt",
        "SMB 3.x encryption: off, desired (when the server asks for it; the default) or required",
    ),
}
SMB_DIALECTS = ("2.1", "3.0", "3.0.2", "3.1.1")
SMB_SIGNING = ("off", "if-offered", "required")
SMB_ENCRYPT = ("off", "desired", "required")


def parse_smb(text: str) -> dict:
    """`smb://[user[:password]@]host[:port]/share[/path][?options]` as the engine's SMB target object."""
    url = urlsplit(text)
    try:
        host, port = url.hostname, url.port
    except ValueError:
        raise InputError(f"{_without_password(text)}: the port is not a number from 1 to 65535", field=FIELD) from None
    label = _without_password(text)
    if not host:
        raise InputError(f"{label}: no server; write smb://[USER[:PASSWORD]@]SERVER/SHARE", field=FIELD)
    parts = [p for p in unquote(url.path).split("/") if p]
    if not parts:
        raise InputError(f"{label}: no share; write smb://[USER[:PASSWORD]@]SERVER/SHARE", field=FIELD)
    target = {
        "kind": "smb",
        "host": host,
        "share": parts[0],
        "path": "/".join(parts[1:]),
        "user": unquote(url.username or ""),
        "password": unquote(url.password or ""),
        "url": label,
    }
    if port is not None:
        target["port"] = port
    seen = set()
    for name, value in parse_qsl(url.query, keep_blank_values=True, strict_parsing=False):
        if name not in SMB_OPTIONS:
            raise InputError(f"{label}: unknown option {name!r} (known: {', '.join(sorted(SMB_OPTIONS))})", field=FIELD)
        if name in seen:
            raise InputError(f"{label}: option {name!r} given twice", field=FIELD)
        seen.add(name)
        field, kind, _ = SMB_OPTIONS[name]
        if kind == "text":
            target[field] = value
        elif kind == "dialect":
            if value not in SMB_DIALECTS:
                raise InputError(f"{label}: dialect={value} must be one of {', '.join(SMB_DIALECTS)}", field=FIELD)
            target[field] = value
        elif kind in ("signing", "encrypt"):
            allowed = SMB_SIGNING if kind == "signing" else SMB_ENCRYPT
            if value not in allowed:
                raise InputError(f"{label}: {name}={value} must be one of {', '.join(allowed)}", field=FIELD)
            target[field] = value
        else:
            target[field] = _nfs_number(value, name, kind, label)
    return target


# Ops a kind of target has no form for (the engine refuses them too, but only once it has
# connected): SMB2 makes no symlinks and has no pathconf; byte-range locks are SMB's alone so far.
UNSUPPORTED_OPS = {
    "smb": ("symlink", "readlink", "pathconf"),
    "posix": ("lock", *HANDLE_OPS),
    "nfs": ("lock", *HANDLE_OPS),
    "http": ("lock", *HANDLE_OPS),
}


def refuse_unsupported(target: dict, mix: dict, workload: str) -> None:
    """Refuse a mix that names an op the target cannot do, before anything is prepared."""
    named = [op for op in UNSUPPORTED_OPS.get(target["kind"], ()) if mix.get(op, 0) > 0]
    if named:
        raise InputError(
            f"workload {workload} has {', '.join(named)} in its mix, which {target['kind']}:// targets cannot do;"
            " give a mix without them",
            field=FIELD,
        )


def _without_password(text: str) -> str:
    """An smb:// URL as shown and stored: the password replaced by ***."""
    url = urlsplit(text)
    if url.password is None:
        return text
    return text.replace(f":{url.password}@", ":***@", 1)


def parse_target(text: str, docroot: str | Path | None = None) -> dict:
    """The engine's target object, e.g. {"kind": "posix", "path": "/mnt/x"}."""
    if text == "null://":
        return {"kind": "null"}
    if text.startswith(("http://", "https://")):
        return parse_http(text, docroot)
    if docroot is not None:
        raise InputError("--docroot goes with an http:// target only", field="--docroot")
    if "://" in text:
        url = urlsplit(text)
        if url.scheme == "nfs":
            return parse_nfs(text)
        if url.scheme == "smb":
            return parse_smb(text)
        if url.scheme != "file":
            raise InputError(
                f"{url.scheme}:// targets are not supported yet; use a directory, file:///DIR,"
                " nfs://SERVER/EXPORT, smb://SERVER/SHARE, http://HOST:PORT/ or null://",
                field=FIELD,
            )
        if url.netloc not in ("", "localhost"):
            raise InputError(f"{text}: file:// URLs must name a local path (file:///DIR)", field=FIELD)
        text = unquote(url.path)
    path = Path(text).expanduser().absolute()
    _check_directory(path)
    return {"kind": "posix", "path": str(path)}


def parse_http(text: str, docroot: str | Path | None = None) -> dict:
    """{"kind": "http", "url": "http(s)://host:port/base/[?ca=FILE | ?insecure=1]"[, "docroot": DIR]}.
    https:// verifies the server against the PEM CA bundle ca=FILE, or not at all with insecure=1."""
    url = urlsplit(text)
    if url.scheme not in ("http", "https"):
        raise InputError(f"{text}: only http:// and https:// are supported", field=FIELD)
    if not url.hostname:
        raise InputError(f"{text}: no host ({url.scheme}://HOST:PORT/)", field=FIELD)
    try:
        url.port  # noqa: B018 -- raises on a bad port
    except ValueError as error:
        raise InputError(f"{text}: {error}", field=FIELD) from None
    if url.fragment or (url.query and url.scheme == "http"):
        raise InputError(f"{text}: a target URL names a directory; drop the ?query or #fragment", field=FIELD)
    query = ""
    if url.scheme == "https":
        pairs = parse_qsl(url.query, keep_blank_values=True)
        ((name, value),) = pairs if len(pairs) == 1 else [("", "")]
        if not ((name == "ca" and value) or (name, value) == ("insecure", "1")):
            raise InputError(
                f"{text}: https:// takes one option: ca=FILE (a PEM CA bundle to verify the server against) "
                "or insecure=1 (no verification)",
                field=FIELD,
            )
        if name == "ca":
            ca = Path(value).expanduser().absolute()
            if not ca.is_file():
                raise InputError(f"{text}: ca={value}: no such file", field=FIELD)
            query = f"?ca={ca}"
        else:
            print(f"warning: {text}: insecure=1, the server's certificate is not verified", file=sys.stderr)
            query = "?insecure=1"
    path = url.path or "/"
    target = {"kind": "http", "url": f"{url.scheme}://{url.netloc}{path if path.endswith('/') else path + '/'}{query}"}
    if docroot is not None:
        root = Path(docroot).expanduser().absolute()
        _check_directory(root)
        target["docroot"] = str(root)
    return target


def check_simulated(urls: Iterable[str], field: str = "target") -> None:
    """Each sim:// URL names a surface the simulator has, with parameters it can take: checked
    for every sample of a plan when it is read, not when its search comes up after a surface
    has been stored."""
    from . import sim  # the simulator brings the controller with it; only plans with sim:// need it

    for url in urls:
        try:
            sim.target_from_url(url)
        except (ValueError, OverflowError) as error:
            raise InputError(f"{url}: {error}", field=field) from None


def target_label(target: dict) -> str:
    """How a parsed target is shown and stored: its absolute path, or its URL."""
    if target["kind"] == "posix":
        return target["path"]
    if target["kind"] == "nfs":
        return target.get("url") or f"nfs://{target['host']}{target['export']}"
    if target["kind"] in ("http", "smb"):
        return target["url"]
    return f"{target['kind']}://"


def _local_directory(target: dict) -> Path | None:
    """The local directory peakbench builds the file set in, if any."""
    if target["kind"] == "posix":
        return Path(target["path"])
    if target["kind"] == "http" and target.get("docroot"):
        return Path(target["docroot"])
    return None


def _check_directory(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such directory (peakbench loads an empty directory you made)", field=FIELD)
    if not path.is_dir():
        raise InputError(f"{path}: not a directory", field=FIELD)
    # os.access misses read-only mounts for root, so ask the file system too.
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        raise InputError(f"{path}: the file system is mounted read-only", field=FIELD)
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{path}: not writable by this user", field=FIELD)


def check_ours(target: dict) -> None:
    """Refuse a non-empty directory that peakbench did not prepare.

    The engine refuses it too; checking first makes it an input error (exit 2)
    that leaves nothing behind, rather than a failed trial in the store.
    """
    path = _local_directory(target)
    if path is None:
        return
    if not (path / MANIFEST).exists() and any(path.iterdir()):
        raise InputError(
            f"{path} is not empty and peakbench did not create it (no {MANIFEST}); name an empty directory",
            field=FIELD,
        )


def check_space(target: dict, needed_bytes: float) -> None:
    """Refuse a file set that cannot fit, before the engine starts filling the disk.

    A directory peakbench has prepared before already holds part of the set: what
    it holds is counted as there (a walk of the directory, once per command), so
    growing a set for a higher load is checked too.
    """
    path = _local_directory(target)
    if path is None or not path.is_dir():
        return
    present = _bytes_under(path) if (path / MANIFEST).exists() else 0
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    if needed_bytes - present > free:
        held = f" ({format_size(present)} of it already there)" if present else ""
        raise InputError(
            f"the file set needs about {format_size(needed_bytes)}{held} but {path} has"
            f" {format_size(free)} free; lower --rate or --scale",
            field=FIELD,
        )


def _bytes_under(path: Path) -> int:
    """The bytes of the regular files below `path` (symlinks not followed)."""
    total = 0
    pending = [path]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total
