"""What a peak-rate search returns: the verdict, the peak with its intervals, the cost, the trace.

Definitions (c = `confidence`, a = `target_accuracy`, Rsat and the peak
region [Rsat(1−s), Rsat(1+s)] as in settings.py):
- measured_load: the paper's λ*, the test load whose interval of R̄ overlaps
  the peak region with accuracy ≥ a (Algorithm 2); None for a bracket claim.
- response_ms, response_ci_low_ms, response_ci_high_ms: R̄ at measured_load
  and its interval at c, as the loads table states it there
  (statistics.stated_response_interval): positive and holding its point.
  A load claimed on its first STEIN_PILOT trials was claimed because they
  agreed, so the search then runs as many fresh trials there
  (`confirmation`), and the interval is theirs alone: not selected, it
  claims to hold R̄'s steady-state mean with confidence c, as measured on a
  simulated queue (BENCHMARKS.md §7, which names the cells where it holds
  more often); where those trials still rose within their windows, only
  R̄ ≥ response_ci_low_ms is stated (response_ci_high_ms and accuracy None).
  A later claim's trials ran to a count fixed before them, and the interval
  is theirs. Without a confirmation (`confirm` off, or stopped by the
  search's limits before two trials) the claim's own trials are stated, their
  width resting on their spread pooled with their halves'
  (statistics.claim_deviation), and the message says so. `accuracy` is the
  interval's, 1 − (high−low)/(high+low); the search steered by another
  interval (Stein's two-stage form), quoted in the load's reason, and claimed
  when that one met a, so `accuracy` may fall short of a: the message then
  says so and names the interval claimed on.
- confirmation: "held" (the fresh trials' interval reaches into the peak
  region), "contradicted" (it lies outside, or a fresh trial saturated: the
  message says the claim did not hold), "stopped", "off", or "later-stage"
  (no confirmation: the claim came after its pilot).
- peak_rate: the estimate of the true peak rate λ_true, the load where the
  mean response is Rsat. It is measured_load itself when Rsat lies inside R̄'s
  interval there; otherwise the load where the response line 1/R = α − βλ
  through measured_load and the other careful load nearest Rsat reaches Rsat.
- ci_low, ci_high: an interval for λ_true that always holds peak_rate. For a
  measured peak: the range of that line's Rsat-load as R̄ at both loads
  ranges over their intervals at √c each (joint confidence c for independent
  trials); it assumes 1/R is linear in λ between the two loads (exact for
  M/M/1, close for M/D/1). None, with no claim made, when there is no
  second careful load or the intervals allow a flat curve. For a bracket
  claim: the bracket's two loads, except that a low end found below the
  region whose R̄ interval reaches within 1.25× of it and whose R̄ is at
  least a third of its edge (trials from an empty queue near saturation
  read low) does not bound it: the interval then reaches down to
  the highest settled load below that margin, and `accuracy` is the
  estimate's against that interval, which may fall short of a; with no such
  load no interval is claimed (ci_low, ci_high and accuracy None).
- bracket_low, bracket_high: the nearest loads found, each settling its side,
  below and above the peak region (None where no such load was tested);
  the message names the same loads.
- A search may find no load in the region (a narrow region in load terms, a
  steep curve, or a real jump): when settled, carefully measured loads below
  and above it are close enough that the estimate is within 1 − a of any
  peak between them, the peak is that estimate (the 1/R line between the
  two, or their midpoint), ci_low/ci_high are the two loads, `accuracy` is
  1 − the estimate's worst relative error in the bracket, and the response_*
  fields are None. The message says what was seen; it never claims a jump.
- seed: the search's first trial seed (trial k uses seed + k), drawn afresh
  per search unless given; repeat a search with it.
- load_factor: load / peak_rate, known once the peak is found (the paper's ρ).
- loads[].ci_low_ms, ci_high_ms: R̄'s interval at that load as a report states it
  (statistics.stated_response_interval over all its careful trials, at c), not
  the one the search steered by (quoted in `reason`); when `rising`, its trials
  had not reached steady state and only R̄ ≥ ci_low_ms is stated, with no
  confidence claimed (ci_high_ms None).

Coverage, measured over 1,000 simulated searches per policy (`peakbench
simulate --coverage`, BENCHMARKS.md): the share of searches whose [ci_low,
ci_high] holds λ_true and whose peak_rate lies within 1 − a of it.
"""

from __future__ import annotations

import dataclasses
import json

from .observation import Observation

PEAK = "peak"
NOT_SATURATED = "not-saturated"
SATURATED_AT_MIN = "saturated-at-min"
NOISY = "noisy"  # R̄ varies too much from trial to trial (or the loads contradict each other)
GENERATOR_BOUND = "generator-bound"
BUDGET_SPENT = "budget-spent"  # the benchmarking-time budget (--budget) ran out
TRIAL_LIMIT = "trial-limit"  # the trial budget of the whole search (--max-trials) ran out
LOAD_LIMIT = "load-limit"  # settings.max_loads test loads without a peak
# Results stored before the last three existed said "noisy" for all of them; readers take any string.
VERDICTS = (PEAK, NOT_SATURATED, SATURATED_AT_MIN, NOISY, GENERATOR_BOUND, BUDGET_SPENT, TRIAL_LIMIT, LOAD_LIMIT)


@dataclasses.dataclass(frozen=True)
class TraceEntry:
    """One trial, in the order run (the data of the paper's Figures 3 and 7)."""

    trial: int  # 1-based over the whole search
    load: float
    load_factor: float | None
    purpose: str  # "scout" (one short trial), "careful" (Algorithm 2 trials) or "confirm" (after the claim)
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
    # True: the careful trials were still rising (not in steady state); ci_low_ms then bounds R̄ from
    # below only (R̄ ≥ ci_low_ms, no confidence claimed) and ci_high_ms is None
    rising: bool = False


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
    measured_load: float | None = None  # λ*; None for a bracket claim or no peak
    seed: int | None = None  # the search's trial seed, recorded by whoever runs the trials
    # How the confirmation of a peak claimed on its pilot went (search.CONFIRMATION_*): "held", "contradicted",
    # "stopped" or "off"; "later-stage" for a claim after its pilot (none runs); None without a measured peak,
    # and in results stored before it existed
    confirmation: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)
