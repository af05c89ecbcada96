"""One trial across many load clients: split the spec, start together, stop together, merge.

THE SEAM every caller uses (`run`, `search`, `sfs`, plans):

    from peakbench.cluster import connect, DistributedEngine

    with connect(clients=4) as cluster:           # or connect(address="tcp://host:8786")
        engine = DistributedEngine(cluster, shared_fileset=False)
        engine.prepare(spec)                      # each client's part of the file set
        result = engine.run(spec)                 # merged TrialResult; ClientsLost if a client was lost
        trial = engine.run_trial(spec)            # never raises for a lost client: a DistributedTrial with
                                                  # .result (merged), .clients (per client), .verdict, .message

DistributedEngine has the methods of peakbench.engine.Engine (version, validate,
prepare, run) with the same arguments, so code written against one engine
takes a DistributedEngine unchanged. `spec` is an ordinary TrialSpec at the
*aggregate* offered rate; the split is:

- rate: each client offers rate/N; with uniform arrivals client i starts i/rate
  later, so the N metronomes interleave into one at the aggregate rate;
- op seed: client i gets seed + i·1000003 (client 0 keeps the seed, so one
  client runs exactly the given spec);
- file set: per client (default), client i owns ceil(files/N) files under its own
  layout seed (fileset.seed + i), so the parts are disjoint file sets that the
  engine keeps apart in the target; shared (shared_fileset=True, for read-only
  mixes only: concurrent restores of a mutated set would collide), every client
  uses the whole set, prepared once by client-0;
- max_outstanding: ceil(cap/N) per client;
- an access-log replay (a spec with `replay`, engine/SPEC.md): client i replays
  the requests at positions i, i+N, ... of the (truncated) log (replay.share),
  each at its own log time when the replay follows the log's clock; a closed
  loop's clients are dealt out among the load clients (64 over two: 32 each,
  the Flash paper's two machines); the document tree is the target's one, so
  client-0 alone prepares it.

The start: the controller measures every client's clock offset (clock.py),
refuses a start whose skew could exceed the tolerance, picks an instant
`start_lead_s` ahead and hands each client that instant in its own clock
(schema peakbench.trial-spec/2, start_at_unix_s). Every engine stops at the end
of its own window, so clients stop together too. Prepares run one client at a
time (per-client parts share the target's manifest).

Faults: a client whose worker leaves the cluster mid-trial (or that returns
nothing by the deadline: warm-up + run + drain + margins) is lost; the trial
still ends, with verdict "lost-clients" naming it, and the merged result of
the clients that finished. A client whose engine fails is "failed-clients".
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

from ..contract import SPEC_SCHEMA_V2, TrialResult
from ..engine import Engine, prepare_timeout, run_timeout
from ..errors import InputError, RunError
from ..workload import check_shareable
from .clock import DEFAULT_TOLERANCE_S, ClockOffset, check_skew, measure_offsets, worker_clock
from .merge import merge_results

SEED_STRIDE = 1_000_003
DEFAULT_START_LEAD_S = 1.0
POLL_S = 0.2
PROGRESS_S = 1.0
MARGIN_S = 30.0

COMPLETE, LOST, FAILED = "complete", "lost-clients", "failed-clients"


# ------------------------------------------------------------------ the split (pure)


def client_specs(
    spec: dict, n: int, shared_fileset: bool = False, parts: list[tuple[float, dict]] | None = None
) -> list[dict]:
    """The N clients' TrialSpecs for one trial at the aggregate rate of `spec` (see the module's doc).
    `parts`: each client's (share of the load, target) where they differ, as an sfs rc file's
    processes on several mount points; by default every client takes 1/N on the spec's target."""
    if n < 1:
        raise ValueError("at least one client")
    if parts is not None and len(parts) != n:
        raise ValueError(f"{len(parts)} parts for {n} clients")
    replay = spec.get("replay")
    if shared_fileset and replay is None:
        check_shareable(spec["mix"])
    closed = spec["load"].get("clients")
    if closed is not None and closed < n:
        raise InputError(f"{closed} closed-loop clients cannot be dealt out among {n} load clients", field="--clients")
    cap = spec["load"].get("max_outstanding")
    specs = []
    for i in range(n):
        # An equal split divides (a product with 1/n can land an ulp above a whole number of files).
        split = (lambda x: x / n) if parts is None else (lambda x, share=parts[i][0]: x * share)
        target = spec["target"] if parts is None else parts[i][1]
        part = {**spec, "schema": SPEC_SCHEMA_V2, "seed": spec.get("seed", 0) + i * SEED_STRIDE, "target": target}
        part["load"] = {
            **spec["load"],
            "rate": split(spec["load"]["rate"]),
            "max_outstanding": math.ceil(split(cap)) if cap else cap,
        }
        if closed is not None:
            part["load"]["clients"] = closed // n + (i < closed % n)
        if replay is not None:
            part["replay"] = {**replay, "share": {"index": i, "count": n}}
        elif not shared_fileset:
            fileset = spec["fileset"]
            part["fileset"] = {
                **fileset,
                "files": math.ceil(split(fileset["files"])),
                "seed": fileset.get("seed", 0) + i,
            }
        part.pop("start_at_unix_s", None)
        specs.append(part)
    return specs


