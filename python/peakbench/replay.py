"""`peakbench replay`: a web server's access log as the request stream.

    peakbench replay ACCESS_LOG --target http://host:port/ [--clients 64 | --rate OPS | --timed [--speed F]]
                     [--format combined|common|FORMAT] [--dataset-size SIZE[,SIZE...]] [--repeat N] [--runtime S]
                     [--load-clients M | --cluster ADDR] ...
    peakbench replay --build-docroot DIR ACCESS_LOG [--dataset-size SIZE]
    peakbench tracegen OUT.log[.gz] [--requests N] [--files N] ...

The engine reads the log itself (engine/SPEC.md, "Replay"): GET and HEAD lines
that succeeded (2xx, 304) are replayed in order, in a loop; data-set size control
keeps the longest prefix of the log whose distinct files total the wanted size
(the method of the Flash paper's dataset-size curves, docs/sources.md, trace-based web-server experiments).
Modes: closed loop with N clients (default 64, as in the paper), open loop at a
fixed rate, or the log's own inter-arrival times at a speed factor. Against a
directory (a document tree built with --build-docroot) a GET is a lookup and a
whole-file sequential read.

From many load clients (--load-clients M: Dask workers on this host; --cluster
ADDR: the workers of a Dask scheduler), client i replays the requests at
positions i, i+M, ... of the log, each at its own log time with --timed, and the
results merge like every distributed trial (peakbench.cluster). A closed loop's
--clients are dealt out among them: the paper's two machines of 32 clients are
--clients 64 --load-clients 2. (`--clients` keeps the meaning it has always had
here, the closed loop's clients; it is `run`'s load clients that are
--load-clients here.)
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import store as store_module
from . import tracegen
from .cluster import engine_for
from .cluster.connection import add_tls_options
from .cluster.report import print_clients
from .contract import SPEC_SCHEMA_V2, ReplaySummary, TrialResult
from .credentials import without_passwords
from .engine import Engine
from .errors import InputError
from .locks import StoreLock
from .output import STDOUT, check_output, write_json
from .progress import ProgressDisplay
from .sysinfo import snapshot
from .table import ops_with_error_counts, print_trial
from .targets import check_ours, parse_target, target_label
from .trials import TrialRecord, run_trial
from .units import format_size, parse_size

# The engine's size classes (replay.rs SIZE_CLASSES), smallest first.
SIZE_CLASSES = ("<1KiB", "1-10KiB", "10-100KiB", "100KiB-1MiB", ">=1MiB")
DEFAULT_CLIENTS = 64  # two client machines with 32 clients each, in the paper


def replay_spec(
    target: dict,
    log: Path,
    *,
    fmt: str = "combined",
    dataset_bytes: int | None = None,
    clients: int | None = None,
    rate: float | None = None,
    timed: bool = False,
    speed: float = 1.0,
    arrivals: str = "uniform",
    warmup_s: float = 0.0,
    runtime_s: float = 10.0,
    loop: bool = True,
    all_statuses: bool = False,
    seed: int = 1,
    drain_timeout_s: float = 10.0,
    max_outstanding: int | None = None,
) -> dict:
    """The engine's TrialSpec (version 2) for one replay trial."""
    if timed:
        clients = None
    elif rate is None and clients is None:
        clients = DEFAULT_CLIENTS
    return {
        "schema": SPEC_SCHEMA_V2,
        "target": target,
        "seed": seed,
        "load": {
            "rate": rate or 0.0,
            "arrivals": arrivals,
            "warmup_s": warmup_s,
            "runtime_s": runtime_s,
            "clients": clients if rate is None else None,
            "max_outstanding": max_outstanding,
            "drain_timeout_s": drain_timeout_s,
        },
        "replay": {
            "log": str(Path(log).absolute()),
            "format": fmt,
            "dataset_bytes": dataset_bytes,
            "loop": loop,
            "timing": "log" if timed else "rate",
            "speed": speed,
            "all_statuses": all_statuses,
        },
    }


