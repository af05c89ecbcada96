"""`peakbench resume [JOB] --db FILE`: finish a job whose controller died (kill -9, a crash, a reboot).

JOB is search:ID, sfs:ID, replay:ID, surface:ID or plan:ID; without it, the newest unfinished job.
A job still held by a live peakbench (its lock, locks.py) is refused. Nothing
finished is run again and nothing stored is lost:
- a search: the controller decides only from its trials' outcomes, so the
  stored trials are handed back to it in their order, in place of running
  them, and the search then goes on live from where it stopped. A stored
  trial that is not the one the controller asks for (another peakbench
  version) stops the resume with a message rather than mixing two searches;
- an sfs run: the load points with a stored trial are kept, the others run
  with the seeds they would have had;
- a replay sweep: the data-set sizes with a stored trial are kept, the others
  run with the specs the sweep stored;
- a surface: its samples are visited in the same order, and each sample's
  search goes on as a search does (its stored trials handed back first);
- a plan: as `peakbench plan resume`.
A trial that was running when the controller died was never stored, so it
runs again.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rich.console import Console

from . import credentials, replay, searching
from . import store as store_module
from .cluster import engine_for
from .cluster.connection import tls_files, use_tls
from .controller import SearchSettings
from .engine import Engine
from .errors import InputError
from .locks import StoreLock
from .sfs import run as sfs_run
from .surfaceplan import load_plan
from .sysinfo import snapshot
from .trials import TrialRecord
from .workload import find_workload, with_mixfile

RESUMABLE = ("search", "sfs", "replay", "surface", "plan")


def add_command(commands, store_option) -> None:
    resume = commands.add_parser(
        "resume",
        parents=[store_option],
        help="finish an interrupted search, sfs run, replay sweep, surface or plan, repeating no finished trial",
    )
    resume.add_argument(
        "job",
        nargs="?",
        metavar="JOB",
        help="search:ID, sfs:ID, replay:ID, surface:ID or plan:ID (default: the newest unfinished one)",
    )
    resume.set_defaults(handler=command_resume)


def command_resume(args: argparse.Namespace, console=None) -> int:
    with store_module.Store(args.db, readonly=True) as store:
        kind, job_id = _chosen_job(store, args.job)
    if kind == "plan":
        from .harness.commands import command_resume as resume_plan

        return resume_plan(argparse.Namespace(db=args.db, plan_id=job_id, json=None))
    with store_module.Store(args.db) as store:
        if kind == "search":
            result = resume_search(store, job_id)
            print(f"search {job_id}: {result.verdict}: {result.message}")
            return 0 if result.verdict == "peak" else 3
        if kind == "surface":
            return resume_surface(store, job_id, args.db, console or Console())
        if kind == "replay":
            resume_replay(store, job_id, console or Console())
            return 0
        resume_sfs(store, job_id)
    sfs_run.print_summary(args.db, job_id, console or Console())
    return 0


def _chosen_job(store: store_module.Store, text: str | None) -> tuple[str, int]:
    if text is not None:
        match = re.fullmatch(r"(search|sfs|replay|surface|plan):(\d+)", text)
        if not match:
            raise InputError(
                f"{text!r}: name the job as search:ID, sfs:ID, replay:ID, surface:ID or plan:ID", field="JOB"
            )
        kind, job_id = match.group(1), int(match.group(2))
        jobs = [j for j in store.jobs((kind,)) if j["id"] == job_id]
        if not jobs:
            raise InputError(f"no {kind} {job_id} in the store", file=store.path)
        if jobs[0]["status"] == "done":
            raise InputError(f"{kind} {job_id} is finished: nothing to resume", file=store.path)
        return kind, job_id
    unfinished = [j for j in store.jobs(RESUMABLE) if j["status"] != "done" and not _surface_sample(store, j)]
    if not unfinished:
        raise InputError(
            "no unfinished search, sfs run, replay sweep, surface or plan in the store: nothing to resume",
            file=store.path,
        )
    job = unfinished[-1]
    return job["kind"], job["id"]


def _surface_sample(store: store_module.Store, job: dict) -> bool:
    """A search that is one sample of a surface: its surface resumes it."""
    return job["kind"] == "search" and store.search(job["id"])["surface_id"] is not None


def resume_search(store: store_module.Store, search_id: int):
    search = store.search(search_id)
    invocation = search["invocation"]
    if search["surface_id"] is not None:
        raise InputError(
            f"search {search_id} is a sample of surface {search['surface_id']}: resume surface:{search['surface_id']}",
            file=store.path,
        )
    if invocation is None:
        raise InputError(
            f"search {search_id} was not stored with what a resume needs (a simulated search,"
            " or from an older peakbench): run it again",
            file=store.path,
        )
    settings = SearchSettings.from_stored(search["settings"])
    workload = find_workload(invocation["workload"])
    if invocation.get("mixfile"):
        workload = with_mixfile(workload, Path(invocation["mixfile"]))
    target = credentials.with_password(invocation["target"], f"search {search_id}", store.path)
    trials = store.search_trials(search_id)
    done = [t for t in trials if t["status"] == "done"]
    _take_over(store, "search", search_id, f"{len(done)} stored trials")
    with _engine(invocation, workload) as engine:
        live = searching.EngineTrials(
            workload,
            target,
            engine,
            store,
            search_id,
            settings,
            snapshot(target, engine.version()),
            invocation["scale"],
            invocation["seed"],
            invocation["max_outstanding"],
            trials_run=len(trials),
        )
        return searching.continue_search(
            store,
            search_id,
            searching.ResumedTrials(search_id, done, live),
            settings,
            search["policy"],
            invocation["seed_load"],
            invocation["seed"],
        )


def resume_sfs(store: store_module.Store, run_id: int) -> None:
    record = store.sfs_run(run_id)
    settings = record["settings"]
    mixfile = settings.get("mixfile_option")
    chosen = sfs_run.plan(
        Path(settings["rcfile"]),
        settings["spec_rounding"],
        Path(mixfile) if mixfile else None,
        settings.get("scale", 1.0),
        by_client=(record["invocation"] or {}).get("cluster") is not None,
    )
    if chosen.loads != settings["loads"]:
        raise InputError(
            f"sfs run {run_id} cannot be resumed: its rc file now gives the load points"
            f" {' '.join(f'{load:g}' for load in chosen.loads)} where the run has"
            f" {' '.join(f'{load:g}' for load in settings['loads'])}",
            file=settings["rcfile"],
        )
    done = frozenset(store_module.point_key(t["rate"]) for t in store.sfs_run_trials(run_id) if t["status"] == "done")
    _take_over(store, "sfs", run_id, f"{len(done)} of {len(chosen.loads)} load points done")
    invocation = record["invocation"] or {}
    use_tls(invocation.get("cluster"), tls_files(invocation))
    with sfs_run.engines(
        chosen, invocation.get("clients"), invocation.get("cluster"), invocation.get("clock_tolerance_ms", 10.0)
    ) as engine:
        sfs_run.run_points(
            store, run_id, chosen, sfs_run.point_specs(chosen), engine, snapshot(chosen.target, engine.version()), done
        )


def resume_surface(store: store_module.Store, surface_id: int, db: Path, console) -> int:
    surface = store.surface(surface_id)
    invocation = surface["invocation"]
    if invocation is None:
        raise InputError(
            f"surface {surface_id} was not stored with what a resume needs (from an older peakbench): run it again",
            file=store.path,
        )
    path = Path(surface["plan"]["path"])
    plan = load_plan(path, searching.QUICK)
    if json.loads(json.dumps(credentials.without_passwords({**plan.summary(), "path": str(path)}))) != surface["plan"]:
        raise InputError(f"surface {surface_id} cannot be resumed: its plan file has changed since", file=path)
    searches = store.surface_searches(surface_id)
    _take_over(store, "surface", surface_id, f"{len(searches)} of {len(plan.samples)} samples begun")
    _, result = searching.map_planned_surface(
        plan, find_workload(plan.workload), db, invocation["scale"], invocation["seed"], surface_id
    )
    from .cli import print_surface

    print_surface(result, console)
    return 0 if result.surface is not None and not any(o.failure for o in result.outcomes) else 3


def resume_replay(store: store_module.Store, sweep_id: int, console) -> None:
    sweep = store.replay_sweep(sweep_id)
    specs = [
        {**spec, "target": credentials.with_password(spec["target"], f"replay sweep {sweep_id}", store.path)}
        for spec in sweep["settings"]["specs"]
    ]
    prepare = sweep["settings"]["prepare"]
    done = sum(1 for t in store.replay_sweep_trials(sweep_id) if t["status"] == "done")
    _take_over(store, "replay", sweep_id, f"{done} of {len(specs)} data-set sizes done")
    engine = Engine()
    record = TrialRecord(
        workload=sweep["workload"],
        target=sweep["target"],
        sysinfo=snapshot(specs[0]["target"], engine.version()),
        replay_sweep_id=sweep_id,
    )
    replay.run_sweep(store, sweep_id, specs, engine, record, prepare, console)


def _take_over(store: store_module.Store, kind: str, job_id: int, kept: str) -> None:
    """Refuse a job whose controller is alive, say what is kept of it, and mark it running again."""
    _check_not_running(store, f"{kind} {job_id}")
    print(f"{kind} {job_id}: resuming with {kept}", file=sys.stderr, flush=True)
    store.reopen(kind, job_id)


def _check_not_running(store: store_module.Store, job: str) -> None:
    """Refuse a job whose controller is alive (it holds the job's lock) before touching its record."""
    with StoreLock(store.path, job) as lock:
        lock.acquire("checking it can be resumed")


def _engine(invocation: dict, workload):
    use_tls(invocation.get("cluster"), tls_files(invocation))
    return engine_for(
        invocation.get("clients"),
        invocation.get("cluster"),
        shared_fileset=workload.cluster_fileset == "shared",
        clock_tolerance_s=invocation.get("clock_tolerance_ms", 10.0) / 1e3,
        announce=lambda text: print(f"cluster: {text}", file=sys.stderr),
    )
