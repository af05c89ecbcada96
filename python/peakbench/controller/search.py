"""The peak-rate search (the paper's Algorithm 2) over a `run_trial` callable.

    find_peak(run_trial, settings, policy="guided", seed_load=None, progress=None)

`run_trial(load, runlength_s) -> Observation` runs one independent trial
(warm-up included); the search never looks inside it. At each test load the
policy either starts with one short scout trial, which decides the load when
it is clearly far from the peak region (more than SCOUT_FAR_FACTOR outside
it, or saturated by a one-trial signal), or goes straight to careful trials:
from min_trials trials on, a t-interval of R̄ wholly below or above the
region decides the load; the peak (interval overlapping the region with the
target accuracy) is claimed through Stein's two-stage procedure (see
careful()). A load that would need more than max_trials for the accuracy
still settles its side if one more stage of trials can (side_trials); else it
is left unsettled: which side of Rsat its R̄ lies on only steers the search. The peak may also
be claimed as a bracket: settled loads below and above the region close
enough for the accuracy, where the response time jumps across the region or
the loads between are too noisy to settle (the search then bounds them from
outside, knee_probe()).

Only careful trials of one runlength enter an interval, so the peak's claim
(R̄'s interval at confidence c, accuracy ≥ a) rests on trials at λ* alone;
scout decisions only steer the search. A peak claimed on its first stage is confirmed (confirm()):
that stage's trials are repeated afresh, and R̄ there is stated from those alone. Baselines run every careful trial for
settings.runlength_s; the guided policy picks each load's runlength before
its trials from the variance earlier loads showed (runlength.py). A scout
decision is provisional: when the bracket closes with a scout-decided end,
that end is measured carefully.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from . import result as verdicts
from .history import ABOVE, BELOW, PEAK, LoadRecord, SearchHistory, same_load
from .observation import Observation, saturation_signal
from .pickers import bisection_step
from .policies import DEFAULT_POLICY, Policy, policy_named
from .response_model import line_through
from .result import LoadSummary, SearchResult, TraceEntry
from .runlength import careful_runlength
from .settings import SearchSettings
from .statistics import (
    STEIN_PILOT,
    ConfidenceInterval,
    floored_log_deviation,
    log_deviation,
    response_interval,
    sample_deviation,
    stated_response_interval,
    stein_trials,
    t_quantile,
    trials_for_half_width,
)

RunTrial = Callable[[float, float], Observation]
# progress(load, trial number at that load, width of R̄'s interval in ms or None)
Progress = Callable[[float, int, float | None], None]

SCOUT_FAR_FACTOR = 1.5  # a scout decides when R̄ is below region/1.5 or above region·1.5
# A load found below the region whose R̄ interval reaches above region_low / this may have read low
# (maybe_read_low): chosen from 1.25 and 1.5 by simulated M/D/4 and M/D/1 quick searches (BENCHMARKS.md §7)
READ_LOW_MARGIN = 1.25
# ... unless R̄ itself lies below region_low / this: no load at or past λ* read that low in any stored real search
# (lowest 20.7 ms against 15 for Rsat 50), while the throttled disk's loads below its cliff, whose trial means
# spread from 0.1 to 24 ms, did reach into the margin by their interval alone (BENCHMARKS.md §7)
READ_LOW_MAX_FACTOR = 3.0
CLOSED_BRACKET = 0.002  # a bracket narrower than this (relative) leaves no load to try
# A stage runs at most this many times the trials of the one before: Stein's N from a pilot
# of 4 carries t(3)² ≈ 10 where a known deviation needs z² ≈ 3.8, so a noisy load is cheaper
# re-planned from a larger pilot with more degrees of freedom.
STAGE_GROWTH = 2
# TraceEntry.purpose of the trials run at each load (result.py)
SCOUT, CAREFUL, CONFIRM = "scout", "careful", "confirm"


class _Cliff(Exception):
    """Carefully measured loads just below and just above the region, close enough that
    the peak rate between them is known to the target accuracy, though no load between
    them has been measured in the region (a server whose response time jumps)."""

    def __init__(self, low: LoadRecord, high: LoadRecord):
        super().__init__()
        self.low, self.high = low, high


def estimate_accuracy(estimate: float, low: float, high: float) -> float:
    """1 − the worst relative error of `estimate` against a true peak anywhere in [low, high], and 0 when
    that error passes 100% (an accuracy is a share: a real search printed "accuracy -185.4%")."""
    return max(0.0, 1 - max((estimate - low) / low, (high - estimate) / high))


def bracket_accuracy(low: float, high: float) -> float:
    """How accurately the midpoint of [low, high] locates a peak anywhere in it:
    1 − its worst relative error, (high − low) / 2 against a peak as low as `low`."""
    return 1 - (high - low) / (2 * low)


class _Stopped(Exception):
    def __init__(self, verdict: str, message: str):
        super().__init__(message)
        self.verdict = verdict
        self.message = message


def find_peak(
    run_trial: RunTrial,
    settings: SearchSettings | None = None,
    policy: str | Policy = DEFAULT_POLICY,
    seed_load: float | None = None,
    progress: Progress | None = None,
) -> SearchResult:
    """Search the peak rate; `seed_load` starts there instead of settings.start_load."""
    settings = settings or SearchSettings()
    if isinstance(policy, str):
        policy = policy_named(policy)
    if seed_load is not None and not (math.isfinite(seed_load) and seed_load > 0):
        raise ValueError(f"seed_load must be a positive number (got {seed_load!r})")
    return _Search(run_trial, settings, policy, progress).run(seed_load)


def careful_at(run_trial: RunTrial, settings: SearchSettings, load: float) -> LoadRecord | None:
    """The careful trials a search runs at one load for settings.runlength_s each, and what it concludes
    there with R̄'s interval; None when the load stays too noisy within max_trials (for coverage checks)."""
    return careful_claim_at(run_trial, settings, load)[0]


def careful_claim_at(
    run_trial: RunTrial, settings: SearchSettings, load: float
) -> tuple[LoadRecord | None, Confirmation | None]:
    """careful_at's record, and the confirmation a search runs when it claims the load there (None where it
    runs none): what peak_response states at the claim, for coverage checks."""
    search = _Search(run_trial, settings, policy_named("binsearch"), None)
    try:
        record = search.careful(load)
    except _Stopped:
        return None, None
    return record, search.confirm(record) if record.classification == PEAK else None


