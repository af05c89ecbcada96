"""A dense linear sweep, judged as the search judges: the check of a found peak.

One trial per load, each saturated when R̄ exceeds Rsat or a one-trial signal
fires (see saturation_signal). The knee is where the sweep crosses from
unsaturated to saturated, if it crosses exactly once.
"""

from __future__ import annotations

from .observation import Observation, saturation_signal
from .settings import SearchSettings


def saturated(observation: Observation, settings: SearchSettings) -> bool:
    """One trial judged alone: R̄ above Rsat, or a one-trial saturation signal."""
    return observation.mean_ms > settings.rsat_ms or saturation_signal(observation, settings) is not None


def sweep_knee(observations: list[Observation], settings: SearchSettings) -> float | None:
    """The midpoint between the last unsaturated and the first saturated load of a sweep
    (observations in rising load order); None unless the sweep starts unsaturated, ends
    saturated and crosses once."""
    verdicts = [saturated(o, settings) for o in observations]
    if verdicts != sorted(verdicts) or not verdicts or verdicts[0] or not verdicts[-1]:
        return None
    first = verdicts.index(True)
    return (observations[first - 1].requested_rate + observations[first].requested_rate) / 2