def mode_text(spec: dict) -> str:
    load, replay = spec["load"], spec["replay"]
    if replay["timing"] == "log":
        return f"the log's own times at {replay['speed']:g}x"
    if load.get("clients"):
        return f"closed loop, {load['clients']} clients"
    return f"open loop at {load['rate']:g} requests/s ({load['arrivals']})"


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(parse_size(part.strip(), "--dataset-size")) for part in text.split(",") if part.strip()]
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: sizes above 0, e.g. 10MB or 5MB,10MB,20MB")
    return sizes


def add_commands(commands, store_option, parsers) -> None:
    """Register `replay` and `tracegen` on the peakbench command (`parsers`: the CLI's argument types)."""
    replay = commands.add_parser(
        "replay", parents=[store_option], help="replay a web server's access log against a target"
    )
    replay.add_argument("log", type=Path, metavar="ACCESS_LOG", help="the log (gzip-compressed is fine)")
    replay.add_argument("--target", metavar="URL", help="http://HOST:PORT/ or a directory (a built docroot)")
    replay.add_argument(
        "--build-docroot",
        type=Path,
        metavar="DIR",
        help="instead of replaying: create the document tree the log implies in DIR",
    )
    replay.add_argument(
        "--format",
        default="combined",
        metavar="FMT",
        help='combined (default), common, or a format string (Apache %%h %%t "%%r" %%>s %%b,'
        ' or nginx $remote_addr [$time_local] "$request" $status $body_bytes_sent)',
    )
    how = replay.add_mutually_exclusive_group()
    how.add_argument(
        "--clients",
        type=parsers["whole"](1),
        metavar="N",
        help=f"closed loop with N clients (the default, N={DEFAULT_CLIENTS})",
    )
    how.add_argument("--rate", type=parsers["rate"], metavar="OPS", help="open loop at this many requests/s")
    how.add_argument("--timed", action="store_true", help="send at the log's own times (see --speed)")
    replay.add_argument(
        "--speed",
        type=parsers["scale"],
        default=1.0,
        metavar="F",
        help="with --timed: replay F times faster than the log (default 1)",
    )
    replay.add_argument(
        "--arrivals",
        choices=("uniform", "poisson"),
        default="uniform",
        help="with --rate: uniform (metronome, default) or poisson",
    )
    replay.add_argument(
        "--dataset-size",
        type=_sizes,
        metavar="SIZE[,SIZE...]",
        help="keep the log's prefix whose distinct files total SIZE; several make a sweep",
    )
    replay.add_argument(
        "--repeat",
        type=parsers["whole"](1),
        default=1,
        metavar="N",
        help="run every data-set size N times, in N rounds, so the report can give each an interval (default 1)",
    )
    replay.add_argument(
        "--no-loop", dest="loop", action="store_false", help="replay the log once instead of looping until the run ends"
    )
    replay.add_argument(
        "--all-statuses", action="store_true", help="replay unsuccessful GETs and HEADs too (default: 2xx and 304 only)"
    )
    replay.add_argument(
        "--docroot",
        type=Path,
        metavar="DIR",
        help="the directory an http:// target serves: build the log's files there first",
    )
    replay.add_argument(
        "--prepare",
        action="store_true",
        help="build the log's files through the target first (WebDAV PUT, or in --docroot)",
    )
    replay.add_argument("--warmup", type=parsers["duration"], default=2.0, metavar="S", help="default 2 s")
    replay.add_argument(
        "--runtime",
        type=parsers["positive_duration"],
        default=30.0,
        metavar="S",
        help="measured time per trial (default 30 s)",
    )
    replay.add_argument(
        "--max-outstanding",
        type=parsers["whole"](1),
        metavar="N",
        help="with --rate or --timed: cap on requests in flight",
    )
    replay.add_argument(
        "--timeout",
        type=parsers["positive_duration"],
        metavar="S",
        help="per-request timeout of an http:// target (default 10 s)",
    )
    replay.add_argument(
        "--load-clients",
        type=parsers["whole"](1),
        metavar="M",
        help="replay from M load clients (Dask workers on this host, or M workers of --cluster),"
        " each its share of the log",
    )
    replay.add_argument(
        "--cluster",
        metavar="ADDR",
        help="an existing Dask scheduler, e.g. tcp://scheduler:8786: every worker is a load client",
    )
    add_tls_options(replay)
    replay.add_argument(
        "--clock-tolerance",
        type=parsers["positive_ms"],
        default=10.0,
        metavar="MS",
        help="refuse a distributed start that could be skewed by more (default 10 ms)",
    )
    replay.add_argument("--seed", type=parsers["whole"](0), default=1, metavar="N")
    replay.add_argument("--json", type=Path, metavar="FILE", help="also write the results to this JSON file")
    replay.set_defaults(handler=command_replay)

    gen = commands.add_parser("tracegen", help="write a synthetic access log (Zipf popularity, long-tailed sizes)")
    gen.add_argument("out", type=Path, metavar="OUT", help="the log to write (.gz: gzip-compressed)")
    gen.add_argument("--requests", type=parsers["whole"](1), default=10_000, metavar="N")
    gen.add_argument("--files", type=parsers["whole"](1), default=500, metavar="N")
    gen.add_argument("--rate", type=parsers["rate"], default=20.0, metavar="OPS", help="mean requests/s (default 20)")
    gen.add_argument("--alpha", type=parsers["scale"], default=0.75, metavar="A", help="Zipf exponent (default 0.75)")
    gen.add_argument("--format", choices=("combined", "common"), default="combined")
    gen.add_argument("--seed", type=parsers["whole"](0), default=1, metavar="N")
    gen.set_defaults(handler=command_tracegen)


