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

import contextlib
import dataclasses
import socket
import subprocess
import sys
import threading
from pathlib import Path

from rich.console import Console

from .. import store as store_module
from ..cluster.connection import LoadClient, LoadCluster, cluster_invocation
from ..cluster.fanout import DistributedEngine, engine_for
from ..contract import TrialResult
from ..engine import Engine
from ..errors import InputError, RunError
from ..locks import StoreLock
from ..report import terminal
from ..report.model import ReportOptions
from ..report.sections import sfs_summary
from ..report.sections.load_curve import overall_response_time
from ..report.sections.sfs_summary import size_used
from ..report.selection import select
from ..sysinfo import snapshot
from ..table import print_validation
from ..targets import check_ours, check_space, parse_target, target_label
from ..trials import TrialFailed, TrialRecord, run_trial
from ..units import format_size
from ..workload import Workload, find_workload, trial_spec, with_mixfile
from .rcfile import DEBUG_FLAGS, MountPoint, RcFile, read_rcfile
from .submission import warnings, write_sfssum


@dataclasses.dataclass(frozen=True)
class Group:
    """The processes of one client on one mount point: one engine's share of the load."""

    client: str | None  # a CLIENTS name, mapped to a Dask worker on that host; None: any load client
    mount: MountPoint
    target: dict
    procs: int


@dataclasses.dataclass(frozen=True)
class Plan:
    rc: RcFile
    workload: Workload
    groups: tuple[Group, ...]
    loads: list[float]
    spec_rounding: bool
    mixfile_option: Path | None = None  # --mixfile
    scale: float = 1.0  # --scale: multiplies the self-scaled file set

    @property
    def target(self) -> dict:
        """The first group's target: the whole load's when there is one group."""
        return self.groups[0].target

    def label(self) -> str:
        return " ".join(dict.fromkeys(target_label(group.target) for group in self.groups))

    def parts(self) -> list[tuple[float, dict]]:
        """Each group's share of the load and its target, for the DistributedEngine."""
        return [(group.procs / self.rc.processes, group.target) for group in self.groups]

    def settings(self) -> dict:
        """What the store keeps about the curve: enough to rebuild its summary and know what is missing."""
        rc = self.rc
        return {
            "rcfile": str(rc.path),
            "workload": rc.workload,
            "loads": self.loads,
            "requested": list(rc.requested),
            "spec_rounding": self.spec_rounding,
            "clients": list(rc.clients),
            "procs": rc.procs,
            "processes": rc.processes,
            "per_process": [load / rc.processes for load in self.loads],
            "mount_points": [mount.written for mount in rc.mounts],
            "mixfile": str(rc.mixfile or self.mixfile_option or "") or None,
            "mixfile_option": str(self.mixfile_option) if self.mixfile_option else None,
            "mix": self.workload.mix,
            "scale": self.scale,
            "bytes_per_op": self.workload.scaling.bytes_per_op,
            "warmup_s": rc.warmup_s,
            "runtime_s": rc.runtime_s,
            "ignored": list(rc.ignored),
            **rc.settings(),
        }


def plan(
    path: Path, spec_rounding: bool, mixfile: Path | None = None, scale: float = 1.0, by_client: bool = False
) -> Plan:
    """Everything that can be wrong in the rc file and what it names, checked before anything runs.
    `mixfile`: --mixfile, for an rc file without MIXFILE; `scale`: --scale; `by_client`: CLIENTS
    are hosts of a --cluster, so each client's processes run there."""
    rc = read_rcfile(path)
    try:
        workload = find_workload(rc.workload)
    except InputError as error:
        raise rc.error("WORKLOAD", error.message) from None
    if mixfile is not None and rc.mixfile is not None:
        raise rc.error("MIXFILE", f"the rc file sets MIXFILE and --mixfile names {mixfile}; give one")
    if mixfile is not None or rc.mixfile is not None:
        workload = with_mixfile(workload, mixfile or rc.mixfile)
    if rc.access_share is not None:
        workload = dataclasses.replace(workload, fileset={**workload.fileset, "active_fraction": rc.access_share})
    loads = rc.loads(spec_rounding)
    groups = load_groups(rc, by_client)
    for group in groups:
        try:
            check_ours(group.target)
            check_space(group.target, workload.bytes_at(loads[-1], scale) * group.procs / rc.processes)
        except InputError as error:  # a --target error on the command line is a MNT_POINTS error here
            raise InputError(error.message, file=group.mount.file, line=group.mount.line, field="MNT_POINTS") from None
    return Plan(rc, workload, groups, loads, spec_rounding, mixfile.absolute() if mixfile else None, scale)


