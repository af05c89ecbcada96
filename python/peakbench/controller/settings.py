"""What a peak-rate search is asked to find, and the limits it must keep to.

The names follow the workbench paper (docs/sources.md, the workbench controller): Rsat, the width s of
the peak region [Rsat(1−s), Rsat(1+s)], confidence c, accuracy a, Psat/Lsat.
Every setting is checked when the object is made; a bad one raises ValueError
with a one-line message that names it.
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    rsat_ms: float = 40.0  # saturated when the mean response time exceeds this
    width: float = 0.10  # s: the peak region is [rsat·(1−s), rsat·(1+s)]
    confidence: float = 0.95  # c: confidence level of every interval
    accuracy: float = 0.90  # a: 1 − (high−low)/(high+low) required at the peak
    psat: float = 95.0  # percentile (0–100) reported by each trial ...
    lsat_ms: float = 2000.0  # ... saturated when it exceeds this
    # Saturated when more than this share of a trial's requests failed: errors, shed replies
    # (HTTP 503/429, NFS3ERR_JUKEBOX), timeouts and cancellations.
    max_failed_share: float = 0.01
    min_trials: int = 2  # trials at a load before its interval is judged
    max_trials: int = 30  # trials at one load before the search gives up as noisy
    runlength_s: float = 180.0  # measured time of a careful trial (paper: 3 min)
    warmup_s: float = 30.0  # unmeasured time before each trial
    scout_runlength_s: float | None = None  # measured time of a scout trial; None: runlength/6
    # Shortest careful trial the guided policy may choose from the variance it sees (at most
    # runlength_s, so a preset's floor gives way to a shorter --runlength); None: runlength/3.
    min_runlength_s: float | None = None
    start_load: float = 50.0  # first test load when no seed is given (ops/s)
    min_load: float = 1.0  # lowest load the search may offer (ops/s)
    max_load: float = 1_000_000.0  # highest load the search may offer (ops/s)
    max_total_trials: int = 300  # trial budget of the whole search
    max_cost_s: float | None = None  # benchmarking-time budget of the whole search
    max_loads: int = 100  # test loads before the search is declared not converging
    # Repeat the claimed peak's trials afresh and state R̄ there from those alone (search._Search.confirm):
    # the claim's own trials were chosen because they agreed, so their interval holds the mean less often.
    confirm: bool = True

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise ValueError(message)

        for name in (
            "rsat_ms",
            "width",
            "confidence",
            "accuracy",
            "psat",
            "lsat_ms",
            "max_failed_share",
            "runlength_s",
            "warmup_s",
            "start_load",
            "min_load",
            "max_load",
        ):
            value = getattr(self, name)
            check(
                isinstance(value, (int, float)) and math.isfinite(value),
                f"{name} must be a finite number (got {value!r})",
            )
        check(self.rsat_ms > 0, f"rsat_ms must be positive (got {self.rsat_ms})")
        check(
            self.width > 0,
            f"width must be positive: the peak region [rsat·(1−s), rsat·(1+s)] is empty for s = {self.width}",
        )
        check(self.width < 1, f"width must be below 1: the peak region would reach 0 ms (got {self.width})")
        check(0 < self.confidence < 1, f"confidence must lie strictly between 0 and 1 (got {self.confidence})")
        check(0 < self.accuracy < 1, f"accuracy must lie strictly between 0 and 1 (got {self.accuracy})")
        check(0 < self.psat < 100, f"psat must be a percentile strictly between 0 and 100 (got {self.psat})")
        check(self.lsat_ms > 0, f"lsat_ms must be positive (got {self.lsat_ms})")
        check(0 <= self.max_failed_share < 1, f"max_failed_share must lie in [0, 1) (got {self.max_failed_share})")
        check(
            isinstance(self.min_trials, int) and self.min_trials >= 2,
            f"min_trials must be an integer of at least 2: one trial gives no interval (got {self.min_trials})",
        )
        check(
            isinstance(self.max_trials, int) and self.max_trials >= self.min_trials,
            f"max_trials must be an integer no smaller than min_trials = {self.min_trials} (got {self.max_trials})",
        )
        check(self.runlength_s > 0, f"runlength_s must be positive (got {self.runlength_s})")
        check(self.warmup_s >= 0, f"warmup_s must not be negative (got {self.warmup_s})")
        check(
            self.scout_runlength_s is None or 0 < self.scout_runlength_s <= self.runlength_s,
            f"scout_runlength_s must be positive and at most runlength_s = {self.runlength_s} "
            f"(got {self.scout_runlength_s})",
        )
        check(
            self.min_runlength_s is None or (math.isfinite(self.min_runlength_s) and self.min_runlength_s > 0),
            f"min_runlength_s must be a positive number (got {self.min_runlength_s!r})",
        )
        check(self.min_load > 0, f"min_load must be positive (got {self.min_load})")
        check(
            self.max_load >= self.min_load, f"max_load ({self.max_load}) must not be below min_load ({self.min_load})"
        )
        check(
            self.min_load <= self.start_load <= self.max_load,
            f"start_load must lie within [min_load, max_load] = [{self.min_load}, {self.max_load}] "
            f"(got {self.start_load})",
        )
        check(
            isinstance(self.max_total_trials, int) and self.max_total_trials >= self.min_trials,
            f"max_total_trials must be an integer no smaller than min_trials = {self.min_trials} "
            f"(got {self.max_total_trials})",
        )
        check(self.max_cost_s is None or self.max_cost_s > 0, f"max_cost_s must be positive (got {self.max_cost_s})")
        check(isinstance(self.confirm, bool), f"confirm must be true or false (got {self.confirm!r})")
        check(
            isinstance(self.max_loads, int) and self.max_loads >= 1,
            f"max_loads must be a positive integer (got {self.max_loads})",
        )

    @classmethod
    def from_stored(cls, stored: dict) -> SearchSettings:
        """The settings of a stored search; fields since retired (shortfall_tolerance) are left out."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in stored.items() if k in known})

    @property
    def region_low_ms(self) -> float:
        return self.rsat_ms * (1 - self.width)

    @property
    def region_high_ms(self) -> float:
        return self.rsat_ms * (1 + self.width)

    @property
    def scout_runlength(self) -> float:
        return self.scout_runlength_s if self.scout_runlength_s is not None else self.runlength_s / 6

    @property
    def min_runlength(self) -> float:
        if self.min_runlength_s is None:
            return self.runlength_s / 3
        return min(self.min_runlength_s, self.runlength_s)
