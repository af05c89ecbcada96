"""Helpers shared by the benchmarks (benchmarks/run.py and the scripts beside it): running processes under a
timeout with their resource usage, machine and CPU-load records, results files and tables, engine trials, and
the peers (fio, the raw system-call loop, wrk) more than one benchmark measures against.

ENGINE, MACHINE and LOAD are set by the runner; read them as `common.ENGINE` so an `--engine` override is seen."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT / "python"))  # the checkout's peakbench, installed or not
from peakbench.contract import SPEC_SCHEMA, SPEC_SCHEMA_V2  # noqa: E402, F401  (V2: re-exported to the benchmarks)

ENGINE = ROOT / "engine" / "target" / "release" / "peakbench-engine"
MANIFEST = ".peakbench-manifest.json"


# The Fstress-like mix from engine/SPEC.md, for a "realistic" row beside the single-op ones.
EXAMPLE_MIX = {"getattr": 0.55, "read": 0.28, "lookup": 0.14, "readdir": 0.01, "fsstat": 0.01, "access": 0.01}


@dataclass
class Proc:
    cmd: list[str]
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # user + system of the process and every descendant it waited for
    maxrss_kib: int


def run(
    cmd,
    *,
    timeout: float,
    input: str | None = None,
    cgroup: Path | None = None,
    cpus: set[int] | None = None,
    check: bool = True,
    env_extra: dict | None = None,
    watch=None,
    cwd: Path | None = None,
) -> Proc:
    """Run a command, bounded by `timeout`, and return its output and its own resource usage (wait4).
    `watch(pid)`, if given, is called every 20 ms while it runs (to sample /proc/PID); `cwd`: where it runs."""
    cmd = [str(c) for c in cmd]

    def setup():
        os.setsid()  # own process group: a timeout kills everything it started
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
        t0 = time.monotonic()
        env = {**os.environ, **env_extra} if env_extra else None
        p = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, text=True, preexec_fn=setup, env=env, cwd=cwd)
        if input is not None:
            p.stdin.write(input)
            p.stdin.close()
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(p.pid, signal.SIGKILL)
                os.wait4(p.pid, 0)
                raise RuntimeError(f"timed out after {timeout:.0f} s: {' '.join(cmd)[:200]}")
            if watch is not None:
                watch(p.pid)
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from reaping again
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        proc = Proc(cmd, p.returncode, out.read(), err.read(), wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss)
    if check and proc.rc != 0:
        raise RuntimeError(f"exit {proc.rc}: {' '.join(cmd)[:200]}\n{proc.stderr[-2000:]}")
    return proc


def sh(*cmd, timeout: float = 60) -> str:
    return run(cmd, timeout=timeout).stdout.strip()


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text())
    except (OSError, ValueError):
        return None


def machine_info(engine: bool = True) -> dict:
    """This machine, the checkout and (unless `engine` is False, for scripts that run none) the engine's build."""
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    git = lambda *a: run(["git", "-C", ROOT, *a], timeout=30, check=False).stdout.strip()  # noqa: E731
    info = {
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "hostname": platform.node(),
        "git_commit": git("rev-parse", "--short", "HEAD"),
        "python": platform.python_version(),
        # With autogroup on, `nice` only ranks processes within one session: a neighbour's nice 19 build still
        # takes a core's fair share from the benchmark (seen 2026-12-07), so the setting is recorded.
        "sched_autogroup": _read_int("/proc/sys/kernel/sched_autogroup_enabled"),
    }
    if engine:
        info["engine"] = run([ENGINE, "--version"], timeout=10).stdout.strip()
        info["engine_sha256"] = hashlib.sha256(ENGINE.read_bytes()).hexdigest()[:16]
        info["engine_src_dirty"] = bool(git("status", "--porcelain", "engine"))
    if shutil.which("fio"):
        info["fio"] = run(["fio", "--version"], timeout=10).stdout.strip()
    return info


def cpu_times() -> list[int]:
    """Aggregate /proc/stat jiffies: user nice system idle iowait irq softirq steal ..."""
    return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def cpu_busy_s(cpus: set[int]) -> float:
    """Busy seconds (not idle, iowait or steal) of some CPUs since boot, from /proc/stat."""
    busy = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            v = [int(x) for x in fields]
            busy += sum(v) - v[3] - v[4] - v[7]
    return busy / os.sysconf("SC_CLK_TCK")


