"""A peakbench trial as a harness test: the one seam through which plans run trials.

`run_clients(specs)` is the only function the runner calls to run a trial:
it prepares every client's file set, then starts all clients' engines
together behind a barrier and returns their TrialResults. Distributed runs
(Dask, issue 8) replace this one function (see RUNNER), nothing else.
`merge_results` combines the clients' results as the paper's aggregation
says: histograms merge exactly, rates and counts add.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

from ..cluster.merge import merge_results as merge_client_results
from ..engine import Engine
from ..errors import RunError
from ..searching import percentile_ms
from ..table import error_count


def client_specs(spec: dict, clients: int) -> list[dict]:
    """One spec per client: the offered rate split evenly, a seed and (posix) a directory each."""
    if clients == 1:
        return [spec]
    specs = []
    for index in range(1, clients + 1):
        one = copy.deepcopy(spec)
        one["load"]["rate"] = spec["load"]["rate"] / clients
        one["seed"] = spec["seed"] * 1000 + index
        if one["target"]["kind"] == "posix":
            one["target"]["path"] = f"{spec['target']['path'].rstrip('/')}/client{index}"
        specs.append(one)
    return specs


def run_clients(specs: list[dict], engine: Engine | None = None) -> list[dict]:
    """Prepare each client's file set, then run every client's trial at once; their TrialResults.

    Any client failing fails the whole run (RunError).
    """
    engine = engine or Engine()
    for spec in specs:
        engine.prepare(spec)
    if len(specs) == 1:
        return [engine.run(specs[0])]
    barrier = threading.Barrier(len(specs))
    results: list[dict | None] = [None] * len(specs)
    errors: list[BaseException | None] = [None] * len(specs)

    def client(slot: int) -> None:
        try:
            barrier.wait(timeout=600)
            results[slot] = engine.run(specs[slot])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors[slot] = error

    threads = [threading.Thread(target=client, args=(slot,), daemon=True) for slot in range(len(specs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [(slot, error) for slot, error in enumerate(errors) if error is not None]
    if failed:
        slot, error = failed[0]
        raise RunError(f"client {slot + 1} of {len(specs)}: {error}")
    return results  # type: ignore[return-value]


# The runner calls trials.RUNNER(specs); a distributed implementation can replace it.
RUNNER: Callable[[list[dict]], list[dict]] = run_clients


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
