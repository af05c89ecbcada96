"""`nfs`: NULL, GETATTR and 4 KiB READ against nfs-ganesha and a canned-reply responder, beside the nfs3_client
crate and libnfs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    BENCH,
    MANIFEST,
    ROOT,
    SPEC_SCHEMA_V2,
    cpu_busy_s,
    engine,
    fileset,
    header,
    run,
    save,
    table,
    trial_spec,
)

PEERS = BENCH / "peers"


NFS3CLIENT = PEERS / "nfs3client" / "target" / "release" / "nfs3client-bench"


def build_nfs_peers(workdir: Path) -> Path:
    run(["cargo", "build", "--release", "--quiet", "--manifest-path", PEERS / "nfs3client" / "Cargo.toml"], timeout=900)
    libnfs = workdir / "libnfs-bench"
    run(["cc", "-O2", "-o", libnfs, PEERS / "libnfs_bench.c", "-lnfs"], timeout=120)
    return libnfs


def _threads(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def pin(pid: int, cpus: set[int]) -> None:
    """Pin a process and all its threads."""
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


RESPONDER = PEERS / "nfs3client" / "target" / "release" / "rpc-responder"


# The NFS rows' one-op mixes, by row name.
NFS_MIXES = {"null": {"null": 1.0}, "getattr": {"getattr": 1.0}, "read4k": {"read": 1.0}}


def with_recv_wait(target: dict, recv_wait_us: float | None) -> dict:
    """An NFS target with a receive-moderation setting: None keeps the engine's default
    (adaptive), 0 turns it off, more is a fixed wait."""
    return target if recv_wait_us is None else {**target, "recv_wait_us": recv_wait_us}


def baseline_rows() -> list[tuple[str, Path]]:
    """The row label and binary of PB_NFS_BASELINE (another engine, for an A/B in the same run), if set."""
    baseline = os.environ.get("PB_NFS_BASELINE")
    return [(f"peakbench {Path(baseline).name}, 1 conn, 64 in flight", Path(baseline))] if baseline else []


def bench_nfs(name: str = "nfs") -> dict:
    """Two parts (PB_NFS_PARTS=ganesha,responder, default both): against nfs-ganesha,
    where the server saturates first, and against rpc-responder (canned replies, no
    file-system work), where the client does."""
    parts = os.environ.get("PB_NFS_PARTS", "ganesha,responder").split(",")
    out = {}
    if "ganesha" in parts:
        out["ganesha"] = bench_nfs_ganesha(name)
    if "responder" in parts:
        out["responder"] = bench_nfs_responder(name + "-responder")
    return out


def bench_nfs_responder(name: str) -> dict:
    """Client-bound: every client against a canned-reply MOUNT+NFSv3 responder pinned to
    CPU 1, the client on CPU 0, as fast as it can go."""
    header("nfs: client-bound, against a canned-reply responder, one client core")
    seconds = float(os.environ.get("PB_NFS_SECONDS", "5"))
    client_cpu, server_cpus = {0}, ({1} if (os.cpu_count() or 1) > 1 else {0})
    rounds = int(os.environ.get("PB_NFS_ROUNDS", "3"))
    with tempfile.TemporaryDirectory(prefix="pb-nfs-resp-") as tmp:
        libnfs = build_nfs_peers(Path(tmp))
        # The engine wants a prepared file set: prepare the same layout locally and let
        # the responder serve its manifest (every other name is one canned file).
        local = Path(tmp) / "local"
        local.mkdir()
        fs = fileset(64, size=1 << 20)
        engine(
            "prepare",
            trial_spec({"kind": "posix", "path": str(local)}, 1, {"getattr": 1.0}, fs, runtime_s=1),
            timeout=300,
        )
        responder = subprocess.Popen(
            [RESPONDER, "0", str(local / MANIFEST)],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, server_cpus),
        )
        try:
            port = int(responder.stdout.readline())
            tgt = {"kind": "nfs", "host": "127.0.0.1", "export": "/export", "port": port, "mount_port": port}
            rows, samples = [], {}

            def peakbench(op: str, depth: int, binary: Path | None = None, recv_wait_us: float | None = None):
                spec = trial_spec(
                    with_recv_wait(tgt, recv_wait_us),
                    2_000_000,
                    NFS_MIXES[op],
                    fs,
                    runtime_s=seconds,
                    warmup_s=0.0,
                    io_size=4096,
                    max_outstanding=depth,
                    drain_timeout_s=10.0,
                )
                r = engine("run", spec, cpus=client_cpu, binary=binary).result
                errors = sum(sum(o["errors"].values()) + o["timeouts"] for o in r["ops"].values())
                return r["completed"], seconds, r["engine_cpu_s"], errors

            def nfs3client(op: str, conns: int):
                args = [NFS3CLIENT, "127.0.0.1", "/export", op, conns, seconds] + (
                    ["bench-file"] if op != "null" else []
                )
                p = run(args, timeout=seconds + 120, cpus=client_cpu, env_extra={"NFS_PORT": str(port)})
                j = json.loads(p.stdout.strip().splitlines()[-1])
                return j["ops"], j["seconds"], p.cpu_s, 0

            def libnfs_run(op: str, depth: int):
                p = run(
                    [libnfs, "127.0.0.1", "/export", "bench-file", op, depth, seconds, port],
                    timeout=seconds + 120,
                    cpus=client_cpu,
                )
                j = json.loads(p.stdout.strip().splitlines()[-1])
                return j["ops"], j["seconds"], p.cpu_s, j["errors"]

            plan = []
            for op in ("null", "getattr", "read4k"):
                plan += [
                    ("peakbench, 1 conn, 64 in flight", op, lambda op=op: peakbench(op, 64)),
                    ("nfs3_client, 16 conns", op, lambda op=op: nfs3client(op, 16)),
                    ("libnfs async, 1 conn, 64 in flight", op, lambda op=op: libnfs_run(op, 64)),
                ]
                plan += [
                    (label, op, lambda op=op, binary=binary: peakbench(op, 64, binary))
                    for label, binary in baseline_rows()
                ]
                # Client-bound, every read finds many replies: the receive wait must not start.
                plan += [
                    (
                        "peakbench, 1 conn, 64 in flight, recv wait 200 us",
                        op,
                        lambda op=op: peakbench(op, 64, recv_wait_us=200.0),
                    )
                ]
            for k in range(rounds):
                print(f"  round {k + 1} of {rounds}", flush=True)
                for label, op, fn in plan:
                    ops, wall, cpu, errors = fn()
                    row = {
                        "op": op,
                        "client": label,
                        "ops_per_s": ops / wall,
                        "client_us_per_op": cpu / max(ops, 1) * 1e6,
                        "errors": errors,
                    }
                    print(
                        f"  {op:8} {label:34} {row['ops_per_s']:>10,.0f} ops/s  client {row['client_us_per_op']:6.2f} us/op",
                        flush=True,
                    )
                    samples.setdefault((label, op), []).append(row)
        finally:
            responder.kill()
            responder.wait(timeout=10)
        for (label, op), runs in samples.items():
            med = sorted(runs, key=lambda r: r["client_us_per_op"])[len(runs) // 2]
            rows.append(
                {
                    **med,
                    "ops_per_s_all": [round(r["ops_per_s"]) for r in runs],
                    "client_us_per_op_all": [round(r["client_us_per_op"], 2) for r in runs],
                }
            )
        for row in rows:
            nfs3 = next(r for r in rows if r["op"] == row["op"] and r["client"].startswith("nfs3_client"))
            row["cpu_vs_nfs3_client"] = row["client_us_per_op"] / nfs3["client_us_per_op"]
            peers = [r for r in rows if r["op"] == row["op"] and not r["client"].startswith("peakbench")]
            row["vs_best_peer_ops"] = row["ops_per_s"] / max(r["ops_per_s"] for r in peers)
        table(
            "NFS, client-bound (rpc-responder on CPU 1, client on CPU 0; median-CPU round)",
            rows,
            ["op", "client", "ops_per_s", "client_us_per_op", "cpu_vs_nfs3_client", "vs_best_peer_ops"],
        )
        save(name, {"rows": rows, "seconds": seconds})
        return {"rows": rows}


def bench_nfs_ganesha(name: str = "nfs") -> dict:
    """NULL, GETATTR and 4 KiB READ against nfs-ganesha on loopback, one client core each:
    peakbench's engine (pipelined, one connection) beside nfs3_client (16 connections,
    one request in flight on each) and libnfs's asynchronous API (one connection)."""
    header("nfs: ops/s and client CPU per op against nfs-ganesha, one client core")
    sys.path.insert(0, str(ROOT / "tests"))
    from ganesha import Ganesha

    seconds = float(os.environ.get("PB_NFS_SECONDS", "5"))
    loadavg_before = os.getloadavg()
    ncpu = os.cpu_count() or 1
    client_cpu, server_cpus = {0}, ({1} if ncpu > 1 else {0})
    with tempfile.TemporaryDirectory(prefix="pb-nfs-bench-") as tmp, Ganesha(workdir=Path(tmp) / "g") as server:
        libnfs = build_nfs_peers(Path(tmp))
        pin(server.pid, server_cpus)
        tgt = {"kind": "nfs", "host": "127.0.0.1", "export": "/export"}
        fs = fileset(64, size=1 << 20)
        engine("prepare", trial_spec(tgt, 1, {"getattr": 1.0}, fs, runtime_s=1), timeout=300)
        (server.export_dir / "bench-file").write_bytes(os.urandom(1 << 20))  # for the peers
        rows = []

        def measure(label: str, op: str, fn) -> dict:
            pin(server.pid, server_cpus)
            s0 = server.cpu_seconds()
            busy0, t0 = cpu_busy_s(client_cpu), time.monotonic()
            ops, wall, cpu, extra = fn()
            server_cpu = server.cpu_seconds() - s0
            # What other processes ran on the client's CPU meanwhile (busy time not the client's):
            # a neighbour there costs the client caches and wake-ups, whichever client it is.
            others = max(cpu_busy_s(client_cpu) - busy0 - cpu, 0.0) / max(time.monotonic() - t0, 1e-9)
            row = {
                "op": op,
                "client": label,
                "ops_per_s": ops / wall,
                "client_us_per_op": cpu / max(ops, 1) * 1e6,
                "server_us_per_op": server_cpu / max(ops, 1) * 1e6,
                "ops": ops,
                "others_on_client_cpu": round(others, 3),
                **extra,
            }
            rows.append(row)
            print(
                f"  {op:8} {label:34} {row['ops_per_s']:>10,.0f} ops/s  client {row['client_us_per_op']:6.2f} us/op"
                f"  server {row['server_us_per_op']:6.2f} us/op",
                flush=True,
            )
            return row

        def peakbench(
            op: str,
            depth: int,
            conns: int = 1,
            binary: Path | None = None,
            recv_wait_us: float | None = None,
            rate: float = 400_000,
            clients: int | None = None,
        ):
            # By default offered far above what anything here can do, with the cap as the pipeline
            # depth: the engine runs flat out, and its CPU (no warm-up) is all spent on the window's ops.
            # A closed loop instead has `clients` callers, each waiting for its reply.
            load = {"clients": clients} if clients else {"max_outstanding": depth}
            spec = trial_spec(
                with_recv_wait({**tgt, "connections": conns}, recv_wait_us),
                rate,
                NFS_MIXES[op],
                fs,
                runtime_s=seconds,
                warmup_s=0.0,
                io_size=4096,
                drain_timeout_s=10.0,
                **load,
            )
            if clients:
                spec["schema"] = SPEC_SCHEMA_V2
            r = engine("run", spec, cpus=client_cpu, binary=binary).result
            errors = sum(sum(o["errors"].values()) + o["timeouts"] for o in r["ops"].values())
            lat = r["latency"]
            held = r.get(
                "receive_moderation", {"holds": 0, "reads": 0, "mean_hold_us": 0.0, "max_hold_us": 0.0}
            )  # older engines: none
            return (
                r["completed"],
                seconds,
                r["engine_cpu_s"],
                {
                    "errors": errors,
                    "holds_per_read": round(held["holds"] / max(held["reads"], 1), 3),
                    "mean_hold_us": round(held["mean_hold_us"], 1),
                    "max_hold_us": round(held["max_hold_us"], 1),
                    **{f"latency_{k}_us": round(lat[f"{k}_ms"] * 1000, 1) for k in ("mean", "p50", "p99")},
                },
            )

        def nfs3client(op: str, conns: int):
            args = [NFS3CLIENT, "127.0.0.1", "/export", op, conns, seconds] + (["bench-file"] if op != "null" else [])
            p = run(args, timeout=seconds + 120, cpus=client_cpu)
            j = json.loads(p.stdout.strip().splitlines()[-1])
            return j["ops"], j["seconds"], p.cpu_s, {}

        def libnfs_run(op: str, depth: int):
            p = run(
                [libnfs, "127.0.0.1", "/export", "bench-file", op, depth, seconds],
                timeout=seconds + 120,
                cpus=client_cpu,
            )
            j = json.loads(p.stdout.strip().splitlines()[-1])
            return j["ops"], j["seconds"], p.cpu_s, {"errors": j["errors"]}

        plan = []
        waits = [float(w) for w in os.environ.get("PB_NFS_RECV_WAIT_US", "200").split(",") if w]

        def wait_label(w: float | None) -> str:
            return "adaptive hold (default)" if w is None else "recv wait off" if w == 0 else f"recv wait {w:g} us"

        # Each row a ratio is taken against sits next to its peer's row (the peer between this
        # engine and a baseline engine), so the two samples are seconds apart, not a dozen rows.
        for op in [o for o in os.environ.get("PB_NFS_OPS", "null,getattr,read4k").split(",") if o]:
            plan += [
                (f"peakbench, 1 conn, 64 in flight, {wait_label(None)}", op, lambda op=op: peakbench(op, 64)),
                ("nfs3_client, 16 conns", op, lambda op=op: nfs3client(op, 16)),
            ]
            plan += [
                (label, op, lambda op=op, binary=binary: peakbench(op, 64, 1, binary))
                for label, binary in baseline_rows()
            ]
            plan += [("libnfs async, 1 conn, 64 in flight", op, lambda op=op: libnfs_run(op, 64))]
            plan += [
                (
                    f"peakbench, 1 conn, 64 in flight, {wait_label(w)}",
                    op,
                    lambda op=op, w=w: peakbench(op, 64, recv_wait_us=w),
                )
                for w in [0.0] + waits
            ]
            # Issue 21: at 16 in flight beside libnfs at the same depth, with the receive hold and without.
            sixteen = {
                w: (
                    f"peakbench, 1 conn, 16 in flight, {wait_label(w)}",
                    op,
                    lambda op=op, w=w: peakbench(op, 16, recv_wait_us=w),
                )
                for w in (None, 0.0)
            }
            baseline16 = {
                w: [
                    (
                        f"{label.replace('64 in flight', '16 in flight')}, {wait_label(w)}",
                        op,
                        lambda op=op, binary=binary, w=w: peakbench(op, 16, 1, binary, recv_wait_us=w),
                    )
                    for label, binary in baseline_rows()
                ]
                for w in (None, 0.0)
            }
            plan += [sixteen[None], ("libnfs async, 1 conn, 16 in flight", op, lambda op=op: libnfs_run(op, 16))]
            plan += baseline16[None] + [sixteen[0.0]] + baseline16[0.0]
        plan += [
            ("peakbench, 4 conns, 64 in flight", "getattr", lambda: peakbench("getattr", 64, 4)),
            ("peakbench, 2 conns, 64 in flight", "getattr", lambda: peakbench("getattr", 64, 2)),
            ("nfs3_client, 4 conns", "getattr", lambda: nfs3client("getattr", 4)),
        ]
        # What receive moderation does to measured latency, with and without it: GETATTR at a
        # light load (2,000 ops/s: too few calls in flight for a hold to start), near the knee
        # (15,000 ops/s offered, open loop: bursts queue 8+ calls), far above it (flat out, 64
        # in flight: the rows above) and in a closed loop of 16 clients (16 in flight).
        for load, op, in_flight, options in (
            ("2,000 ops/s offered", "getattr@2000/s", 64, {"rate": 2_000}),
            ("15,000 ops/s offered", "getattr@15000/s", 64, {"rate": 15_000}),
            ("closed loop of 16 clients", "getattr@16 clients", 0, {"clients": 16}),
        ):
            for w in [None, 0.0] + waits:
                plan.append(
                    (
                        f"peakbench, {load}, {wait_label(w)}",
                        op,
                        lambda w=w, in_flight=in_flight, options=options: peakbench(
                            "getattr", in_flight, recv_wait_us=w, **options
                        ),
                    )
                )
        # Rounds over the whole plan, so a neighbour's burst hits one sample of each, not all
        # samples of one client; the median of the rounds is reported.
        rounds = int(os.environ.get("PB_NFS_ROUNDS", "3"))
        samples: dict = {}
        for k in range(rounds):
            print(f"  round {k + 1} of {rounds}", flush=True)
            # Every other round runs the plan backwards: a row does not always come before its
            # peer's, so a drift within a round (a neighbour starting up, ganesha's state) favours
            # neither, and no row always runs first.
            for label, op, fn in plan if k % 2 == 0 else plan[::-1]:
                samples.setdefault((label, op), []).append(measure(label, op, fn))
        rows.clear()
        for (label, op), runs in samples.items():
            med = sorted(runs, key=lambda r: r["ops_per_s"])[len(runs) // 2]
            # Client CPU per op over nfs3_client's in the same round: the neighbours move both alike.
            peer = samples.get(("nfs3_client, 16 conns", op.split("@")[0]), [])
            # ... and, at 16 in flight, over libnfs's at the same depth.
            libnfs16 = samples.get(("libnfs async, 1 conn, 16 in flight", op), []) if "16 in flight" in label else []
            rows.append(
                {
                    **med,
                    "ops_per_s_all": [round(r["ops_per_s"]) for r in runs],
                    "client_us_per_op_all": [round(r["client_us_per_op"], 2) for r in runs],
                    **{
                        f"{k}_all": [r[k] for r in runs]
                        for k in (
                            "latency_mean_us",
                            "latency_p50_us",
                            "latency_p99_us",
                            "holds_per_read",
                            "mean_hold_us",
                            "max_hold_us",
                            "others_on_client_cpu",
                        )
                        if k in med
                    },
                    "cpu_vs_nfs3_client_rounds": [
                        round(r["client_us_per_op"] / n["client_us_per_op"], 3) for r, n in zip(runs, peer)
                    ],
                    "cpu_vs_libnfs16_rounds": [
                        round(r["client_us_per_op"] / n["client_us_per_op"], 3) for r, n in zip(runs, libnfs16)
                    ],
                }
            )
        for row in rows:
            peers = [r for r in rows if r["op"] == row["op"] and not r["client"].startswith("peakbench")]
            best = max(peers, key=lambda r: r["ops_per_s"]) if peers else None
            if best:
                row["vs_best_peer_ops"] = row["ops_per_s"] / best["ops_per_s"]
        table(
            "NFS against nfs-ganesha (client pinned to CPU 0, ganesha to CPU 1)",
            [r for r in rows if "@" not in r["op"]],
            [
                "op",
                "client",
                "ops_per_s",
                "client_us_per_op",
                "server_us_per_op",
                "vs_best_peer_ops",
                "cpu_vs_nfs3_client_rounds",
                "cpu_vs_libnfs16_rounds",
            ],
        )
        table(
            "Receive moderation and latency (GETATTR; every round)",
            [r for r in rows if "@" in r["op"]],
            [
                "op",
                "client",
                "ops_per_s_all",
                "client_us_per_op_all",
                "latency_mean_us_all",
                "latency_p50_us_all",
                "latency_p99_us_all",
                "holds_per_read_all",
                "mean_hold_us_all",
                "max_hold_us_all",
            ],
        )
        loadavg = {"before": loadavg_before, "after": os.getloadavg()}
        return {
            "rows": rows,
            "seconds": seconds,
            "client_cpus": sorted(client_cpu),
            "server_cpus": sorted(server_cpus),
            "path": str(save(name, {"rows": rows, "seconds": seconds, "loadavg": loadavg})),
        }
