"""Loop-mounted file-system images (ext4, xfs, btrfs): a real file system to
benchmark on one machine, made and torn down by peakbench itself (needs root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MKFS = {
    # No lazy initialisation: ext4lazyinit would otherwise write inode tables in the background
    # for a while after mounting, disturbing the first measurements.
    "ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
    "xfs": ["mkfs.xfs", "-q", "-f"],
    "btrfs": ["mkfs.btrfs", "-q", "-f"],
}
COMMAND_TIMEOUT_S = 120


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


@dataclass
class LoopFilesystem:
    image: Path
    mountpoint: Path
    fstype: str
    device: str = ""
    options: str = ""  # mount options, e.g. "sync"

    @property
    def device_numbers(self) -> str:
        """MAJOR:MINOR of the loop device, as cgroup blkio throttles want it."""
        st = os.stat(self.device)
        return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"

    def mount(self) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        _run(
            [
                "mount",
                "-t",
                self.fstype,
                *(["-o", self.options] if self.options else []),
                self.device,
                str(self.mountpoint),
            ]
        )

    def unmount(self) -> None:
        _run(["umount", str(self.mountpoint)])

    def remount(self) -> None:
        """Unmount and mount again: the cold-cache policy of Auto-pilot."""
        self.unmount()
        self.mount()

    def destroy(self) -> None:
        if os.path.ismount(self.mountpoint):
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True, timeout=COMMAND_TIMEOUT_S)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=COMMAND_TIMEOUT_S)
        self.image.unlink(missing_ok=True)


def create(workdir: Path, fstype: str = "ext4", size_mb: int = 256, options: str = "") -> LoopFilesystem:
    """Make an image of `size_mb` in `workdir`, format it and mount it at workdir/mnt with `options`."""
    if fstype not in MKFS:
        raise ValueError(f"unknown file-system type {fstype!r}; choose one of {', '.join(MKFS)}")
    if shutil.which(MKFS[fstype][0]) is None:
        raise RuntimeError(f"{MKFS[fstype][0]} is not installed")
    workdir.mkdir(parents=True, exist_ok=True)
    fs = LoopFilesystem(image=workdir / f"{fstype}.img", mountpoint=workdir / "mnt", fstype=fstype, options=options)
    with open(fs.image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    try:
        _run(MKFS[fstype] + [str(fs.image)])
        fs.device = _run(["losetup", "--find", "--show", str(fs.image)])
        fs.mount()
    except BaseException:
        fs.destroy()
        raise
    return fs
