"""Cache policies before each measured run (Auto-pilot's cold and warm caches).

warm     discard the first run of a test (and the first after a resume): it fills the caches
drop     sync, then echo 3 > /proc/sys/vm/drop_caches (page cache, dentries, inodes)
remount  unmount and mount the target file system again (the test's loop image, or cache.mount)
chill    allocate and dirty memory until the page cache is evicted, then free it
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ..errors import RunError
from ..sysinfo import mount_of
from .monitor import memory

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
CHILL_HEADROOM = 256 * 2**20  # never take the machine's last 256 MiB
CHILL_CHUNK = 64 * 2**20


def drop_caches() -> dict:
    os.sync()
    try:
        DROP_CACHES.write_text("3\n")
    except OSError as error:
        raise RunError(
            f"cannot drop caches ({DROP_CACHES}: {error.strerror}); run as root"
            " or remove 'drop' from the test's cache policy"
        ) from None
    return {"policy": "drop"}


def remount_path(mount_point: str) -> dict:
    """Unmount and mount a mounted file system again, with the device, type and options it had."""
    info = mount_of(mount_point)
    if info is None or os.path.realpath(info["mount_point"]) != os.path.realpath(mount_point):
        raise RunError(f"{mount_point} is not a mount point; cannot remount it")
    os.sync()
    options = info["mount_options"]
    steps = (
        ["umount", info["mount_point"]],
        ["mount", "-t", info["fs_type"], "-o", options, info["device"], info["mount_point"]],
    )
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RunError(f"remount {mount_point}: {' '.join(argv)}: {done.stderr.strip()}")
    return {"policy": "remount", "mount_point": info["mount_point"], "fs_type": info["fs_type"]}


# The chiller runs in a child process, so all it took is given back when it exits.
_CHILL_PROGRAM = r"""
import mmap, sys, time
limit, chunk = int(sys.argv[1]), int(sys.argv[2])
def cached():
    for line in open("/proc/meminfo"):
        if line.startswith("Cached:"):
            return int(line.split()[1]) * 1024
start = cached()
held, taken = [], 0
while taken < limit:
    size = min(chunk, limit - taken)
    m = mmap.mmap(-1, size)
    for offset in range(0, size, 4096):
        m[offset] = 1  # dirty every page
    held.append(m)
    taken += size
    if cached() < start * 0.05:
        break
print(start, cached(), taken)
"""


def chill(limit_bytes: float | None = None) -> dict:
    """Allocate and dirty memory (up to what is available less a headroom, or `limit_bytes`)
    until the page cache has shrunk to 5% of what it was; report what it did."""
    mem = memory()
    available = mem.get("MemAvailable", 0)
    limit = max(0, available - CHILL_HEADROOM)
    if limit_bytes is not None:
        limit = min(limit, int(limit_bytes))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _CHILL_PROGRAM, str(int(limit)), str(CHILL_CHUNK)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RunError(f"chill failed: {done.stderr.strip()[-300:]}")
    before, after, taken = (int(x) for x in done.stdout.split())
    return {
        "policy": "chill",
        "cached_before_mb": before / 2**20,
        "cached_after_mb": after / 2**20,
        "allocated_mb": taken / 2**20,
        "seconds": time.monotonic() - started,
    }