def command_tracegen(args: argparse.Namespace) -> int:
    if not args.out.absolute().parent.is_dir():
        raise InputError(f"{args.out}: its directory does not exist")
    shape = tracegen.TraceShape(
        requests=args.requests, files=args.files, rate=args.rate, alpha=args.alpha, format=args.format, seed=args.seed
    )
    tracegen.write(args.out, shape)
    print(f"{args.out}: {args.requests} requests over {args.files} files", file=sys.stderr)
    return 0


def _check_log(log: Path) -> None:
    if log.is_dir():
        raise InputError(f"{log}: is a directory, not an access log")
    if not log.is_file():
        raise InputError(f"{log}: no such file")


def report_parse(summary: ReplaySummary, stream=sys.stderr) -> None:
    """What the log held and what was left out: never silent about unparseable lines."""
    skipped = summary.skipped
    print(
        f"replay: {summary.log}: {summary.lines:,} lines, {summary.replayable:,} replayable;"
        f" skipped {skipped['unparseable']:,} unparseable, {skipped['method']:,} not GET/HEAD,"
        f" {skipped['status']:,} unsuccessful, {skipped['path']:,} bad paths",
        file=stream,
    )
    for bad in summary.first_unparseable:
        print(f"  line {bad['line']}: {bad['error']}: {bad['text']}", file=stream)
    kept = f"{summary.requests:,} requests over {summary.files:,} files ({format_size(summary.dataset_bytes)})"
    if summary.truncated:
        kept += f", the prefix of the log's {summary.log_files:,} files ({format_size(summary.log_dataset_bytes)})"
    print(f"replay: {kept}", file=stream)