def cpu_share(before: list[int], after: list[int]) -> dict:
    """Between two cpu_times() samples: the share of all CPUs busy (not idle, iowait or steal) and stolen by the host."""
    d = [b - a for a, b in zip(before, after)]
    total = max(sum(d), 1)
    return {"busy": round(1 - (d[3] + d[4] + d[7]) / total, 3), "steal": round(d[7] / total, 3)}


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    doc = {
        "benchmark": name,
        "command": "python3 benchmarks/run.py " + " ".join(sys.argv[1:]),
        "machine": MACHINE,
        "load": {
            **{k: v for k, v in LOAD.get(name, {}).items() if k != "_times"},
            "during": cpu_share(LOAD.get(name, {}).get("_times", cpu_times()), cpu_times()),  # includes our own work
            "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        },
        **payload,
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"  -> {path.relative_to(ROOT)}")
    return path


def fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        if abs(v) >= 0.01:
            return f"{v:.3f}"
        return f"{v:.2g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(title: str, rows: list[dict], columns: list[str] | None = None) -> None:
    if not rows:
        return
    columns = columns or list(rows[0])
    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}")
    print("  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for row in cells:
        print("  " + "  ".join(v.rjust(w) for v, w in zip(row, widths)))


def header(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 70 - len(text)), flush=True)


def build_engine() -> None:
    run(["cargo", "build", "--release", "--quiet", "--manifest-path", ROOT / "engine" / "Cargo.toml"], timeout=600)
    if not ENGINE.exists():
        raise RuntimeError(f"{ENGINE} missing after cargo build")


def fileset(files: int, size: int = 65536, **extra) -> dict:
    """A regular tree: 64 files and 8 subdirectories per directory, constant file size."""
    return {
        "seed": 42,
        "files": files,
        "files_per_dir": {"kind": "constant", "value": 64},
        "dirs_per_dir": {"kind": "constant", "value": 8},
        "max_depth": 4,
        "file_sizes": {"kind": "constant", "value": size},
        **extra,
    }


def trial_spec(
    target: dict,
    rate: float,
    mix: dict,
    fs: dict,
    *,
    runtime_s: float,
    warmup_s: float = 0.0,
    io_size: int = 4096,
    **load,
) -> dict:
    xfer = {"size": {"kind": "constant", "value": io_size}, "pattern": "random"}
    return {
        "schema": SPEC_SCHEMA,
        "target": target,
        "seed": 1,
        "load": {"rate": rate, "warmup_s": warmup_s, "runtime_s": runtime_s, **load},
        "fileset": fs,
        "mix": mix,
        "read": xfer,
        "write": xfer,
    }


@dataclass
class Trial:
    spec: dict
    result: dict
    progress: list[dict] = field(default_factory=list)
    proc: Proc | None = None

    @property
    def rate(self) -> float:
        return self.result["requested_rate"]

    @property
    def achieved(self) -> float:
        return self.result["achieved_rate"]

    def ops(self) -> int:
        """Requests executed in the whole run (warm-up and measured window)."""
        return round(self.result["completed"] + self.rate * self.result.get("warmup_s", 0))

    def per_cpu_s(self) -> float:
        return self.ops() / max(self.result["engine_cpu_s"], 1e-9)

    def summary(self) -> dict:
        r = self.result
        return {
            "requested": self.rate,
            "achieved": self.achieved,
            "saturated": r["generator_saturated"],
            "lag_p99_ms": r["schedule_lag"]["p99_ms"],
            "lat_mean_ms": r["latency"]["mean_ms"],
            "lat_p99_ms": r["latency"]["p99_ms"],
            "cpu_s": r["engine_cpu_s"],
            "ops_per_cpu_s": self.per_cpu_s(),
            "rss_kib": r["peak_rss_kib"],
        }


def engine(command: str, spec: dict, *, timeout: float | None = None, binary: Path | None = None, **kw) -> Trial:
    load = spec["load"]
    timeout = timeout or load.get("warmup_s", 0) + load["runtime_s"] + load.get("drain_timeout_s", 10) + 120
    proc = run([binary or ENGINE, command, "-"], input=json.dumps(spec), timeout=timeout, **kw)
    progress = []
    for line in proc.stderr.splitlines():
        try:
            progress.append(json.loads(line))
        except ValueError:
            pass
    return Trial(spec, json.loads(proc.stdout), progress, proc)


