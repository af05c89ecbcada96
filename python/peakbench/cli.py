"""The `peakbench` command.

    peakbench run WORKLOAD --target DIR --rate OPS [--warmup S] [--runtime S] [--clients N | --cluster ADDR] ...
    peakbench prepare WORKLOAD --target DIR --rate OPS [--scale F]
    peakbench search WORKLOAD --target DIR|sim://... [--quick] [--confidence C] [--accuracy A] [--clients N] ...
    peakbench surface PLAN.toml [--json FILE]
    peakbench validate TARGET [--json FILE]
    peakbench simulate [--samples N] [--policies P,...] [--surfaces]
    peakbench workloads list | show NAME [--rate OPS] [--scale F]
    peakbench workloads model web-proxy --memory-hit H --disk-hit D [--reads-per-file N] [--eviction P] [--output F]
    peakbench workloads model web-server --hit H [--reads-per-file N] [--output FILE]
    peakbench workloads derive BASE --set KEY=VALUE ... [--name NAME] [--output FILE]
    peakbench workloads train-markov CAPTURE --output MODEL
    peakbench results list | show ID | export [SELECTOR...] (--csv | --json | --hlog | --openmetrics) FILE
    peakbench plan check|run PLAN.toml | resume [ID] | report [ID] | list
    peakbench compare A B [--metric M] [--alpha 0.05]
    peakbench sfs RCFILE [--spec-rounding] [--dry-run]
    peakbench report [search:ID|sfs:ID|trial:ID ...] --html FILE [--figures DIR --format png,svg,pdf] [--csv DIR]
    peakbench replay ACCESS_LOG --target URL [--clients N | --rate OPS | --timed] [--dataset-size SIZE,...]
    peakbench replay --build-docroot DIR ACCESS_LOG
    peakbench tracegen OUT [--requests N] [--files N]

Exit status: 0 done, 1 the trial could not run (or `validate` found a failure), 2 bad input (one line on
stderr naming the file, line and field; nothing written to the store or target),
3 a search ended without a peak (its verdict says why and what to change).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import markovtrain, searching, sim
from . import replay as replay_module
from . import resume as resume_module
from . import store as store_module
from . import workloadknobs as knobs_module
from .cluster import engine_for
from .cluster.connection import add_tls_options, cluster_invocation, tls_files, use_tls
from .cluster.report import print_clients
from .contract import TrialResult
from .controller import DEFAULT_POLICY, POLICIES, SearchSettings
from .controller.design import quadratic_terms
from .controller.surface import describe_error
from .distributions import describe as describe_distribution
from .engine import Engine
from .errors import InputError, RunError, TrialInterrupted
from .mix import format_mix
from .output import STDOUT, check_output, opened, write_json
from .progress import ProgressDisplay
from .report import command as report_command
from .sfs import run as sfs_command
from .surfaceplan import load_plan
from .sysinfo import peakbench_version, snapshot
from .table import ops_with_error_counts, print_trial, print_validation
from .targets import check_ours, check_space, parse_target, target_label
from .trials import TrialFailed, TrialRecord, measured_so_far, run_trial
from .units import format_size, parse_duration, parse_rate
from .workload import ARRIVALS, Workload, canned_names, find_workload, trial_spec, with_mixfile


def _console(json_to: Path | None = None) -> Console:
    """Where tables go: standard output, or standard error when --json takes standard output."""
    # Piped output (a log, CI) gets long lines instead of Rich's 80-column default,
    # so tables are not squeezed into ellipses.
    stderr = json_to == STDOUT
    terminal = (sys.stderr if stderr else sys.stdout).isatty()
    return Console(stderr=stderr, width=None if terminal else 160)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line like every other input error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _positive_number(unit: str = ""):
    """An argparse type: a finite number (of `unit`) above 0."""
    what = f"a number of {unit}" if unit else "a number"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r}: must be a finite {what[2:]} above 0")
        return value

    return parse


_positive_ms = _positive_number("milliseconds")
_scale = _positive_number()


def _rate(text: str) -> float:
    try:
        return parse_rate(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def _positive_duration(text: str) -> float:
    seconds = _duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be longer than 0")
    return seconds


def _whole(minimum: int):
    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not minimum <= number < 2**64:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at least {minimum}")
        return number

    return parse


class _Version(argparse.Action):
    """--version: the engine is asked only when the user asks."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            engine = Engine().version()
        except (RunError, OSError) as error:
            engine = f"engine not usable: {error}"
        print(f"peakbench {peakbench_version()}; {engine}")
        parser.exit()