def _interleave_s(spec: dict, index: int) -> float:
    """How much later client `index` starts, so uniform arrivals interleave into one metronome
    (nothing for a closed loop or a replay at the log's times, which have no rate)."""
    rate = spec["load"]["rate"]
    uniform = spec["load"].get("arrivals", "uniform") == "uniform"
    return index / rate if uniform and rate > 0 else 0.0


def start_instants(start_at: float, offsets: list[ClockOffset], spec: dict, compensate: bool = True) -> list[float]:
    """Each client's start_at_unix_s, in its own clock: one instant, interleaved for uniform arrivals."""
    return [start_at + (o.correction_s if compensate else 0.0) + _interleave_s(spec, i) for i, o in enumerate(offsets)]


def default_start_lead_s(spec: dict) -> float:
    """Time for every client to get its task, start its engine and build the file-set model."""
    return DEFAULT_START_LEAD_S + spec.get("fileset", {}).get("files", 0) / 1e6


# ------------------------------------------------------------------ on the workers

# A worker's engine processes by the key of the task that started each, and the tasks the
# controller interrupted: a task interrupted before its engine started (it started late)
# has the engine stopped as it starts, rather than left running a whole trial.
_ENGINES: dict[str, subprocess.Popen] = {}
_INTERRUPTED: set[str] = set()
_ENGINES_LOCK = threading.Lock()


@contextlib.contextmanager
def _engine_of_this_task():
    from distributed import get_worker

    key = get_worker().get_current_task()

    def started(process: subprocess.Popen) -> None:
        with _ENGINES_LOCK:
            _ENGINES[key] = process
            if key in _INTERRUPTED:
                process.send_signal(signal.SIGTERM)

    try:
        yield Engine(on_start=started)
    finally:
        with _ENGINES_LOCK:
            _ENGINES.pop(key, None)


def prepare_on_worker(spec: dict, timeout_s: float | None = None) -> dict:
    with _engine_of_this_task() as engine:
        return engine.prepare(spec, timeout_s=timeout_s)


def run_on_worker(spec: dict, name: str | None = None, topic: str | None = None) -> dict:
    """One client's trial; its engine's progress lines go to the controller as Dask events on `topic`."""
    with _engine_of_this_task() as engine:
        return engine.run(spec, None if topic is None else _forward_progress(name, topic))


def _forward_progress(name: str | None, topic: str):
    from distributed import get_worker

    worker = get_worker()
    return lambda event: worker.log_event(topic, {"client": name, **event})


def stop_engines_on_worker(keys: list[str]) -> int:
    """Stop the engines of these tasks, now or as they start; returns how many were running.
    SIGTERM, not SIGINT: a worker started in the background of a non-interactive shell (`&`)
    passes SIGINT on ignored, and the engine would run its whole trial."""
    with _ENGINES_LOCK:
        _INTERRUPTED.update(keys)
        running = [p for key, p in _ENGINES.items() if key in keys and p.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
    return len(running)


# ------------------------------------------------------------------ outcomes


@dataclasses.dataclass
class ClientRun:
    name: str
    worker: str
    host: str
    spec: dict
    result: dict | None = None
    error: str | None = None  # why it has no result
    lost: bool = False  # its worker left the cluster (or never answered)
    clock: ClockOffset | None = None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "worker": self.worker,
            "host": self.host,
            "lost": self.lost,
            "error": self.error,
            "clock": self.clock.to_dict() if self.clock else None,
            "rate": self.spec["load"]["rate"],
            "seed": self.spec.get("seed"),
            "start_at_unix_s": self.spec.get("start_at_unix_s"),
            "fileset": self.spec.get("fileset", {}).get("seed"),
            "files": self.spec.get("fileset", {}).get("files"),
        }


