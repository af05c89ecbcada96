"""The M/D/c queue of servers/mdc.py in virtual time: trials simulated request by request.

`SimulatedMDC(workers)` is a target for `sim.SimulatedTarget`, so whole searches of the known-curve
server run in seconds (tests, `benchmarks/truth.py`'s checks): Poisson arrivals, FIFO, c workers of
deterministic service D, each trial from an empty queue at the start of its warm-up, measured as the
engine measures one (the mean and the quarter means of the requests due in the window, the arrivals
and completions in it). Near capacity such trials read low, as the real server's do: the queue is
still filling when the window ends.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from ..controller.observation import Observation
from . import mdc


def responses_s(arrivals: np.ndarray, workers: int, service_s: float) -> np.ndarray:
    """Response times (s) of FIFO M/D/c customers arriving at the sorted `arrivals` to an empty queue."""
    waits = np.empty(len(arrivals))
    for residue in range(workers):
        # Customer i takes the worker customer i−c leaves, so W_i = max(0, W_{i−c} + D − (a_i − a_{i−c}))
        # from W = 0: the walk of those steps less its running minimum.
        walk = np.cumsum(np.concatenate([[0.0], service_s - np.diff(arrivals[residue::workers])]))
        waits[residue::workers] = walk - np.minimum.accumulate(walk)
    return waits + service_s


@dataclasses.dataclass(frozen=True)
class SimulatedMDC:
    workers: int
    service_ms: float = 5.0

    def mean_response_ms(self, load: float) -> float:
        return mdc.mean_response_ms(load, self.workers, self.service_ms)

    def true_peak(self, rsat_ms: float) -> float:
        return mdc.peak_rate(rsat_ms, self.workers, self.service_ms)

    def trial(self, load: float, runlength_s: float, warmup_s: float, psat: float, rng: random.Random) -> Observation:
        generator = np.random.default_rng(rng.getrandbits(64))
        end = warmup_s + runlength_s
        arrivals = np.sort(generator.uniform(0.0, end, generator.poisson(load * end)))
        responses_ms = 1000 * responses_s(arrivals, self.workers, self.service_ms / 1000)
        measured = (arrivals >= warmup_s) & (arrivals < end)
        window = responses_ms[measured]
        departures = arrivals + responses_ms / 1000
        completed = np.count_nonzero((departures >= warmup_s) & (departures < end))
        quarters = np.minimum(((arrivals[measured] - warmup_s) / runlength_s * 4).astype(int), 3)
        quarter_means = tuple(float(window[quarters == q].mean()) if np.any(quarters == q) else None for q in range(4))
        return Observation(
            requested_rate=load,
            achieved_rate=completed / runlength_s,
            mean_ms=float(window.mean()) if window.size else 0.0,
            percentile_ms=float(np.percentile(window, psat)) if window.size else 0.0,
            generator_saturated=False,
            cost_s=end,
            offered_rate=window.size / runlength_s,
            quarter_means_ms=quarter_means,
        )
