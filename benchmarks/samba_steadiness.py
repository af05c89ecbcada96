"""How steady is smbd's mean response from one fixed-rate trial to the next, per setup: which
real-time share (`samba_server.py --realtime --cpu-percent`) and how many SMB connections
(the target's `conns`) make careful searches of Samba's peak settle in fewest trials
(BENCHMARKS.md §13).

    python3 benchmarks/samba_steadiness.py --workdir DIR --port P --runtime 30 --rounds 3 \\
        --setup 30:1:190 --setup 60:4:400 ... --json out.json

Each --setup is SHARE:CONNS:RATE. Every round runs each setup once, interleaved, restarting
smbd in DIR when the share changes (DIR/share, a file set prepared beforehand, is kept), and
runs `peakbench run specsfs2008-cifs` with the engine wrapper the hook writes (real-time below
smbd). Per trial it records R̄, p50, p99, readdir's mean, failures, smbd's CPU share over the
trial (its parent's reaped children plus the live ones, from /proc) and the load average at the
start; per setup, the median R̄, its range and the coefficient of variation over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "peakbench-Samba-1"  # tests/samba.py's


def smbd_cpu_s(parent: int) -> float:
    """CPU seconds of smbd's parent, its reaped children and its live children."""
    tick = os.sysconf("SC_CLK_TCK")

    def fields(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    f = fields(parent)
    total = sum(int(x) for x in f[11:15])  # utime, stime, cutime, cstime
    kids = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True, timeout=10).stdout.split()
    for kid in kids:
        try:
            total += sum(int(x) for x in fields(int(kid))[11:13])
        except FileNotFoundError:
            pass
    return total / tick


def start_smbd(workdir: Path, port: int, share: float) -> int:
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks/samba_server.py"), "start", "--workdir", str(workdir)]
        + ["--port", str(port), "--cpu-percent", f"{share:g}", "--realtime"],
        check=True,
        timeout=120,
    )
    return int((workdir / "smbd.pid").read_text())


def trial(workdir: Path, port: int, parent: int, conns: int, rate: float, runtime: float, seed: int) -> dict:
    out = workdir.parent / f"{workdir.name}-trial.json"
    target = f"smb://root:{PASSWORD}@127.0.0.1:{port}/share" + (f"?conns={conns}" if conns > 1 else "")
    env = {**os.environ, "PEAKBENCH_ENGINE": str(workdir / "peakbench-engine"), "PYTHONPATH": str(REPO / "python")}
    load = Path("/proc/loadavg").read_text().split()[:3]
    cpu0, t0 = smbd_cpu_s(parent), time.monotonic()
    subprocess.run(
        ["nice", "-n", "-5", sys.executable, "-m", "peakbench.cli", "run", "specsfs2008-cifs"]
        + ["--target", target, "--rate", f"{rate:g}", "--runtime", f"{runtime:g}", "--warmup", "5"]
        + ["--seed", str(seed), "--db", str(workdir.parent / f"{workdir.name}-trials.db"), "--json", str(out)],
        check=True,
        timeout=runtime + 300,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # the per-connection smbd exits and is reaped
    cpu_share = (smbd_cpu_s(parent) - cpu0) / (time.monotonic() - t0)
    r = json.loads(out.read_text())
    return {
        "rate": rate,
        "achieved_rate": r["achieved_rate"],
        "mean_ms": r["latency"]["mean_ms"],
        "quarters_mean_ms": r["latency"]["quarters_mean_ms"],
        "p50_ms": r["latency"]["p50_ms"],
        "p99_ms": r["latency"]["p99_ms"],
        "readdir_mean_ms": r["ops"]["readdir"]["mean_ms"],
        "failed_share": r["outcomes"]["failed_share"],
        "smbd_cpu_share": round(cpu_share, 4),
        "files": r["fileset"]["files"],
        "load_average_at_start": load,
        "at": time.strftime("%H:%M:%S", time.gmtime()),
    }


def summary(means: list[float]) -> dict:
    m = statistics.mean(means)
    return {
        "n": len(means),
        "median_ms": statistics.median(means),
        "range_ms": [min(means), max(means)],
        "max_over_min": max(means) / min(means),
        "cv": statistics.stdev(means) / m if len(means) > 1 else None,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--runtime", type=float, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1, help="round r's trials use seed + r - 1, the same for every setup")
    p.add_argument("--setup", action="append", required=True, help="SHARE:CONNS:RATE")
    p.add_argument("--json", type=Path, required=True)
    a = p.parse_args(argv)
    try:
        setups = [(float(s), int(c), float(r)) for s, c, r in (x.split(":") for x in a.setup)]
    except ValueError:
        p.error("--setup must be SHARE:CONNS:RATE, e.g. 30:1:190")
    runs: list[dict] = []
    share_running = None
    parent = 0
    try:
        for rnd in range(1, a.rounds + 1):
            for share, conns, rate in setups:
                if share != share_running:
                    parent, share_running = start_smbd(a.workdir, a.port, share), share
                t = trial(a.workdir, a.port, parent, conns, rate, a.runtime, a.seed + rnd - 1)
                runs.append({"round": rnd, "share": share, "conns": conns, **t})
                print(json.dumps(runs[-1]), flush=True)
    finally:
        subprocess.run(
            [sys.executable, str(REPO / "benchmarks/samba_server.py"), "stop", "--workdir", str(a.workdir)], timeout=120
        )
    per_setup = {
        f"{s:g}% share, {c} conn, {r:g} ops/s": summary(
            [x["mean_ms"] for x in runs if (x["share"], x["conns"], x["rate"]) == (s, c, r)]
        )
        for s, c, r in setups
    }
    a.json.write_text(json.dumps({"runtime_s": a.runtime, "seed": a.seed, "setups": per_setup, "runs": runs}, indent=1))
    for k, v in per_setup.items():
        print(k, json.dumps(v))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