@dataclasses.dataclass
class DistributedTrial:
    spec: dict  # the aggregate spec
    clients: list[ClientRun]
    result: dict | None  # merged over the clients that returned a result; None if none did
    verdict: str  # complete | lost-clients | failed-clients
    message: str

    @property
    def lost(self) -> list[str]:
        return [c.name for c in self.clients if c.lost]

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.clients if c.error and not c.lost]

    @property
    def complete(self) -> bool:
        return self.verdict == COMPLETE

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "message": self.message,
            "lost": self.lost,
            "failed": self.failed,
            "clients": [c.to_dict() for c in self.clients],
            "result": self.result,
        }


class ClientsLost(RunError):
    """A distributed trial without every client's result; .trial holds what the others measured."""

    def __init__(self, trial: DistributedTrial):
        super().__init__(trial.message)
        self.trial = trial


def verdict_of(runs: list[ClientRun]) -> tuple[str, str]:
    lost = [r for r in runs if r.lost]
    failed = [r for r in runs if r.error and not r.lost]
    finished = len(runs) - len(lost) - len(failed)
    if not lost and not failed:
        return COMPLETE, f"all {len(runs)} clients finished"
    parts = [f"lost {r.name} ({r.worker}: {r.error})" for r in lost]
    parts += [f"{r.name} failed: {r.error}" for r in failed]
    verdict = LOST if lost else FAILED
    return verdict, f"{'; '.join(parts)}; {finished} of {len(runs)} clients finished (their merged results kept)"


# ------------------------------------------------------------------ the engine over many clients