def command_replay(args: argparse.Namespace) -> int:
    _check_log(args.log)
    sizes = args.dataset_size or [None]
    if args.build_docroot is not None:
        if args.target:
            raise InputError("--build-docroot builds a directory; give no --target", field="--build-docroot")
        if len(sizes) > 1:
            raise InputError(
                "--build-docroot takes one --dataset-size (the largest builds them all)", field="--dataset-size"
            )
        return build_docroot(args.build_docroot, args.log, args.format, sizes[0])
    if not args.target:
        raise InputError("give --target URL (or --build-docroot DIR)", field="--target")
    if args.speed != 1.0 and not args.timed:
        raise InputError("--speed goes with --timed", field="--speed")
    if args.max_outstanding and args.rate is None and not args.timed:
        raise InputError("--max-outstanding caps an open loop (--rate or --timed)", field="--max-outstanding")
    target = parse_target(args.target, args.docroot)
    if args.timeout:
        if target["kind"] != "http":
            raise InputError("--timeout is for http:// targets", field="--timeout")
        target["timeout_s"] = args.timeout
    prepare = args.prepare or args.docroot is not None
    if prepare:
        check_ours(target)
    check_output(args.json, "--json")
    store_module.check_compatible(args.db)
    specs = [
        replay_spec(
            target,
            args.log,
            fmt=args.format,
            dataset_bytes=size,
            clients=args.clients,
            rate=args.rate,
            timed=args.timed,
            speed=args.speed,
            arrivals=args.arrivals,
            warmup_s=args.warmup,
            runtime_s=args.runtime,
            loop=args.loop,
            all_statuses=args.all_statuses,
            seed=args.seed,
            max_outstanding=args.max_outstanding,
        )
        for size in sizes
    ]
    workload = f"replay:{args.log.name}"
    console = Console(stderr=args.json == STDOUT, width=None if sys.stdout.isatty() else 160)
    # Rounds over the sizes, not each size N times in a row: drift on a shared machine then
    # spreads over every size instead of biasing one.
    specs = [spec for _ in range(args.repeat) for spec in specs]
    with (
        engine_for(
            args.load_clients,
            args.cluster,
            clock_tolerance_s=args.clock_tolerance / 1e3,
            announce=lambda text: print(f"cluster: {text}", file=sys.stderr),
        ) as engine,
        store_module.Store(args.db) as store,
    ):
        engine.validate(specs[0])
        system = snapshot(target, engine.version())
        record = TrialRecord(workload=workload, target=target_label(target), sysinfo=system)
        if len(specs) == 1:
            rows = [run_point(specs[0], engine, store, record, prepare, console)]
        else:  # a sweep is a job of its own, so that `peakbench resume` can finish it
            sweep_id = store.add_replay_sweep(workload=workload, target=record.target, specs=specs, prepare=prepare)
            print(
                f"replay sweep {sweep_id}: {len(specs)} trials; resume with"
                f" `peakbench resume replay:{sweep_id} --db {args.db}` if interrupted",
                file=sys.stderr,
                flush=True,
            )
            rows = run_sweep(
                store, sweep_id, specs, engine, dataclasses.replace(record, replay_sweep_id=sweep_id), prepare, console
            )
    write_json(args.json, rows if len(rows) > 1 else rows[0])
    return 0


def run_point(spec: dict, engine, store, record: TrialRecord, prepare: bool, console, parse_report=True) -> dict:
    """One replay trial, run, stored and printed (with what the log's parse found, if parse_report); its row
    of the JSON report."""
    stored = run_trial(spec, engine, store, record, prepare=prepare, phase="replay")
    result, trial_id = stored.result, stored.trial_id
    if trial_id is None:
        print(f"peakbench: {stored.store_error}; the trial was written to {stored.saved_to} instead", file=sys.stderr)
    typed = TrialResult.load(result)
    if parse_report:
        report_parse(typed.replay)
    size = spec["replay"]["dataset_bytes"]
    console.print(
        f"[bold]trial {trial_id}[/bold]: {mode_text(spec)}" + (f", data set {format_size(size)}" if size else "")
    )
    print_trial({**spec, "mix": typed.mix_actual}, result, console)
    console.print(class_table(result))
    print_clients(result, console)
    return report_row(trial_id, result)


def report_row(trial_id: int | None, result: dict) -> dict:
    return {"trial_id": trial_id, **result, "ops": ops_with_error_counts(result)}


def run_sweep(store, sweep_id: int, specs: list[dict], engine, record: TrialRecord, prepare: bool, console) -> list:
    """Run the sweep's data-set sizes that have no stored trial yet, in order, holding the sweep's job lock
    so that `peakbench resume` can tell it is alive; the sweep is finished (or failed) in the store.
    Returns the rows of every size, stored ones included, in sweep order."""
    with StoreLock(store.path, f"replay {sweep_id}") as lock:
        lock.acquire("running the replay sweep")
        stored = collections.defaultdict(collections.deque)
        for trial in store.replay_sweep_trials(sweep_id):
            if trial["status"] == "done":
                stored[_key(trial["spec"])].append(trial)
        rows = []
        try:
            for spec in specs:
                if stored[_key(spec)]:
                    trial = stored[_key(spec)].popleft()
                    rows.append(report_row(trial["id"], trial["result"]))
                else:
                    rows.append(run_point(spec, engine, store, record, prepare, console, parse_report=not rows))
        except BaseException as error:
            store.finish_replay_sweep(sweep_id, error=str(error) or type(error).__name__)
            raise
        store.finish_replay_sweep(sweep_id)
    console.print(sweep_table(rows))
    return rows