MIXFILE_HELP = "a SPECsfs mix file (SFS MIXFILE VERSION 2) for the workload's op mix"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="peakbench", description="Open-loop benchmarking of file services.")
    parser.add_argument("--version", action=_Version, nargs=0, help="print peakbench's and its engine's versions")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_option = _Parser(add_help=False)
    store_option.add_argument(
        "--db",
        type=Path,
        metavar="FILE",
        default=store_module.DEFAULT_PATH,
        help="results store (default ./peakbench.db)",
    )

    def add_trial_arguments(command: argparse.ArgumentParser) -> None:
        command.add_argument("workload", metavar="WORKLOAD", help="a canned workload name or a workload .toml file")
        command.add_argument(
            "--target",
            required=True,
            metavar="DIR",
            help="a directory, file:///DIR, nfs://SERVER/EXPORT[?options], smb://[USER[:PASSWORD]@]SERVER/SHARE[?options], http://HOST:PORT/, or null://",
        )
        command.add_argument(
            "--docroot",
            metavar="DIR",
            help="with http://: the directory the server serves; the file set is built there"
            " (default: through the server, with WebDAV PUT and MKCOL)",
        )
        command.add_argument("--rate", required=True, type=_rate, metavar="OPS", help="offered load in ops/s")
        command.add_argument("--mixfile", type=Path, metavar="FILE", help=MIXFILE_HELP)
        command.add_argument(
            "--scale", type=_scale, default=1.0, metavar="F", help="multiply the self-scaled file-set size (default 1)"
        )

    cluster_options = _Parser(add_help=False)
    cluster_options.add_argument(
        "--clients",
        type=_whole(1),
        metavar="N",
        help="run the load from N clients (Dask worker processes on this host, or N"
        " workers of --cluster), each offering its share of --rate",
    )
    cluster_options.add_argument(
        "--cluster",
        metavar="ADDR",
        help="an existing Dask scheduler, e.g. tcp://scheduler:8786: every worker is a"
        " load client (the first --clients N if given)",
    )
    add_tls_options(cluster_options)
    cluster_options.add_argument(
        "--clock-tolerance",
        type=_positive_ms,
        default=10.0,
        metavar="MS",
        help="refuse a distributed start that could be skewed by more (default 10 ms)",
    )

    run = commands.add_parser(
        "run", parents=[store_option, cluster_options], help="prepare the file set and run one trial"
    )
    add_trial_arguments(run)
    run.add_argument(
        "--warmup", type=_duration, default=5.0, metavar="S", help="warm-up before measuring (default 5 s)"
    )
    run.add_argument(
        "--runtime", type=_positive_duration, default=30.0, metavar="S", help="measured time (default 30 s)"
    )
    run.add_argument("--seed", type=_whole(0), default=1, metavar="N", help="op-sequence seed (default 1)")
    run.add_argument("--arrivals", choices=ARRIVALS, help="override the workload's arrival process")
    run.add_argument("--max-outstanding", type=_whole(1), metavar="N", help="cap on requests in flight (default: none)")
    run.add_argument("--json", type=Path, metavar="FILE", help="also write the result to this JSON file")
    run.set_defaults(handler=command_run)

    prepare = commands.add_parser(
        "prepare",
        parents=[cluster_options],
        help="create or augment the file set only (each client's part with --clients)",
    )
    add_trial_arguments(prepare)
    prepare.set_defaults(handler=command_prepare)

    search = commands.add_parser(
        "search", parents=[store_option, cluster_options], help="find the peak rate to a stated confidence and accuracy"
    )
    search.add_argument("workload", metavar="WORKLOAD", help="a canned workload name or a workload .toml file")
    search.add_argument(
        "--target",
        required=True,
        metavar="URL",
        help="a directory, file:///DIR, null://, http://HOST:PORT/, or a simulated server sim://?capacity=OPS",
    )
    search.add_argument(
        "--docroot", metavar="DIR", help="with http://: the directory the server serves; the file set is built there"
    )
    search.add_argument("--mixfile", type=Path, metavar="FILE", help=MIXFILE_HELP)
    search.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        default=DEFAULT_POLICY,
        help=f"how the next test load is chosen (default {DEFAULT_POLICY})",
    )
    search.add_argument(
        "--quick",
        action="store_true",
        help="short trials and a looser claim (4 s runs, c=90%%, a=85%%) for a first look",
    )
    for option, setting, kind, what in SEARCH_OPTIONS:
        search.add_argument(
            option, dest=setting, type=kind, metavar=what.split(":")[0], help=what.split(":", 1)[1].strip()
        )
    search.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="state R̄ at the peak from the claim's own trials instead of repeating them afresh (cheaper; those "
        "trials were chosen because they agreed, so their interval holds R̄ less often than the confidence)",
    )
    search.add_argument(
        "--seed-rate",
        type=_rate,
        metavar="OPS",
        help="start near this load, e.g. the peak of a similar finished search",
    )
    search.add_argument(
        "--scale", type=_scale, default=1.0, metavar="F", help="multiply the self-scaled file-set size (default 1)"
    )
    search.add_argument(
        "--seed",
        type=_whole(0),
        metavar="N",
        help="first trial's op-sequence seed (default: drawn afresh per search, printed and stored)",
    )
    search.add_argument(
        "--max-outstanding",
        type=_whole(1),
        metavar="N",
        help="cap on requests in flight in every trial (default: none), as `run` has it",
    )
    search.add_argument("--json", type=Path, metavar="FILE", help="also write the search result to this JSON file")
    search.set_defaults(handler=command_search)

    surface = commands.add_parser(
        "surface", parents=[store_option], help="map the peak rate over factors (a response surface) from a plan"
    )
    surface.add_argument("plan", metavar="PLAN.toml", type=Path, help="the surface plan (see peakbench.surfaceplan)")
    surface.add_argument(
        "--scale", type=_scale, default=1.0, metavar="F", help="multiply the self-scaled file-set size (default 1)"
    )
    surface.add_argument("--seed", type=_whole(0), default=1, metavar="N", help="first trial's op-sequence seed")
    surface.add_argument("--json", type=Path, metavar="FILE", help="also write the surface result to this JSON file")
    surface.set_defaults(handler=command_surface)

    validate = commands.add_parser("validate", help="check that the target performs every operation correctly")
    validate.add_argument(
        "target",
        metavar="TARGET",
        help="a directory, file:///DIR, nfs://SERVER/EXPORT[?options] or smb://[USER[:PASSWORD]@]SERVER/SHARE[?options]",
    )
    validate.add_argument("--json", type=Path, metavar="FILE", help="also write the checks to this JSON file")
    validate.set_defaults(handler=command_validate)

    # `simulate` has its own parser (peakbench.sim.main); main() hands it the rest of the line.
    commands.add_parser(
        "simulate", add_help=False, help="run search policies side by side on simulated servers (--help for more)"
    )

    workloads = commands.add_parser("workloads", help="the canned workloads")
    workload_commands = workloads.add_subparsers(dest="action", required=True, metavar="ACTION")
    workload_commands.add_parser("list", help="list them").set_defaults(handler=command_workloads_list)
    show = workload_commands.add_parser("show", help="knobs, normalised mix and file-set size of one")
    show.add_argument("workload", metavar="NAME", help="a canned workload name or a workload .toml file")
    show.add_argument(
        "--rate", type=_rate, default=100.0, metavar="OPS", help="offered load for the file-set size (default 100)"
    )
    show.add_argument("--scale", type=_scale, default=1.0, metavar="F", help="multiply the file-set size (default 1)")
    show.set_defaults(handler=command_workloads_show)
    model = workload_commands.add_parser(
        "model", help="a workload from Fstress's application models (Figure 3): hit rates to an op mix"
    )
    models = model.add_subparsers(dest="model", required=True, metavar="MODEL")
    proxy = models.add_parser("web-proxy", help="memory and disk cache hit rates of a web proxy cache")
    proxy.add_argument("--memory-hit", required=True, metavar="H", help="share of requests the memory cache serves")
    proxy.add_argument("--disk-hit", required=True, metavar="D", help="share of memory misses the disk cache serves")
    proxy.add_argument(
        "--eviction",
        default="full",
        metavar="POLICY",
        help="full (default: every create evicts a file), none (a cache still filling), or removes per create",
    )
    server = models.add_parser("web-server", help="the memory cache hit rate of a web server")
    server.add_argument("--hit", required=True, metavar="H", help="share of requests the memory cache serves")
    for modelled in (proxy, server):
        modelled.add_argument(
            "--reads-per-file", metavar="N", help="8 KiB transfers per file read or written (default 2, Fstress's)"
        )
        modelled.add_argument("--output", type=Path, metavar="FILE", help="write the workload here (default: stdout)")
        modelled.set_defaults(handler=command_workloads_model)
    derive = workload_commands.add_parser("derive", help="a workload regenerated along one or more dimensions")
    derive.add_argument("workload", metavar="BASE", help="a canned workload name or a workload .toml file")
    derive.add_argument(
        "--set",
        dest="knobs",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help=f"one of {', '.join(knobs_module.KNOBS)} (see peakbench.workloadknobs); repeat for more",
    )
    derive.add_argument("--name", help="the new workload's name (default: BASE-derived)")
    derive.add_argument("--output", type=Path, metavar="FILE", help="write the workload here (default: stdout)")
    derive.set_defaults(handler=command_workloads_derive)
    trainer = workload_commands.add_parser(
        "train-markov", help="a Markov model (as in specsfs2008-cifs) counted from a capture of SMB2 clients"
    )
    trainer.add_argument("capture", type=Path, metavar="CAPTURE", help="a pcap or pcapng file tshark can read")
    trainer.add_argument("--output", type=Path, required=True, metavar="MODEL", help="the model file to write")
    trainer.set_defaults(handler=command_workloads_train_markov)

    results = commands.add_parser("results", help="what the store holds")
    result_commands = results.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = result_commands.add_parser(
        "list", parents=[store_option], help="one line per stored job: trials, searches, sfs runs, surfaces, plans"
    )
    listing.add_argument(
        "--kind", action="append", choices=store_module.JOB_KINDS, help="only jobs of this kind (repeat for several)"
    )
    listing.add_argument("--json", type=Path, metavar="FILE", help="the list as JSON (- for standard output)")
    listing.set_defaults(handler=command_results_list)
    show_result = result_commands.add_parser("show", parents=[store_option], help="one trial's table and system")
    show_result.add_argument("id", type=int)
    show_result.set_defaults(handler=command_results_show)
    export = result_commands.add_parser(
        "export",
        parents=[store_option],
        help="trials to CSV (summary), JSON (everything), an HdrHistogram log or OpenMetrics text",
    )
    export.add_argument(
        "selectors",
        nargs="*",
        metavar="SELECTOR",
        help="search:ID, sfs:ID, trial:ID[-ID], ... as `report` (default: all)",
    )
    export_to = export.add_mutually_exclusive_group(required=True)
    export_to.add_argument("--csv", type=Path, metavar="FILE")
    export_to.add_argument("--json", type=Path, metavar="FILE")
    export_to.add_argument(
        "--hlog", type=Path, metavar="FILE", help="HdrHistogram interval log: one interval per trial's window"
    )
    export_to.add_argument(
        "--openmetrics", type=Path, metavar="FILE", help="OpenMetrics text: trial rates and latency, search peaks"
    )
    export.set_defaults(handler=command_results_export)

    from .harness.commands import add_commands as add_harness_commands  # plan run|resume|..., compare

    add_harness_commands(commands, _Parser, store_option)
    sfs_run = commands.add_parser(
        "sfs", parents=[store_option, cluster_options], help="run a SPECsfs-style load-point curve from an rc file"
    )
    sfs_run.add_argument(
        "rcfile",
        type=Path,
        metavar="RCFILE",
        help="sfs_rc-style file: LOAD, INCR_LOAD, NUM_RUNS, CLIENTS, PROCS, MNT_POINTS, ...",
    )
    sfs_run.add_argument(
        "--spec-rounding",
        action="store_true",
        help="floor each process's rate as SPEC does (default: split the load exactly)",
    )
    sfs_run.add_argument("--mixfile", type=Path, metavar="FILE", help="the rc file's MIXFILE, when it names none")
    sfs_run.add_argument(
        "--scale",
        type=_scale,
        default=1.0,
        metavar="F",
        help="multiply the self-scaled file set (specsfs2008: 1000 gives SPEC's 120 MB per op/s)",
    )
    sfs_run.add_argument("--dry-run", action="store_true", help="print the load points and stop")
    sfs_run.add_argument(
        "--validate",
        action="store_true",
        help="check every mount point operation by operation, as SPEC's -v, and run no load",
    )
    sfs_run.set_defaults(handler=lambda args: sfs_command.command(args, _console()))

    report = commands.add_parser(
        "report", parents=[store_option], help="tables, figures and a self-contained HTML report from the store"
    )
    report_command.add_arguments(report)
    report.set_defaults(handler=lambda args: report_command.run(args, _console()))
    resume_module.add_command(commands, store_option)
    replay_module.add_commands(
        commands,
        store_option,
        {
            "whole": _whole,
            "positive_ms": _positive_ms,
            "rate": _rate,
            "scale": _scale,
            "duration": _duration,
            "positive_duration": _positive_duration,
        },
    )
    return parser


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _share(text: str) -> float:
    """A share as a fraction (0.01) or a percentage (1%)."""
    percent = text.strip().endswith("%")
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share (e.g. 0.01 or 1%)") from None
    return value / 100 if percent else value


