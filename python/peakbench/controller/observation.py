"""One trial's outcome as the controller sees it, and what makes it saturated.

The controller knows nothing of protocols: whoever runs trials (the engine
adapter, the simulator) hands back an Observation per trial.
"""

from __future__ import annotations

import dataclasses

from .settings import SearchSettings


@dataclasses.dataclass(frozen=True)
class Outcomes:
    """What became of the requests due in a trial's measured window; each is exactly one of these."""

    succeeded: int
    errors: int
    shed: int  # replies in which the server said on purpose that it is overloaded
    timeouts: int
    cancelled: int
    # Due in the window but never sent: held behind the in-flight cap by a server that did not
    # answer (a generator that fell behind is a verdict of its own, not counted here).
    unsent: int = 0

    @property
    def requests(self) -> int:
        return self.succeeded + self.errors + self.shed + self.timeouts + self.cancelled + self.unsent

    @property
    def failed_share(self) -> float:
        return (self.requests - self.succeeded) / self.requests if self.requests else 0.0


@dataclasses.dataclass(frozen=True)
class Observation:
    requested_rate: float  # offered load, ops/s
    achieved_rate: float  # successful completions per second of the measured runlength (goodput)
    mean_ms: float  # mean response time of the trial
    percentile_ms: float  # the Psat percentile of response time (e.g. p95)
    generator_saturated: bool  # the load generator, not the server, fell behind
    cost_s: float  # benchmarking time the trial cost: warm-up + runlength + overheads
    # Arrivals the schedule put in the measured window, per second: with Poisson arrivals
    # this is the requested rate give or take a few percent, and a server that completed
    # every one of them kept up. None: exactly the requested rate (metronome, simulator).
    offered_rate: float | None = None
    # Shares of the window's requests that failed (errors, shed, timeouts, cancelled) and
    # that the server shed on purpose (HTTP 503/429, NFS3ERR_JUKEBOX).
    failed_share: float = 0.0
    shed_share: float = 0.0
    # Mean response of the requests due in each quarter of the window: rising, the queue
    # was still growing (a trial that is not stationary). None: not measured.
    quarter_means_ms: tuple[float, ...] | None = None
    # The counts behind the shares, for messages; None where only shares are known.
    outcomes: Outcomes | None = None
    shed_label: str = "overloaded, on purpose"  # what a shed reply is on this target
    # The engine's own words for why it, not the server, fell behind (generator_saturated), if it said.
    saturation_reason: str | None = None


def _share(x: float) -> str:
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def saturation_signal(observation: Observation, settings: SearchSettings) -> str | None:
    """Why one trial alone shows the server saturated, or None.

    These are the criteria that need no interval: more of the window's requests
    failed than settings.max_failed_share allows (shed replies, a server saying
    it is overloaded, count among them), or a Psat percentile above Lsat. (The
    mean-response criterion, R̄ > Rsat, is judged on the interval of several
    trials.) Goodput below the nominal rate is no signal by itself: a Poisson
    window draws more or fewer arrivals than the nominal rate, and a server near
    capacity completes some of a window's arrivals after the window ends.
    """
    if observation.failed_share > settings.max_failed_share:
        o = observation.outcomes
        if o is None:
            what = f"{_share(observation.failed_share)} of the window's requests failed"
            if observation.shed_share > 0:
                what += f" ({_share(observation.shed_share)} shed: the server said it was overloaded)"
        else:
            what = (
                f"{_share(observation.failed_share)} of the window's {o.requests} requests failed:"
                f" {o.shed} shed ({observation.shed_label}), {o.errors} errors, {o.timeouts} timeouts,"
                f" {o.cancelled} cancelled"
            )
            if o.unsent:
                what += f", {o.unsent} never sent (held behind the in-flight cap)"
        return f"{what} (more than the {_share(settings.max_failed_share)} allowed)"
    if observation.percentile_ms > settings.lsat_ms:
        return f"p{settings.psat:g} {observation.percentile_ms:.0f} ms above {settings.lsat_ms:g} ms"
    return None
