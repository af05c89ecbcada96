"""Monitors during each measured run, sampled from /proc: CPU, memory, disk I/O of
the target's device, and CPU time of named server processes (Auto-pilot's nfsd
measurement). A sampler thread reads them every interval; `summary()` gives the
deltas and averages that are stored with the run (and become mon_* metrics, so
getstats, outliers and the leak check see them), `samples` the time series.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_SECTOR = 512


def cpu_times(text: str | None = None) -> dict:
    """Jiffies of the `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal."""
    text = text if text is not None else Path("/proc/stat").read_text()
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
            return dict(zip(names, fields + [0] * (len(names) - len(fields))))
    return {}


def memory(text: str | None = None) -> dict:
    """MemTotal, MemFree, MemAvailable, Cached, Dirty... in bytes."""
    text = text if text is not None else Path("/proc/meminfo").read_text()
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and name in ("MemTotal", "MemFree", "MemAvailable", "Cached", "Dirty", "Buffers", "Writeback"):
            out[name] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    return out


def disk_stats(device: str, text: str | None = None) -> dict | None:
    """/proc/diskstats for one device name (sda, loop3): reads, sectors read, writes, sectors written, io ms."""
    text = text if text is not None else Path("/proc/diskstats").read_text()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 14 and fields[2] == device:
            return {
                "reads": int(fields[3]),
                "read_bytes": int(fields[5]) * _SECTOR,
                "writes": int(fields[7]),
                "write_bytes": int(fields[9]) * _SECTOR,
                "io_ms": int(fields[12]),
            }
    return None


def process_cpu(names: list[str], proc: Path = Path("/proc")) -> dict[str, float]:
    """CPU seconds (user + system) used so far by all processes whose name (comm) is in `names`."""
    totals = {name: 0.0 for name in names}
    if not names:
        return totals
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm in totals:
            fields = stat[stat.rindex(")") + 2 :].split()
            # fields[11], [12] are utime, stime (the 14th and 15th of the whole line)
            totals[comm] += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return totals


def device_of(path: str | None) -> str | None:
    """The block device name (as /proc/diskstats has it) under a path, if there is one."""
    if not path:
        return None
    from ..sysinfo import mount_of

    mount = mount_of(path)
    if not mount or not mount["device"].startswith("/dev/"):
        return None
    real = os.path.realpath(mount["device"])
    return os.path.basename(real)


class Monitor:
    def __init__(self, interval_s: float = 0.5, device: str | None = None, processes: list[str] | None = None):
        self.interval_s = max(0.05, interval_s)
        self.device = device
        self.processes = list(processes or [])
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start: dict | None = None
        self._t0 = 0.0

    def _sample(self) -> dict:
        sample = {"t": time.monotonic() - self._t0, "cpu": cpu_times(), "mem": memory()}
        if self.device:
            sample["disk"] = disk_stats(self.device)
        if self.processes:
            sample["proc_cpu"] = process_cpu(self.processes)
        return sample

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._start = self._sample()
        self.samples = [self._start]
        self._thread = threading.Thread(target=self._loop, daemon=True, name="peakbench-monitor")
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.samples.append(self._sample())
            except OSError:
                pass

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.samples.append(self._sample())
        return self.summary()

    def summary(self) -> dict:
        first, last = self.samples[0], self.samples[-1]
        out: dict = {"interval_s": self.interval_s, "samples": len(self.samples), "seconds": last["t"] - first["t"]}
        c0, c1 = first["cpu"], last["cpu"]
        total = sum(c1.values()) - sum(c0.values())
        if total > 0:
            busy = total - (c1["idle"] - c0["idle"]) - (c1["iowait"] - c0["iowait"])
            out["cpu_busy_pct"] = 100 * busy / total
            out["cpu_iowait_pct"] = 100 * (c1["iowait"] - c0["iowait"]) / total
            out["cpu_system_pct"] = 100 * (c1["system"] - c0["system"]) / total
        available = [s["mem"].get("MemAvailable") for s in self.samples if s["mem"].get("MemAvailable")]
        if available:
            out["mem_available_min_mb"] = min(available) / 2**20
            out["mem_available_end_mb"] = available[-1] / 2**20
        if last["mem"].get("MemFree") is not None:
            out["mem_free_end_mb"] = last["mem"]["MemFree"] / 2**20
        if self.device and first.get("disk") and last.get("disk"):
            d0, d1 = first["disk"], last["disk"]
            out["device"] = self.device
            out["disk_read_mb"] = (d1["read_bytes"] - d0["read_bytes"]) / 1e6
            out["disk_write_mb"] = (d1["write_bytes"] - d0["write_bytes"]) / 1e6
            out["disk_reads"] = d1["reads"] - d0["reads"]
            out["disk_writes"] = d1["writes"] - d0["writes"]
            out["disk_busy_pct"] = 100 * (d1["io_ms"] - d0["io_ms"]) / 1000 / max(out["seconds"], 1e-9)
        if self.processes:
            out["proc_cpu_s"] = {name: last["proc_cpu"][name] - first["proc_cpu"][name] for name in self.processes}
        return out

    def series(self) -> list[dict]:
        """The samples, compact: time, cpu busy % since the previous sample, available memory MB."""
        rows = []
        for before, after in zip(self.samples, self.samples[1:]):
            total = sum(after["cpu"].values()) - sum(before["cpu"].values())
            idle = (after["cpu"]["idle"] - before["cpu"]["idle"]) + (after["cpu"]["iowait"] - before["cpu"]["iowait"])
            row = {
                "t": round(after["t"], 3),
                "cpu_busy_pct": round(100 * (total - idle) / total, 2) if total else None,
                "mem_available_mb": round(after["mem"].get("MemAvailable", 0) / 2**20, 1),
            }
            if after.get("disk") and before.get("disk"):
                row["disk_write_mb"] = round((after["disk"]["write_bytes"] - before["disk"]["write_bytes"]) / 1e6, 3)
                row["disk_read_mb"] = round((after["disk"]["read_bytes"] - before["disk"]["read_bytes"]) / 1e6, 3)
            rows.append(row)
        return rows


def monitor_metrics(summary: dict) -> dict:
    """The monitor's numbers as run metrics (mon_*), for getstats, outliers and the leak check."""
    metrics = {}
    for key in (
        "cpu_busy_pct",
        "cpu_iowait_pct",
        "mem_available_end_mb",
        "mem_free_end_mb",
        "disk_read_mb",
        "disk_write_mb",
        "disk_busy_pct",
    ):
        if key in summary:
            metrics[f"mon_{key}"] = float(summary[key])
    for name, seconds in summary.get("proc_cpu_s", {}).items():
        metrics[f"mon_cpu_s_{name}"] = float(seconds)
    return metrics