class _Search:
    def __init__(self, run_trial: RunTrial, settings: SearchSettings, policy: Policy, progress: Progress | None):
        self.run_trial = run_trial
        self.settings = settings
        self.policy = policy
        self.progress = progress
        self.history = SearchHistory()
        self.trace: list[tuple[float, str, int, float, Observation, float]] = []
        self.cost_s = 0.0
        self.variance_seconds: dict[float, float] = {}  # per carefully measured load: cv² × runlength

    # -- the loop -------------------------------------------------------------

    def run(self, seed_load: float | None) -> SearchResult:
        picker = self.policy.make_picker(self.settings)
        load = self.clamp(seed_load if seed_load is not None else self.settings.start_load)
        careful_only = False
        try:
            while True:
                record = self.measure(load, careful_only)
                self.history.add(record)
                if record.classification == PEAK:
                    self.second_point(record)
                    return self.peak_result(record, self.confirm(record))
                self.stop_at_the_limits(record)
                load, careful_only = self.next_step(picker)
        except _Cliff as cliff:
            return self.bracket_result(cliff.low, cliff.high)
        except _Stopped as stop:
            return self.result(stop.verdict, stop.message)

    def second_point(self, peak: LoadRecord) -> None:
        """Trials at a second load below λ* when no measured load yet bounds the response line's slope.

        The load is the one on the curve below Rsat nearest to it (far enough
        from the knee to vary little), else 20% below λ*; trials run there
        until its interval, with λ*'s, bounds the slope, at most
        2·STEIN_PILOT. A budget that runs out meanwhile, or trials that never
        bound it, leave the peak without an interval of the peak rate.
        """
        if self.peak_rate_interval(peak) is not None:
            return
        s = self.settings
        below = [
            r
            for r in self.history.records
            if r.on_curve and 0 < r.mean_ms < s.region_low_ms and not same_load(r.load, peak.load)
        ]
        load = (
            min(below, key=lambda r: abs(math.log(r.mean_ms / s.rsat_ms))).load
            if below
            else self.clamp(peak.load * 0.8)
        )
        if same_load(load, peak.load):
            return
        runlength = (
            careful_runlength(s, self.variance_seconds.values(), STEIN_PILOT)
            if self.policy.adapts_runlength
            else s.runlength_s
        )
        means: list[float] = []
        try:
            for number in range(1, 2 * STEIN_PILOT + 1):
                observation = self.trial(load, runlength, CAREFUL, number)
                self.report(load, number, None)
                if saturation_signal(observation, s) is not None:
                    return
                means.append(observation.mean_ms)
                if len(means) < 2:
                    continue
                interval = response_interval(means, s.confidence)
                side = BELOW if interval.mean < s.rsat_ms else ABOVE
                self.history.add(
                    LoadRecord(
                        load,
                        side,
                        interval.mean,
                        interval,
                        True,
                        False,
                        f"{self.describe(interval)}, measured for the slope at the peak",
                        settled=interval.high < s.region_low_ms or interval.low > s.region_high_ms,
                        means_ms=tuple(means),
                    )
                )
                if self.peak_rate_interval(peak) is not None:
                    return
        except _Stopped:
            return

    def confirm(self, peak: LoadRecord) -> Confirmation | None:
        """For a claim on its pilot stage, a pilot's worth of fresh trials at the claimed load, as long as the
        claim's, whose R̄ the result states there (peak_response); None for a later claim, or when
        settings.confirm is off.

        A claim on the pilot took the load because its first trials happened to agree, so an interval on those
        same trials holds the true mean less often than c: 85.8% of simulated 20 s pilot claims at ρ 0.875 and
        c = 95%, against 93.5% of later claims, whose trials ran to a count fixed before them (BENCHMARKS.md §7).
        Trials run after the claim are kept whatever they read, so their interval is not selected. As many as
        the pilot, where the stated interval's allowances were measured. They stop at a saturation signal,
        which contradicts the claim; a limit of the search (budget, trial limit, a generator that fell behind)
        stops them too and is recorded.
        """
        s = self.settings
        if not (s.confirm and claimed_on_pilot(peak, s)):
            return None
        runlength = next(
            length
            for load, purpose, _, length, _, _ in reversed(self.trace)
            if purpose == CAREFUL and same_load(load, peak.load)
        )
        means: list[float] = []
        drifts: list[float] = []
        planned = pilot_size(s)
        try:
            for number in range(1, planned + 1):
                observation = self.trial(peak.load, runlength, CONFIRM, number)
                self.report(peak.load, number, None)
                signal = saturation_signal(observation, s)
                if signal is not None:
                    return Confirmation(tuple(means), tuple(drifts), planned, signal, saturated=True)
                means.append(observation.mean_ms)
                drift = _drift(observation)
                if drift is not None:
                    drifts.append(drift)
        except _Stopped as stop:
            return Confirmation(tuple(means), tuple(drifts), planned, f"{stop.verdict}: {stop.message}")
        return Confirmation(tuple(means), tuple(drifts), planned)

    def stop_at_the_limits(self, record: LoadRecord) -> None:
        s = self.settings
        if record.classification == BELOW and record.load >= s.max_load * (1 - 1e-9):
            raise _Stopped(
                verdicts.NOT_SATURATED,
                f"not saturated up to the maximum rate {s.max_load:g} ops/s "
                f"(R̄ {record.mean_ms:.1f} ms, below {s.region_low_ms:g} ms); "
                "raise the maximum rate (--max-rate) to find the peak",
            )
        if record.classification == ABOVE and record.load <= s.min_load * (1 + 1e-9):
            raise _Stopped(
                verdicts.SATURATED_AT_MIN,
                f"already saturated at the lowest rate {s.min_load:g} ops/s ({record.reason}); "
                "lower the minimum rate (--min-rate) or check the target",
            )

    def next_step(self, picker) -> tuple[float, bool]:
        """The next load, and whether it is a careful re-check of a scout-decided one."""
        if len(self.history.records) >= self.settings.max_loads:
            raise _Stopped(
                verdicts.LOAD_LIMIT,
                f"no peak after {self.settings.max_loads} test loads (the limit): the response curve "
                "does not settle; lengthen the runlength or widen the peak region",
            )
        low, high = self.history.bracket()
        if low is not None and high is not None and bracket_accuracy(low.load, high.load) >= self.settings.accuracy:
            scouted = [r for r in (low, high) if r.scouted]
            if scouted:
                return scouted[0].load, True
            # Only loads that settled their side can bound a claim; while those are too far
            # apart, keep looking inside the bracket, where loads off the knee vary less.
            settled_low, settled_high = self.history.bracket(settled_only=True)
            if (
                settled_low is not None
                and settled_high is not None
                and not settled_low.scouted
                and not settled_high.scouted
                and bracket_accuracy(settled_low.load, settled_high.load) >= self.settings.accuracy
            ):
                probe = self.trusted_low_probe(settled_low, settled_high) or self.inner_probe(settled_low, settled_high)
                if probe is not None:
                    return probe, True
                raise _Cliff(settled_low, settled_high)
            probe = self.knee_probe()
            if probe is not None:
                return probe, True
        if low is not None and high is not None and high.load <= low.load * (1 + CLOSED_BRACKET):
            scouted = [r for r in (low, high) if r.scouted]
            if scouted:
                return scouted[0].load, True
            raise _Stopped(
                verdicts.NOISY,
                f"no load lands in the peak region: R̄ goes from {low.mean_ms:.1f} ms at "
                f"{low.load:g} ops/s to {high.mean_ms:.1f} ms at {high.load:g} ops/s; "
                "lengthen the runlength or widen the peak region (--width)",
            )
        proposal = self.clamp(picker.next_load(self.history))
        if self.history.tested(proposal):
            proposal = self.clamp(bisection_step(self.history))
        if self.history.tested(proposal):
            raise _Stopped(
                verdicts.NOISY,
                f"the search cannot move on from {proposal:g} ops/s: its results contradict "
                "each other; lengthen the runlength or allow more trials",
            )
        return proposal, False

    def trusted_low_probe(self, low: LoadRecord, high: LoadRecord) -> float | None:
        """Before a bracket claim whose low end may have read low (maybe_read_low): a load one step of
        (1 − a)/2 below the lowest such load, measured carefully, so that a load that cannot have read
        low may bound the claim within the accuracy; None when one already does, or none can.
        """
        s = self.settings
        if not low.maybe_read_low:
            return None
        trusted, _ = self.history.bracket(settled_only=True, trusted_only=True)
        if trusted is not None and bracket_accuracy(trusted.load, high.load) >= s.accuracy:
            return None
        floor = trusted.load if trusted is not None else 0.0
        doubtful = min(r.load for r in self.history.records if r.maybe_read_low and floor < r.load <= low.load)
        probe = doubtful / (1 + (1 - s.accuracy) / 2)
        if probe <= floor or probe < s.min_load or bracket_accuracy(probe, high.load) < s.accuracy:
            return None
        return self.untried(probe)

    def inner_probe(self, low: LoadRecord, high: LoadRecord) -> float | None:
        """Before a bracket claim whose low end may have read low and that no load below can rescue
        (trusted_low_probe): the load midway between the two, measured carefully, where the search may land
        in the region or settle a side; None when the low end can bound the claim, or the midpoint was
        measured. A Samba search stopped on such a bracket, 425 and 490.5 ops/s, claiming no interval, with
        1,029 s of its budget left and no load tried between them.
        """
        if not low.maybe_read_low:
            return None
        probe = (low.load + high.load) / 2
        return self.untried(probe)

    def untried(self, probe: float) -> float | None:
        """`probe`, unless it was already measured carefully (a scouted load may be measured again)."""
        already = [r for r in self.history.records if same_load(r.load, probe)]
        return None if already and not already[0].scouted else probe

    def knee_probe(self) -> float | None:
        """A load just outside a knee whose loads are too noisy to settle, or None.

        Near the knee R̄ varies most from trial to trial, and on a steep curve
        every load there may stay unsettled, so bisecting further inside only
        spends trials. The peak rate is still known if settled loads bound the
        knee closely: probe one step of (1 − a)/2 beyond the unsettled loads,
        above first, then below, measured carefully, until the settled loads
        make a cliff claim; None when no such bracket can be narrow enough.
        """
        s = self.settings
        settled_low, settled_high = self.history.bracket(settled_only=True)
        floor = settled_low.load if settled_low is not None and not settled_low.scouted else 0.0
        ceiling = settled_high.load if settled_high is not None and not settled_high.scouted else math.inf
        knee = [r.load for r in self.history.records if not r.settled and floor < r.load < ceiling]
        if not knee:
            return None
        step = 1 + (1 - s.accuracy) / 2
        upper = min(max(knee) * step, settled_high.load if settled_high is not None else math.inf)
        lower = max(min(knee) / step, settled_low.load if settled_low is not None else 0.0)
        if bracket_accuracy(lower, upper) < s.accuracy:
            return None
        probe = upper if ceiling > upper else lower if floor < lower else None
        if probe is None or probe > s.max_load or probe < s.min_load:
            return None
        return self.untried(probe)

    def clamp(self, load: float) -> float:
        return min(max(load, self.settings.min_load), self.settings.max_load)

    # -- measuring one load ---------------------------------------------------

    def measure(self, load: float, careful_only: bool) -> LoadRecord:
        if self.policy.scout and not careful_only:
            observation = self.trial(load, self.settings.scout_runlength, SCOUT, 1)
            self.report(load, 1, None)
            decided = self.scout_decision(load, observation)
            if decided is not None:
                return decided
        return self.careful(load)

    def scout_decision(self, load: float, observation: Observation) -> LoadRecord | None:
        s = self.settings
        signal = saturation_signal(observation, s)
        mean = observation.mean_ms
        if signal is not None:
            return LoadRecord(load, ABOVE, mean, None, False, True, f"scout: {signal}")
        if mean < s.region_low_ms / SCOUT_FAR_FACTOR:
            return LoadRecord(load, BELOW, mean, None, True, True, f"scout: R̄ {mean:.1f} ms, far below the peak region")
        if mean > s.region_high_ms * SCOUT_FAR_FACTOR:
            return LoadRecord(load, ABOVE, mean, None, True, True, f"scout: R̄ {mean:.1f} ms, far above the peak region")
        return None

    def careful(self, load: float) -> LoadRecord:
        """Careful trials at one load (see careful_trials), recorded with the trials' drifts for the report.
        A search that stops among them (budget, trial limit, noise) still records what they read."""
        drifts: list[float] = []
        means: list[float] = []
        try:
            record = self.careful_trials(load, drifts, means)
        except _Stopped as stop:
            if means:
                self.history.add(self.unfinished(load, tuple(means), tuple(drifts), stop.verdict))
            raise
        return dataclasses.replace(record, drifts=tuple(drifts))

    def unfinished(self, load: float, means: tuple[float, ...], drifts: tuple[float, ...], verdict: str) -> LoadRecord:
        """A load whose careful trials the search stopped among: what they read, on the side of Rsat their mean
        lies, unsettled (no bracket rests on it). Without it, the loads table kept an earlier scout's reading of
        the load, or nothing, beside trials it did not count."""
        s = self.settings
        interval = (
            response_interval(means, s.confidence, floored_log_deviation(means, list(drifts)), len(means))
            if len(means) >= 2
            else None
        )
        mean = interval.mean if interval is not None else means[0]
        side = ABOVE if mean > s.rsat_ms else BELOW
        read = self.describe(interval) if interval is not None else f"R̄ {mean:.1f} ms over 1 careful trial"
        return LoadRecord(
            load,
            side,
            mean,
            interval,
            True,
            False,
            f"{read}: the search stopped ({verdict}) before they settled a side",
            settled=False,
            means_ms=means,
            drifts=drifts,
        )

    def careful_trials(self, load: float, drifts: list[float], means: list[float]) -> LoadRecord:
        """Careful trials at one load until it is below, above, or the peak (or noisy).

        Classification looks after every trial from min_trials on, as in
        Algorithm 2. R̄'s interval is Cox's lognormal interval of the trial
        means (statistics.response_interval): positive, and fitted to the
        right skew of trial means near saturation. The accuracy claim uses
        Stein's two-stage procedure on the log scale: the first `pilot`
        trials fix the deviation s0 of the log trial means, which sets the
        total N (statistics.stein_trials) for the target accuracy; the
        interval's width rests on s0 with t on pilot−1 degrees of freedom, and
        the peak is claimed only at the end of a stage (a stage that falls
        short is the pilot of the next; a stage runs to min(N, STAGE_GROWTH·n0)
        trials after a stage of n0, still fixed by that stage's deviation
        alone). Adding one trial at a time until the interval is narrow
        enough, as the paper does, stops when s happens to be small and covers
        less than c: 88–94% in simulation.
        """
        s = self.settings
        pilot = pilot_size(s)
        # means gets each trial's R̄, drifts the log of its second half's mean over its first half's
        interval: ConfidenceInterval | None = None
        stage: tuple[int, float] | None = None  # (size, log deviation) of the completed stage
        planned = pilot  # trials this stage runs before the interval is judged for accuracy
        runlength = (
            careful_runlength(s, self.variance_seconds.values(), pilot)
            if self.policy.adapts_runlength
            else s.runlength_s
        )
        for number in range(1, s.max_trials + 1):
            observation = self.trial(load, runlength, CAREFUL, number)
            signal = saturation_signal(observation, s)
            if signal is not None:
                self.report(load, number, None)
                return LoadRecord(
                    load, ABOVE, observation.mean_ms, interval, False, False, signal, means_ms=tuple(means)
                )
            means.append(observation.mean_ms)
            drift = _drift(observation)
            if drift is not None:
                drifts.append(drift)
            if len(means) < s.min_trials:
                self.report(load, number, None)
                continue
            self.variance_seconds[load] = log_deviation(means) ** 2 * runlength
            if stage is None:
                interval = response_interval(means, s.confidence, floored_log_deviation(means, drifts), len(means))
            else:
                interval = response_interval(means, s.confidence, stage[1], stage[0])
            self.report(load, number, interval.high - interval.low)
            decided = self.classify(load, interval, tuple(means), final=len(means) >= planned)
            if decided is not None:
                if decided.classification != ABOVE and self.still_rising(drifts):
                    return self.warming(load, interval, tuple(means), drifts)
                if decided.classification == BELOW and self.maybe_read_low(interval):
                    if len(means) < min(pilot, s.max_trials):
                        # Two or three trials' interval is wide: the pilot's may clear the margin.
                        self.report(load, number, interval.high - interval.low)
                        continue
                    return dataclasses.replace(
                        decided,
                        maybe_read_low=True,
                        reason=f"{decided.reason}, but within {READ_LOW_MARGIN:g}× of it, where trials from an "
                        "empty queue may read low: it does not bound the peak's interval",
                    )
                return decided
            if len(means) >= planned:  # a stage is complete: it is the pilot of the next
                stage = (len(means), log_deviation(means))
                planned = stein_trials(stage[1], s.confidence, s.accuracy, stage[0])
                if planned > s.max_trials:
                    settling = self.side_trials(interval, stage)
                    if settling is None:
                        return self.unresolvable(load, interval, tuple(means), planned)
                    planned = settling
                planned = min(planned, STAGE_GROWTH * stage[0])
        raise _Stopped(
            verdicts.NOISY,
            f"at {load:g} ops/s R̄ varies too much from trial to trial "
            f"({self.describe(interval)}) to reach accuracy {s.accuracy:.0%} within {s.max_trials} "
            "trials; lengthen the runlength or allow more trials per load",
        )

    def side_trials(self, interval: ConfidenceInterval, stage: tuple[int, float]) -> int | None:
        """The trials, within one more stage, whose interval would settle which side of the region a load lies on
        when it is too noisy for the accuracy: None when R̄ lies in the region or more trials than that are needed.

        A load far enough off the region settles its side long before R̄'s interval is narrow enough for a peak
        claim; left unsettled, it cannot bound a bracket, and a search whose knee is flanked by such loads ran
        out of loads to try and claimed nothing (issue 20: a real M/D/1 search's load at 177 req/s, true mean
        24.5 ms, read 27.4 ms, 95% CI [15.3, 49.0] over 4 trials, two trials short of settling below 45 ms).
        """
        s = self.settings
        if s.region_low_ms <= interval.mean <= s.region_high_ms:
            return None
        edge = s.region_low_ms if interval.mean < s.region_low_ms else s.region_high_ms
        gap = abs(math.log(interval.mean / edge))
        needed = trials_for_half_width(stage[1], s.confidence, gap, stage[0])
        return needed if needed <= min(s.max_trials, STAGE_GROWTH * stage[0]) else None

    def maybe_read_low(self, interval: ConfidenceInterval) -> bool:
        """Whether a load found below the region may truly lie in or above it, its R̄ read low by trials that
        began on an empty queue near saturation: 4 s trials read a fifth low at ρ 0.95 of an M/M/1 queue and
        a third low in M/D/4's peak region (BENCHMARKS.md §7), and neither the drift test (_rising) nor the
        trials' spread tells such loads apart on a few trials. So a load below the region whose interval
        reaches within READ_LOW_MARGIN of it, and whose R̄ is not below READ_LOW_MAX_FACTOR of it, steers
        the search and decides its side as before, but a bracket claim does not rest on it as its low end.
        Such a decision waits for the pilot's STEIN_PILOT trials: two trials' interval is often wide enough
        to reach into the margin at a load far below it.
        """
        low_edge = self.settings.region_low_ms
        return interval.high >= low_edge / READ_LOW_MARGIN and interval.mean >= low_edge / READ_LOW_MAX_FACTOR

    def still_rising(self, drifts: list[float]) -> bool:
        """Whether the trials' response time still rises through their measured windows (see _rising)."""
        return _rising(drifts, self.settings)

    def warming(
        self, load: float, interval: ConfidenceInterval, means: tuple[float, ...], drifts: list[float]
    ) -> LoadRecord:
        """A load whose trials had not settled into steady state: never a peak, nor a bracket's end.

        Its R̄ may underestimate the steady-state mean, so it cannot settle a
        side; like a load too noisy to settle, the side of Rsat its R̄ lies on
        only steers the search. Not "above" whatever R̄ says: the drift test
        also fires on Poisson noise, in about 1 − c of loads far below the
        region (BENCHMARKS.md §7), and such a load taken as above steered the
        search below the peak.
        """
        rise = math.exp(math.fsum(drifts) / len(drifts)) - 1
        side = ABOVE if interval.mean > self.settings.rsat_ms else BELOW
        return LoadRecord(
            load,
            side,
            interval.mean,
            interval,
            True,
            False,
            f"{self.describe(interval)} still rising within its trials (second half {rise:.0%} "
            f"slower than the first, over {len(drifts)} trials): not in steady state after "
            f"{self.settings.warmup_s:g} s of warm-up; taken as {side} Rsat to steer the search "
            "(lengthen --warmup to measure it)",
            settled=False,
            means_ms=means,
        )

    def unresolvable(
        self, load: float, interval: ConfidenceInterval, means: tuple[float, ...], needed: int
    ) -> LoadRecord:
        """A load whose trials vary too much to reach the accuracy within max_trials.

        Trial-to-trial variance grows as the load factor nears 1, so such a load
        usually sits right at the knee; rather than spend the budget there, the
        search records which side of Rsat its R̄ lies on, only to steer the next
        load, and moves on to a load where the claim can be made.
        """
        side = ABOVE if interval.mean > self.settings.rsat_ms else BELOW
        return LoadRecord(
            load,
            side,
            interval.mean,
            interval,
            True,
            False,
            f"{self.describe(interval)} too noisy to settle (needs {needed} trials,"
            f" limit {self.settings.max_trials}); taken as {side} Rsat to steer the search",
            settled=False,
            means_ms=means,
        )

    def classify(
        self, load: float, interval: ConfidenceInterval, means: tuple[float, ...], final: bool
    ) -> LoadRecord | None:
        """Below or above the region whenever the interval says so; the peak only on a final interval."""
        s = self.settings
        described = self.describe(interval)
        if interval.high < s.region_low_ms:
            return LoadRecord(
                load, BELOW, interval.mean, interval, True, False, f"{described} below the peak region", means_ms=means
            )
        if interval.low > s.region_high_ms:
            return LoadRecord(
                load, ABOVE, interval.mean, interval, True, False, f"{described} above the peak region", means_ms=means
            )
        if final and interval.accuracy >= s.accuracy:
            return LoadRecord(
                load,
                PEAK,
                interval.mean,
                interval,
                True,
                False,
                f"{described} in the peak region, accuracy {interval.accuracy:.1%}",
                means_ms=means,
            )
        return None

    def describe(self, interval: ConfidenceInterval | None) -> str:
        if interval is None:
            return "no interval yet"
        return (
            f"R̄ {interval.mean:.1f} ms, {interval.confidence:.0%} CI "
            f"[{interval.low:.1f}, {interval.high:.1f}] ms over {interval.count} careful trials"
        )

    def trial(self, load: float, runlength_s: float, purpose: str, number: int) -> Observation:
        s = self.settings
        if len(self.trace) >= s.max_total_trials:
            raise _Stopped(
                verdicts.TRIAL_LIMIT,
                f"trial budget of {s.max_total_trials} trials spent before the peak was found; "
                "allow more trials (--max-trials) or lengthen the runlength",
            )
        if s.max_cost_s is not None and self.cost_s >= s.max_cost_s:
            raise _Stopped(
                verdicts.BUDGET_SPENT,
                f"cost budget of {s.max_cost_s:g} s spent ({self.cost_s:.0f} s of benchmarking) "
                "before the peak was found; allow a larger budget (--budget)",
            )
        observation = self.run_trial(load, runlength_s)
        self.cost_s += observation.cost_s
        self.trace.append((load, purpose, number, runlength_s, observation, self.cost_s))
        if observation.generator_saturated:
            why = f" ({observation.saturation_reason})" if observation.saturation_reason else ""
            raise _Stopped(
                verdicts.GENERATOR_BOUND,
                f"the load generator could not keep up at {load:g} ops/s{why}, so the server's "
                "peak is beyond what this generator can show; add clients or lower --max-rate",
            )
        return observation

    def report(self, load: float, number: int, width_ms: float | None) -> None:
        if self.progress is not None:
            self.progress(load, number, width_ms)

    # -- results --------------------------------------------------------------

    def peak_result(self, record: LoadRecord, confirmation: Confirmation | None) -> SearchResult:
        """λ* and the interval of the true peak rate (see result.py for what each claims)."""
        s = self.settings
        stated = peak_response(record, confirmation, s)
        interval = stated.interval
        # The claim rests on the interval steered by (Stein's); the stated one is wider by its allowances (or
        # rests on other trials) and may fall short of the target. Stated so: a headline "accuracy 89.3%" beside
        # a target of 90% read as a claim that did not meet its own terms.
        short = (
            f", short of the target {s.accuracy:.0%}: the search claimed it on its own interval "
            f"[{record.interval.low:.1f}, {record.interval.high:.1f}] ms, accuracy {record.interval.accuracy:.1%}"
            if interval.accuracy < s.accuracy and not stated.rising
            else ""
        )
        if stated.rising:
            response = (
                f"R̄ ≥ {interval.low:.1f} ms over {interval.count} {stated.trials}: still rising within them, "
                "so no confidence is claimed"
            )
        else:
            response = (
                f"R̄ {interval.mean:.1f} ms, {s.confidence:.0%} CI [{interval.low:.1f}, {interval.high:.1f}] ms "
                f"over {interval.count} {stated.trials}, accuracy {interval.accuracy:.1%}{short}"
            )
        response += stated.note
        estimate = self.peak_rate_interval(record)
        if estimate is None:
            message = (
                f"peak rate {record.load:.1f} ops/s (a measured load): {response}; no other measured load "
                "to carry it to an interval of the peak rate"
            )
            return self.result(verdicts.PEAK, message, record, stated=stated)
        peak_rate, ci_low, ci_high, nearest = estimate
        if same_load(peak_rate, record.load):
            how = f"peak rate {record.load:.1f} ops/s (a measured load): {response}"
        else:
            how = (
                f"peak rate {peak_rate:.1f} ops/s, estimated where the response line through the measured "
                f"loads {record.load:.1f} ops/s and {nearest:.1f} ops/s reaches Rsat {s.rsat_ms:g} ms (not "
                f"{record.load:.1f} itself: R̄'s interval over the claim's trials misses Rsat); at "
                f"{record.load:.1f} ops/s {response}"
            )
        message = (
            f"{how}; {s.confidence:.0%} interval of the peak rate {ci_low:.1f}-{ci_high:.1f} ops/s{self.shorter_note()}"
        )
        result = self.result(verdicts.PEAK, message, record, ci_low, ci_high, stated=stated)
        return dataclasses.replace(
            result,
            peak_rate=peak_rate,
            measured_load=record.load,
            loads=self.load_summaries(result.trace, lambda load: load / peak_rate, stated),
            trace=[dataclasses.replace(t, load_factor=t.load / peak_rate) for t in result.trace],
        )

    def bracket_result(self, low: LoadRecord, high: LoadRecord) -> SearchResult:
        """The peak between two settled loads close enough for the target accuracy.

        The estimate is where the response line through the two loads' R̄
        reaches Rsat when both lie on the curve and that keeps the accuracy,
        else the midpoint; the claim is the bracket itself, [low, high], unless `low` may have read low
        (LoadRecord.maybe_read_low): then it reaches down to the highest settled load below that cannot have.
        """
        s = self.settings
        peak_rate = (low.load + high.load) / 2
        line = (
            line_through((low.load, low.mean_ms), (high.load, high.mean_ms))
            if low.on_curve and high.on_curve and low.mean_ms > 0 and high.mean_ms > 0
            else None
        )
        if line is not None:
            interpolated = line.load_for(s.rsat_ms)
            if (
                low.load < interpolated < high.load
                and estimate_accuracy(interpolated, low.load, high.load) >= s.accuracy
            ):
                peak_rate = interpolated
        unsettled = sum(1 for r in self.history.records if not r.settled and low.load < r.load < high.load)
        between = (
            f"the {unsettled} load(s) tested between them did not settle which side they are on"
            if unsettled
            else "no load tested between them"
        )
        estimated = (
            "where the response line through them reaches Rsat"
            if peak_rate != (low.load + high.load) / 2
            else "their midpoint"
        )
        # A low end that may have read low (maybe_read_low) does not bound the claim: it reaches down to
        # the highest settled load below that cannot have; none, and no interval is claimed.
        claim_low = low if not low.maybe_read_low else self.history.bracket(settled_only=True, trusted_only=True)[0]
        achieved = estimate_accuracy(peak_rate, claim_low.load, high.load) if claim_low is not None else None
        short = f", short of the target {s.accuracy:.0%}" if achieved is not None and achieved < s.accuracy else ""
        if claim_low is low:
            claim = f"located to accuracy {achieved:.1%}"
        elif claim_low is not None:
            claim = (
                f"its interval reaches down to {claim_low.load:.1f} ops/s, since {low.load:.1f} ops/s may have read "
                f"low, so it is located to accuracy {achieved:.1%}{short}"
            )
        else:
            claim = f"no interval of the peak rate is claimed, since {low.load:.1f} ops/s may have read low"
        message = (
            f"peak rate {peak_rate:.1f} ops/s ({estimated}): no measured load landed in the peak region; "
            f"it lies between {low.load:.1f} ops/s ({low.reason}) and {high.load:.1f} ops/s ({high.reason}); "
            f"{between}; {claim}{self.shorter_note()}"
        )
        claimed = (claim_low.load, high.load) if claim_low is not None else (None, None)
        result = self.result(verdicts.PEAK, message, None, *claimed)
        return dataclasses.replace(
            result,
            peak_rate=peak_rate,
            accuracy=achieved,
            loads=self.load_summaries(result.trace, lambda load: load / peak_rate),
            trace=[dataclasses.replace(t, load_factor=t.load / peak_rate) for t in result.trace],
        )

    def shorter_note(self) -> str:
        """Says so when careful trials ran shorter than settings.runlength_s (the guided policy's choice)."""
        lengths = sorted({runlength for _, purpose, _, runlength, _, _ in self.trace if purpose == CAREFUL})
        if not lengths or lengths[0] >= self.settings.runlength_s * (1 - 1e-9):
            return ""
        shown = ", ".join(f"{length:.3g}" for length in lengths)
        return (
            f"; careful trials ran {shown} s, shorter than the runlength of {self.settings.runlength_s:g} s: "
            f"the {self.policy.name} policy chose them from the noise it saw"
        )

    def peak_rate_interval(self, peak: LoadRecord) -> tuple[float, float, float, float] | None:
        """(estimate, low, high, other load) of the true peak rate λ_true, where R = Rsat; None without a claim.

        On the response line 1/R = α − βλ through (λ*, R*) and (λo, Ro), the
        load where R = Rsat is a monotone function of R* and Ro, so its range
        over the box of their intervals, each at √c (joint confidence c for
        independent trials), is an interval for λ_true at confidence c. λo is
        the other carefully measured load on the curve nearest Rsat. The
        estimate is λ* itself when Rsat lies in R̄'s interval at λ* (then
        the range holds λ*), else the line's estimate from the two R̄. Loads
        whose interval overlaps λ*'s allow a flat curve and bound nothing; the
        nearest to Rsat of the others is used.
        """
        rsat = self.settings.rsat_ms
        level = math.sqrt(self.settings.confidence)
        if len(peak.means_ms) < 2:
            return None
        at_peak = response_interval(peak.means_ms, level)
        others = sorted(
            (
                r
                for r in self.history.records
                if r.on_curve and len(r.means_ms) >= 2 and not same_load(r.load, peak.load)
            ),
            key=lambda r: abs(math.log(r.mean_ms / rsat)),
        )
        for nearest in others:
            at_other = response_interval(nearest.means_ms, level)
            lines = [
                line_through((peak.load, r_peak), (nearest.load, r_other))
                for r_peak in (at_peak.low, at_peak.high)
                for r_other in (at_other.low, at_other.high)
            ]
            if all(line is not None for line in lines):
                break
        else:
            return None
        corners = [line.load_for(rsat) for line in lines]
        low, high = min(corners), max(corners)
        stated, _ = stated_response(peak, self.settings)
        if stated.low <= rsat <= stated.high:
            estimate = peak.load
        else:
            estimate = line_through((peak.load, peak.mean_ms), (nearest.load, nearest.mean_ms)).load_for(rsat)
        return estimate, min(low, estimate), max(high, estimate), nearest.load

    def result(
        self,
        verdict: str,
        message: str,
        peak: LoadRecord | None = None,
        ci_low: float | None = None,
        ci_high: float | None = None,
        stated: PeakResponse | None = None,
    ) -> SearchResult:
        """The result; `stated` is R̄ at the claimed load `peak` (peak_response)."""
        peak_rate = peak.load if peak is not None else None

        def factor(load: float) -> float | None:
            return load / peak_rate if peak_rate else None

        trace = [
            TraceEntry(i + 1, load, factor(load), purpose, number, runlength, observation, cumulative)
            for i, (load, purpose, number, runlength, observation, cumulative) in enumerate(self.trace)
        ]
        low, high = self.history.bracket(settled_only=True)
        interval = stated.interval if stated is not None else None
        rising = stated is not None and stated.rising
        return SearchResult(
            verdict=verdict,
            message=message,
            policy=self.policy.name,
            peak_rate=peak_rate,
            measured_load=peak_rate,
            ci_low=ci_low,
            ci_high=ci_high,
            bracket_low=low.load if low is not None else None,
            bracket_high=high.load if high is not None else None,
            response_ms=interval.mean if interval else None,
            response_ci_low_ms=interval.low if interval else None,
            response_ci_high_ms=interval.high if interval and not rising else None,
            confidence=self.settings.confidence,
            accuracy=interval.accuracy if interval and not rising else None,
            target_accuracy=self.settings.accuracy,
            cost_seconds=self.cost_s,
            trials=len(trace),
            loads=self.load_summaries(trace, factor, stated),
            trace=trace,
            confirmation=stated.confirmation if stated is not None else None,
        )

    def load_summaries(self, trace: list[TraceEntry], factor, stated: PeakResponse | None = None) -> list[LoadSummary]:
        """The loads table; at the claimed peak, R̄ as `stated` states it there."""
        summaries = []
        for record in sorted(self.history.records, key=lambda r: r.load):
            spent = [t for t in trace if same_load(t.load, record.load)]
            interval, rising = stated_response(record, self.settings)
            reason = record.reason
            mean = record.mean_ms
            if record.classification == PEAK and stated is not None and stated.claim_reading:
                interval, rising, mean = stated.interval, stated.rising, stated.interval.mean
                reason = (
                    f"{reason}; R̄ stated from the {interval.count} {stated.trials}{stated.note}; {stated.claim_reading}"
                )
            elif rising:
                careful = [t for t in spent if t.purpose == CAREFUL]
                reason = (
                    f"R̄ ≥ {interval.low:.1f} ms: still rising after {len(careful)} trials of "
                    f"{careful[-1].runlength_s:g} s; steady state not reached (no confidence claimed). {reason}"
                )
            summaries.append(
                LoadSummary(
                    load=record.load,
                    load_factor=factor(record.load),
                    classification=record.classification,
                    mean_ms=mean,
                    ci_low_ms=interval.low if interval else None,
                    ci_high_ms=interval.high if interval and not rising else None,
                    trials=len(spent),
                    cost_s=sum(t.observation.cost_s for t in spent),
                    reason=reason,
                    rising=rising,
                )
            )
        return summaries


