"""System calls and context switches per SMB op (perf stat), engines alternated at fixed offered rates.

python3 benchmarks/smb_syscalls.py ENGINE,ENGINE ECHO_RATE GETATTR_RATE READ_RATE SECONDS RUNS [OUTPUT.json]
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "python"))
import smb_client_cpu as b  # noqa: E402
from samba import Samba  # noqa: E402

engines = sys.argv[1].split(",")
rates = dict(echo=float(sys.argv[2]), getattr=float(sys.argv[3]), read4k=float(sys.argv[4]))
secs = float(sys.argv[5])
runs = int(sys.argv[6])
EV = "task-clock,context-switches,user_time,system_time,raw_syscalls:sys_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_ppoll,syscalls:sys_enter_poll,syscalls:sys_enter_futex,syscalls:sys_enter_clock_nanosleep,syscalls:sys_enter_nanosleep,syscalls:sys_enter_sched_yield"
ROWS = []
with Samba() as server:
    url = server.url("engine")
    for run in range(runs):
        for op in ("echo", "getattr", "read4k"):
            for engine in engines:
                spec = b.trial_spec(url, op, rates[op], secs)
                subprocess.run(
                    [engine, "prepare", "-"], input=json.dumps(spec), capture_output=True, text=True, check=True
                )
                with tempfile.NamedTemporaryFile() as f:
                    p = subprocess.run(
                        ["perf", "stat", "-x,", "-e", EV, "-o", f.name, "--", engine, "run", "-"],
                        input=json.dumps(spec),
                        capture_output=True,
                        text=True,
                    )
                    txt = open(f.name).read()
                r = json.loads(p.stdout)
                ok = r["outcomes"]["succeeded"]
                c = {}
                for line in txt.splitlines():
                    x = line.split(",")
                    if len(x) > 2 and x[0].replace(".", "").isdigit():
                        c[x[2].split(":")[-1]] = float(x[0])
                per = {k.replace("sys_enter_", ""): round(v / ok, 2) for k, v in c.items()}
                per["task-clock"] = round(c["task-clock"] * 1e3 / ok, 1)
                ROWS.append(
                    {
                        "run": run,
                        "op": op,
                        "engine": engine,
                        "offered": rates[op],
                        "achieved_rate": r["achieved_rate"],
                        "mean_ms": r["latency"]["mean_ms"],
                        "per_op": per,
                        "load": os.getloadavg(),
                    }
                )
                print(
                    run,
                    op,
                    engine.split("/")[2],
                    "rate",
                    round(r["achieved_rate"]),
                    "mean_ms",
                    round(r["latency"]["mean_ms"], 2),
                    per,
                    flush=True,
                )

if len(sys.argv) > 7:
    open(sys.argv[7], "w").write(json.dumps({"argv": sys.argv[1:], "events": EV, "rows": ROWS}, indent=1) + "\n")