class DistributedEngine:
    """The interface of peakbench.engine.Engine, over every load client of a LoadCluster."""

    def __init__(
        self,
        cluster,
        *,
        shared_fileset: bool = False,
        clock_tolerance_s: float = DEFAULT_TOLERANCE_S,
        compensate_clocks: bool = True,
        start_lead_s: float | None = None,
        clock: Callable[[], float] = worker_clock,
        poll_s: float = POLL_S,
        parts: list[tuple[float, dict]] | None = None,
    ):
        self.cluster = cluster
        self.parts = parts  # each client's (share, target), see client_specs
        self.shared_fileset = shared_fileset
        self.clock_tolerance_s = clock_tolerance_s
        self.compensate_clocks = compensate_clocks
        self.start_lead_s = start_lead_s
        self.clock = clock
        self.poll_s = poll_s
        self.last_offsets: list[ClockOffset] = []

    # -- Engine's interface

    def version(self) -> str:
        return Engine().version()  # every worker's was checked equal when connecting

    def validate(self, spec: dict) -> None:
        engine = Engine()
        for part in client_specs(spec, self.cluster.size, self.shared_fileset, self.parts):
            engine.validate({**part, "start_at_unix_s": time.time() + 60})

    def prepare(self, spec: dict, on_progress=None, timeout_s: float | None = None) -> dict:
        """Each client's part of the file set (client-0 alone for a shared one), one client at a time."""
        specs = client_specs(spec, self.cluster.size, self.shared_fileset, self.parts)
        shared = self.shared_fileset or "replay" in spec  # a replay's document tree is the target's one
        clients = self.cluster.clients[:1] if shared else self.cluster.clients
        prepared = []
        for load_client, part in zip(clients, specs):
            future = self.cluster.client.submit(
                prepare_on_worker,
                part,
                timeout_s,
                key=f"peakbench-prepare-{load_client.name}-{uuid.uuid4().hex[:8]}",
                workers=[load_client.worker],
                allow_other_workers=False,
                pure=False,
                retries=0,
            )
            run = ClientRun(load_client.name, load_client.worker, load_client.host, part)
            self._gather(
                {load_client.name: future},
                {load_client.name: run},
                (timeout_s or prepare_timeout(part)) + MARGIN_S,
                on_progress,
                phase="prepare",
            )
            if run.result is None:
                what = "lost" if run.lost else "failed"
                raise RunError(f"prepare on {run.name} ({run.worker}) {what}: {run.error}")
            prepared.append(run.result)
            if on_progress is not None and "fileset" in spec:
                on_progress(
                    {
                        "phase": "prepare",
                        "done": sum(p["fileset"]["files"] for p in prepared),
                        "total": sum(s["fileset"]["files"] for s in specs[: len(clients)]),
                    }
                )
        return _merge_prepared(prepared, shared)

    def run(self, spec: dict, on_progress=None) -> dict:
        trial = self.run_trial(spec, on_progress)
        if not trial.complete:
            raise ClientsLost(trial)
        return trial.result

    # -- the distributed trial

    def run_trial(self, spec: dict, on_progress=None) -> DistributedTrial:
        cluster = self.cluster
        specs = client_specs(spec, cluster.size, self.shared_fileset, self.parts)
        offsets = measure_offsets(cluster, clock=self.clock, good_enough_s=self.clock_tolerance_s / 4)
        self.last_offsets = offsets
        bound = check_skew(offsets, self.clock_tolerance_s, self.compensate_clocks)
        lead = self.start_lead_s if self.start_lead_s is not None else default_start_lead_s(spec)
        start_at = time.time() + lead
        instants = start_instants(start_at, offsets, spec, self.compensate_clocks)
        runs, futures = {}, {}
        topic = f"peakbench-progress-{uuid.uuid4().hex[:12]}" if on_progress is not None else None
        latest: dict[str, dict] = {}
        if topic is not None:
            cluster.client.subscribe_topic(topic, lambda event: latest.__setitem__(event[1]["client"], event[1]))
        for load_client, part, offset, instant in zip(cluster.clients, specs, offsets, instants):
            part["start_at_unix_s"] = instant
            runs[load_client.name] = ClientRun(
                load_client.name, load_client.worker, load_client.host, part, clock=offset
            )
            futures[load_client.name] = cluster.client.submit(
                run_on_worker,
                part,
                load_client.name,
                topic,
                key=f"peakbench-run-{load_client.name}-{uuid.uuid4().hex[:8]}",
                workers=[load_client.worker],
                allow_other_workers=False,
                pure=False,
                retries=0,
            )
        deadline_s = lead + run_timeout(specs[0]) + MARGIN_S
        try:
            self._gather(
                futures, runs, deadline_s, on_progress, phase="run", start_at=start_at, spec=spec, latest=latest
            )
        finally:
            if topic is not None:
                cluster.client.unsubscribe_topic(topic)

        ordered = [runs[c.name] for c in cluster.clients]
        verdict, message = verdict_of(ordered)
        finished = [r for r in ordered if r.result is not None]
        merged = None
        if finished:
            started = time.perf_counter()
            merged = merge_results(
                [r.result for r in finished],
                [r.name for r in finished],
                shared_fileset=self.shared_fileset,
                late_tolerance_ms=self.clock_tolerance_s * 1e3,
            )
            merge_s = time.perf_counter() - started
            merged["cluster"] = {
                "clients": len(ordered),
                "finished": [r.name for r in finished],
                "lost": [r.name for r in ordered if r.lost],
                "failed": [r.name for r in ordered if r.error and not r.lost],
                "verdict": verdict,
                "hosts": {r.name: r.host for r in ordered},
                "clock": {r.name: r.clock.to_dict() for r in ordered if r.clock},
                "skew_bound_ms": bound * 1e3,
                "start_skew_ms": measured_start_skew_ms(finished, start_at, spec),
                "start_lead_s": lead,
                "merge_s": merge_s,
                "shared_fileset": self.shared_fileset,
            }
        return DistributedTrial(spec, ordered, merged, verdict, message)

    def _gather(
        self,
        futures: dict,
        runs: dict,
        deadline_s: float,
        on_progress,
        phase: str,
        start_at: float | None = None,
        spec: dict | None = None,
        latest: dict | None = None,
    ) -> None:
        """Wait for every future; a client whose worker leaves, or that is silent past the deadline, is lost."""
        from distributed import wait

        deadline = time.monotonic() + deadline_s
        pending = dict(futures)
        next_progress = time.monotonic()
        try:
            while pending:
                try:
                    wait(list(pending.values()), timeout=self.poll_s, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                for name, future in list(pending.items()):
                    if future.done():
                        del pending[name]
                        self._collect(future, runs[name])
                if not pending:
                    break
                alive = self.cluster.alive()  # None: unanswered, ask again at the next poll
                for name, future in list(pending.items()):
                    if alive is not None and runs[name].worker not in alive:
                        runs[name].lost, runs[name].error = True, "its worker left the cluster mid-trial"
                        future.cancel()
                        del pending[name]
                if time.monotonic() > deadline:
                    for name, future in pending.items():
                        runs[name].lost = True
                        runs[name].error = f"no result within {deadline_s:.0f} s"
                        future.cancel()
                    pending.clear()
                if (
                    on_progress is not None
                    and start_at is not None
                    and spec is not None
                    and time.monotonic() >= next_progress
                ):
                    next_progress += PROGRESS_S
                    on_progress(progress_event(spec, start_at, len(pending), len(futures), latest or {}))
        except BaseException:
            for future in pending.values():
                future.cancel()
            if pending:  # interrupted: the engines still running on the workers stop too
                try:
                    self.cluster.client.run(
                        stop_engines_on_worker,
                        [f.key for f in pending.values()],
                        workers=[runs[n].worker for n in pending],
                        on_error="ignore",
                    )
                except Exception:
                    pass
            raise

    def _collect(self, future, run: ClientRun) -> None:
        if future.status == "finished":
            run.result = future.result()
            return
        if future.cancelled():
            run.lost, run.error = True, run.error or "cancelled"
            return
        error = future.exception()
        alive = self.cluster.alive()
        if alive is not None and run.worker not in alive:
            run.lost, run.error = True, f"its worker left the cluster mid-trial ({type(error).__name__})"
        else:
            run.error = str(error) or type(error).__name__


def progress_event(spec: dict, start_at: float, pending: int, total: int, latest: dict[str, dict]) -> dict:
    """One progress line for the whole trial: the phase from the controller's clock, and the sums of
    the clients' latest engine progress lines (completed, in flight, rate; the largest lag)."""
    load = spec["load"]
    elapsed = time.time() - start_at
    if elapsed < 0:
        phase = "start"
    elif elapsed < load.get("warmup_s", 0):
        phase = "warmup"
    elif elapsed < load.get("warmup_s", 0) + load["runtime_s"]:
        phase = "measure"
    else:
        phase = "drain"
    event = {"phase": phase, "elapsed_s": max(0.0, elapsed), "clients_running": pending, "clients": total}
    events = list(latest.values())
    for key in ("completed", "outstanding", "rate"):
        values = [e[key] for e in events if isinstance(e.get(key), (int, float))]
        if values:
            event[key] = sum(values)
    lags = [e["lag_ms"] for e in events if isinstance(e.get("lag_ms"), (int, float))]
    if lags:
        event["lag_ms"] = max(lags)
    return event


def measured_start_skew_ms(finished: list[ClientRun], start_at: float, spec: dict) -> float | None:
    """Spread of the clients' actual time zeros around their planned ones, each converted to the
    controller's clock by the offset the start compensated: how closely the engines hit their
    instants. The clock check's error is not in it (skew_bound_ms bounds that)."""
    deviations = []
    for run in finished:
        start = TrialResult.load(run.result).start
        if start is None or run.clock is None:
            continue
        at = start.at_unix_s
        index = int(run.name.rsplit("-", 1)[-1]) if run.name.rsplit("-", 1)[-1].isdigit() else 0
        planned = start_at + _interleave_s(spec, index)
        deviations.append(at - run.clock.correction_s - planned)
    if len(deviations) < 1:
        return None
    return (max(deviations) - min(deviations)) * 1e3


def _merge_prepared(prepared: list[dict], shared: bool) -> dict:
    if shared or len(prepared) == 1:
        return prepared[0]
    first = prepared[0]
    fileset = {"id": ",".join(sorted({p["fileset"]["id"] for p in prepared}))}
    for key in ("files", "dirs", "symlinks", "bytes"):
        fileset[key] = sum(p["fileset"][key] for p in prepared)
    return {
        "schema": first.get("schema"),
        "fileset": fileset,
        "files_created": sum(p.get("files_created", 0) for p in prepared),
        "files_already_complete": sum(p.get("files_already_complete", 0) for p in prepared),
        "seconds": sum(p.get("seconds", 0.0) for p in prepared),
        "clients": len(prepared),
    }


@contextlib.contextmanager
def engine_for(
    clients: int | None = None,
    address: str | None = None,
    *,
    shared_fileset: bool = False,
    clock_tolerance_s: float = DEFAULT_TOLERANCE_S,
    announce: Callable[[str], None] | None = None,
):
    """The engine a command uses: one local Engine, or a DistributedEngine over a cluster it connects
    (and closes on exit). `run` and `search` use this; `sfs` and plans should too."""
    if clients is None and address is None:
        yield Engine()
        return
    from .connection import connect

    with connect(clients=clients, address=address) as cluster:
        if announce is not None:
            announce(cluster.describe())
        yield DistributedEngine(cluster, shared_fileset=shared_fileset, clock_tolerance_s=clock_tolerance_s)
