"""`peakbench sfs RCFILE`: run a SPECsfs-style load-point curve and keep it in the store.

Each load point is one trial at the aggregate load (after SPEC's rounding if
asked): prepare (the file set grows with the load, like SPEC's INIT phase),
warm up, measure. The curve and every trial are stored as they finish, so
`peakbench report sfs:ID` can show a curve that is still running or was
killed. A failed point ends the curve, as in SPEC.

The load of all CLIENTS × PROCS processes is generated from this machine by
one engine (multi-host runs belong to the cluster layer); MNT_POINTS may name
one directory any number of times.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from rich.console import Console

from .. import store as store_module
from ..engine import Engine
from ..errors import InputError, RunError
from ..locks import StoreLock
from ..mix import normalise
from ..mixfile import read_mixfile
from ..report import terminal
from ..report.model import ReportOptions
from ..report.sections import sfs_summary
from ..report.sections.load_curve import overall_response_time
from ..report.selection import select
from ..sysinfo import snapshot
from ..targets import check_ours, check_space, parse_target, target_label
from ..trials import TrialFailed, TrialRecord, run_trial
from ..workload import Workload, find_workload, trial_spec
from .rcfile import RcFile, read_rcfile


@dataclasses.dataclass(frozen=True)
class Plan:
    rc: RcFile
    workload: Workload
    target: dict
    loads: list[float]
    spec_rounding: bool

    def settings(self) -> dict:
        """What the store keeps about the curve: enough to rebuild its summary and know what is missing."""
        rc = self.rc
        return {
            "rcfile": str(rc.path),
            "loads": self.loads,
            "requested": list(rc.requested),
            "spec_rounding": self.spec_rounding,
            "clients": list(rc.clients),
            "procs": rc.procs,
            "processes": rc.processes,
            "per_process": [load / rc.processes for load in self.loads],
            "mount_points": list(rc.mount_points),
            "mixfile": str(rc.mixfile) if rc.mixfile else None,
            "mix": self.workload.mix,
            "warmup_s": rc.warmup_s,
            "runtime_s": rc.runtime_s,
            "ignored": list(rc.ignored),
        }


def plan(path: Path, spec_rounding: bool) -> Plan:
    """Everything that can be wrong in the rc file and what it names, checked before anything runs."""
    rc = read_rcfile(path)
    try:
        workload = find_workload(rc.workload)
    except InputError as error:
        raise InputError(error.message, file=rc.path, line=rc.lines.get("WORKLOAD"), field="WORKLOAD") from None
    if rc.mixfile is not None:
        shares, _ = normalise(read_mixfile(rc.mixfile))
        workload = dataclasses.replace(workload, mix=shares, mix_note=None)
    distinct = sorted(set(rc.mount_points))
    if len(distinct) > 1:
        raise InputError(
            f"{len(distinct)} different directories; peakbench sfs loads one directory from this"
            " machine (repeat it once per proc)",
            file=rc.path,
            line=rc.lines.get("MNT_POINTS"),
            field="MNT_POINTS",
        )
    loads = rc.loads(spec_rounding)
    try:
        target = parse_target(distinct[0])
        check_ours(target)
        check_space(target, workload.bytes_at(loads[-1]))
    except InputError as error:  # a --target error on the command line is a MNT_POINTS error here
        raise InputError(error.message, file=rc.path, line=rc.lines.get("MNT_POINTS"), field="MNT_POINTS") from None
    return Plan(rc, workload, target, loads, spec_rounding)


def describe(chosen: Plan) -> list[str]:
    rc = chosen.rc
    lines = [
        f"{len(chosen.loads)} load points ({'SPEC rounding' if chosen.spec_rounding else 'exact split'} over"
        f" {len(rc.clients)} client(s) x {rc.procs} proc(s) = {rc.processes} processes):"
        f" {' '.join(f'{load:g}' for load in chosen.loads)} ops/s",
        f"{chosen.workload.name} on {target_label(chosen.target)}; warm-up {rc.warmup_s:g} s, measured"
        f" {rc.runtime_s:g} s per point" + (f"; mix from {rc.mixfile}" if rc.mixfile else ""),
    ]
    advice = rc.guidance(chosen.loads)
    if advice:
        lines.append(f"note: {advice}")
    if rc.ignored:
        lines.append(f"note: ignored (no meaning here): {', '.join(rc.ignored)}")
    return lines


def run(chosen: Plan, db: Path, engine=None, invocation: dict | None = None) -> int:
    """Run every load point (with `engine`: one local Engine by default, or --clients' load
    clients); returns the stored curve's id. `invocation`: what `peakbench resume` needs."""
    store_module.check_compatible(db)
    engine = engine or Engine()
    specs = point_specs(chosen)
    for spec in specs:
        engine.validate(spec)
    system = snapshot(chosen.target, engine.version())
    with store_module.Store(db) as store:
        run_id = store.add_sfs_run(
            workload=chosen.workload.name,
            target=target_label(chosen.target),
            settings=chosen.settings(),
            invocation=invocation,
        )
        run_points(store, run_id, chosen, specs, engine, system)
    return run_id


