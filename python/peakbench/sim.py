"""A simulated server in virtual time (`sim://`), and side-by-side runs of search policies.

The server is M/M/1-like: mean response R(λ) = S/(1 − λ/μ) for service time S
and capacity μ, so its true peak rate, where R = Rsat, is μ·(1 − S/Rsat).
A trial's mean response varies from trial to trial as the mean of λ·r
correlated M/M/1 sojourn times does: its squared coefficient of variation is
    u(2 + 5u − 4u² + u³) / ((1 − u)² · λ·r)        (u = λ/μ)
times `noise`², plus a run-length-independent floor, so it shrinks with the
runlength r and grows sharply as the load approaches saturation (the paper's
Figures 4 and 5). Past u = 0.98 the server is overloaded: the backlog grows
through the trial, R̄ grows with the trial's length, and achieved < offered
once λ > μ. A trial costs its warm-up + runlength + overhead in virtual
seconds and returns at once. Every draw comes from a seeded generator.

With `queue=1` a trial is instead a single-server queue simulated request by
request: Poisson arrivals, exponential service at rate μ, starting from an
empty queue at the start of the warm-up (Lindley's recursion), each sojourn
scaled by μ·S so that the steady-state mean is S/(1 − λ/μ) as above. Such a
trial shows what the analytic model cannot: near saturation a short warm-up
leaves the queue still filling, so the trial's later quarters are slower than
its earlier ones and its mean is biased low; achieved < offered arises from
the backlog itself. It costs about 50 ns of CPU per simulated request.

URLs: sim://?capacity=1000&service_ms=5[&noise=1&floor_cv=0.02&generator_limit=..&queue=1]
      sim://SURFACE?disks=2&nfsds=16   (a sample of a simulated response surface)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from urllib.parse import parse_qsl, urlsplit

from .controller import SearchSettings, find_peak
from .controller.design import Factor, Sample, d_optimal, full_factorial
from .controller.history import LoadRecord
from .controller.observation import Observation
from .controller.policies import DEFAULT_POLICY, policy_named
from .controller.result import PEAK, SearchResult
from .controller.surface import QuadraticSurface, map_surface, mape

OVERLOADED = 0.98  # utilisation past which the server is treated as overloaded
MAX_TRIAL_CV = 1.0  # the trial-to-trial variation is capped here


@dataclasses.dataclass(frozen=True)
class SimulatedServer:
    capacity: float  # μ, ops/s
    service_ms: float = 5.0  # S, response time at zero load
    noise: float = 1.0  # multiplies the queueing noise of a trial's mean
    floor_cv: float = 0.02  # trial-to-trial variation that no runlength removes
    generator_limit: float = math.inf  # the highest rate the load generator can drive
    overhead_s: float = 0.0  # set-up time per trial on top of warm-up and runlength
    queue: bool = False  # simulate each trial's queue from empty instead of the analytic model

    def __post_init__(self) -> None:
        for name in ("capacity", "service_ms"):
            if not getattr(self, name) > 0:
                raise ValueError(f"sim: {name} must be positive (got {getattr(self, name)})")
        for name in ("noise", "floor_cv", "overhead_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"sim: {name} must not be negative (got {getattr(self, name)})")
        if not self.generator_limit > 0:
            raise ValueError(f"sim: generator_limit must be positive (got {self.generator_limit})")
        if self.queue and self.noise != 1.0:
            raise ValueError("sim: noise applies to the analytic model only; a simulated queue has its own")

    @classmethod
    def with_peak(cls, peak: float, rsat_ms: float = 40.0, service_ms: float = 5.0, **options) -> SimulatedServer:
        """The server whose true peak rate for `rsat_ms` is `peak`."""
        if not service_ms < rsat_ms:
            raise ValueError(f"sim: service_ms ({service_ms}) must be below rsat_ms ({rsat_ms}) for a peak to exist")
        return cls(capacity=peak / (1 - service_ms / rsat_ms), service_ms=service_ms, **options)

    def true_peak(self, rsat_ms: float) -> float:
        """The load where the mean response time is exactly rsat_ms (0 if none)."""
        return max(self.capacity * (1 - self.service_ms / rsat_ms), 0.0)

    def mean_response_ms(self, load: float) -> float:
        """The steady-state mean response time (infinite at or past capacity)."""
        utilisation = load / self.capacity
        return self.service_ms / (1 - utilisation) if utilisation < 1 else math.inf

    def trial(self, load: float, runlength_s: float, warmup_s: float, psat: float, rng: random.Random) -> Observation:
        if self.queue:
            return self.queue_trial(load, runlength_s, warmup_s, psat, rng)
        utilisation = load / self.capacity
        cost = warmup_s + runlength_s + self.overhead_s
        driven = min(load, self.generator_limit)
        if utilisation < OVERLOADED:
            count = max(load * runlength_s, 1.0)
            queueing = utilisation * (2 + 5 * utilisation - 4 * utilisation**2 + utilisation**3)
            cv2 = self.noise**2 * queueing / ((1 - utilisation) ** 2 * count) + self.floor_cv**2
            mean = self.service_ms / (1 - utilisation) * _unit_lognormal(rng, min(cv2, MAX_TRIAL_CV**2))
            achieved = driven
        else:
            backlog_s = max(load - self.capacity, 0.0) * (warmup_s + runlength_s / 2) / self.capacity
            mean = (self.service_ms / (1 - OVERLOADED) + 1000 * backlog_s) * _unit_lognormal(rng, 0.05**2)
            achieved = min(driven, self.capacity)
        # Sojourn times of M/M/1 are exponential: the p-th percentile is −ln(1 − p)·mean.
        percentile = -math.log(1 - psat / 100) * mean
        return Observation(
            requested_rate=load,
            achieved_rate=achieved,
            mean_ms=mean,
            percentile_ms=percentile,
            generator_saturated=load > self.generator_limit,
            cost_s=cost,
        )

    def queue_trial(
        self, load: float, runlength_s: float, warmup_s: float, psat: float, rng: random.Random
    ) -> Observation:
        """One trial of the queue from empty (see the module's doc), measured over [warm-up, end)."""
        import numpy  # here, not at the top: only queue trials need it

        generator = numpy.random.default_rng(rng.getrandbits(64))
        driven = min(load, self.generator_limit)
        end = warmup_s + runlength_s
        arrivals = numpy.sort(generator.uniform(0.0, end, generator.poisson(driven * end)))
        services = generator.exponential(1 / self.capacity, arrivals.size)
        # Lindley from an empty queue: the wait is the walk C_n = Σ(S_{i−1} − A_i) above its running minimum.
        steps = numpy.concatenate(([0.0], services[:-1] - numpy.diff(arrivals))) if arrivals.size else arrivals
        walk = numpy.cumsum(steps)
        sojourns = walk - numpy.minimum.accumulate(numpy.minimum(walk, 0.0)) + services
        responses_ms = sojourns * self.capacity * self.service_ms * _unit_lognormal(rng, self.floor_cv**2)
        measured = (arrivals >= warmup_s) & (arrivals < end)
        departures = arrivals + sojourns
        completed = numpy.count_nonzero((departures >= warmup_s) & (departures < end))
        window = responses_ms[measured]
        quarters = numpy.minimum(((arrivals[measured] - warmup_s) / runlength_s * 4).astype(int), 3)
        quarter_means = tuple(
            float(window[quarters == q].mean()) if numpy.any(quarters == q) else None for q in range(4)
        )
        mean = float(window.mean()) if window.size else 0.0
        return Observation(
            requested_rate=load,
            achieved_rate=completed / runlength_s,
            mean_ms=mean,
            percentile_ms=float(numpy.percentile(window, psat)) if window.size else 0.0,
            generator_saturated=load > self.generator_limit,
            cost_s=end + self.overhead_s,
            offered_rate=window.size / runlength_s,
            quarter_means_ms=quarter_means,
        )


def _unit_lognormal(rng: random.Random, cv2: float) -> float:
    """A lognormal factor with mean 1 and squared coefficient of variation cv2."""
    sigma2 = math.log1p(cv2)
    return math.exp(rng.gauss(-sigma2 / 2, math.sqrt(sigma2)))


class SimulatedTarget:
    """The `run_trial(load, runlength_s)` callable of one simulated server, in virtual time."""

    def __init__(self, server: SimulatedServer, warmup_s: float = 30.0, psat: float = 95.0, seed: int = 0):
        self.server = server
        self.warmup_s = warmup_s
        self.psat = psat
        self.rng = random.Random(seed)

    def __call__(self, load: float, runlength_s: float) -> Observation:
        return self.server.trial(load, runlength_s, self.warmup_s, self.psat, self.rng)


# -- R̄ intervals near saturation -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ResponseCoverage:
    """How often the R̄ intervals a report states at one load of a simulated queue hold the true mean response."""

    utilisation: float
    preset: str  # the trial settings, by name (RESPONSE_PRESETS)
    runlength_s: float
    warmup_s: float
    confidence: float
    repeats: int  # loads measured, each as a search measures one (search.careful_at)
    stated: int  # of those, stated with an interval at confidence (the n of `coverage`)
    coverage: float  # share of stated intervals that hold the true mean response
    rising: int  # stated in the open form R̄ ≥ L instead (trials still rising), no confidence claimed
    rising_holds: float | None  # share of those whose L lies at or below the true mean (None if none)
    # Share of all stated loads whose statement holds: the interval holding the mean, or R̄ ≥ L with L at or
    # below it. This is the figure held to c: the open form is the price, counted in `rising`.
    statements_hold: float
    median_width: float | None  # median high/low of the stated intervals (None if none)
    noisy: int  # loads that stayed too noisy within max_trials: no interval at all
    claims: int  # loads where the search claimed the peak, with R̄ as it states it there (search.peak_response)
    claim_coverage: float | None  # share of those whose statement holds the truth (None if none)
    mean_trials: float  # per measured load, the confirmation's trials not counted
    # Of the claims, those made on the pilot stage (where the claim selects trials that agreed, so R̄ is stated
    # from the confirmation's fresh trials), and the share of their statements that hold the truth (None if none)
    pilot_claims: int
    pilot_claim_coverage: float | None


def response_coverage(
    utilisation: float,
    preset: str,
    repeats: int,
    seed: int = 0,
    capacity: float = 200.0,
    service_ms: float = 5.0,
) -> ResponseCoverage:
    """Coverage of the R̄ intervals a report states (search.stated_response) at one load of a simulated
    queue (`queue=1`, from empty each trial) measured with a preset's settings, Rsat set to the true mean
    response there so that the load lies in the peak region and the search runs its careful trials as it
    would at λ*."""
    settings, truth, records, confirmations = response_records(utilisation, preset, repeats, seed, capacity, service_ms)
    return response_summary(utilisation, preset, settings, truth, records, confirmations)


def response_records(
    utilisation: float, preset: str, repeats: int, seed: int, capacity: float, service_ms: float
) -> tuple[SearchSettings, float, list, list]:
    """The settings, the true mean response, the careful trials' records (None: too noisy) of
    response_coverage's `repeats` loads, and the confirmation a search runs after each claim (None where none)."""
    from .controller.search import careful_claim_at

    server = SimulatedServer(capacity, service_ms, queue=True)
    load = utilisation * capacity
    truth = server.mean_response_ms(load)
    settings = SearchSettings(rsat_ms=truth, **response_preset(preset))
    measured = [
        careful_claim_at(SimulatedTarget(server, settings.warmup_s, settings.psat, seed * 100_003 + i), settings, load)
        for i in range(repeats)
    ]
    return settings, truth, [record for record, _ in measured], [confirmation for _, confirmation in measured]


def response_summary(
    utilisation: float,
    preset: str,
    settings: SearchSettings,
    truth: float,
    records: Sequence[LoadRecord | None],
    confirmations: Sequence | None = None,
) -> ResponseCoverage:
    """What response_coverage reports of loads measured as search.careful_claim_at measures them (None: too
    noisy), against the true mean response `truth`; at claims, R̄ as search.peak_response states it, from the
    confirmations (None: as without one)."""
    from .controller.history import PEAK as PEAK_LOAD
    from .controller.search import claimed_on_pilot, peak_response, stated_response

    repeats = len(records)
    confirmations = confirmations if confirmations is not None else [None] * repeats

    def stated(record: LoadRecord, confirmation) -> tuple:
        if record.classification != PEAK_LOAD:
            return stated_response(record, settings)
        at_peak = peak_response(record, confirmation, settings)
        return at_peak.interval, at_peak.rising

    def held(interval, rising: bool) -> bool:
        return interval.low <= truth and (rising or truth <= interval.high)

    pairs = [(r, c) for r, c in zip(records, confirmations, strict=True) if r is not None and r.interval is not None]
    measured = [r for r, _ in pairs]
    forms = [stated(r, c) for r, c in pairs]
    holds = [held(interval, False) for interval, rising in forms if not rising]
    lower_bounds = [held(interval, True) for interval, rising in forms if rising]
    claimed = [(r, form) for r, form in zip(measured, forms, strict=True) if r.classification == PEAK_LOAD]
    claims = [held(*form) for _, form in claimed]
    pilot_claims = [held(*form) for r, form in claimed if claimed_on_pilot(r, settings)]
    return ResponseCoverage(
        utilisation,
        preset,
        settings.runlength_s,
        settings.warmup_s,
        settings.confidence,
        repeats,
        len(holds),
        sum(holds) / len(holds) if holds else 0.0,
        len(lower_bounds),
        sum(lower_bounds) / len(lower_bounds) if lower_bounds else None,
        (sum(holds) + sum(lower_bounds)) / len(forms) if forms else 0.0,
        statistics.median(i.high / i.low for i, rising in forms if not rising) if holds else None,
        repeats - len(measured),
        len(claims),
        sum(claims) / len(claims) if claims else None,
        sum(len(r.means_ms) for r in measured) / len(measured) if measured else 0.0,
        len(pilot_claims),
        sum(pilot_claims) / len(pilot_claims) if pilot_claims else None,
    )


# The trial settings whose intervals are checked besides the quick preset (searching.QUICK): issue 20's
# careful search (--runlength 20 --warmup 5), the guided policy's shortest careful trials (runlength/3 of
# the default) and the default careful trial.
RESPONSE_PRESETS = {
    "runlength-20": dict(runlength_s=20.0, warmup_s=5.0),
    "guided-shortest": dict(runlength_s=60.0, warmup_s=30.0),
    "default": dict(runlength_s=180.0, warmup_s=30.0),
}
RESPONSE_UTILISATIONS = (0.8, 0.875, 0.95)


def response_preset(name: str) -> dict:
    """The settings of RESPONSE_PRESETS' `name`, or of the quick preset for "quick"."""
    if name == "quick":
        from .searching import QUICK  # here: searching imports this module

        return dict(QUICK)
    return RESPONSE_PRESETS[name]


# -- the claims' coverage (peakbench simulate --coverage) ------------------------

NOISIER = {"noise": 2.0, "floor_cv": 0.05}  # the noisier population of the coverage check
RESPONSE_REPEATS = 1000


@dataclasses.dataclass(frozen=True)
class Coverage:
    searches: list[SimulationReport]  # one per population
    responses: list[ResponseCoverage]


def coverage(
    policies: Sequence[str],
    n_samples: int,
    settings: SearchSettings,
    seed: int,
    seeded: bool,
    peak_range: tuple[float, float],
    options: dict,
) -> Coverage:
    """The peak claims over `n_samples` searches per policy on the population (with `options`) and on a
    noisier one, and R̄'s intervals near saturation."""
    searches = [
        simulate(policies, n_samples, settings, seed, seeded, peak_range, **population_options)
        for population_options in (options, {**options, **NOISIER})
    ]
    return Coverage(searches, response_coverages(seed))


def response_coverages(seed: int) -> list[ResponseCoverage]:
    """R̄'s intervals near saturation: RESPONSE_REPEATS loads per preset and load factor."""
    return [
        response_coverage(u, preset, RESPONSE_REPEATS, seed)
        for preset in ("quick", *RESPONSE_PRESETS)
        for u in RESPONSE_UTILISATIONS
    ]


def format_coverage(result: Coverage) -> str:
    confidence = result.searches[0].settings.confidence
    lines = [f"{'population':<24} {'policy':<10} {'n':>5} {'peak':>6} {'λ in CI':>8} {'within a':>9} {'mean s':>8}"]
    for report in result.searches:
        population = ", ".join(f"{k} {v:g}" for k, v in report.server_options.items()) or "default"
        for f in report.figures:
            lines.append(
                f"{population:<24} {f.policy:<10} {f.samples:>5} {f.peaks_found:>6} "
                f"{f.peak_ci_coverage:8.1%} {f.within_accuracy:9.1%} {f.mean_cost_s:8.0f}"
            )
    lines.append(
        f"λ in CI: searches whose interval of the peak rate holds the true peak (claimed {confidence:.0%}); "
        "within a: whose peak rate is within 1 − a of it; a search without that claim counts as a miss"
    )
    lines.append("")
    lines.extend(format_responses(result.responses))
    return "\n".join(lines)


def format_responses(responses: Sequence[ResponseCoverage]) -> list[str]:
    lines = [
        f"{'preset':<16} {'ρ':>5} {'run s':>6} {'warm s':>6} {'c':>4} {'n':>5} {'stated':>6} {'covers':>7} "
        f"{'R̄ ≥ L':>6} {'L ok':>7} {'all':>7} {'width':>6} {'noisy':>5} {'claims':>6} {'covers':>7} {'pilot':>5} "
        f"{'covers':>7} {'trials':>6}"
    ]

    def share(value: float | None) -> str:
        return f"{value:7.1%}" if value is not None else f"{'-':>7}"

    for r in responses:
        lines.append(
            f"{r.preset:<16} {r.utilisation:5.3f} {r.runlength_s:6g} {r.warmup_s:6g} {r.confidence:4.0%} "
            f"{r.repeats:5d} {r.stated:6d} {r.coverage:7.1%} {r.rising:6d} {share(r.rising_holds)} "
            f"{share(r.statements_hold)} "
            f"{r.median_width or 0:6.2f} {r.noisy:5d} "
            f"{r.claims:6d} {share(r.claim_coverage)} {r.pilot_claims:5d} {share(r.pilot_claim_coverage)} "
            f"{r.mean_trials:6.1f}"
        )
    lines.append(
        "R̄ intervals as a report states them at load factor ρ of a simulated M/M/1 queue (from empty each "
        "trial), each load measured n times as a search measures the peak (Rsat at the true mean response): "
        "stated: with an interval at the preset's confidence c; covers: share of those holding the true mean; "
        "R̄ ≥ L: trials still rising, stated as a lower bound with no confidence claimed; L ok: share of those "
        "with L at or below the true mean; all: share of both forms that hold (held to c); width: median "
        "high/low of the intervals; noisy: no interval within the trial limit; claims: loads the search "
        "claimed as the peak, and how often the interval stated there holds the true mean; pilot: of those, "
        "claimed on their first stage of trials (the claim selected trials that agreed), and how often"
    )
    return lines


# -- simulated response surfaces ------------------------------------------------

DISKS = Factor("disks", (1, 2, 3, 4))
NFSDS = Factor("nfsds", (1, 2, 4, 8, 16, 32, 64, 100), scale="log")


@dataclasses.dataclass(frozen=True)
class SimulatedSurface:
    """Peak rates that are a smooth function of the factors, as in the paper's Figure 2."""

    name: str
    description: str
    factors: tuple[Factor, ...]
    peak: Callable[[Sample], float]
    service_ms: float = 5.0

    def server(self, sample: Sample, rsat_ms: float = 40.0, **options) -> SimulatedServer:
        return SimulatedServer.with_peak(self.peak(sample), rsat_ms, self.service_ms, **options)


SURFACES = {
    surface.name: surface
    for surface in (
        SimulatedSurface(
            "db-tp",
            "disk-bound: more disks help only with enough nfsds to keep them busy",
            (DISKS, NFSDS),
            lambda s: 40 + 110 * s["disks"] * (1 - math.exp(-s["nfsds"] / (1.5 * s["disks"]))),
        ),
        SimulatedSurface(
            "web-server",
            "CPU- and cache-bound: nfsds matter, disks a little",
            (DISKS, NFSDS),
            lambda s: 1800 * (1 - 0.7 * math.exp(-s["nfsds"] / 6)) * (1 + 0.08 * (s["disks"] - 1)),
        ),
        SimulatedSurface(
            "mail",
            "small files, many directories: gentle gains from both",
            (DISKS, NFSDS),
            lambda s: 260 + 45 * s["disks"] + 30 * math.log2(s["nfsds"]) - 2 * math.log2(s["nfsds"]) ** 2,
        ),
    )
}


def target_from_url(
    url: str, warmup_s: float = 30.0, psat: float = 95.0, rsat_ms: float = 40.0, seed: int = 0
) -> SimulatedTarget:
    """The simulated target a `sim://` URL names (see the module's doc)."""
    parts = urlsplit(url)
    if parts.scheme != "sim":
        raise ValueError(f"not a sim:// URL: {url!r}")
    try:
        params = {k: float(v) for k, v in parse_qsl(parts.query, strict_parsing=bool(parts.query))}
    except ValueError:
        raise ValueError(f"sim: parameters in {url!r} must be name=number pairs") from None
    options = {k: params.pop(k) for k in ("noise", "floor_cv", "generator_limit", "overhead_s") if k in params}
    if "queue" in params:
        options["queue"] = params.pop("queue") != 0
    if parts.netloc:
        surface = SURFACES.get(parts.netloc)
        if surface is None:
            raise ValueError(f"sim: unknown surface {parts.netloc!r}; known: {', '.join(SURFACES)}")
        missing = [f.name for f in surface.factors if f.name not in params]
        if missing:
            raise ValueError(f"sim://{surface.name} needs the factor(s) {', '.join(missing)}")
        server = surface.server({f.name: params.pop(f.name) for f in surface.factors}, rsat_ms, **options)
    else:
        if "capacity" not in params:
            raise ValueError("sim:// needs capacity=OPS (and optionally service_ms=MS)")
        server = SimulatedServer(capacity=params.pop("capacity"), service_ms=params.pop("service_ms", 5.0), **options)
    if params:
        raise ValueError(f"sim: unknown parameter(s) {', '.join(params)}")
    return SimulatedTarget(server, warmup_s, psat, seed)


# -- policies side by side ----------------------------------------------------

PEAK_RANGE = (250.0, 4000.0)  # true peaks of the simulated population, ops/s (log-uniform)
SERVICE_RANGE_MS = (2.0, 12.0)  # zero-load response times of the population (uniform)


def population(
    n_samples: int, seed: int, rsat_ms: float = 40.0, peak_range: tuple[float, float] = PEAK_RANGE, **options
) -> list[SimulatedServer]:
    """Simulated servers of varied peak rates and curve shapes, the same for a seed;
    `options` (noise, floor_cv, queue) apply to every one."""
    rng = random.Random(seed)
    servers = []
    for _ in range(n_samples):
        peak = math.exp(rng.uniform(math.log(peak_range[0]), math.log(peak_range[1])))
        servers.append(SimulatedServer.with_peak(peak, rsat_ms, rng.uniform(*SERVICE_RANGE_MS), **options))
    return servers


@dataclasses.dataclass(frozen=True)
class PolicyFigures:
    policy: str
    samples: int
    total_cost_s: float
    mean_cost_s: float
    mean_trials: float
    mean_loads: float
    peaks_found: int
    within_accuracy: float  # share of samples whose found peak is within 1−a of the truth
    response_ci_coverage: float  # share of found peaks whose R̄ interval holds the true mean response
    peak_ci_coverage: float  # share of all samples whose [ci_low, ci_high] holds the truth (no claim: a miss)
    mean_accuracy: float  # mean achieved accuracy of R̄ at the found peaks
    failures: dict[str, int]  # verdicts other than peak, counted


@dataclasses.dataclass(frozen=True)
class SimulationReport:
    settings: SearchSettings
    seed: int
    seeded: bool
    peak_range: tuple[float, float]
    figures: list[PolicyFigures]
    server_options: dict  # noise, floor_cv, queue of every simulated server

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def simulate(
    policies: Sequence[str] = ("guided", "binsearch", "model", "linear"),
    n_samples: int = 50,
    settings: SearchSettings | None = None,
    seed: int = 0,
    seeded: bool = False,
    peak_range: tuple[float, float] = PEAK_RANGE,
    **server_options,
) -> SimulationReport:
    """Run each policy on the same simulated servers (and the same noise streams) and compare.

    `seeded`: start each search from a seed within ±20% of the true peak, as a
    nearest finished sample of a surface would give.
    """
    settings = settings or SearchSettings()
    for name in policies:
        policy_named(name)
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive (got {n_samples})")
    servers = population(n_samples, seed, settings.rsat_ms, peak_range, **server_options)
    seeds = random.Random(seed + 1)
    starts = [s.true_peak(settings.rsat_ms) * seeds.uniform(0.8, 1.2) if seeded else None for s in servers]
    figures = []
    for name in policies:
        results = [
            find_peak(
                SimulatedTarget(server, settings.warmup_s, settings.psat, seed * 100_003 + i),
                settings,
                name,
                seed_load=starts[i],
            )
            for i, server in enumerate(servers)
        ]
        figures.append(_figures(name, servers, results, settings))
    return SimulationReport(settings, seed, seeded, peak_range, figures, server_options)


def _figures(
    policy: str, servers: list[SimulatedServer], results: list[SearchResult], settings: SearchSettings
) -> PolicyFigures:
    truths = [s.true_peak(settings.rsat_ms) for s in servers]
    found = [(r, t) for r, t in zip(results, truths) if r.verdict == PEAK]
    within = sum(abs(r.peak_rate - t) / t <= 1 - settings.accuracy for r, t in found)
    covered = sum(r.ci_low is not None and r.ci_low <= t <= r.ci_high for r, t in found)
    # Peaks located by a bracket (a cliff) claim no interval of R̄.
    with_interval = [
        (r, server) for r, server in zip(results, servers) if r.verdict == PEAK and r.response_ci_low_ms is not None
    ]
    # A confirmation whose trials still rose states only R̄ ≥ low (response_ci_high_ms None): it holds when low does.
    response_covered = sum(
        r.response_ci_low_ms <= server.mean_response_ms(r.measured_load) <= (r.response_ci_high_ms or math.inf)
        for r, server in with_interval
    )
    failures: dict[str, int] = {}
    for r in results:
        if r.verdict != PEAK:
            failures[r.verdict] = failures.get(r.verdict, 0) + 1
    total = sum(r.cost_seconds for r in results)
    return PolicyFigures(
        policy=policy,
        samples=len(results),
        total_cost_s=total,
        mean_cost_s=total / len(results),
        mean_trials=sum(r.trials for r in results) / len(results),
        mean_loads=sum(len(r.loads) for r in results) / len(results),
        peaks_found=len(found),
        within_accuracy=within / len(results),
        response_ci_coverage=response_covered / len(with_interval) if with_interval else 0.0,
        peak_ci_coverage=covered / len(results),
        mean_accuracy=sum(r.accuracy or 0.0 for r, _ in found) / len(found) if found else 0.0,
        failures=failures,
    )


def format_report(report: SimulationReport) -> str:
    s = report.settings
    base = next((f for f in report.figures if f.policy == DEFAULT_POLICY), report.figures[0])
    low, high = report.peak_range
    options = "".join(f", {k} {v:g}" for k, v in report.server_options.items())
    lines = [
        f"{report.figures[0].samples} simulated servers{options}, true peaks {low:g}–{high:g} ops/s, seed {report.seed}"
        f"{', seeded within ±20% of the peak' if report.seeded else ''}; target: peak within "
        f"{1 - s.accuracy:.0%} of the truth at {s.confidence:.0%} confidence; runlength {s.runlength_s:g} s, "
        f"warm-up {s.warmup_s:g} s",
        f"{'policy':<10} {'total h':>8} {'mean s':>8} {'vs ' + base.policy:>10} {'trials':>7} {'loads':>6} "
        f"{'within':>7} {'R-CI':>6} {'λ-CI':>6} {'R-acc':>6}  failures",
    ]
    for f in report.figures:
        failures = ", ".join(f"{k} {v}" for k, v in sorted(f.failures.items())) or "-"
        lines.append(
            f"{f.policy:<10} {f.total_cost_s / 3600:8.1f} {f.mean_cost_s:8.0f} "
            f"{f.total_cost_s / base.total_cost_s:9.2f}x {f.mean_trials:7.1f} {f.mean_loads:6.1f} "
            f"{f.within_accuracy:7.1%} {f.response_ci_coverage:6.1%} {f.peak_ci_coverage:6.1%} "
            f"{f.mean_accuracy:6.1%}  {failures}"
        )
    lines.append(
        "within: share of servers whose found peak is within the accuracy of the true peak; "
        "R-CI: share of found peaks whose interval of R̄ holds the true mean response there; "
        "λ-CI: share of servers whose peak-rate interval holds the true peak (no claim counts as a miss); "
        "R-acc: mean accuracy of R̄ at the peak"
    )
    return "\n".join(lines)


# -- response surfaces over the simulator -----------------------------------------


@dataclasses.dataclass(frozen=True)
class SurfaceFigures:
    surface: str
    samples: int
    mape: float  # percent, predicted vs true peak over every candidate sample
    cost_s: float
    failures: int


def simulate_surface(
    name: str, n_samples: int, settings: SearchSettings | None = None, seed: int = 0, policy: str = DEFAULT_POLICY
) -> SurfaceFigures:
    """Fit a simulated surface from n D-optimal samples of its full factorial; MAPE over all of it."""
    settings = settings or SearchSettings()
    surface = SURFACES[name]
    candidates = full_factorial(surface.factors)
    chosen = d_optimal(surface.factors, n_samples, candidates)
    counter = iter(range(10**9))

    def runner(sample: Sample) -> SimulatedTarget:
        return SimulatedTarget(
            surface.server(sample, settings.rsat_ms), settings.warmup_s, settings.psat, seed * 1_000_003 + next(counter)
        )

    mapped = map_surface(surface.factors, chosen, runner, settings, policy)
    failures = sum(o.failure is not None for o in mapped.outcomes)
    if mapped.surface is None:
        return SurfaceFigures(name, n_samples, math.inf, mapped.cost_seconds, failures)
    fitted: QuadraticSurface = mapped.surface
    error = mape([fitted.predict(c) for c in candidates], [surface.peak(c) for c in candidates])
    return SurfaceFigures(name, n_samples, error, mapped.cost_seconds, failures)


# -- peakbench simulate ---------------------------------------------------------


def _peak_range(text: str) -> tuple[float, float]:
    try:
        low, high = (float(w) for w in text.split(","))
    except ValueError:
        raise ValueError(f"--peaks must be LOW,HIGH in ops/s (got {text!r})") from None
    if not 0 < low <= high:
        raise ValueError(f"--peaks needs 0 < LOW <= HIGH (got {text!r})")
    return low, high


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="peakbench simulate", description="Run peak-search policies side by side on simulated servers."
    )
    parser.add_argument(
        "--policies", default="guided,binsearch,model,linear", help="comma-separated policies (default: %(default)s)"
    )
    parser.add_argument("--samples", type=int, default=50, help="simulated servers (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeded", action="store_true", help="start each search near the true peak")
    parser.add_argument(
        "--peaks",
        default=f"{PEAK_RANGE[0]:g},{PEAK_RANGE[1]:g}",
        help="range of true peak rates, LOW,HIGH ops/s (log-uniform; default: %(default)s)",
    )
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--accuracy", type=float, default=0.90)
    parser.add_argument("--runlength", type=float, default=180.0, help="seconds per careful trial")
    parser.add_argument(
        "--min-runlength",
        type=float,
        default=None,
        help="shortest careful trial the guided policy may choose (default: runlength/3)",
    )
    parser.add_argument(
        "--equal-runlength",
        action="store_true",
        help="every policy's careful trials run the full runlength (compares at equal trial length)",
    )
    parser.add_argument("--noise", type=float, default=1.0, help="multiplies every server's queueing noise")
    parser.add_argument("--floor-cv", type=float, default=0.02, help="every server's runlength-free variation")
    parser.add_argument(
        "--queue",
        action="store_true",
        help="simulate each trial's queue from empty (transient included) instead of the analytic model",
    )
    parser.add_argument(
        "--coverage",
        action="store_true",
        help="the claims' coverage: --samples searches per policy on the population and on a noisier "
        "one (noise 2, floor_cv 0.05), and R̄ intervals near saturation (1,000 loads per preset and load factor)",
    )
    parser.add_argument(
        "--response-coverage",
        action="store_true",
        help="only the R̄ intervals near saturation of --coverage (1,000 loads per preset and load factor)",
    )
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of warm-up per trial")
    parser.add_argument(
        "--surfaces",
        action="store_true",
        help="also fit the simulated surfaces from 6, 8 and 10 D-optimal samples of 32",
    )
    parser.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="run no confirmation after a claim on the pilot (to see what it costs)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    try:
        settings = SearchSettings(
            confidence=args.confidence,
            accuracy=args.accuracy,
            runlength_s=args.runlength,
            min_runlength_s=args.runlength if args.equal_runlength else args.min_runlength,
            warmup_s=args.warmup,
            confirm=args.confirm,
        )
        peak_range = _peak_range(args.peaks)
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        options = {"noise": args.noise, "floor_cv": args.floor_cv, **({"queue": True} if args.queue else {})}
        if args.response_coverage:
            responses = response_coverages(args.seed)
            if args.json:
                print(json.dumps([dataclasses.asdict(r) for r in responses], indent=2))
            else:
                print("\n".join(format_responses(responses)))
            return 0
        if args.coverage:
            print(
                format_coverage(coverage(policies, args.samples, settings, args.seed, args.seeded, peak_range, options))
            )
            return 0
        report = simulate(policies, args.samples, settings, args.seed, args.seeded, peak_range, **options)
        surfaces = (
            [simulate_surface(name, n, settings, args.seed) for name in SURFACES for n in (6, 8, 10)]
            if args.surfaces
            else []
        )
    except ValueError as error:
        print(f"peakbench simulate: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps({"policies": report.to_dict(), "surfaces": [dataclasses.asdict(f) for f in surfaces]}, indent=2)
        )
        return 0
    print(format_report(report))
    if surfaces:
        print()
        print(f"{'surface':<11} {'samples':>7} {'MAPE':>7} {'cost h':>7} failures")
        for f in surfaces:
            print(f"{f.surface:<11} {f.samples:>7} {f.mape:6.1f}% {f.cost_s / 3600:7.1f} {f.failures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
