"""A snapshot of the machine and the target's file system, stored with every trial.

A number is only comparable with another if we know what produced it: the
kernel, CPU, memory and the file system under the target (type, device,
mount options) are recorded next to each result.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path


def snapshot(target: dict, engine_version: str | None = None) -> dict:
    info = {
        "os": _os_name(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
        "peakbench_version": peakbench_version(),
        "engine_version": engine_version,
    }
    info.update(cpu_frequency())
    info["disks"] = disks()
    if target["kind"] == "posix":
        info["target_fs"] = mount_of(target["path"])
    elif target["kind"] == "http" and target.get("docroot"):
        info["target_fs"] = mount_of(target["docroot"])  # where the web server's files live
    return info


def cpu_frequency(sys_cpu: Path = Path("/sys/devices/system/cpu")) -> dict:
    """The frequency governor and current MHz of cpu0, where the kernel exposes them."""
    out: dict = {"cpu_governor": None, "cpu_mhz": None}
    try:
        out["cpu_governor"] = (sys_cpu / "cpu0" / "cpufreq" / "scaling_governor").read_text().strip()
    except OSError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                out["cpu_mhz"] = float(line.split(":", 1)[1])
                break
    except (OSError, ValueError):
        pass
    return out


def disks(partitions_text: str | None = None, sys_block: Path = Path("/sys/block")) -> list[dict]:
    """Disks and their partitions from /proc/partitions, with model and rotational flag where known.

    Loop, ram and zram devices that back nothing are left out; a loop device that
    has an image attached is kept (a benchmark's file system may live on one).
    """
    if partitions_text is None:
        try:
            partitions_text = Path("/proc/partitions").read_text()
        except OSError:
            return []
    found: dict[str, dict] = {}
    for line in partitions_text.splitlines()[2:]:
        fields = line.split()
        if len(fields) != 4:
            continue
        name, blocks = fields[3], int(fields[2])
        if name.startswith(("ram", "zram")) or blocks == 0:
            continue
        disk_dir = sys_block / name
        if disk_dir.is_dir():
            entry = {"name": name, "size_bytes": blocks * 1024, "partitions": []}
            for attribute, key in (
                ("device/model", "model"),
                ("queue/rotational", "rotational"),
                ("loop/backing_file", "backing_file"),
            ):
                try:
                    entry[key] = (disk_dir / attribute).read_text().strip()
                except OSError:
                    pass
            found[name] = entry
        else:
            parent = next((d for d in found if name.startswith(d)), None)
            if parent is not None:
                found[parent]["partitions"].append({"name": name, "size_bytes": blocks * 1024})
    return list(found.values())


def peakbench_version() -> str:
    try:
        return metadata.version("peakbench")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024  # the kernel reports kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    return None


def mount_of(path: str, mountinfo: str | None = None) -> dict | None:
    """The mount holding `path`: the longest mount point that is a prefix of it.

    /proc/self/mountinfo lines read (proc(5)):
      36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
      id parent dev root mount-point options [optional...] - fstype source super-options
    Later lines win a tie, as a later mount hides an earlier one at the same place.
    """
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    real = os.path.realpath(path)
    best = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 3:
            continue
        mount_point = _unescape(fields[4])
        inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
        if inside and (best is None or len(mount_point) >= len(best["mount_point"])):
            best = {
                "mount_point": mount_point,
                "fs_type": tail[0],
                "device": _unescape(tail[1]),
                "mount_options": fields[5],
                "super_options": tail[2],
            }
    return best


def _unescape(text: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes (\040 ...).
    for code in ("040", "011", "012", "134"):
        text = text.replace("\\" + code, chr(int(code, 8)))
    return text
