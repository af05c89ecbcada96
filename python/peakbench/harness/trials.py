"""A peakbench trial as a harness test: the one seam through which plans run trials.

`run_clients(spec, clients)` is the only function the runner calls to run a
trial. "Clients" means what it means for `run --clients` (cluster/fanout.py):
the spec is split as the cluster splits it (rate and in-flight cap divided, a
seed and a file set of its own per client, or one shared set for a read-only
workload that asks for it), every client's file set is prepared, and the
clients start together at one instant (start_at_unix_s) with their uniform
schedules interleaved. `merge_results` combines the clients' results as the
paper's aggregation says: histograms merge exactly, rates and counts add.
"""

from __future__ import annotations

import threading
import time

from ..cluster.fanout import client_specs, default_start_lead_s, start_instants
from ..cluster.merge import merge_results as merge_client_results
from ..engine import Engine
from ..errors import RunError
from ..searching import percentile_ms
from ..table import error_count


def run_clients(
    spec: dict, clients: int, *, shared_fileset: bool = False, engine: Engine | None = None
) -> tuple[list[dict], list[dict]]:
    """Split `spec` among `clients` load clients, prepare each one's file set, then run them all from one
    start instant on this host; (the clients' specs, their TrialResults). Any client failing fails the
    whole run (RunError)."""
    engine = engine or Engine()
    specs = client_specs(spec, clients, shared_fileset)
    for one in specs[:1] if shared_fileset else specs:
        engine.prepare(one)
    if clients == 1:
        return specs, [engine.run(specs[0])]
    # Every client is on this host: one clock, so no offsets to compensate.
    instants = start_instants(time.time() + default_start_lead_s(spec), [None] * clients, spec, compensate=False)
    for one, instant in zip(specs, instants):
        one["start_at_unix_s"] = instant
    results: list[dict | None] = [None] * clients
    errors: list[BaseException | None] = [None] * clients

    def client(slot: int) -> None:
        try:
            results[slot] = engine.run(specs[slot])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors[slot] = error

    threads = [threading.Thread(target=client, args=(slot,), daemon=True) for slot in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [(slot, error) for slot, error in enumerate(errors) if error is not None]
    if failed:
        slot, error = failed[0]
        raise RunError(f"client {slot + 1} of {clients}: {error}")
    return specs, results  # type: ignore[return-value]


def merge_results(results: list[dict]) -> dict:
    """The clients' results as one, merged exactly as distributed clients' are (cluster.merge)."""
    if len(results) == 1:
        return results[0]
    return merge_client_results(results, [f"client{index}" for index in range(1, len(results) + 1)])


def trial_metrics(merged: dict) -> dict:
    """The numbers of a (merged) trial that the harness analyses."""
    latency = merged.get("latency", {})
    metrics = {
        "achieved_rate": merged.get("achieved_rate"),
        "mean_ms": latency.get("mean_ms"),
        "p50_ms": latency.get("p50_ms"),
        "p90_ms": latency.get("p90_ms")
        if latency.get("p90_ms") is not None
        else (percentile_ms(merged, 90) if latency.get("hist") else None),
        "p99_ms": latency.get("p99_ms"),
        "max_ms": latency.get("max_ms"),
        "completed": merged.get("completed"),
        "errors": sum(error_count(op) for op in merged.get("ops", {}).values()),
        "schedule_lag_p99_ms": merged.get("schedule_lag", {}).get("p99_ms"),
        "generator_saturated": 1.0 if merged.get("generator_saturated") else 0.0,
    }
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
