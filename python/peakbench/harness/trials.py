"""A peakbench trial as a harness test: the engine a plan's trial test runs through `trials.run_trial`.

`LocalClients(clients)` has the Engine interface (version, validate, prepare, run), so a plan trial
takes the one trial path like every other command. "Clients" means what it means for `run --clients`
(cluster/fanout.py): the spec is split as the cluster splits it (rate and in-flight cap divided, a
seed and a file set of its own per client, or one shared set for a read-only workload that asks for
it), every client's file set is prepared, and the clients start together at one instant
(start_at_unix_s) with their uniform schedules interleaved. Their results are merged as the paper's
aggregation says (cluster.merge): histograms merge exactly, rates and counts add.
"""

from __future__ import annotations

import threading
import time

from ..cluster.fanout import client_specs, default_start_lead_s, start_instants
from ..cluster.merge import merge_results
from ..contract import TrialResult
from ..engine import Engine, Progress
from ..errors import RunError, TrialInterrupted

# How long interrupted engines may take to drain, restore their file sets and report (as engine.py waits).
INTERRUPTED_REPORT_S = 60


class LocalClients:
    """The Engine interface over `clients` load clients on this host, each its own engine process.
    After `run`, `last_specs` and `last_results` hold each client's spec and result."""

    def __init__(self, clients: int, *, shared_fileset: bool = False):
        self.clients = clients
        self.shared_fileset = shared_fileset
        self.engine = Engine()
        self.last_specs: list[dict] = []
        self.last_results: list[dict] = []

    def version(self) -> str:
        return self.engine.version()

    def validate(self, spec: dict) -> None:
        """Raise InputError if the spec cannot be split among the clients (a shared file set with a mix
        that writes) or the engine would refuse a client's part."""
        for part in client_specs(spec, self.clients, self.shared_fileset):
            self.engine.validate(part)

    def prepare(self, spec: dict, on_progress: Progress | None = None) -> None:
        specs = client_specs(spec, self.clients, self.shared_fileset)
        for one in specs[:1] if self.shared_fileset else specs:
            self.engine.prepare(one, on_progress)

    def run(self, spec: dict, on_progress: Progress | None = None) -> dict:
        """Every client's part from one start instant; the merged result. Any client failing fails the
        trial (RunError). Ctrl-C keeps what the clients measured: their merged cut-short windows
        (TrialInterrupted; cluster.merge says how windows cut a few milliseconds apart merge)."""
        specs = client_specs(spec, self.clients, self.shared_fileset)
        self.last_specs, self.last_results = specs, []
        if self.clients == 1:
            self.last_results = [self.engine.run(specs[0], on_progress)]
            return self.last_results[0]
        # Every client is on this host: one clock, so no offsets to compensate.
        instants = start_instants(time.time() + default_start_lead_s(spec), [None] * self.clients, spec, False)
        for one, instant in zip(specs, instants):
            one["start_at_unix_s"] = instant
        results: list[dict | None] = [None] * self.clients
        errors: list[BaseException | None] = [None] * self.clients
        # Events, not Thread.join: a join that Ctrl-C interrupted can return at once when called again.
        done = [threading.Event() for _ in range(self.clients)]

        def client(slot: int) -> None:
            try:  # one client's progress stands for all: they share the window
                results[slot] = self.engine.run(specs[slot], on_progress if slot == 0 else None)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors[slot] = error
            finally:
                done[slot].set()

        threads = [threading.Thread(target=client, args=(slot,), daemon=True) for slot in range(self.clients)]
        for thread in threads:
            thread.start()
        names = [f"client{index}" for index in range(1, self.clients + 1)]
        try:
            for finished in done:
                finished.wait()
        except KeyboardInterrupt:  # each engine ends its window and reports (SPEC.md)
            self.engine.interrupt()
            deadline = time.monotonic() + INTERRUPTED_REPORT_S
            for finished in done:
                finished.wait(timeout=max(0.0, deadline - time.monotonic()))
            if any(result is None for result in results):  # a client measured nothing (cut in its warm-up)
                raise
            self.last_results = results  # type: ignore[assignment]
            raise TrialInterrupted(merge_results(results, names, shared_fileset=self.shared_fileset)) from None
        failed = [(slot, error) for slot, error in enumerate(errors) if error is not None]
        if failed:
            slot, error = failed[0]
            raise RunError(f"client {slot + 1} of {self.clients}: {error}")
        self.last_results = results  # type: ignore[assignment]
        return merge_results(self.last_results, names, shared_fileset=self.shared_fileset)


def trial_metrics(result: dict) -> dict:
    """The numbers of a (merged) trial that the harness analyses."""
    typed = TrialResult.load(result)
    latency = typed.latency
    metrics = {
        "achieved_rate": typed.achieved_rate,
        "mean_ms": latency.mean_ms,
        "p50_ms": latency.p50_ms,
        "p90_ms": latency.p90_ms,
        "p99_ms": latency.p99_ms,
        "max_ms": latency.max_ms,
        "completed": typed.completed,
        "errors": sum(op.failed_count() for op in typed.ops.values()),
        "schedule_lag_p99_ms": typed.schedule_lag.p99_ms,
        "generator_saturated": 1.0 if typed.generator_saturated else 0.0,
    }
    return {k: float(v) for k, v in metrics.items()}
