"""Resource limits through cgroup v1: a throttled disk, to reproduce the paper's
resource factors on one machine.

The throttle is set in the root blkio group, so it binds every submitter —
the benchmark's own I/O, page-cache writeback and the journal thread alike —
but only on the one device named (normally a loop device peakbench made)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")


def _write(name: str, value: str) -> None:
    path = BLKIO / name
    try:
        path.write_text(value)
    except OSError as e:
        raise RuntimeError(f"{path}: cannot write {value!r}: {e.strerror}") from e


@contextmanager
def throttled_device(device_numbers: str, read_iops: int = 0, write_iops: int = 0) -> Iterator[None]:
    """Limit a block device ("MAJOR:MINOR") to so many read and write I/Os per second
    for the duration of the block; 0 means unlimited."""
    settings = {"blkio.throttle.read_iops_device": read_iops, "blkio.throttle.write_iops_device": write_iops}
    applied = []
    try:
        for name, iops in settings.items():
            if iops:
                _write(name, f"{device_numbers} {int(iops)}")
                applied.append(name)
        yield
    finally:
        for name in applied:
            _write(name, f"{device_numbers} 0")
