"""The one path from a trial spec to a stored result: `run_trial`.

Every command that runs trials (run, search, sfs, replay, surface samples)
calls run_trial, so each of them keeps what it measured the same way:
- the store is opened (created, migrated, checked writable) by the caller
  before the first trial, so a store that cannot be written is refused before
  anything is measured;
- a trial that fails is stored as failed, with the reason, and raised;
- a result that the store cannot take (locked, disk full, read-only) is not
  lost: it is written to a JSON file beside the store (or in the working
  directory, or the temporary directory) and the caller is told where.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from .cluster.fanout import ClientsLost
from .contract import ClientSummary, TrialResult
from .errors import RunError, TrialInterrupted
from .progress import ProgressDisplay
from .store import Store


@dataclasses.dataclass(frozen=True)
class TrialRecord:
    """What the store keeps with a trial besides its spec and result."""

    workload: str
    target: str
    sysinfo: dict
    notes: tuple[str, ...] = ()
    search_id: int | None = None
    sfs_run_id: int | None = None
    replay_sweep_id: int | None = None

    def fields(self) -> dict:
        return {**dataclasses.asdict(self), "notes": list(self.notes)}


@dataclasses.dataclass(frozen=True)
class StoredTrial:
    result: dict
    trial_id: int | None  # None: the store refused it, and `saved_to` holds it instead
    cost_s: float  # wall time of prepare, warm-up, run and write-back
    saved_to: Path | None = None
    store_error: str | None = None


class TrialFailed(RunError):
    """A trial that did not run to its end; it is stored as failed (trial_id) when the store allowed."""

    def __init__(self, message: str, trial_id: int | None, partial: dict | None = None):
        super().__init__(message)
        self.trial_id = trial_id
        self.partial = partial  # what the clients that finished measured, if any


def run_trial(
    spec: dict, engine, store: Store, record: TrialRecord, *, prepare: bool = True, phase: str = "run"
) -> StoredTrial:
    """Prepare (unless told not to), run and store one trial; see the module's docstring."""
    started = time.monotonic()
    try:
        if prepare:
            with ProgressDisplay("prepare", None) as display:
                engine.prepare(spec, display)
        load = spec["load"]
        with ProgressDisplay(phase, load["warmup_s"] + load["runtime_s"]) as display:
            result = engine.run(spec, display)
    except ClientsLost as lost:
        partial = lost.trial.result
        notes = record.notes
        if partial is not None:
            notes += (
                "partial results of the clients that finished: "
                + ", ".join(_achieved(client) for client in TrialResult.load(partial).client_summaries() or []),
            )
        trial_id = _store_failure(store, spec, dataclasses.replace(record, notes=notes), str(lost))
        raise TrialFailed(f"{lost}{_stored_as(trial_id)}", trial_id, partial) from None
    except RunError as error:
        trial_id = _store_failure(store, spec, record, str(error))
        raise TrialFailed(f"{error}{_stored_as(trial_id)}", trial_id) from None
    except TrialInterrupted as stop:  # what the window measured before Ctrl-C is kept, marked so
        stop.trial_id = _keep(
            store,
            {
                "spec": spec,
                "result": stop.result,
                "cost_s": time.monotonic() - started,
                "interrupted": True,
                **record.fields(),
            },
        )
        raise
    cost_s = time.monotonic() - started
    try:
        trial_id = store.add_trial(spec=spec, result=result, cost_s=cost_s, **record.fields())
    except sqlite3.Error as error:
        saved_to = save_unstored(store.path, {"spec": spec, "result": result, "cost_s": cost_s, **record.fields()})
        return StoredTrial(result, None, cost_s, saved_to, f"the store {store.path} could not take the trial ({error})")
    return StoredTrial(result, trial_id, cost_s)


def measured_so_far(spec: dict, result: dict) -> str:
    """An interrupted trial's partial figures, for the line that says it was interrupted."""
    typed = TrialResult.load(result)
    clients = f" (the window all {len(typed.clients)} clients measured)" if isinstance(typed.clients, list) else ""
    return (
        f"{typed.runtime_s:.1f} of {spec['load']['runtime_s']:g} s measured{clients}: {typed.achieved_rate:.1f} ops/s"
        f" achieved, mean {typed.latency.mean_ms:.2f} ms over {typed.latency.count} requests"
    )


def _achieved(client: ClientSummary) -> str:
    offered = f" of {client.requested_rate:.1f}" if client.requested_rate is not None else ""  # None: closed loop
    return f"{client.name} achieved {client.achieved_rate:.1f}{offered} ops/s"


def _keep(store: Store, trial: dict) -> int | None:
    """Store an interrupted trial; if the store refuses, write it beside the store. Its id, or None."""
    try:
        return store.add_trial(**trial)
    except sqlite3.Error:
        save_unstored(store.path, trial)
        return None


def _store_failure(store: Store, spec: dict, record: TrialRecord, error: str) -> int | None:
    try:
        return store.add_trial(spec=spec, error=error, **record.fields())
    except sqlite3.Error:
        return None  # the failure is still raised; only its record is lost


def _stored_as(trial_id: int | None) -> str:
    return f" (recorded as failed trial {trial_id})" if trial_id is not None else " (the store could not record it)"


def save_unstored(store_path: Path, trial: dict) -> Path:
    """Write a trial the store refused to the first writable place: beside the store, here, or the temp dir."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    name = f"peakbench-unstored-trial-{stamp}.json"
    text = json.dumps(trial, indent=2) + "\n"
    for directory in (Path(store_path).absolute().parent, Path.cwd(), Path(tempfile.gettempdir())):
        try:
            path = directory / name
            path.write_text(text)
            return path
        except OSError:
            continue
    raise RunError(
        "the trial could be stored nowhere: the store, the working directory and the temporary directory all refused it"
    )