def point_specs(chosen: Plan) -> list[dict]:
    """One trial spec per load point, each with its own seed (the same on a resume)."""
    return [
        trial_spec(
            chosen.workload,
            chosen.target,
            rate=load,
            warmup_s=chosen.rc.warmup_s,
            runtime_s=chosen.rc.runtime_s,
            seed=index + 1,
        )
        for index, load in enumerate(chosen.loads)
    ]


def run_points(
    store: store_module.Store,
    run_id: int,
    chosen: Plan,
    specs: list[dict],
    engine,
    system: dict,
    done: frozenset[float] = frozenset(),
) -> None:
    """Every load point whose rate is not in `done`, holding the run's job lock (so that `peakbench
    resume` can tell it is alive); the run is finished, or failed with the reason, in the store."""
    with StoreLock(store.path, f"sfs {run_id}") as lock:
        lock.acquire("running the load points")
        try:
            for number, spec in enumerate(specs, start=1):
                if store_module.point_key(spec["load"]["rate"]) not in done:
                    _point(engine, store, run_id, chosen, spec, system, number)
        except BaseException as error:
            store.finish_sfs_run(run_id, error=str(error) or type(error).__name__)
            raise
        store.finish_sfs_run(run_id)


def _point(engine, store: store_module.Store, run_id: int, chosen: Plan, spec: dict, system: dict, number: int) -> None:
    rate = spec["load"]["rate"]
    print(f"sfs  point {number}/{len(chosen.loads)}: {rate:g} ops/s", file=sys.stderr, flush=True)
    record = TrialRecord(
        workload=chosen.workload.name, target=target_label(chosen.target), sysinfo=system, sfs_run_id=run_id
    )
    try:
        stored = run_trial(spec, engine, store, record)
    except TrialFailed as failed:
        raise RunError(f"load point {rate:g} ops/s: {failed}") from None
    if stored.trial_id is None:
        raise RunError(
            f"load point {rate:g} ops/s: {stored.store_error}; the trial was written to {stored.saved_to} instead"
        )


def command(args, console: Console, engine_for) -> int:
    """`engine_for(args, workload)`: the context manager that gives the engine (or load clients)."""
    chosen = plan(args.rcfile, args.spec_rounding)
    for line in describe(chosen):
        print(line, file=sys.stderr)
    if args.dry_run:
        console.print(" ".join(f"{load:g}" for load in chosen.loads))
        return 0
    with engine_for(args, chosen.workload) as engine:
        run_id = run(
            chosen,
            args.db,
            engine,
            invocation={"clients": args.clients, "cluster": args.cluster, "clock_tolerance_ms": args.clock_tolerance},
        )
    print_summary(args.db, run_id, console)
    return 0


def print_summary(db: Path, run_id: int, console: Console) -> None:
    """The curve's SPECsfs summary, peak and ORT, read back from the store."""
    with store_module.Store(db, readonly=True) as store:
        data = select(store, [f"sfs:{run_id}"])
    terminal.show([sfs_summary.section(data, ReportOptions())], console)
    (series,) = data.series
    points = series.done_points()
    ort = overall_response_time([(p.mean_achieved, p.mean_ms) for p in points])
    peak = max(p.mean_achieved for p in points)
    console.print(
        f"peak {peak:,.1f} ops/s achieved" + (f"; overall response time {ort:.3g} ms" if ort is not None else "")
    )
    print(
        f"sfs run {run_id} and its {len(points)} load points stored in {db};"
        f" `peakbench report sfs:{run_id} --db {db} --html report.html` for the full report",
        file=sys.stderr,
    )
