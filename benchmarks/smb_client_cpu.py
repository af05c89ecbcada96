"""Client CPU per SMB op: peakbench's engine against SMB load peers, all against the same Samba
smbd on 127.0.0.1, in the same run, alternated.

For each op (echo, query-path-info, 4 KiB read) and each run:
- the engine, open loop at RATE ops/s over one connection (its pipelined path: no thread or
  task per request), for SECONDS;
- benchmarks/smb_peers/gosmb2.go (go-smb2 from Debian, GOMAXPROCS=1: one core), TASKS
  goroutines over one connection, each doing one op after another;
- benchmarks/smb_peers/smbclient_loop.c (libsmbclient from Debian), one synchronous loop
  (the library has one request in flight per context);
- benchmarks/smb_crate (smb 0.11, tokio current-thread runtime: one core), TASKS tasks each
  awaiting one op after another, only if its probe has been built (it pulls in 292 crates).
Each prints ops/s (successful) and the client process's user+system CPU per op (getrusage of
the child, set-up included). No peer has an echo call, so echo is the engine's alone. The
go-smb2 and libsmbclient peers are built by this script (apt-get installs their packages).

    python3 benchmarks/smb_client_cpu.py [--runs 3] [--rate 8000] [--tasks 64] [--seconds 3]

With --encryption, the peers are left out and the engine runs plain (SMB 3.1.1, unsigned),
encrypted with AES-128-GCM (3.1.1) and with AES-128-CCM (3.0), alternated, and each
encrypted CPU per op is set against the plain one of the same run. With --callgrind as well,
each engine run goes under valgrind and the cost is instructions per op (use a low --rate).

With --before ENGINE --callgrind, that engine binary (say, main's build) and this one run plain,
alternated, and each is measured at --rate and at three times it: besides the total Ir per op
(set-up and summary included, as above), the marginal Ir per op, (Ir at 3R - Ir at R) / (ops
at 3R - ops at R), which leaves out what does not grow with the ops (start-up, the result's
histograms, the 1 MiB content block) and the idle polling of equal-length runs, and the SMB
code's Ir per op at R (smb_ir_per_op: the target's request building, sending, reading and
completion, without the sender's pacing, whose spin makes the other two figures wander).

With --baseline ENGINE, that engine binary (say, main's build) runs beside this one in every
round, at the same rate, as the client "baseline engine": an A/B in the same rounds, each
run's ratio to go-smb2 and to libsmbclient printed for both.

Needs root (smbd, apt-get); for the crate, `cargo build --release` in benchmarks/smb_crate
(CARGO_TARGET_DIR honoured).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "python"))

from debian import apt_install  # noqa: E402
from peakbench.contract import SPEC_SCHEMA  # noqa: E402
from peakbench.targets import parse_target  # noqa: E402
from samba import PASSWORD, SHARE, USER, Samba  # noqa: E402

PEERS = HERE / "smb_peers"

ENGINE_MIX = {"echo": {"null": 1.0}, "getattr": {"getattr": 1.0}, "read4k": {"read": 1.0}}


# Set by --counters: every client then runs under `perf stat` with these events.
COUNTERS: list[str] = []
PERF_EVENTS = "task-clock,context-switches,user_time,system_time"


def _rusage_run(argv: list[str], stdin: str | None = None, env: dict | None = None) -> tuple[str, float, str, dict]:
    """Run a client: (stdout, its user+system CPU seconds, stderr, perf counters if --counters)."""
    with tempfile.NamedTemporaryFile(suffix=".perf") as perf:
        if COUNTERS:
            argv = ["perf", "stat", "-x,", "-e", PERF_EVENTS, "-o", perf.name, "--", *argv]
        before = os.times()
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=600, env=env)
        after = os.times()
        counters = _perf_counters(Path(perf.name).read_text()) if COUNTERS else {}
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {proc.stderr.strip()[-500:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return proc.stdout, cpu, proc.stderr, counters


def _perf_counters(text: str) -> dict:
    """`perf stat -x,` output: event name -> value (task-clock in ms)."""
    out = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in PERF_EVENTS.split(","):
            out[fields[2]] = float(fields[0])
    return out


def _per_op(row: dict, counters: dict, ok: int) -> dict:
    if counters:
        row["task_clock_us_per_op"] = counters["task-clock"] * 1e3 / ok
        row["switches_per_op"] = counters["context-switches"] / ok
        # perf's own split of the CPU time (ns): how much of it the kernel spent for the client.
        row["kernel_share"] = counters["system_time"] / (counters["user_time"] + counters["system_time"])
    return row


def trial_spec(url: str, op: str, rate: float, seconds: float) -> dict:
    """The engine trial of one op at `rate` against `url`: 16 files of 4 KiB, reads of 4 KiB."""
    return {
        "schema": SPEC_SCHEMA,
        "target": parse_target(url),
        "seed": 1,
        "load": {"rate": rate, "warmup_s": 0.0, "runtime_s": seconds, "drain_timeout_s": 5.0},
        "fileset": {
            "seed": 1,
            "files": 16,
            "files_per_dir": {"kind": "constant", "value": 16},
            "dirs_per_dir": {"kind": "constant", "value": 0},
            "max_depth": 1,
            "file_sizes": {"kind": "constant", "value": 4096},
        },
        "mix": ENGINE_MIX[op],
        "read": {"pattern": "random", "size": {"kind": "constant", "value": 4096}},
    }


def engine_run(
    engine: str,
    url: str,
    op: str,
    rate: float,
    seconds: float,
    client: str = "peakbench engine",
    callgrind: bool = False,
) -> dict:
    spec = trial_spec(url, op, rate, seconds)
    subprocess.run([engine, "prepare", "-"], input=json.dumps(spec), capture_output=True, text=True, check=True)
    # Under callgrind, instructions per op: a count the machine's load does not move.
    profile = tempfile.NamedTemporaryFile(suffix=".callgrind")
    wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile.name}"] if callgrind else []
    with profile:
        out, cpu, err, counters = _rusage_run([*wrap, engine, "run", "-"], json.dumps(spec))
        smb_ir = _smb_code_ir(profile.name) if callgrind else 0
    result = json.loads(out)
    ok = result["outcomes"]["succeeded"]
    row = {"client": client, "op": op, "ops_per_s": result["achieved_rate"], "cpu_us_per_op": cpu / ok * 1e6, "ok": ok}
    row["offered"] = rate
    _per_op(row, counters, ok)
    if callgrind:
        row["ir"] = int(re.search(r"Collected : (\d+)", err)[1])
        row["ir_per_op"] = row["ir"] / ok
        row["smb_ir_per_op"] = smb_ir / ok
    return row


# The SMB target's own code, inclusive: building and queueing requests (`start`), sending them
# (`flush`), and reading the responses (framing, matching, each op's completion): on the
# connection's reader thread (main before smbcpu7) or in the leading sender's `poll` (the
# sender's waits for its due times are inside `poll` too, a few hundred instructions a call).
SMB_CODE = (
    r"target::smb::Smb as peakbench_engine::target::Target>::start \[",
    r"target::smb::Smb as peakbench_engine::target::Target>::flush \[",
    r"target::smb::Smb as peakbench_engine::target::Target>::poll \[",
    r"target/smb/conn\.rs:std::sys::backtrace::__rust_begin_short_backtrace",
)


def _smb_code_ir(profile: str) -> int:
    """Instructions in SMB_CODE (callgrind_annotate's inclusive counts): unlike the whole
    process's, they leave out the sender's pacing (its spin before a due time grows with
    the wall-clock time it waits) and the per-trial set-up and summary."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", profile], capture_output=True, text=True, check=True
    ).stdout
    total = 0
    for pattern in SMB_CODE:
        line = next((x for x in text.splitlines() if re.search(pattern, x) and not x.lstrip().startswith("=>")), "0")
        total += int(line.split()[0].replace(",", ""))
    return total


