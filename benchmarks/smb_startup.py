"""The SMB start-up case: test_smb's 50 files of 4 KiB, 3000 reads/s for 1 s from a fresh engine (each
file's first read opens it), engines alternated in each round; mean latency and sender threads per run.

    python3 benchmarks/smb_startup.py RUNS name=ENGINE,name=ENGINE OUTPUT.json
"""

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "python"))
import test_smb as t  # noqa: E402
from samba import Samba  # noqa: E402

engines = dict(arg.split("=", 1) for arg in sys.argv[2].split(","))
rows = []
with Samba() as samba:
    for run in range(int(sys.argv[1])):
        for name, eng in engines.items():
            spec = t._spec(samba.url(f"startup{run}{name}"), {"read": 1.0}, rate=3000, runtime_s=1.0)
            t._engine(Path(eng), "prepare", spec)
            r = t._engine(Path(eng), "run", spec)
            rd = r["ops"]["read"]
            row = {
                "run": run,
                "engine": name,
                "achieved_rate": r["achieved_rate"],
                "count": rd["count"],
                "successes": rd["successes"],
                "errors": rd["errors"],
                "timeouts": rd["timeouts"],
                "threads": r["outstanding"]["threads"],
                "outstanding_max": r["outstanding"]["max"],
                "mean_ms": r["latency"]["mean_ms"],
                "p99_ms": r["latency"]["p99_ms"],
                "max_ms": r["latency"]["max_ms"],
                "load": os.getloadavg(),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
Path(sys.argv[3]).write_text(json.dumps({"argv": sys.argv[1:], "rows": rows}, indent=1) + "\n")
