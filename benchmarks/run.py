#!/usr/bin/env python3
"""peakbench performance benchmarks (issue 2, "Benchmarks"). Not part of the test suite.

    python3 benchmarks/run.py [--max-wait S] [--engine PATH] [floor|posix|openloop|memory|cluster|nfs|http|https|parser|realsearch|all]

--max-wait S   wait up to S seconds (default 300) for other work to leave the CPUs idle before
               each benchmark; the load seen is recorded in the result either way.
--engine PATH  benchmark another engine binary (e.g. an older commit) instead of building
               engine/; results go to benchmarks/results/<name>.<binary sha256 prefix>.json.

Each benchmark prints a table and writes benchmarks/results/<name>.json with the
machine it ran on. Peers (fio, a raw system-call loop) run in the same invocation,
so quote ratios: these machines are shared and noisy. `posix` measures the highest open-loop rate the
engine keeps to its schedule, then the per-op cost in three closed-loop rounds beside fio and the raw loop. Needs root for `openloop`
(loop device, mount, cgroup v1 blkio), as does `realsearch` (issue 3: a quick search
against a dense sweep of a throttled ext4), and fio 3.33 for `posix` and `openloop`
(`apt-get install -y fio`), nginx and wrk for `http` (`apt-get install -y nginx wrk`).
`nfs` starts nfs-ganesha and rpcbind (tests/ganesha.py; root) and builds its peers: the
nfs3_client crate (benchmarks/peers/nfs3client, cargo) and libnfs's asynchronous API
(benchmarks/peers/libnfs_bench.c; libnfs-dev). PB_NFS_BASELINE=PATH adds rows for another
engine binary (e.g. the previous commit's) to every round, for an A/B in the same run;
PB_NFS_OPS (default "null,getattr,read4k") chooses the ops of the nfs-ganesha rows (each op also
at 16 in flight, beside libnfs at 16, with CPU per op over libnfs's in every round; a row compared
with a peer runs next to the peer's row, every other round runs the plan backwards, and every row
records the share of its client CPU that other processes took meanwhile);
PB_NFS_RECV_WAIT_US (default "200") lists the fixed receive moderation waits of the nfs-ganesha rows
that use one, beside the default (adaptive) and the wait off (the canned-reply responder adds one row
with a 200 µs wait beside its default one).
PB_HTTP_BASELINE=PATH does the same for `http` (the closed-loop rounds and the overloaded open-loop run).
Every subprocess runs under a timeout.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# The runner only: one module per benchmark in benchmarks/bench/, shared helpers in benchmarks/common.py.
import common
from bench import cluster, floor, http, https, memory, nfs, openloop, parser, posix, realsearch


def wait_for_quiet(max_wait_s: float = 300, busy_below: float = 0.15) -> dict:
    """Wait (bounded) until other work, in this VM or stolen by its host, leaves the CPUs nearly idle; report what was seen."""
    t0 = time.monotonic()
    while True:
        before = common.cpu_times()
        time.sleep(2.0)
        seen = common.cpu_share(before, common.cpu_times())
        if seen["busy"] + seen["steal"] < busy_below or time.monotonic() - t0 >= max_wait_s:
            break
    waited = time.monotonic() - t0
    if seen["busy"] + seen["steal"] >= busy_below:
        print(
            f"  warning: CPUs still {seen['busy']:.0%} busy and {seen['steal']:.0%} stolen after waiting {waited:.0f} s; figures will be noisy"
        )
    return {
        "before": seen,
        "waited_s": round(waited, 1),
        "loadavg_before": Path("/proc/loadavg").read_text().split()[:3],
    }


BENCHMARKS = {
    "floor": floor.bench_floor,
    "posix": posix.bench_posix,
    "openloop": openloop.bench_openloop,
    "memory": memory.bench_memory,
    "cluster": cluster.bench_cluster,
    "nfs": nfs.bench_nfs,
    "http": http.bench_http,
    "https": https.bench_https,
    "parser": parser.bench_parser,
    "realsearch": realsearch.bench_realsearch,
}


def main(argv: list[str]) -> int:
    args = list(argv)
    engine_override = None
    if "--engine" in args:  # benchmark another build, e.g. an older commit: results/<name>.<sha>.json
        i = args.index("--engine")
        engine_override = Path(args[i + 1]).resolve()
        del args[i : i + 2]
    max_wait = 300.0
    if "--max-wait" in args:  # seconds to wait for other work to leave the CPUs before each benchmark
        i = args.index("--max-wait")
        max_wait = float(args[i + 1])
        del args[i : i + 2]
    which = args[0] if args else "all"
    if which not in (*BENCHMARKS, "all") or len(args) > 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if engine_override:
        common.ENGINE = engine_override
    else:
        common.build_engine()
    common.MACHINE.update(common.machine_info())
    print("machine: " + ", ".join(f"{k}={v}" for k, v in common.MACHINE.items()))
    for name in BENCHMARKS if which == "all" else [which]:
        result_name = name if not engine_override else f"{name}.{common.MACHINE['engine_sha256'][:8]}"
        common.LOAD[result_name] = wait_for_quiet(max_wait)
        print(f"  machine load before {name}: {common.LOAD[result_name]}")
        common.LOAD[result_name]["_times"] = common.cpu_times()
        BENCHMARKS[name](result_name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