def stated_response(record: LoadRecord, settings: SearchSettings) -> tuple[ConfidenceInterval | None, bool]:
    """R̄'s interval at a load as the report states it (statistics.stated_response_interval), and whether
    its trials were still rising (see _rising): then only its low end is stated, as R̄ ≥ low, with no
    confidence claimed, since trials that had not reached steady state bound the mean from below only.
    A load claimed as the peak on its pilot stage is stated with the claim's selection allowed for
    (statistics.claim_deviation), wherever it is stated: message, JSON, loads table and report alike.

    The search steers by record.interval; this interval only reports. (None, False) where it has none.
    """
    if record.interval is None:
        return None, False
    interval = stated_response_interval(
        record.means_ms, record.drifts, settings.confidence, claimed_on_pilot(record, settings)
    )
    return interval, _rising(record.drifts, settings)


# SearchResult.confirmation: what the claimed peak's confirmation (_Search.confirm) showed
CONFIRMATION_HELD = "held"  # its trials' R̄ interval reaches into the peak region
CONFIRMATION_CONTRADICTED = "contradicted"  # its interval lies outside the region, or a trial saturated
CONFIRMATION_STOPPED = "stopped"  # the search's limits stopped it before two trials: R̄ from the claim's
CONFIRMATION_OFF = "off"  # settings.confirm was off: R̄ from the claim's own trials
# A claim after its pilot stage: its trials ran to a count fixed before them, and R̄ is stated from them
CONFIRMATION_LATER_STAGE = "later-stage"


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """The trials _Search.confirm ran at the claimed load after the claim."""

    means_ms: tuple[float, ...]  # R̄ of each trial that ran to the end without a saturation signal
    drifts: tuple[float, ...]  # of those whose quarters are known (see _drift)
    planned: int  # a pilot's worth (pilot_size)
    stopped: str | None = None  # why fewer than planned ran: a saturation signal, or a limit of the search
    saturated: bool = False  # stopped by a saturation signal


