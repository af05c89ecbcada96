"""What a search has learnt so far: one record per tested load, and the bracket.

Load pickers read it to choose the next load; the search loop writes it.
"""

from __future__ import annotations

import dataclasses
import math

from .statistics import ConfidenceInterval

BELOW = "below"  # the mean response time lies below the peak region
ABOVE = "above"  # saturated: above the region, or a one-trial saturation signal
PEAK = "peak"  # the interval overlaps the region and is accurate enough

SAME_LOAD = 1e-3  # loads closer than this (relative) count as the same test load


@dataclasses.dataclass(frozen=True)
class LoadRecord:
    load: float
    classification: str  # BELOW, ABOVE or PEAK
    mean_ms: float  # R̄ at this load (of the careful trials, else of the scout trial)
    interval: ConfidenceInterval | None  # of the careful trials; None when a scout decided
    on_curve: bool  # no saturation signal: the point lies on the response curve
    scouted: bool  # decided by one short scout trial (provisional)
    reason: str  # why it was classified so, for the user
    settled: bool = True  # False: too noisy to settle, classified by R̄'s side of Rsat only to steer
    means_ms: tuple[float, ...] = ()  # R̄ of each careful trial, for intervals at other confidence levels
    drifts: tuple[float, ...] = ()  # of each careful trial whose quarters are known: log(second half / first half)
    # Below the region but within a margin where trials from an empty queue may read low
    # (search.maybe_read_low): it steers the search, but no claim rests on it as a bracket's low end
    maybe_read_low: bool = False


class SearchHistory:
    def __init__(self) -> None:
        self.records: list[LoadRecord] = []

    def add(self, record: LoadRecord) -> None:
        """Add a record; a record for an already tested load replaces the old one."""
        self.records = [r for r in self.records if not same_load(r.load, record.load)]
        self.records.append(record)

    @property
    def latest(self) -> LoadRecord:
        return self.records[-1]

    def tested(self, load: float) -> bool:
        return any(same_load(r.load, load) for r in self.records)

    def bracket(
        self, settled_only: bool = False, trusted_only: bool = False
    ) -> tuple[LoadRecord | None, LoadRecord | None]:
        """(highest load below the region, lowest load above it), None where not yet seen;
        with settled_only, of the loads whose trials settled which side they are on; with
        trusted_only, no load that may have read low (maybe_read_low) is the lower end.

        A load found below the region but higher than a saturated one contradicts
        it (noise) and is not used as the lower end.
        """
        records = [r for r in self.records if r.settled or not settled_only]
        above = [r for r in records if r.classification == ABOVE]
        high = min(above, key=lambda r: r.load) if above else None
        below = [
            r
            for r in records
            if r.classification == BELOW
            and (high is None or r.load < high.load)
            and not (trusted_only and r.maybe_read_low)
        ]
        low = max(below, key=lambda r: r.load) if below else None
        return low, high

    def curve_points(self) -> list[tuple[float, float]]:
        """(load, R̄) of the loads on the response curve (not saturated by a one-trial signal)."""
        return [(r.load, r.mean_ms) for r in self.records if r.on_curve and math.isfinite(r.mean_ms) and r.mean_ms > 0]


def same_load(a: float, b: float) -> bool:
    return abs(a - b) <= SAME_LOAD * max(abs(a), abs(b))
