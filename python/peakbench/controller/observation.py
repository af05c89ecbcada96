"""One trial's outcome as the controller sees it, and what makes it saturated.

The controller knows nothing of protocols: whoever runs trials (the engine
adapter, the simulator) hands back an Observation per trial.
"""

from __future__ import annotations

import dataclasses

from .settings import SearchSettings


@dataclasses.dataclass(frozen=True)
class Observation:
    requested_rate: float  # offered load, ops/s
    achieved_rate: float  # completed ops/s over the measured runlength
    mean_ms: float  # mean response time of the trial
    percentile_ms: float  # the Psat percentile of response time (e.g. p95)
    generator_saturated: bool  # the load generator, not the server, fell behind
    cost_s: float  # benchmarking time the trial cost: warm-up + runlength + overheads
    # Arrivals the schedule put in the measured window, per second: with Poisson arrivals
    # this is the requested rate give or take a few percent, and a server that completed
    # every one of them kept up. None: exactly the requested rate (metronome, simulator).
    offered_rate: float | None = None


def saturation_signal(observation: Observation, settings: SearchSettings) -> str | None:
    """Why one trial alone shows the server saturated, or None.

    These are the criteria that need no interval: an open-loop server that
    completes fewer requests than offered, or a Psat percentile above Lsat.
    (The mean-response criterion, R̄ > Rsat, is judged on the interval of
    several trials.)
    """
    offered = observation.offered_rate or observation.requested_rate
    if observation.achieved_rate < offered * (1 - settings.shortfall_tolerance):
        share = observation.achieved_rate / offered
        return f"achieved only {share:.0%} of the offered load"
    if observation.percentile_ms > settings.lsat_ms:
        return f"p{settings.psat:g} {observation.percentile_ms:.0f} ms above {settings.lsat_ms:g} ms"
    return None