def _key(spec: dict) -> str:
    """The same for a spec as run and as stored (which keeps no SMB password)."""
    return json.dumps(without_passwords(spec), sort_keys=True)


def class_table(result: dict) -> Table:
    table = Table(title="per request class (size served by the log, outcome); latency in ms")
    for heading in ("class", "count", "MB", "mean", "p50", "p99", "max"):
        table.add_column(heading, justify="left" if heading == "class" else "right")

    def order(name: str) -> tuple:
        method, size, outcome = name.split(" ", 2)
        return method, SIZE_CLASSES.index(size) if size in SIZE_CLASSES else 99, outcome

    for name, c in sorted((TrialResult.load(result).classes or {}).items(), key=lambda item: order(item[0])):
        table.add_row(
            name,
            str(c.count),
            f"{c.bytes / 1e6:.2f}",
            f"{c.mean_ms:.3f}",
            f"{c.p50_ms:.3f}",
            f"{c.p99_ms:.3f}",
            f"{c.max_ms:.3f}",
        )
    return table


def sweep_table(rows: list[dict]) -> Table:
    """The paper's dataset-size curve: output bandwidth against data-set size."""
    table = Table(title="data-set size sweep (output bandwidth is the paper's measure)")
    for heading in ("trial", "data set", "files", "Mb/s", "requests/s", "mean ms", "p99 ms", "errors"):
        table.add_column(heading, justify="right")
    for row in rows:
        typed = TrialResult.load(row)  # a trial's result with its trial_id (kept in `extra`)
        errors = sum(op.failed_count() for op in typed.ops.values())
        table.add_row(
            str(row["trial_id"]),
            format_size(typed.replay.dataset_bytes),
            str(typed.replay.files),
            f"{typed.output_mbit_s:.1f}",
            f"{typed.achieved_rate:.1f}",
            f"{typed.latency.mean_ms:.3f}",
            f"{typed.latency.p99_ms:.3f}",
            str(errors),
        )
    return table


def build_docroot(directory: Path, log: Path, fmt: str, dataset_bytes: int | None) -> int:
    """Every file the log served successfully, at its served size, with deterministic content.

    A new tree is built in a temporary directory beside DIR and renamed into place when it is
    complete, so a bad log, a full disk or an interrupt leaves no half-built tree behind.
    """
    directory = directory.absolute()
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{directory}: not a directory", field="--build-docroot")
    made = not directory.exists()
    if made and not directory.parent.is_dir():
        raise InputError(f"{directory.parent}: no such directory", field="--build-docroot")
    building = directory.parent / f".{directory.name}.building-{os.getpid()}" if made else directory
    building.mkdir(exist_ok=True)
    try:
        target = parse_target(str(building))
        check_ours(target)
        spec = replay_spec(target, log, fmt=fmt, dataset_bytes=dataset_bytes, runtime_s=1.0)
        engine = Engine()
        engine.validate(spec)
        with ProgressDisplay("prepare", None) as display:
            done = engine.prepare(spec, display)
        if made:
            building.rename(directory)
    except BaseException:
        if made:  # rm, not shutil.rmtree: a log's paths can nest thousands of directories deep
            subprocess.run(["rm", "-rf", "--", str(building)], check=False, timeout=600)
        raise
    report_parse(ReplaySummary.load(done["replay"], "replay"))
    print(
        f"docroot {directory}: {done['docroot']['files']:,} files, {format_size(done['docroot']['bytes'])};"
        f" {done['files_created']:,} written ({done['seconds']:.1f} s)"
    )
    return 0
