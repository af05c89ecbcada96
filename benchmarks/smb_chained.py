"""Readdir and the other ops of several round trips, pipelined or blocking: specsfs2008-cifs (its own file set,
1,000-name directories, readdir 8.6% of ops) at a fixed rate against a private smbd, engines alternated in each
round, each run either steady or with smbd stopped (SIGSTOP) for a second mid-run. Per run: sender threads, the
most threads /proc showed, CPU per op in the measured window, mean latency of all ops and of readdir, and ops
without success.

    python3 benchmarks/smb_chained.py ROUNDS RATE SECONDS name=ENGINE,name=ENGINE OUTPUT.json [TIMEOUT]

TIMEOUT (an smb:// URL's timeout, e.g. 300ms; default 5s) shorter than the stall makes the requests sent meanwhile
time out: then only stalled runs are made, to count the timeouts.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "python"))
import test_smb as t  # noqa: E402
from peakbench.targets import parse_target  # noqa: E402
from peakbench.workload import find_workload, trial_spec  # noqa: E402
from samba import Samba  # noqa: E402

rounds, rate, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
engines = dict(arg.split("=", 1) for arg in sys.argv[4].split(","))
timeout = sys.argv[6] if len(sys.argv) > 6 else None
stalls = (True,) if timeout else (False, True)
rows = []
started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
with Samba() as samba:
    specs = {}
    for name, eng in engines.items():
        spec = trial_spec(
            find_workload("specsfs2008-cifs"),
            parse_target(samba.url(f"chained-{name}", options=f"timeout={timeout}" if timeout else "")),
            rate=rate,
            warmup_s=1,
            runtime_s=seconds,
        )
        t._engine(Path(eng), "prepare", spec)
        specs[name] = spec
    for run in range(rounds):
        for stall in stalls:
            for name, eng in engines.items():
                r, peak = t._sampled_run(Path(eng), specs[name], samba, pause_at_s=1 + seconds / 2 if stall else None)
                ops = r["ops"]
                count = sum(o["count"] for o in ops.values())
                row = {
                    "run": run,
                    "engine": name,
                    "stall": stall,
                    "achieved_rate": r["achieved_rate"],
                    "count": count,
                    "not_succeeded": count - sum(o["successes"] for o in ops.values()),
                    "timeouts": sum(o["timeouts"] for o in ops.values()),
                    "sender_threads": r["outstanding"]["threads"],
                    "peak_threads": peak,
                    "window_cpu_us_per_op": 1e6 * r["window_cpu_s"] / (r["achieved_rate"] * seconds),
                    "mean_ms": r["latency"]["mean_ms"],
                    "p99_ms": r["latency"]["p99_ms"],
                    "readdir_mean_ms": ops["readdir"]["mean_ms"],
                    "readdir_count": ops["readdir"]["count"],
                    "load": os.getloadavg(),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
commit = subprocess.run(
    ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
).stdout.strip()
machine = {"date_utc": started, "git_commit": commit, "cores": os.cpu_count()}
doc = {"benchmark": "smb_chained", "machine": machine, "argv": sys.argv[1:], "rows": rows}
Path(sys.argv[5]).write_text(json.dumps(doc, indent=1) + "\n")
