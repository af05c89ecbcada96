"""What a peak-rate search returns: the verdict, the peak with its intervals, the cost, the trace.

Definitions:
- peak_rate (λ*): the test load whose interval of R̄ (t-based, at
  `confidence`, over its careful trials) overlaps the peak region
  [Rsat(1−s), Rsat(1+s)] with accuracy ≥ the target (paper, Algorithm 2).
- response_ms, response_ci_low_ms, response_ci_high_ms: R̄ at λ* and that interval;
  `accuracy` is its accuracy, 1 − (high−low)/(high+low).
- ci_low, ci_high: an interval for the true peak rate (the load where R̄ = Rsat),
  found by carrying the interval of R̄ at λ* along the response line
  1/R = α − βλ whose slope comes from λ* and the nearest other point on the
  curve. It assumes that line shape and ignores the slope's own error, so it
  is an estimate, not a guaranteed c-level claim: in simulation it held the
  true peak in 92–96% of unseeded searches but only 60–80% of seeded ones,
  whose nearest point is often close to λ*. None when λ* is the only point
  on the curve. The c-level claims are R̄'s interval at λ* and the bracket.
- bracket_low, bracket_high: the nearest tested loads found below and above
  the peak region (None where no such load was tested).
- A server whose response time jumps across the region (a cliff) may have no
  load in it: when carefully measured loads below and above the region are
  close enough that the midpoint is within 1 − a of any peak between them,
  1 − (high−low)/(2·low) ≥ a, the peak is their midpoint,
  ci_low/ci_high are the two loads, `accuracy` is that bracket's accuracy and
  the response_* fields are None.
- load_factor: load / peak_rate, known once the peak is found (the paper's ρ).
"""

from __future__ import annotations

import dataclasses
import json

from .observation import Observation

PEAK = "peak"
NOT_SATURATED = "not-saturated"
SATURATED_AT_MIN = "saturated-at-min"
NOISY = "noisy"
GENERATOR_BOUND = "generator-bound"
VERDICTS = (PEAK, NOT_SATURATED, SATURATED_AT_MIN, NOISY, GENERATOR_BOUND)


@dataclasses.dataclass(frozen=True)
class TraceEntry:
    """One trial, in the order run (the data of the paper's Figures 3 and 7)."""

    trial: int  # 1-based over the whole search
    load: float
    load_factor: float | None
    purpose: str  # "scout" (one short trial) or "careful" (Algorithm 2 trials)
    trial_at_load: int  # 1-based within this load's measurement
    runlength_s: float
    observation: Observation
    cumulative_cost_s: float


@dataclasses.dataclass(frozen=True)
class LoadSummary:
    """One test load: how it was classified and what it cost in all."""

    load: float
    load_factor: float | None
    classification: str  # below, above or peak
    mean_ms: float
    ci_low_ms: float | None
    ci_high_ms: float | None
    trials: int
    cost_s: float
    reason: str


@dataclasses.dataclass(frozen=True)
class SearchResult:
    verdict: str
    message: str
    policy: str
    peak_rate: float | None
    ci_low: float | None
    ci_high: float | None
    bracket_low: float | None
    bracket_high: float | None
    response_ms: float | None
    response_ci_low_ms: float | None
    response_ci_high_ms: float | None
    confidence: float
    accuracy: float | None  # achieved accuracy of R̄ at λ*
    target_accuracy: float
    cost_seconds: float
    trials: int
    loads: list[LoadSummary]
    trace: list[TraceEntry]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)