# (option, SearchSettings field, parser, "METAVAR: help"); the settings check the values.
SEARCH_OPTIONS = (
    ("--rsat", "rsat_ms", _fraction, "MS: saturated when the mean response time exceeds this (default 40)"),
    ("--width", "width", _fraction, "S: the peak region is [Rsat(1-S), Rsat(1+S)] (default 0.10)"),
    ("--confidence", "confidence", _fraction, "C: confidence of every interval (default 0.95)"),
    ("--accuracy", "accuracy", _fraction, "A: accuracy required at the peak (default 0.90)"),
    ("--psat", "psat", _fraction, "P: percentile checked against --lsat (default 95)"),
    ("--lsat", "lsat_ms", _fraction, "MS: saturated when the --psat percentile exceeds this (default 2000)"),
    (
        "--max-failed-share",
        "max_failed_share",
        _share,
        (
            "F: saturated when more than this share of a trial's requests fail: errors, shed (HTTP 503/429,"
            " NFS3ERR_JUKEBOX), timeouts, cancellations; 0.01 or 1%% (default 1%%)"
        ),
    ),
    ("--runlength", "runlength_s", _positive_duration, "S: measured time of a careful trial (default 180 s)"),
    (
        "--min-runlength",
        "min_runlength_s",
        _positive_duration,
        "S: shortest careful trial the guided policy may choose from the variance it sees (default runlength/3)",
    ),
    ("--warmup", "warmup_s", _duration, "S: warm-up before each trial (default 30 s)"),
    ("--start-rate", "start_load", _rate, "OPS: first test load (default 50)"),
    ("--min-rate", "min_load", _rate, "OPS: lowest load to offer (default 1)"),
    ("--max-rate", "max_load", _rate, "OPS: highest load to offer (default 1,000,000)"),
    ("--max-trials", "max_total_trials", _whole(2), "N: trial budget of the whole search (default 300)"),
    ("--budget", "max_cost_s", _positive_duration, "S: benchmarking-time budget of the whole search"),
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simulate"]:
        return sim.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        use_tls(getattr(args, "cluster", None), tls_files(vars(args)))
        return args.handler(args)
    except InputError as error:
        print(f"peakbench: {error}", file=sys.stderr)
        return 2
    except RunError as error:
        print(f"peakbench: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("peakbench: interrupted", file=sys.stderr)
        return 130


def _checked_trial(
    args: argparse.Namespace, warmup_s: float = 0.0, runtime_s: float = 1.0, **load
) -> tuple[Workload, dict]:
    """Everything about a trial that can be wrong in the input, checked before anything is written."""
    workload = find_workload(args.workload)
    if args.mixfile is not None:
        workload = with_mixfile(workload, args.mixfile)
    target = parse_target(args.target, getattr(args, "docroot", None))
    check_ours(target)
    # Before the spec, whose file count has a limit too: a set larger than the disk says so first.
    check_space(target, workload.bytes_at(args.rate, args.scale))
    spec = trial_spec(
        workload, target, rate=args.rate, scale=args.scale, warmup_s=warmup_s, runtime_s=runtime_s, **load
    )
    return workload, spec


def _announce(workload: Workload, spec: dict, args: argparse.Namespace) -> None:
    if workload.mix_note:
        print(f"note: {workload.name}: {workload.mix_note}", file=sys.stderr)
    files = spec["fileset"]["files"]
    print(
        f"{workload.name} at {args.rate:g} ops/s on {target_label(spec['target'])}: {files} files,"
        f" about {format_size(workload.bytes_at(args.rate, args.scale))}",
        file=sys.stderr,
    )


def _prepare(engine: Engine, spec: dict) -> dict:
    with ProgressDisplay("prepare", None) as display:
        return engine.prepare(spec, display)


def command_prepare(args: argparse.Namespace) -> int:
    workload, spec = _checked_trial(args)
    with _engine(args, workload) as engine:
        engine.validate(spec)
        _announce(workload, spec, args)
        prepared = _prepare(engine, spec)
    fileset = prepared["fileset"]
    print(
        f"file set {fileset['id']} in {target_label(spec['target'])}: {fileset['files']} files,"
        f" {fileset['dirs']} directories, {fileset['symlinks']} symlinks, {format_size(fileset['bytes'])};"
        f" {prepared['files_created']} files created, {prepared['files_already_complete']} already there"
        f" ({prepared['seconds']:.1f} s" + (f", {prepared['clients']} clients" if "clients" in prepared else "") + ")"
    )
    return 0


def _workload_reference(name: str) -> str:
    """How `peakbench resume` finds the workload again: a file by its absolute path, else the canned name."""
    return str(Path(name).absolute()) if Path(name).is_file() else name


def _engine(args: argparse.Namespace, workload: Workload):
    """One local engine, or the load clients of --clients / --cluster (a context manager)."""
    return engine_for(
        args.clients,
        args.cluster,
        shared_fileset=workload.cluster_fileset == "shared",
        clock_tolerance_s=args.clock_tolerance / 1e3,
        announce=lambda text: print(f"cluster: {text}", file=sys.stderr),
    )


def command_run(args: argparse.Namespace) -> int:
    workload, spec = _checked_trial(
        args,
        warmup_s=args.warmup,
        runtime_s=args.runtime,
        seed=args.seed,
        max_outstanding=args.max_outstanding,
        arrivals=args.arrivals,
    )
    check_output(args.json, "--json")
    with _engine(args, workload) as engine:
        engine.validate(spec)
        # Opened before the trial: a store that cannot be written is refused before anything is measured.
        with store_module.Store(args.db) as store:
            return _run_trial(args, workload, spec, engine, store)


def _run_trial(args: argparse.Namespace, workload: Workload, spec: dict, engine, store) -> int:
    _announce(workload, spec, args)
    record = TrialRecord(
        workload=workload.name,
        target=target_label(spec["target"]),
        sysinfo=snapshot(spec["target"], engine.version()),
        notes=(workload.mix_note,) if workload.mix_note else (),
    )
    console = _console(args.json)
    try:
        stored = run_trial(spec, engine, store, record)
    except TrialFailed as failed:
        if failed.partial is not None:
            print_trial(spec, failed.partial, console)
            print_clients(failed.partial, console)
        raise
    except TrialInterrupted as stop:
        print_trial(spec, stop.result, console)
        write_json(args.json, json_report(stop.trial_id, workload.name, stop.result))
        kept = (
            f"stored as interrupted trial {stop.trial_id}" if stop.trial_id is not None else "written beside the store"
        )
        print(
            f"peakbench: interrupted after {measured_so_far(spec, stop.result)}; what was measured is {kept}",
            file=sys.stderr,
        )
        return 130
    print_trial(spec, stored.result, console)
    print_clients(stored.result, console)
    write_json(args.json, json_report(stored.trial_id, workload.name, stored.result))
    if stored.trial_id is None:
        raise RunError(f"{stored.store_error}; the trial was written to {stored.saved_to} instead")
    print(f"trial {stored.trial_id} stored in {args.db}", file=sys.stderr)
    return 0


def command_validate(args: argparse.Namespace) -> int:
    """Every operation exercised in a scratch directory of the target, then removed."""
    target = parse_target(args.target)
    if target["kind"] == "null":
        raise InputError("null:// does nothing, so there is nothing to validate", field="TARGET")
    check_output(args.json, "--json")
    result = Engine().validate_target(target)
    print_validation(result, target_label(target), _console(args.json))
    write_json(args.json, result)
    return 0 if result["ok"] else 1


def _search_settings(args: argparse.Namespace) -> SearchSettings:
    chosen = dict(searching.QUICK) if args.quick else {}
    chosen["confirm"] = args.confirm
    chosen.update(
        {setting: getattr(args, setting) for _, setting, _, _ in SEARCH_OPTIONS if getattr(args, setting) is not None}
    )
    try:
        return SearchSettings(**chosen)
    except ValueError as error:
        option = next((o for o, setting, _, _ in SEARCH_OPTIONS if str(error).startswith(setting)), None)
        raise InputError(str(error), field=option) from None


def command_search(args: argparse.Namespace) -> int:
    settings = _search_settings(args)
    seed = args.seed if args.seed is not None else searching.fresh_seed()
    check_output(args.json, "--json")
    if args.quick:
        print(
            f"quick preset: {settings.runlength_s:g} s trials after {settings.warmup_s:g} s warm-up,"
            f" confidence {settings.confidence:.0%}, accuracy {settings.accuracy:.0%} -- a first look,"
            f" not a publishable figure",
            file=sys.stderr,
        )
    if args.target.startswith("sim://"):
        if args.clients or args.cluster:
            raise InputError(
                "a simulated server runs in virtual time: --clients and --cluster do not apply",
                field="--clients" if args.clients else "--cluster",
            )
        if args.max_outstanding:
            raise InputError("a simulated server has no requests in flight to cap", field="--max-outstanding")
        try:
            sim.target_from_url(args.target)  # a bad URL is refused before the store is touched
        except ValueError as error:
            raise InputError(str(error), field="--target") from None
        search_id, result = searching.search_simulated(
            args.target, settings, args.policy, args.seed_rate, seed, args.db
        )
    else:
        args.rate = settings.max_load if settings.max_load < 1e6 else settings.start_load
        workload, spec = _checked_trial(args, max_outstanding=args.max_outstanding)
        store_module.check_compatible(args.db)
        with _engine(args, workload) as engine:
            engine.validate(spec)
            if workload.mix_note:
                print(f"note: {workload.name}: {workload.mix_note}", file=sys.stderr)
            system = snapshot(spec["target"], engine.version())
            search_id, result = searching.search_engine_target(
                workload,
                spec["target"],
                settings,
                args.policy,
                args.db,
                system,
                args.scale,
                seed,
                args.seed_rate,
                engine=engine,
                max_outstanding=args.max_outstanding,
                invocation={
                    "workload": _workload_reference(args.workload),
                    "mixfile": str(args.mixfile.absolute()) if args.mixfile else None,
                    "target": spec["target"],
                    "scale": args.scale,
                    "seed": seed,
                    "seed_load": args.seed_rate,
                    "max_outstanding": args.max_outstanding,
                    **cluster_invocation(args),
                },
            )
    print_search(result, settings, _console(args.json))
    print(f"search {search_id} and its {result.trials} trials stored in {args.db}", file=sys.stderr)
    write_json(args.json, {"search_id": search_id, **result.to_dict()})
    return 0 if result.verdict == "peak" else 3


def print_search(result, settings: SearchSettings, console: Console) -> None:
    loads = Table(title="test loads (by load; the trace has the order tried)")
    for heading in ("load ops/s", "ρ", "class", "mean R ms", "R interval ms", "trials", "cost s", "why"):
        loads.add_column(heading, no_wrap=heading != "why")
    for load in result.loads:
        if load.ci_low_ms is None:
            interval = "-"
        elif load.ci_high_ms is None:  # trials still rising: a lower bound only (LoadSummary.rising)
            interval = f"≥ {load.ci_low_ms:.2f}"
        else:
            interval = f"{load.ci_low_ms:.2f} .. {load.ci_high_ms:.2f}"
        loads.add_row(
            f"{load.load:.1f}",
            f"{load.load_factor:.2f}" if load.load_factor else "-",
            load.classification,
            f"{load.mean_ms:.2f}",
            interval,
            str(load.trials),
            f"{load.cost_s:.1f}",
            load.reason,
        )
    console.print(loads)
    if any(load.ci_low_ms is not None for load in result.loads):
        console.print(
            "why: the interval the search steered by; R interval: the one it states, which allows for trials "
            "that start on an empty queue; at a peak claimed on its first trials, over the fresh trials run after the "
            "claim (the trials column counts both)"
        )
    region = (settings.rsat_ms * (1 - settings.width), settings.rsat_ms * (1 + settings.width))
    console.print(
        f"peak region: mean response {region[0]:g}-{region[1]:g} ms; policy {result.policy};"
        f" {result.trials} trials, {result.cost_seconds:.0f} s of benchmarking"
    )
    # The message is the result's own account (controller/search.py); the JSON holds the same numbers.
    if result.verdict == "peak":
        console.print(f"[bold]{escape(result.message)}[/bold]")
        console.print(_bracket_line(result.bracket_low, result.bracket_high))
    else:
        console.print(f"[bold red]no peak: {result.verdict}[/bold red]: {escape(result.message)}")
    if result.seed is not None:
        console.print(f"trial seed {result.seed} (repeat this search with --seed {result.seed})")


def _bracket_line(low: float | None, high: float | None) -> str:
    """The settled loads nearest the region, saying which side none settled on (not "between 679.3 and -")."""
    if low is not None and high is not None:
        return f"bracketed by tested loads {low:.1f} and {high:.1f} ops/s"
    if low is None and high is None:
        return "no tested load settled below or above the peak region"
    side, other = ("below", "above") if low is not None else ("above", "below")
    return (
        f"bracketed {side} by tested load {low if low is not None else high:.1f} ops/s; none settled {other} the region"
    )


def _or_dash(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def command_surface(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan, searching.QUICK)
    workload = find_workload(plan.workload)
    check_output(args.json, "--json")
    store_module.check_compatible(args.db)
    if plan.quick:
        print(
            f"quick preset: {plan.settings.runlength_s:g} s trials, confidence {plan.settings.confidence:.0%},"
            f" accuracy {plan.settings.accuracy:.0%} -- a first look, not a publishable figure",
            file=sys.stderr,
        )
    if plan.fixed_rate is not None:
        surface_id, measured = searching.measure_planned_surface(plan, workload, args.db, args.scale, args.seed)
        print_fixed_rate(measured, _console(args.json))
        print(f"surface {surface_id} and its trials stored in {args.db}", file=sys.stderr)
        write_json(args.json, {"surface_id": surface_id, **measured})
        return 0 if not any(o["failure"] for o in measured["outcomes"]) else 3
    surface_id, result = searching.map_planned_surface(plan, workload, args.db, args.scale, args.seed)
    print_surface(result, _console(args.json))
    print(f"surface {surface_id} and its {len(result.outcomes)} searches stored in {args.db}", file=sys.stderr)
    write_json(args.json, {"surface_id": surface_id, **result.to_dict()})
    return 0 if result.surface is not None and not any(o.failure for o in result.outcomes) else 3


def print_fixed_rate(measured: dict, console: Console) -> None:
    names = [f["name"] for f in measured["factors"]]
    table = Table(
        title=f"mean response time at {measured['rate']:g} ops/s offered, {measured['trials_per_sample']} trials"
        f" of {measured['runlength_s']:g} s per sample; {measured['confidence']:.0%} lognormal intervals"
    )
    for heading in (*names, "n", "mean (ms)", "CI low", "CI high", "achieved (ops/s)", "failed"):
        table.add_column(heading, justify="right")
    for outcome in measured["outcomes"]:
        table.add_row(
            *(f"{outcome['sample'][name]:g}" for name in names),
            str(outcome["trials"]),
            *(f"{outcome[k]:.3f}" if outcome[k] is not None else "-" for k in ("mean_ms", "ci_low_ms", "ci_high_ms")),
            _or_dash(outcome["achieved_rate"]),
            escape(outcome["failure"] or f"{outcome['failed_share']:.1%}"),
        )
    console.print(table)


def print_surface(result, console: Console) -> None:
    names = [f.name for f in result.factors]
    samples = Table(title="samples (in the order searched)")
    for heading in (
        *names,
        "seeded from ops/s",
        "peak ops/s",
        "peak interval ops/s",
        f"predicted ops/s ({result.confidence:.0%} prediction interval)",
        "trials",
        "cost s",
        "failure",
    ):
        samples.add_column(heading, no_wrap=heading != "failure")
    for o in result.outcomes:
        found = o.result is not None and o.failure is None
        interval = f"{o.result.ci_low:.1f} .. {o.result.ci_high:.1f}" if found and o.result.ci_low is not None else "-"
        samples.add_row(
            *(f"{o.sample[n]:g}" for n in names),
            _or_dash(o.seed_load),
            _or_dash(o.result.peak_rate if found else None),
            interval,
            _or_dash(o.predicted)
            + (f" ({o.predicted_low:.1f} .. {o.predicted_high:.1f})" if o.predicted_low is not None else ""),
            str(o.result.trials) if o.result else "0",
            f"{o.result.cost_seconds:.0f}" if o.result else "0",
            o.failure or "",
        )
    console.print(samples)
    measured = sum(o.failure is None for o in result.outcomes)
    if result.surface is None:
        console.print(
            f"[bold red]no surface[/bold red]: {measured} of {len(result.outcomes)} samples found a peak;"
            f" a quadratic in {len(names)} factors needs {len(quadratic_terms(result.factors))}"
        )
    else:
        fitted = result.surface
        terms = ", ".join(
            f"{c:+.4g}·{t}" if t != "1" else f"{c:.4g}" for t, c in zip(fitted.terms, fitted.coefficients)
        )
        console.print(
            f"peak rate ≈ {terms} (coded factors in [-1, 1]); "
            + describe_error(
                measured, len(fitted.terms), result.loo_mape, result.loo_samples, result.mape, fitted.r_squared
            )
        )
    console.print(f"total cost {result.cost_seconds:.0f} s of benchmarking")


def json_report(trial_id: int, workload: str, result: dict) -> dict:
    """The engine's result, with the trial's id and a total error count per op."""
    return {"trial_id": trial_id, "workload": workload, **result, "ops": ops_with_error_counts(result)}


def command_workloads_list(args: argparse.Namespace) -> int:
    console = _console()
    for name in canned_names():
        workload = find_workload(name)
        top_ops = format_mix(dict(sorted(workload.mix.items(), key=lambda item: -item[1])[:3]))
        console.print(
            f"[bold]{name}[/bold]  {top_ops}, ...; at 100 ops/s {workload.files_at(100)} files,"
            f" {format_size(workload.bytes_at(100))}"
        )
        console.print(f"    {workload.description}", highlight=False)
    console.print("peakbench workloads show NAME [--rate OPS] for the details")
    return 0


def command_workloads_show(args: argparse.Namespace) -> int:
    workload = find_workload(args.workload)
    console = _console()
    console.print(f"[bold]{workload.name}[/bold]  ({workload.path})")
    console.print(workload.description)
    console.print(f"[dim]source: {workload.source}[/dim]")
    knobs = Table(show_header=False, box=None)
    for key, value in workload.fileset.items():
        quantity = "size" if key == "file_sizes" else "popularity" if "popularity" in key else "count"
        text = describe_distribution(value, quantity) if isinstance(value, dict) else str(value)
        if key == "file_sizes":
            text += f"; mean {format_size(workload.mean_file_size)}"
        knobs.add_row(f"fileset.{key}", text)
    scaling = workload.scaling
    per_op = (
        f"{scaling.files_per_op:g} files" if scaling.files_per_op is not None else format_size(scaling.bytes_per_op)
    )
    knobs.add_row("scaling", f"{per_op} per op/s of offered load, at least {scaling.min_files} files")
    for name, io in (("read", workload.read), ("write", workload.write)):
        knobs.add_row(name, f"{describe_distribution(io['size'], 'size')}, {io['pattern']}")
    knobs.add_row("arrivals", workload.arrivals)
    knobs.add_row("mix", format_mix(workload.mix) + (f"  ({workload.mix_note})" if workload.mix_note else ""))
    console.print(knobs)
    console.print(
        f"at {args.rate:g} ops/s (scale {args.scale:g}): {workload.files_at(args.rate, args.scale)} files,"
        f" about {format_size(workload.bytes_at(args.rate, args.scale))}"
    )
    return 0


def command_workloads_model(args: argparse.Namespace) -> int:
    options = {"memory_hit": "--memory-hit", "disk_hit": "--disk-hit", "eviction": "--eviction", "hit": "--hit"}
    options["reads_per_file"] = "--reads-per-file"
    knobs = {key: getattr(args, key) for key in options if getattr(args, key, None) is not None}
    return _write_derived(args, args.model, knobs, f"{args.model}-model", lambda key: options[key])


def command_workloads_derive(args: argparse.Namespace) -> int:
    knobs = {}
    for text in args.knobs:
        key, value = knobs_module.parse_assignment(text)
        if key in knobs:
            raise InputError(f"{key} is set twice", field=f"--set {key}")
        knobs[key] = value
    base = find_workload(args.workload)
    return _write_derived(args, args.workload, knobs, args.name or f"{base.name}-derived", lambda key: f"--set {key}")


def command_workloads_train_markov(args: argparse.Namespace) -> int:
    check_output(args.output, "--output")
    if args.output.is_dir():
        raise InputError(f"{args.output}: is a directory; name the model file to write", field="--output")
    counts = markovtrain.train(args.capture, args.output)
    print(
        f"{args.output}: {sum(counts.ops.values())} ops over {counts.handles} handles on {counts.clients} connections;"
        f" mix {format_mix({op: n / sum(counts.ops.values()) for op, n in counts.ops.items()})}",
        file=sys.stderr,
    )
    return 0


def _write_derived(args: argparse.Namespace, base_name: str, knobs: dict, name: str, field) -> int:
    """The knobs applied to the base, written as a workload file (or to standard output)."""
    check_output(args.output, "--output")
    if args.output is not None and args.output.is_dir():
        raise InputError(f"{args.output}: is a directory; name the workload file to write", field="--output")
    base = find_workload(base_name)
    derived = knobs_module.with_knobs(base, knobs, field)
    settings = ", ".join(f"{key} = {value}" for key, value in knobs.items()) or "the defaults"
    derived = dataclasses.replace(
        derived, name=name, source=f"{base.source} Derived from {base.path.name} with {settings}.".strip()
    )
    if args.output is None or args.output == STDOUT:
        sys.stdout.write(knobs_module.toml_text(knobs_module.to_document(derived)))
    else:
        knobs_module.write_workload(derived, args.output)
        print(f"{args.output}: workload {name}", file=sys.stderr)
    print(f"mix: {format_mix(derived.mix)}", file=sys.stderr)
    return 0


def _open_existing_store(path: Path) -> store_module.Store:
    return store_module.Store(path, readonly=True)


def command_results_list(args: argparse.Namespace) -> int:
    kinds = tuple(args.kind) if args.kind else store_module.JOB_KINDS
    with _open_existing_store(args.db) as store:
        jobs = store.jobs(kinds)
    if args.json:
        write_json(args.json, jobs)
        return 0
    table = Table(title=f"{len(jobs)} stored job{'s' if len(jobs) != 1 else ''} in {args.db}")
    for heading in ("kind", "id", "created (UTC)", "workload", "state", "size"):
        table.add_column(heading, no_wrap=True)
    table.add_column("target", overflow="fold")
    table.add_column("verdict", overflow="fold")
    for job in jobs:
        table.add_row(
            job["kind"],
            str(job["id"]),
            job["created"][:16].replace("T", " "),
            job["workload"],
            job["status"],
            job["size"],
            job["target"],
            job["verdict"],
        )
    _console().print(table)
    return 0


def command_results_show(args: argparse.Namespace) -> int:
    with _open_existing_store(args.db) as store:
        trial = store.trial(args.id)
    if trial is None:
        raise InputError(f"no trial {args.id} in the store", file=args.db)
    console = _console()
    console.print(
        f"[bold]trial {trial['id']}[/bold]: {trial['workload']} at {trial['rate']:g} ops/s"
        f" on {trial['target']}, {trial['created']}, {trial['status']}"
    )
    for note in trial["notes"]:
        console.print(f"note: {note}")
    if trial["error"]:
        console.print(f"[red]error: {trial['error']}[/red]")
    if trial["result"]:
        print_trial(trial["spec"], trial["result"], console)
    system = trial["sysinfo"]
    memory = format_size(system["memory_bytes"]) if system.get("memory_bytes") else "?"
    console.print(
        f"system: {system.get('os')}, kernel {system.get('kernel')}, {system.get('cpu_count')} x"
        f" {system.get('cpu_model')}, {memory} memory, peakbench {system.get('peakbench_version')}"
    )
    fs = system.get("target_fs")
    if fs:
        console.print(
            f"target file system: {fs['fs_type']} on {fs['device']} at {fs['mount_point']}"
            f" ({fs['mount_options']}; {fs['super_options']})"
        )
    return 0


CSV_COLUMNS = (
    "id",
    "created",
    "workload",
    "target",
    "status",
    "requested_rate",
    "achieved_rate",
    "completed",
    "mean_ms",
    "stddev_ms",
    "p50_ms",
    "p99_ms",
    "schedule_lag_p99_ms",
    "generator_saturated",
    "files",
    "error",
)


def command_results_export(args: argparse.Namespace) -> int:
    output = args.csv or args.json or args.hlog or args.openmetrics
    check_output(output, "--" + next(k for k in ("csv", "json", "hlog", "openmetrics") if getattr(args, k)))
    with _open_existing_store(args.db) as store:
        if args.selectors:
            from .report.selection import select

            chosen = select(store, args.selectors)
            trials = chosen.trials
            searches = [s.record for s in chosen.series if s.kind == "search" and s.record]
        else:
            trials, searches = store.trials(), store.searches()
    if args.json:
        write_json(args.json, trials)
        return 0
    if args.hlog or args.openmetrics:
        from . import exports

        with opened(output) as file:
            file.write(exports.hlog(trials) if args.hlog else exports.openmetrics(trials, searches))
        return 0
    with opened(args.csv, newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for trial in trials:
            result = TrialResult.load(trial["result"]) if trial["result"] else None  # None: a failed trial
            measured = (
                {
                    "achieved_rate": result.achieved_rate,
                    "completed": result.completed,
                    **{key: getattr(result.latency, key) for key in ("mean_ms", "stddev_ms", "p50_ms", "p99_ms")},
                    "schedule_lag_p99_ms": result.schedule_lag.p99_ms,
                    "generator_saturated": result.generator_saturated,
                }
                if result is not None
                else {}
            )
            writer.writerow(
                {
                    "id": trial["id"],
                    "created": trial["created"],
                    "workload": trial["workload"],
                    "target": trial["target"],
                    "status": trial["status"],
                    "requested_rate": trial["rate"],
                    **measured,
                    "files": (trial["spec"].get("fileset") or {}).get("files")  # a replay has no file set
                    or (result.replay.files if result is not None and result.replay is not None else None),
                    "error": trial["error"],
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