def build_peers(out: Path) -> dict[str, Path]:
    """The go-smb2 and libsmbclient peers, compiled into `out`: client name -> binary."""
    failed = apt_install(("golang-github-hirochachacha-go-smb2-dev", "libsmbclient-dev", "pkg-config", "gcc"))
    if failed:
        raise RuntimeError(failed)
    go_env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode"}  # Debian's Go packages
    subprocess.run(
        ["go", "build", "-o", str(out / "gosmb2"), str(PEERS / "gosmb2.go")], env=go_env, check=True, timeout=1800
    )
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "smbclient"], capture_output=True, text=True, check=True
    )
    subprocess.run(
        ["gcc", "-O2", "-o", str(out / "smbclient_loop"), str(PEERS / "smbclient_loop.c"), *flags.stdout.split()],
        check=True,
        timeout=600,
    )
    return {"go-smb2": out / "gosmb2", "libsmbclient": out / "smbclient_loop"}


def peer_run(argv: list[str], env: dict | None = None) -> dict:
    out, cpu, _, counters = _rusage_run(argv, env=env)
    row = json.loads(out)
    row["cpu_us_per_op"] = cpu / row["ops"] * 1e6  # the whole process, set-up included
    return _per_op(row, counters, row["ops"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=8000)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--encryption", action="store_true", help="the engine plain and encrypted, without the peers")
    ap.add_argument("--callgrind", action="store_true", help="with --encryption: instructions per op under callgrind")
    ap.add_argument("--before", metavar="ENGINE", help="with --callgrind: Ir per op of ENGINE beside this engine")
    ap.add_argument("--match-peer", action="store_true", help="offer the engine 1.05x go-smb2's rate of the same run")
    ap.add_argument("--counters", action="store_true", help="task-clock and context switches per op (perf stat)")
    ap.add_argument("--output", type=Path, help="write every row to this JSON file")
    ap.add_argument("--baseline", metavar="ENGINE", help="run ENGINE too, beside this engine, in every round")
    args = ap.parse_args()
    if args.counters:
        apt_install(("linux-perf",))
        COUNTERS.append(PERF_EVENTS)
    if args.before:
        if not args.callgrind:
            ap.error("--before needs --callgrind")
        return before_after(args)
    if args.encryption:
        return encryption_cost(args)
    engine = os.environ.get("PEAKBENCH_ENGINE", str(HERE.parent / "engine/target/release/peakbench-engine"))
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR", HERE / "smb_crate/target"))
    probe = target_dir / "release/smb-crate-probe"
    if not probe.exists():
        print(f"{probe} is not built: the smb crate is left out of this run", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="peakbench-smb-peers-") as build, Samba() as server:
        peers = build_peers(Path(build))
        (server.share_dir / "probe.dat").write_bytes(os.urandom(4096))
        url = server.url("engine")
        s = [SHARE, USER, PASSWORD]
        addr, host, port = f"127.0.0.1:{server.port}", "127.0.0.1", str(server.port)
        one_core = {**os.environ, "GOMAXPROCS": "1"}
        for run in range(args.runs):
            for op in ("echo", "getattr", "read4k"):
                engines = [(engine, "peakbench engine")] + (
                    [(args.baseline, "baseline engine")] if args.baseline else []
                )
                if op == "echo":
                    for binary, client in engines:
                        rows.append({"run": run, **engine_run(binary, url, op, args.rate, args.seconds, client)})
                    continue
                go = peer_run([str(peers["go-smb2"]), addr, *s, op, str(args.tasks), str(args.seconds)], one_core)
                rate = 1.05 * go["ops_per_s"] if args.match_peer else args.rate
                for binary, client in engines:
                    rows.append({"run": run, **engine_run(binary, url, op, rate, args.seconds, client)})
                rows.append({"run": run, **go})
                rows.append(
                    {"run": run, **peer_run([str(peers["libsmbclient"]), host, port, *s, op, str(args.seconds)])}
                )
                if probe.exists():
                    rows.append(
                        {"run": run, **peer_run([str(probe), addr, *s, op, str(args.tasks), str(args.seconds)])}
                    )
                print(json.dumps(rows[-1]), file=sys.stderr)
    _finish(args, rows)
    for op in ("echo", "getattr", "read4k"):
        for client in ("peakbench engine", "baseline engine", "go-smb2", "libsmbclient", "smb crate 0.11"):
            got = [r for r in rows if r["op"] == op and r["client"] == client]
            if not got:
                continue
            line = f"{op:8} {client:17} n={len(got)}  ops/s {_spread([r['ops_per_s'] for r in got], '.0f')}"
            line += f"  CPU µs/op {_spread([r['cpu_us_per_op'] for r in got], '.1f')}"
            if COUNTERS:
                line += f"  task-clock µs/op {_spread([r['task_clock_us_per_op'] for r in got], '.1f')}"
                line += f"  switches/op {_spread([r['switches_per_op'] for r in got], '.2f')}"
                line += f"  kernel share {_spread([r['kernel_share'] for r in got], '.2f')}"
            print(line)
        # Each run's engine set against the peer run beside it.
        for mine in ("peakbench engine", "baseline engine"):
            for peer in ("go-smb2", "libsmbclient"):
                pairs = [
                    (e, g)
                    for e in rows
                    for g in rows
                    if e["op"] == g["op"] == op and e["run"] == g["run"] and (e["client"], g["client"]) == (mine, peer)
                ]
                if pairs:
                    cpu = [e["cpu_us_per_op"] / g["cpu_us_per_op"] for e, g in pairs]
                    rate = [e["ops_per_s"] / g["ops_per_s"] for e, g in pairs]
                    print(
                        f"{op:8} {mine} ÷ {peer} n={len(pairs)}  CPU/op {_spread(cpu, '.2f')}"
                        f"  ops/s {_spread(rate, '.2f')}"
                    )
    return 0


def _finish(args, rows: list[dict]) -> None:
    """Print the load average and, with --output, keep every row."""
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
    if args.output:
        args.output.write_text(
            json.dumps({"argv": sys.argv[1:], "load_average_end": load, "rows": rows}, indent=1) + "\n"
        )


def _spread(values: list[float], fmt: str) -> str:
    """Median [min-max]."""
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


# The engine's encryption modes: client name -> smb:// URL options.
SEALS = {
    "engine plain": "dialect=3.1.1&encrypt=off",
    "engine AES-128-GCM": "dialect=3.1.1&encrypt=required",
    "engine AES-128-CCM": "dialect=3.0&encrypt=required",
}


def encryption_cost(args) -> int:
    engine = os.environ.get("PEAKBENCH_ENGINE", str(HERE.parent / "engine/target/release/peakbench-engine"))
    rows = []
    with Samba() as server:
        for run in range(args.runs):
            for op in ("echo", "getattr", "read4k"):
                for client, options in SEALS.items():
                    url = server.url("engine", options=options)
                    row = engine_run(engine, url, op, args.rate, args.seconds, client, args.callgrind)
                    rows.append({"run": run, **row})
                    print(json.dumps(rows[-1]), file=sys.stderr)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
    cost = "ir_per_op" if args.callgrind else "cpu_us_per_op"
    for op in ("echo", "getattr", "read4k"):
        plain = {r["run"]: r[cost] for r in rows if r["op"] == op and r["client"] == "engine plain"}
        for client in SEALS:
            got = [r for r in rows if r["op"] == op and r["client"] == client]
            rate = [r["ops_per_s"] for r in got]
            cpu = [r[cost] for r in got]
            # Each run's encrypted cost per op over the plain one measured beside it.
            ratio = [r[cost] / plain[r["run"]] for r in got]
            unit = "Ir/op" if args.callgrind else "CPU µs/op"
            print(
                f"{op:8} {client:19} n={len(got)}  ops/s median {statistics.median(rate):8.0f}"
                f" [{min(rate):.0f}-{max(rate):.0f}]  {unit} median {statistics.median(cpu):6.1f}"
                f" [{min(cpu):.1f}-{max(cpu):.1f}]  ×plain median {statistics.median(ratio):.2f}"
                f" [{min(ratio):.2f}-{max(ratio):.2f}]"
            )
    return 0


def before_after(args) -> int:
    engines = {
        "before": args.before,
        "after": os.environ.get("PEAKBENCH_ENGINE", str(HERE.parent / "engine/target/release/peakbench-engine")),
    }
    rows = []
    with Samba() as server:
        url = server.url("engine", options=SEALS["engine plain"])
        for run in range(args.runs):
            for op in ("echo", "getattr", "read4k"):
                for client, engine in engines.items():
                    low, high = (
                        engine_run(engine, url, op, r, args.seconds, client, True) for r in (args.rate, 3 * args.rate)
                    )
                    marginal = (high["ir"] - low["ir"]) / (high["ok"] - low["ok"])
                    rows.append(
                        {"run": run, **low, "high_ops_per_s": high["ops_per_s"], "marginal_ir_per_op": marginal}
                    )
                    print(json.dumps(rows[-1]), file=sys.stderr)
    _finish(args, rows)
    for op in ("echo", "getattr", "read4k"):
        for client in engines:
            got = [r for r in rows if r["op"] == op and r["client"] == client]
            for name in ("ir_per_op", "marginal_ir_per_op", "smb_ir_per_op"):
                v = [r[name] for r in got]
                print(
                    f"{op:8} {client:6} n={len(got)}  {name} median {statistics.median(v):8.0f}"
                    f" [{min(v):.0f}-{max(v):.0f}]"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
