"""A pool of targets: a surface's samples searched in parallel on several independent servers.

    result = map_surface_on_pool(factors, samples, servers, trial_runner_for, settings)

`servers` are whatever names a server to the caller (a target URL, a host, an
object with a configure method); `trial_runner_for(sample, server)` is the
sample's configure hook: it sets `server` up for `sample` (a configure command,
a restart, a readiness wait) and returns the `run_trial(load, runlength_s)`
callable of the search, exactly as map_surface's hook does for one server.
`release(sample, server)`, if given, runs after that sample's search (also
after a failure), before the server takes another sample.

Scheduling: samples are taken in map_surface's visiting order (each next one
nearest the last); each free server takes the next sample, so every server
runs one sample at a time, and a server is configured for a sample only once
its previous sample's search (and release) has ended. A sample is seeded from
the nearest sample *finished* when it starts. A pool of one server is
map_surface. The surface is fitted over all searches as map_surface does, so
the result is the same SurfaceResult; PoolResult adds which server ran which
sample and the wall time, which falls with the pool's size while the summed
benchmarking cost does not.

The trials of one sample run wherever its run_trial sends them: one local
engine, or a DistributedEngine (many load clients against that server).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ..controller.design import Factor, Sample, coded
from ..controller.policies import DEFAULT_POLICY
from ..controller.result import PEAK, SearchResult
from ..controller.search import Progress, RunTrial, find_peak
from ..controller.settings import SearchSettings
from ..controller.surface import SurfaceResult, surface_from_searches, visiting_order

Server = TypeVar("Server")


@dataclasses.dataclass(frozen=True)
class PoolResult(Generic[Server]):
    surface: SurfaceResult
    servers: list  # the server that searched each outcome's sample, in surface.outcomes order
    wall_seconds: float


def map_surface_on_pool(
    factors: Sequence[Factor],
    samples: Sequence[Sample],
    servers: Sequence[Server],
    trial_runner_for: Callable[[Sample, Server], RunTrial],
    settings: SearchSettings | None = None,
    policy: str = DEFAULT_POLICY,
    seeding: bool = True,
    fail_fast: bool = False,
    release: Callable[[Sample, Server], None] | None = None,
    progress: Callable[[Sample], Progress | None] | None = None,
) -> PoolResult:
    """Search every sample's peak, one sample per server at a time, and fit the surface."""
    if not servers:
        raise ValueError("the pool has no server")
    factors = tuple(factors)
    settings = settings or SearchSettings()
    order = visiting_order(factors, samples)
    free: queue.Queue = queue.Queue()
    for server in servers:
        free.put(server)
    lock = threading.Lock()
    finished: list[tuple[Sample, float]] = []
    searched: dict[int, tuple[Sample, float | None, SearchResult | None, str | None]] = {}
    ran_on: dict[int, Server] = {}
    stop = threading.Event()

    def seed_for(sample: Sample) -> float | None:
        with lock:
            if not (seeding and finished):
                return None
            here = coded(factors, sample)
            return min(finished, key=lambda f: math.dist(here, coded(factors, f[0])))[1]

    def search(index: int, sample: Sample, server: Server) -> None:
        seed = seed_for(sample)
        try:
            if stop.is_set():
                return
            try:
                result = find_peak(
                    trial_runner_for(sample, server),
                    settings,
                    policy,
                    seed_load=seed,
                    progress=progress(sample) if progress else None,
                )
            except Exception as error:  # the configure hook or a readiness check failed
                if fail_fast:
                    stop.set()
                    raise
                outcome = (sample, seed, None, f"{type(error).__name__}: {error}")
            else:
                if result.verdict != PEAK and fail_fast:
                    stop.set()
                    raise RuntimeError(f"sample {sample}: {result.message}")
                failure = None if result.verdict == PEAK else f"{result.verdict}: {result.message}"
                outcome = (sample, seed, result, failure)
            with lock:
                searched[index] = outcome
                ran_on[index] = server
                if outcome[3] is None:
                    finished.append((sample, outcome[2].peak_rate))
        finally:
            try:
                if release is not None:
                    release(sample, server)
            finally:
                free.put(server)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(servers), thread_name_prefix="pb-pool") as pool:
        futures = []
        for index, sample in enumerate(order):
            server = free.get()  # wait for a server whose previous sample is done
            if stop.is_set():
                free.put(server)
                break
            futures.append(pool.submit(search, index, sample, server))
        for future in futures:
            future.result()  # re-raise a fail_fast failure
    wall = time.monotonic() - started
    indexes = sorted(searched)
    surface = surface_from_searches(factors, [searched[i] for i in indexes])
    return PoolResult(surface, [ran_on[i] for i in indexes], wall)
