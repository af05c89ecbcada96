"""Targets named on the command line, turned into the engine's target object.

Accepted: a directory path, `file:///absolute/path`, `null://` (a target
that does nothing, to measure the engine's own floor), or `http://host:port/path/`
(a web server; `docroot` names the directory it serves when the file set is to be
built there rather than through WebDAV PUTs). A directory must exist
and be writable, and is checked here so that a typo fails in a second with one
line instead of after the engine has started.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .errors import InputError
from .units import format_size

FIELD = "--target"
MANIFEST = ".peakbench-manifest.json"  # the engine's mark on a directory it prepared


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
        if url.scheme != "file":
            raise InputError(
                f"{url.scheme}:// targets are not supported yet; use a directory, file:///DIR or null://",
                field=FIELD,
            )
        if url.netloc not in ("", "localhost"):
            raise InputError(f"{text}: file:// URLs must name a local path (file:///DIR)", field=FIELD)
        text = unquote(url.path)
    path = Path(text).expanduser().absolute()
    _check_directory(path)
    return {"kind": "posix", "path": str(path)}


def parse_http(text: str, docroot: str | Path | None = None) -> dict:
    """{"kind": "http", "url": "http://host:port/base/"[, "docroot": DIR]}."""
    url = urlsplit(text)
    if url.scheme != "http":
        raise InputError(f"{text}: only http:// is supported (no TLS)", field=FIELD)
    if not url.hostname:
        raise InputError(f"{text}: no host (http://HOST:PORT/)", field=FIELD)
    try:
        url.port  # noqa: B018 -- raises on a bad port
    except ValueError as error:
        raise InputError(f"{text}: {error}", field=FIELD) from None
    if url.query or url.fragment:
        raise InputError(f"{text}: a target URL names a directory; drop the ?query or #fragment", field=FIELD)
    path = url.path or "/"
    target = {"kind": "http", "url": f"http://{url.netloc}{path if path.endswith('/') else path + '/'}"}
    if docroot is not None:
        root = Path(docroot).expanduser().absolute()
        _check_directory(root)
        target["docroot"] = str(root)
    return target


def target_label(target: dict) -> str:
    """How a parsed target is shown and stored: its absolute path, or its URL."""
    if target["kind"] == "posix":
        return target["path"]
    if target["kind"] == "http":
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
        raise InputError(f"{path}: no such directory", field=FIELD)
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
            f"{path} is not empty and peakbench did not create it (no {MANIFEST}); name an empty or new directory",
            field=FIELD,
        )


def check_space(target: dict, needed_bytes: float) -> None:
    """Refuse a file set that cannot fit, before the engine starts filling the disk.

    Only for a fresh directory: once peakbench has prepared there, part of the
    set already exists and uses the space this check would count as missing.
    """
    path = _local_directory(target)
    if path is None or (path / MANIFEST).exists():
        return
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    if needed_bytes > free:
        raise InputError(
            f"the file set needs about {format_size(needed_bytes)} but {path} has"
            f" {format_size(free)} free; lower --rate or --scale",
            field=FIELD,
        )
