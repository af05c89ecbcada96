"""Targets named on the command line, turned into the engine's target object.

Accepted: a directory path, `file:///absolute/path`, or `null://` (a target
that does nothing, to measure the engine's own floor). A directory must exist
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


def parse_target(text: str) -> dict:
    """The engine's target object, e.g. {"kind": "posix", "path": "/mnt/x"}."""
    if text == "null://":
        return {"kind": "null"}
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


def target_label(target: dict) -> str:
    """How a parsed target is shown and stored: its absolute path, or its URL."""
    return target["path"] if target["kind"] == "posix" else f"{target['kind']}://"


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
    if target["kind"] != "posix":
        return
    path = Path(target["path"])
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
    if target["kind"] != "posix" or (Path(target["path"]) / MANIFEST).exists():
        return
    stats = os.statvfs(target["path"])
    free = stats.f_bavail * stats.f_frsize
    if needed_bytes > free:
        raise InputError(
            f"the file set needs about {format_size(needed_bytes)} but {target['path']} has"
            f" {format_size(free)} free; lower --rate or --scale",
            field=FIELD,
        )