@dataclasses.dataclass(frozen=True)
class PeakResponse:
    """R̄ as a result states it at the claimed peak (peak_response)."""

    interval: ConfidenceInterval
    rising: bool  # the trials still rose within their windows: only R̄ ≥ interval.low is stated
    trials: str  # what the interval rests on, after its count: "careful trials" or "fresh trials ..."
    note: str  # what the message adds after it: how the confirmation went
    confirmation: str  # CONFIRMATION_*
    # Where the confirmation's trials are stated: what the claim's own read, for the loads table; else ""
    claim_reading: str = ""


def peak_response(peak: LoadRecord, confirmation: Confirmation | None, settings: SearchSettings) -> PeakResponse:
    """R̄ at the claimed load `peak`: for a claim on its pilot, from its confirmation's trials
    (statistics.stated_response_interval, as at any load) when at least two of them ran and none saturated;
    else from the claim's own trials as stated_response states them (at a pilot claim, with its selection
    allowed for).

    The confirmation's interval is not selected, so it holds the mean as often as an interval over as many
    unchosen trials does (BENCHMARKS.md §7 measures it on a simulated queue); the claim's own trials were
    chosen because they agreed.
    """
    claim, _ = stated_response(peak, settings)

    def from_claim(note: str, outcome: str) -> PeakResponse:
        return PeakResponse(claim, False, "careful trials", note, outcome)

    if not claimed_on_pilot(peak, settings):
        return from_claim("", CONFIRMATION_LATER_STAGE)
    if confirmation is None:
        return from_claim(
            " (not confirmed: the confirmation is off, and the claim chose these trials because they agreed)",
            CONFIRMATION_OFF,
        )
    ran = len(confirmation.means_ms)
    if confirmation.saturated:
        return from_claim(
            f"; its confirmation saturated at trial {ran + 1} of {confirmation.planned} ({confirmation.stopped}): "
            "the claim did not hold",
            CONFIRMATION_CONTRADICTED,
        )
    if ran < 2:
        return from_claim(
            f" (not confirmed: its confirmation stopped after {ran} of {confirmation.planned} trials, "
            f"{confirmation.stopped})",
            CONFIRMATION_STOPPED,
        )
    interval = stated_response_interval(confirmation.means_ms, confirmation.drifts, settings.confidence)
    rising = _rising(confirmation.drifts, settings)
    note = (
        f" (the confirmation stopped after {ran} of {confirmation.planned}: {confirmation.stopped})"
        if confirmation.stopped
        else ""
    )
    outside = interval.low > settings.region_high_ms or (not rising and interval.high < settings.region_low_ms)
    if outside:
        note += (
            f"; outside the peak region [{settings.region_low_ms:g}, {settings.region_high_ms:g}] ms: "
            "the claim did not hold on its confirmation"
        )
    return PeakResponse(
        interval,
        rising,
        "fresh trials run after the claim",
        note,
        CONFIRMATION_CONTRADICTED if outside else CONFIRMATION_HELD,
        f"the claim's own {claim.count} trials read R̄ {claim.mean:.1f} ms, [{claim.low:.1f}, {claim.high:.1f}] "
        "(not stated: the claim chose them because they agreed)",
    )