def find_ceiling(
    trial, passes, *, start: float, grow: float, max_steps: int, refine: int, retries: int = 1
) -> tuple[Trial | None, list[Trial]]:
    """Step the rate geometrically (up from `start` while trials pass, down while they fail), then
    bisect between the highest pass and the lowest failure. A failing rate is retried `retries`
    times before it counts as a failure: on a shared machine a neighbour's burst can fail one trial."""
    trials: list[Trial] = []

    def attempt(rate: float, note: str = "") -> tuple[Trial, bool]:
        for i in range(1 + retries):
            t = trial(rate)
            trials.append(t)
            ok = passes(t)
            print(
                f"  {rate:>12,.0f} ops/s -> achieved {t.achieved:>12,.0f}  lag p99 {t.result['schedule_lag']['p99_ms']:8.3f} ms  "
                f"cpu {t.result['engine_cpu_s']:6.2f} s  {'pass' if ok else 'FAIL'}{note}{' (retry)' if i else ''}",
                flush=True,
            )
            if ok:
                return t, True
        return t, False

    best, fail, rate = None, None, start
    for _ in range(max_steps):
        t, ok = attempt(rate)
        if ok:
            best = t
            if fail is not None:
                break
            rate *= grow
        else:
            fail = rate
            if best is not None:
                break
            rate /= grow
    for _ in range(refine if best is not None and fail is not None else 0):
        t, ok = attempt(round((best.rate + fail) / 2), " (refine)")
        if ok:
            best = t
        else:
            fail = t.rate
    return best, trials


def keeps_up(t: Trial, tolerance: float = 0.02) -> bool:
    """Achieved ≈ requested and the generator kept its schedule."""
    return t.achieved >= (1 - tolerance) * t.rate and not t.result["generator_saturated"]


def fio(args: list[str], *, timeout: float, **kw) -> tuple[dict, Proc]:
    proc = run(["fio", "--output-format=json", *args], timeout=timeout, **kw)
    text = proc.stdout
    return json.loads(text[text.index("{") :]), proc  # fio prints notes such as "opendir added N files" first


def build_rawloop(workdir: Path) -> Path:
    exe = workdir / "rawloop"
    run(["cc", "-O2", "-Wall", "-o", exe, BENCH / "rawloop.c"], timeout=60)
    return exe


def list_files(target: Path) -> tuple[Path, list[str]]:
    """The files peakbench prepared: everything under the target except its manifest, relative to the file-set root."""
    roots = [d for d in target.iterdir() if d.is_dir()]
    assert len(roots) == 1, f"expected one file set under {target}, found {roots}"
    files = sorted(
        str(Path(dp, f).relative_to(roots[0])) for dp, _, fs in os.walk(roots[0]) for f in fs if f != MANIFEST
    )
    return roots[0], files


def drop_page_cache() -> None:
    """Write back, then drop clean page-cache pages (inodes and dentries stay cached)."""
    sh("sync")
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def flat_out(run_trial, spec: dict, repeats: int, server_pid: int | None = None) -> list[dict]:
    """`repeats` trials of `spec` offered far above what can be sent, slowest first; each result gets the
    CPU-seconds the server (a process and its children, e.g. nginx's master and workers) spent in it."""
    results = []
    for _ in range(repeats):
        before = process_tree_cpu_s(server_pid) if server_pid else 0.0
        result = run_trial(spec)
        results.append({**result, "server_cpu_s": process_tree_cpu_s(server_pid) - before if server_pid else None})
    return sorted(results, key=lambda r: r["achieved_rate"])


def process_tree_cpu_s(pid: int) -> float:
    import psutil

    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in (root, *root.children(recursive=True)))


def wrk(url: str, connections: int, seconds: float, cpus: set[int]) -> dict:
    proc = run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", url], timeout=seconds + 60, cpus=cpus)
    requests = errors = 0
    mean_ms = p99_ms = None
    for line in proc.stdout.splitlines():
        words = line.split()
        if "requests in" in line:
            requests = int(words[0])
        elif line.strip().startswith("Non-2xx") or line.strip().startswith("Socket errors"):
            errors += sum(int(w.rstrip(",")) for w in words if w.rstrip(",").isdigit())
        elif words[:1] == ["Latency"] and words[1] != "Distribution":
            mean_ms = _ms(words[1])
        elif words[:1] == ["99%"]:
            p99_ms = _ms(words[1])
    return {
        "requests": requests,
        "rate": requests / seconds,
        "cpu_s": proc.cpu_s,
        "per_cpu_s": requests / max(proc.cpu_s, 1e-9),
        "errors": errors,
        "mean_ms": mean_ms,
        "p99_ms": p99_ms,
        "wall_s": proc.wall_s,
    }


def _ms(text: str) -> float:
    for unit, factor in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def median_range(values: list[float]) -> dict:
    return {"n": len(values), "median": statistics.median(values), "low": min(values), "high": max(values)}


MACHINE: dict = {}  # set by the runner: where the results were measured
LOAD: dict = {}  # benchmark -> what the machine was doing when it started
