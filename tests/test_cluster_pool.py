"""A pool of servers: a surface's samples in parallel, one sample per server at a time."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from peakbench.cluster.pool import map_surface_on_pool
from peakbench.controller import SearchSettings
from peakbench.controller.design import d_optimal
from peakbench.controller.surface import map_surface
from peakbench.sim import SURFACES, SimulatedTarget

SURFACE = SURFACES["mail"]
TRIAL_WALL_S = 0.003  # each simulated trial also takes real time, so the pool's parallelism shows


class Servers:
    """Simulated servers that check the pool's promise: one sample per server at a time, configured first."""

    def __init__(self):
        self.lock = threading.Lock()
        self.busy: dict[str, dict] = {}
        self.configured: list[tuple[str, dict]] = []
        self.released: list[tuple[str, dict]] = []
        self.most_busy = 0

    def configure(self, sample: dict, server: str):
        with self.lock:
            assert server not in self.busy, f"{server} given {sample} while still on {self.busy.get(server)}"
            self.busy[server] = sample
            self.configured.append((server, sample))
            self.most_busy = max(self.most_busy, len(self.busy))
        if sample.get("broken"):
            raise RuntimeError("configure command failed: exit status 1")
        target = SimulatedTarget(SURFACE.server({k: v for k, v in sample.items() if k != "broken"}), seed=1)

        def run_trial(load, runlength_s):
            with self.lock:
                assert self.busy.get(server) is sample, f"{server} ran a trial of a sample it was not configured for"
            time.sleep(TRIAL_WALL_S)
            return target(load, runlength_s)

        return run_trial

    def release(self, sample: dict, server: str) -> None:
        with self.lock:
            assert self.busy.pop(server) is sample
            self.released.append((server, sample))


def test_samples_run_in_parallel_one_per_server():
    samples = d_optimal(SURFACE.factors, 8)
    servers = Servers()
    result = map_surface_on_pool(
        SURFACE.factors, samples, ["s0", "s1", "s2"], servers.configure, SearchSettings(), release=servers.release
    )
    surface = result.surface
    assert len(surface.outcomes) == len(samples)
    assert all(o.failure is None for o in surface.outcomes)
    assert surface.surface is not None and surface.mape < 10
    assert servers.most_busy == 3  # the pool was used in full...
    assert sorted(map(str, (s for _, s in servers.configured))) == sorted(map(str, samples))  # ...once per sample
    assert len(servers.released) == len(samples) and not servers.busy
    assert set(result.servers) == {"s0", "s1", "s2"}
    for (server, sample), outcome in zip(
        sorted(servers.configured, key=lambda c: str(c[1])),
        sorted(zip(result.servers, surface.outcomes), key=lambda c: str(c[1].sample)),
    ):
        assert (server, sample) == (outcome[0], outcome[1].sample)


def test_a_pool_cuts_the_wall_time_not_the_cost(monkeypatch):
    # Trials that take real time (a server under load), far more than the search's own arithmetic,
    # which shares one interpreter (and, on a busy machine, little CPU) between the pool's threads.
    monkeypatch.setattr(sys.modules[__name__], "TRIAL_WALL_S", 0.02)
    samples = d_optimal(SURFACE.factors, 6)
    pool_of_one, pool_of_three = Servers(), Servers()
    alone = map_surface_on_pool(
        SURFACE.factors, samples, ["s0"], pool_of_one.configure, SearchSettings(), release=pool_of_one.release
    )
    three = map_surface_on_pool(
        SURFACE.factors,
        samples,
        ["s0", "s1", "s2"],
        pool_of_three.configure,
        SearchSettings(),
        release=pool_of_three.release,
    )
    assert three.wall_seconds < 0.7 * alone.wall_seconds, (three.wall_seconds, alone.wall_seconds)
    # Seeds differ (fewer samples have finished when a sample starts), so costs differ a little, not 3x.
    assert three.surface.cost_seconds == pytest.approx(alone.surface.cost_seconds, rel=0.5)


def test_a_pool_of_one_is_map_surface():
    samples = d_optimal(SURFACE.factors, 6)
    single = Servers()
    pooled = map_surface_on_pool(
        SURFACE.factors, samples, ["only"], single.configure, SearchSettings(), release=single.release
    )
    servers = Servers()
    plain = map_surface(
        SURFACE.factors, samples, lambda sample: servers.configure(sample, f"x{id(sample)}"), SearchSettings()
    )
    assert [(o.sample, o.seed_load, o.result.peak_rate) for o in pooled.surface.outcomes] == [
        (o.sample, o.seed_load, o.result.peak_rate) for o in plain.outcomes
    ]
    assert pooled.surface.mape == plain.mape


def test_a_failed_configure_hook_is_recorded_and_its_server_freed():
    samples = d_optimal(SURFACE.factors, 6)
    samples[2] = {**samples[2], "broken": 1}
    servers = Servers()
    result = map_surface_on_pool(
        SURFACE.factors, samples, ["s0", "s1"], servers.configure, SearchSettings(), release=servers.release
    )
    failures = [o for o in result.surface.outcomes if o.failure]
    assert len(failures) == 1 and "configure command failed" in failures[0].failure
    assert len(servers.released) == len(samples) and not servers.busy
    strict = Servers()
    with pytest.raises(RuntimeError, match="configure command failed"):
        map_surface_on_pool(
            SURFACE.factors,
            samples,
            ["s0", "s1"],
            strict.configure,
            SearchSettings(),
            fail_fast=True,
            release=strict.release,
        )
    with pytest.raises(ValueError, match="no server"):
        map_surface_on_pool(SURFACE.factors, samples, [], Servers().configure)