def pilot_size(settings: SearchSettings) -> int:
    """The trials of a careful load's first stage, Stein's pilot (see _Search.careful_trials)."""
    return max(settings.min_trials, STEIN_PILOT)


def claimed_on_pilot(record: LoadRecord, settings: SearchSettings) -> bool:
    """Whether the search claimed `record`'s load as the peak at the end of its pilot stage: a claim waits for a
    stage's end, so one on at most the pilot's trials is one on the pilot."""
    return record.classification == PEAK and len(record.means_ms) <= pilot_size(settings)


def _drift(observation: Observation) -> float | None:
    """log(mean of the last two quarters / mean of the first two) of one trial, or None if unknown."""
    quarters = observation.quarter_means_ms  # None for results of engines from before the quarters
    if not quarters or len(quarters) != 4 or any(q is None or not q > 0 for q in quarters):
        return None
    return math.log((quarters[2] + quarters[3]) / (quarters[0] + quarters[1]))


def trials_still_rising(observations: Sequence[Observation], settings: SearchSettings) -> bool:
    """Whether these trials of one load are still rising through their windows (see _rising)."""
    return _rising([d for d in map(_drift, observations) if d is not None], settings)


def _rising(drifts: Sequence[float], settings: SearchSettings) -> bool:
    """Whether trials whose drifts (see _drift) these are still rise through their windows.

    A trial that starts from an empty queue near saturation has not reached
    steady state after a short warm-up: its later quarters are slower than
    its earlier ones, its mean is biased low, and independent trials agree
    on that low value, so their interval is narrow and wrong. It counts
    when the mean drift is positive by a one-sided t-test at the search's
    confidence and larger than half the log half-width the accuracy allows.
    """
    if len(drifts) < 2:
        return False
    count = len(drifts)
    mean = math.fsum(drifts) / count
    if mean <= math.atanh(1 - settings.accuracy) / 2:
        return False
    deviation = sample_deviation(drifts)
    if deviation == 0:
        return True
    return mean / (deviation / math.sqrt(count)) > t_quantile(2 * settings.confidence - 1, count - 1)