def load_groups(rc: RcFile, by_client: bool) -> tuple[Group, ...]:
    """The processes grouped by mount point (and by client when clients are hosts), in rc-file order."""
    targets = {mount.url: target for mount, target in mount_targets(rc)}
    groups: dict[tuple[str | None, str], Group] = {}
    for index, mount in enumerate(rc.mounts):
        client = rc.clients[index // rc.procs] if by_client else None
        key = (client, mount.url)
        found = groups.get(key)
        procs = found.procs + 1 if found else 1
        groups[key] = Group(client, found.mount if found else mount, targets[mount.url], procs)
    return tuple(groups.values())


def mount_targets(rc: RcFile) -> list[tuple[MountPoint, dict]]:
    """Each distinct mount point once, with the engine's target for it."""
    found: dict[str, tuple[MountPoint, dict]] = {}
    for mount in rc.mounts:
        if mount.url not in found:
            try:
                found[mount.url] = (mount, mount_target(rc, mount.url))
            except InputError as error:
                raise InputError(error.message, file=mount.file, line=mount.line, field="MNT_POINTS") from None
    return list(found.values())


def validate(path: Path, console: Console) -> int:
    """SPEC's -v: every distinct mount point of the rc file checked operation by operation (from this
    machine), before any load; 0 when all pass."""
    rc = read_rcfile(path)
    failed = []
    for mount, target in mount_targets(rc):
        print(f"sfs  validating {mount.written}", file=sys.stderr, flush=True)
        result = Engine().validate_target(target)
        print_validation(result, f"{mount.written} ({target_label(target)}; {mount.file}:{mount.line})", console)
        if not result["ok"]:
            failed.append(mount.written)
    if failed:
        print(f"sfs  validation failed for {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def mount_target(rc: RcFile, url: str) -> dict:
    """The engine's target for one mount point, with the rc file's NFS credentials and transfer size,
    or its CIFS login."""
    target = parse_target(url)
    if target["kind"] == "smb" and rc.cifs_login is not None:
        # Here, not in the URL: the password stays out of every label and stored mount point.
        target.update(zip(("user", "password", "domain"), rc.cifs_login))
    if target["kind"] == "nfs":
        nfs = {"uid": rc.uid, "gid": rc.gid, "rsize": rc.block_size, "wsize": rc.block_size}
        nfs.update({"biod_reads": rc.biod_reads, "biod_writes": rc.biod_writes})
        target.update({key: value for key, value in nfs.items() if value is not None})
    return target


def describe(chosen: Plan) -> list[str]:
    rc = chosen.rc
    lines = [
        f"{len(chosen.loads)} load points ({'SPEC rounding' if chosen.spec_rounding else 'exact split'} over"
        f" {len(rc.clients)} client(s) x {rc.procs} proc(s) = {rc.processes} processes):"
        f" {' '.join(f'{load:g}' for load in chosen.loads)} ops/s",
        f"{chosen.workload.name} on {chosen.label()}; warm-up {rc.warmup_s:g} s, measured"
        f" {rc.runtime_s:g} s per point"
        + (f"; mix from {rc.mixfile or chosen.mixfile_option}" if chosen.workload.name != rc.workload else ""),
    ]
    lines.append(f"file set: {size_used(chosen.settings())}")
    advice = rc.guidance(chosen.loads)
    if advice:
        lines.append(f"note: {advice}")
    if len(chosen.groups) > 1:
        lines.append(
            f"{len(chosen.groups)} load clients, one per "
            + ("client and mount point" if chosen.groups[0].client else "mount point")
            + ": "
            + "; ".join(
                f"{g.procs} procs on {g.mount.written}" + (f" from {g.client}" if g.client else "")
                for g in chosen.groups
            )
        )
    elif chosen.groups[0].client is None and rc.clients != ("localhost",):
        lines.append(
            f"note: CLIENTS {' '.join(rc.clients)}: their {rc.processes} processes' load comes from this machine"
            " (give --cluster to run each client's processes on a Dask worker on that host)"
        )
    for flag in sorted(rc.debug):
        lines.append(f"debug {flag}: {DEBUG_FLAGS[flag]}")
    if rc.monitor:
        lines.append(f"PRIME_MON_SCRIPT: {' '.join(rc.monitor)} through each measurement phase")
    if rc.ignored:
        lines.append(f"note: ignored (SPEC's own directories and template variables): {', '.join(rc.ignored)}")
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
            target=chosen.label(),
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
            scale=chosen.scale,
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
                    _write_sfssum(store, run_id)
        except BaseException as error:
            store.finish_sfs_run(run_id, error=str(error) or type(error).__name__)
            raise
        store.finish_sfs_run(run_id)


def sfssum_path(db: Path, run_id: int) -> Path:
    return output_dir(db, run_id) / f"sfssum.{run_id}"


def _write_sfssum(store: store_module.Store, run_id: int) -> None:
    """The run's sfssum file as far as it has gone, rewritten after each load point."""
    (series,) = select(store, [f"sfs:{run_id}"]).series
    output_dir(store.path, run_id).mkdir(exist_ok=True)
    write_sfssum(series, sfssum_path(store.path, run_id))


def output_dir(db: Path, run_id: int) -> Path:
    """Where a run's files beside the store go: its sfssum and each point's monitor output."""
    return db.parent / f"{db.stem}-sfs-{run_id}"


class PointEngine:
    """The engine of one load point as the rc file asks: the file-set build limited to INIT_TIMEOUT,
    and PRIME_MON_SCRIPT running through the measurement phase (from the end of the warm-up to the
    end of the run), its output written to `monitor_output`."""

    STOP_GRACE_S = 5.0

    def __init__(self, engine, rc: RcFile, monitor_output: Path | None):
        self.engine, self.rc, self.monitor_output = engine, rc, monitor_output

    def version(self) -> str:
        return self.engine.version()

    def prepare(self, spec: dict, on_progress=None) -> dict:
        if self.rc.init_timeout_s is None:
            return self.engine.prepare(spec, on_progress)
        try:
            return self.engine.prepare(spec, on_progress, timeout_s=self.rc.init_timeout_s)
        except RunError as error:
            if "did not finish within" not in str(error):
                raise
            where = f"{self.rc.path}:{self.rc.lines['INIT_TIMEOUT']}"
            raise RunError(
                f"the file set ({spec['fileset']['files']:,} files) was not built within INIT_TIMEOUT ="
                f" {self.rc.init_timeout_s:g} s ({where}); the build was stopped"
            ) from None

    def run(self, spec: dict, on_progress=None) -> dict:
        if not self.rc.monitor:
            return self.engine.run(spec, on_progress)
        started: list[subprocess.Popen] = []
        with open(self.monitor_output, "w", encoding="utf-8") as output:

            def start() -> None:
                started.append(
                    subprocess.Popen(self.rc.monitor, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                )

            timer = threading.Timer(spec["load"]["warmup_s"], start)
            timer.start()
            try:
                return self.engine.run(spec, on_progress)
            finally:
                timer.cancel()
                timer.join()
                for process in started:
                    process.terminate()
                    try:
                        process.wait(timeout=self.STOP_GRACE_S)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(timeout=self.STOP_GRACE_S)


def _point(engine, store: store_module.Store, run_id: int, chosen: Plan, spec: dict, system: dict, number: int) -> None:
    rate = spec["load"]["rate"]
    rc = chosen.rc
    print(f"sfs  point {number}/{len(chosen.loads)}: {rate:g} ops/s", file=sys.stderr, flush=True)
    if 12 in rc.debug:
        fileset = spec["fileset"]
        mix = " ".join(f"{op} {share:.1%}" for op, share in sorted(spec["mix"].items(), key=lambda item: -item[1]))
        print(
            f"debug 12: point {number}: {fileset['files']:,} files, about"
            f" {format_size(chosen.workload.bytes_at(rate, chosen.scale))}, {fileset['active_fraction']:.0%} accessed; mix {mix}",
            file=sys.stderr,
        )
    monitor_output = None
    notes: tuple[str, ...] = ()
    if rc.monitor:
        folder = output_dir(store.path, run_id)
        folder.mkdir(exist_ok=True)
        monitor_output = folder / f"point-{number}-monitor.txt"
        notes = (f"PRIME_MON_SCRIPT output: {monitor_output}",)
    record = TrialRecord(
        workload=chosen.workload.name,
        target=chosen.label(),
        sysinfo=system,
        sfs_run_id=run_id,
        notes=notes,
    )
    try:
        stored = run_trial(spec, PointEngine(engine, rc, monitor_output), store, record)
    except TrialFailed as failed:
        raise RunError(f"load point {rate:g} ops/s: {failed}") from None
    if 4 in rc.debug:
        failures = [
            f"{op} {error} x{count}"
            for op, stats in sorted(TrialResult.load(stored.result).ops.items())
            for error, count in sorted((stats.errors or {}).items())
        ]
        print(f"debug 4: point {number}: failed operations: {', '.join(failures) or 'none'}", file=sys.stderr)
    if stored.trial_id is None:
        raise RunError(
            f"load point {rate:g} ops/s: {stored.store_error}; the trial was written to {stored.saved_to} instead"
        )


@contextlib.contextmanager
def engines(chosen: Plan, clients: int | None, address: str | None, clock_tolerance_ms: float):
    """The engine of a run: one local engine (or --clients' load clients) for one group of processes;
    for several, one load client per group: local Dask workers, or with --cluster (address) a worker
    on each group's CLIENTS host."""
    announce = lambda text: print(f"cluster: {text}", file=sys.stderr)  # noqa: E731
    shared = chosen.workload.cluster_fileset == "shared"
    if len(chosen.groups) == 1:
        with engine_for(
            clients, address, shared_fileset=shared, clock_tolerance_s=clock_tolerance_ms / 1e3, announce=announce
        ) as engine:
            yield engine
        return
    if clients is not None:
        raise InputError(
            f"the rc file's CLIENTS and MNT_POINTS make {len(chosen.groups)} load clients, one per mount point"
            " and client; --clients cannot split them differently",
            field="--clients",
        )
    from ..cluster import connect

    with connect(clients=None if address else len(chosen.groups), address=address) as cluster:
        workers = _workers_for(chosen, cluster) if address else cluster.clients
        announce(
            f"{len(chosen.groups)} load clients, one per group of processes: "
            + "; ".join(
                f"{worker.host} runs {group.procs} procs on {group.mount.written}"
                for worker, group in zip(workers, chosen.groups)
            )
        )
        chosen_cluster = LoadCluster(cluster.client, workers, None, cluster.identities)
        yield DistributedEngine(chosen_cluster, clock_tolerance_s=clock_tolerance_ms / 1e3, parts=chosen.parts())


def _workers_for(chosen: Plan, cluster: LoadCluster) -> list[LoadClient]:
    """A distinct Dask worker on each group's CLIENTS host."""
    free = list(cluster.clients)
    picked = []
    for group in chosen.groups:
        matching = [worker for worker in free if same_host(group.client, worker.host)]
        if not matching:
            raise chosen.rc.error(
                "CLIENTS",
                f"client {group.client} (its procs on {group.mount.written}) has no free Dask worker on its host;"
                f" the cluster's workers run on {', '.join(sorted({w.host for w in cluster.clients}))}",
            )
        picked.append(matching[0])
        free.remove(matching[0])
    return picked


def same_host(name: str, host: str) -> bool:
    """Whether a CLIENTS name (host name or address) is the host a worker reports."""
    if name.lower() == host.lower() or name.lower().split(".")[0] == host.lower().split(".")[0]:
        return True
    try:
        return socket.gethostbyname(name) == socket.gethostbyname(host)
    except OSError:
        return False


def command(args, console: Console) -> int:
    if args.validate:
        return validate(args.rcfile, console)
    chosen = plan(args.rcfile, args.spec_rounding, args.mixfile, args.scale, by_client=args.cluster is not None)
    for line in describe(chosen):
        print(line, file=sys.stderr)
    if args.dry_run:
        console.print(" ".join(f"{load:g}" for load in chosen.loads))
        return 0
    with engines(chosen, args.clients, args.cluster, args.clock_tolerance) as engine:
        run_id = run(
            chosen,
            args.db,
            engine,
            invocation=cluster_invocation(args),
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
    for warning in warnings(series):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"sfssum file: {sfssum_path(db, run_id)}", file=sys.stderr)
    print(
        f"sfs run {run_id} and its {len(points)} load points stored in {db};"
        f" `peakbench report sfs:{run_id} --db {db} --html report.html` for the full report",
        file=sys.stderr,
    )
