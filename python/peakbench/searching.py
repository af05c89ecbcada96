"""`peakbench search`: the controller's run_trial, backed by the real engine (or
the simulator for sim:// targets), with every trial and the search itself kept
in the store."""

from __future__ import annotations

import collections
import dataclasses
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from hdrh.histogram import HdrHistogram

from . import hooks, sim
from . import store as store_module
from .contract import TrialResult
from .controller import Observation, SearchResult, SearchSettings, find_peak
from .controller.design import Sample
from .controller.history import same_load
from .controller.observation import Outcomes
from .controller.statistics import response_interval
from .controller.surface import SurfaceResult, map_surface
from .engine import SHED_LABEL, Engine, offered_rate, outcomes
from .errors import InputError, RunError
from .locks import StoreLock
from .surfaceplan import SurfacePlan
from .sysinfo import snapshot
from .targets import check_ours, parse_target, target_label
from .trials import TrialRecord, run_trial
from .workload import Workload, trial_spec

# Short trials and a looser claim, for a first look in a few minutes; said in the output.
# Careful trials stay at 4 s (min_runlength_s): shorter ones on a real target were never
# checked against a dense sweep (BENCHMARKS §7).
QUICK = dict(
    runlength_s=4.0,
    min_runlength_s=4.0,
    warmup_s=1.0,
    scout_runlength_s=1.0,
    confidence=0.90,
    accuracy=0.85,
    start_load=100.0,
    max_trials=12,
    max_total_trials=80,
)


def percentile_ms(result: dict, percentile: float) -> float:
    """A percentile of a trial's overall latency, from its stored HDR histogram (ns)."""
    latency = TrialResult.load(result).latency
    if not latency.hist or latency.count == 0:
        return 0.0
    return HdrHistogram.decode(latency.hist).get_value_at_percentile(percentile) / 1e6


def observation_of(result: dict, load: float, psat: float, cost_s: float) -> Observation:
    """What the controller sees of one engine trial offered `load` ops/s (results stored before
    the engine counted outcomes and latency quarters load too: see engine.outcomes)."""
    typed = TrialResult.load(result)
    counts = outcomes(typed)
    # A request the server's backlog kept from being sent failed as surely as one it dropped: without
    # it, a window whose requests all waited behind the cap would read as R̄ 0 ms, far below the peak.
    held = 0 if typed.generator_saturated else typed.unsent
    seen = Outcomes(counts.succeeded, counts.errors, counts.shed, counts.timeouts, counts.cancelled, held)
    quarters = typed.latency.quarters_mean_ms
    return Observation(
        requested_rate=load,
        achieved_rate=typed.achieved_rate,
        mean_ms=typed.latency.mean_ms,
        percentile_ms=percentile_ms(result, psat),
        generator_saturated=typed.generator_saturated,
        cost_s=cost_s,
        offered_rate=offered_rate(result),
        failed_share=seen.failed_share,
        shed_share=seen.shed / seen.requests if seen.requests else 0.0,
        quarter_means_ms=tuple(quarters) if quarters is not None else None,
        outcomes=seen,
        shed_label=SHED_LABEL,
        saturation_reason=typed.saturation_reason,
    )


@dataclasses.dataclass
class EngineTrials:
    """run_trial(load, runlength_s) for the controller: prepare (augmenting the file set
    as the load grows), run, store. The cost is the wall time all of that took."""

    workload: Workload
    target: dict
    engine: Engine
    store: store_module.Store
    search_id: int | None  # None: trials of a fixed-rate surface, which has no searches
    settings: SearchSettings
    sysinfo: dict
    scale: float = 1.0
    seed: int = 1
    max_outstanding: int | None = None  # cap on requests in flight in every trial
    trials_run: int = 0
    trial_ids: list[int] = dataclasses.field(default_factory=list)

    def __call__(self, load: float, runlength_s: float) -> Observation:
        # Each trial gets its own seed: repeated trials must be independent samples.
        spec = trial_spec(
            self.workload,
            self.target,
            rate=load,
            warmup_s=self.settings.warmup_s,
            runtime_s=runlength_s,
            seed=self.seed + self.trials_run,
            scale=self.scale,
            max_outstanding=self.max_outstanding,
        )
        self.trials_run += 1
        record = TrialRecord(
            workload=self.workload.name,
            target=target_label(self.target),
            sysinfo=self.sysinfo,
            search_id=self.search_id,
        )
        stored = run_trial(spec, self.engine, self.store, record)
        if stored.trial_id is None:  # a search must not go on from a trial the store has not got
            raise RunError(f"{stored.store_error}; the trial was written to {stored.saved_to} instead")
        self.trial_ids.append(stored.trial_id)
        return observation_of(stored.result, load, self.settings.psat, cost_s=stored.cost_s)


def fresh_seed() -> int:
    """A search's own seed, so repeated searches do not replay the same arrival sequences."""
    return secrets.randbelow(2**31)


def progress_printer(stream=sys.stderr) -> Callable[[float, int, float | None], None]:
    def show(load: float, trial_at_load: int, ci_width_ms: float | None) -> None:
        width = f"  R̄ interval width {ci_width_ms:.2f} ms" if ci_width_ms is not None else ""
        print(f"search  load {load:9.1f} ops/s  trial {trial_at_load}{width}", file=stream, flush=True)

    return show


def search_engine_target(
    workload: Workload,
    target: dict,
    settings: SearchSettings,
    policy: str,
    db: Path,
    sysinfo: dict,
    scale: float,
    seed: int,
    seed_load: float | None,
    engine: Engine | None = None,
    max_outstanding: int | None = None,
    invocation: dict | None = None,
) -> tuple[int, SearchResult]:
    """A search against a real target; returns the stored search's id and its result.

    `engine` runs the trials: one local Engine by default, or a cluster.DistributedEngine;
    `max_outstanding` caps the requests in flight in every trial; `invocation` is what
    `peakbench resume` needs to finish the search if this process dies."""
    with store_module.Store(db) as store:
        search_id = store.add_search(
            workload=workload.name,
            target=target_label(target),
            policy=policy,
            settings=dataclasses.asdict(settings),
            invocation=invocation,
        )
        trials = EngineTrials(
            workload, target, engine or Engine(), store, search_id, settings, sysinfo, scale, seed, max_outstanding
        )
        return search_id, continue_search(store, search_id, trials, settings, policy, seed_load, seed)


class ResumedTrials:
    """run_trial for a resumed search: the stored trials first, in order, then live ones."""

    def __init__(self, search_id: int, stored: list[dict], live: EngineTrials):
        self.search_id = search_id
        self.stored = collections.deque(stored)
        self.live = live

    def __call__(self, load: float, runlength_s: float) -> Observation:
        if not self.stored:
            return self.live(load, runlength_s)
        trial = self.stored.popleft()
        ran = trial["spec"]["load"]
        if not (same_load(ran["rate"], load) and abs(ran["runtime_s"] - runlength_s) <= 1e-6 * runlength_s):
            raise RunError(
                f"search {self.search_id} cannot be resumed: its controller now asks for {load:g} ops/s"
                f" for {runlength_s:g} s where its stored trial {trial['id']} ran {ran['rate']:g} ops/s"
                f" for {ran['runtime_s']:g} s (was it started by another peakbench version?)"
            )
        return observation_of(trial["result"], load, self.live.settings.psat, trial["cost_s"] or 0.0)


def continue_search(
    store: store_module.Store,
    search_id: int,
    run_trial,
    settings: SearchSettings,
    policy: str,
    seed_load: float | None,
    seed: int,
) -> SearchResult:
    """Run a stored search to its end (or on from where it stopped: resume.py), holding its job lock,
    so that `peakbench resume` can tell it is alive; its result (with the search's `seed`) or its
    failure is stored."""
    with StoreLock(store.path, f"search {search_id}") as lock:
        lock.acquire("running the search")
        try:
            result = dataclasses.replace(
                find_peak(run_trial, settings, policy, seed_load, progress_printer()), seed=seed
            )
        except BaseException as error:
            store.finish_search(search_id, error=str(error) or type(error).__name__)
            raise
        store.finish_search(search_id, result=result.to_dict())
    return result


def search_simulated(
    url: str, settings: SearchSettings, policy: str, seed_load: float | None, seed: int, db: Path
) -> tuple[int, SearchResult]:
    """A search against sim://, in virtual time; stored like any search (its trace holds every trial,
    and there are no engine trials to store)."""
    trials = sim.target_from_url(
        url, warmup_s=settings.warmup_s, psat=settings.psat, rsat_ms=settings.rsat_ms, seed=seed
    )
    with store_module.Store(db) as store:
        search_id = store.add_search(workload="sim", target=url, policy=policy, settings=dataclasses.asdict(settings))
        return search_id, continue_search(store, search_id, trials, settings, policy, seed_load, seed)


def map_planned_surface(
    plan: SurfacePlan,
    workload: Workload,
    db: Path,
    scale: float = 1.0,
    seed: int = 1,
    surface_id: int | None = None,
) -> tuple[int, SurfaceResult]:
    """Every sample of a surface plan: configure, search its peak, fit the surface; all of it stored.

    A sample whose configure command fails, whose server never becomes ready or
    whose target is unusable is recorded as failed with the reason, and the
    rest go on (unless the plan says fail_fast).

    With surface_id, a stored surface goes on (`peakbench resume`): samples are visited in the
    same order, each sample's search keeps its id and its stored trials are handed back to its
    controller before it goes on live, so no finished trial runs again.
    """
    settings = plan.settings
    with store_module.Store(db) as store:
        if surface_id is None:
            # The plan's absolute path, so that a resume from another directory reads the same file.
            summary = {**plan.summary(), "path": str(plan.path.absolute())}
            surface_id = store.add_surface(plan=summary, invocation={"scale": scale, "seed": seed})
        stored = {_sample_key(search["sample"]): search for search in store.surface_searches(surface_id)}
        searches: list[tuple[Sample, int]] = []

        def trials_for(sample: Sample):
            url = plan.fill(plan.target, sample)
            previous = stored.get(_sample_key(sample))
            if previous is not None:
                search_id = previous["id"]
            else:
                search_id = store.add_search(
                    workload=plan.workload_for(workload, sample).name,
                    target=url,
                    policy=plan.policy,
                    settings=dataclasses.asdict(settings),
                    surface_id=surface_id,
                    sample=sample,
                )
            searches.append((sample, search_id))
            if plan.configure is not None:
                hooks.configure(plan.configure, lambda word: plan.fill(word, sample))
            if url.startswith("sim://"):  # virtual time: the search is cheap and repeats exactly
                return sim.target_from_url(
                    url, warmup_s=settings.warmup_s, psat=settings.psat, rsat_ms=settings.rsat_ms, seed=seed + search_id
                )
            ran = store.search_trials(search_id) if previous is not None else []
            live = _sample_trials(plan, sample, workload, store, search_id, scale, seed, trials_run=len(ran))
            return ResumedTrials(search_id, [t for t in ran if t["status"] == "done"], live)

        def announce(sample: Sample):
            print(f"surface  sample {', '.join(f'{k}={v:g}' for k, v in sample.items())}", file=sys.stderr, flush=True)
            return progress_printer()

        with StoreLock(store.path, f"surface {surface_id}") as lock:
            lock.acquire("mapping the surface")
            try:
                result = map_surface(
                    plan.factors,
                    plan.samples,
                    trials_for,
                    settings,
                    plan.policy,
                    seeding=plan.seeding,
                    fail_fast=plan.fail_fast,
                    progress=announce,
                )
            except BaseException as error:
                store.finish_surface(surface_id, error=str(error) or type(error).__name__)
                if isinstance(error, RuntimeError) and not isinstance(error, RunError):  # fail_fast's stop
                    raise RunError(f"surface stopped (fail_fast): {error}") from None
                raise
            outcomes = {tuple(outcome.sample.items()): outcome for outcome in result.outcomes}
            for sample, search_id in searches:
                outcome = outcomes.get(tuple(sample.items()))
                if outcome is not None and outcome.result is not None:
                    store.finish_search(search_id, result=outcome.result.to_dict())
                else:
                    store.finish_search(search_id, error=outcome.failure if outcome else "not run")
            store.finish_surface(surface_id, result=result.to_dict())
    return surface_id, result


def _sample_trials(
    plan: SurfacePlan,
    sample: Sample,
    workload: Workload,
    store,
    search_id: int | None,
    scale: float,
    seed: int,
    trials_run: int = 0,
) -> EngineTrials:
    """The engine trials of one sample of a plan: its target, and its workload with the sample's knobs."""
    target = parse_target(plan.fill(plan.target, sample))
    check_ours(target)
    engine = Engine()
    version = engine.version()
    return EngineTrials(
        plan.workload_for(workload, sample),
        target,
        engine,
        store,
        search_id,
        plan.settings,
        snapshot(target, version),
        scale,
        seed,
        trials_run=trials_run,
    )


def measure_planned_surface(
    plan: SurfacePlan, workload: Workload, db: Path, scale: float = 1.0, seed: int = 1
) -> tuple[int, dict]:
    """A fixed-rate plan (Fstress Figure 9): every sample's trials at the plan's one offered load,
    stored, and each sample's mean response time with its interval (statistics.response_interval).

    A sample whose configure command or trial fails is recorded as failed and the rest go on
    (unless the plan says fail_fast)."""
    fixed, settings = plan.fixed_rate, plan.settings
    outcomes = []
    with store_module.Store(db) as store:
        surface_id = store.add_surface(plan=plan.summary())
        try:
            for sample in plan.samples:
                print(f"surface  sample {', '.join(f'{k}={v:g}' for k, v in sample.items())}", file=sys.stderr)
                means, achieved, failed, trial_ids, failure = [], [], [], [], None
                try:
                    if plan.configure is not None:
                        hooks.configure(plan.configure, lambda word, sample=sample: plan.fill(word, sample))
                    trials = _sample_trials(plan, sample, workload, store, None, scale, seed)
                    for _ in range(fixed.trials):
                        seen = trials(fixed.rate, settings.runlength_s)
                        means.append(seen.mean_ms)
                        achieved.append(seen.achieved_rate)
                        failed.append(seen.failed_share)
                    trial_ids = trials.trial_ids
                except (RunError, InputError) as error:
                    if plan.fail_fast:
                        raise
                    failure = str(error)
                outcomes.append(
                    _fixed_outcome(sample, means, achieved, failed, trial_ids, failure, settings.confidence)
                )
        except BaseException as error:
            store.finish_surface(surface_id, error=str(error) or type(error).__name__)
            raise
        result = {
            "kind": "fixed-rate",
            "rate": fixed.rate,
            "trials_per_sample": fixed.trials,
            "runlength_s": settings.runlength_s,
            "confidence": settings.confidence,
            "factors": [dataclasses.asdict(f) for f in plan.factors],
            "outcomes": outcomes,
        }
        store.finish_surface(surface_id, result=result)
    return surface_id, result


def _fixed_outcome(sample, means, achieved, failed, trial_ids, failure, confidence) -> dict:
    interval = response_interval(means, confidence) if len(means) >= 2 and all(m > 0 for m in means) else None
    return {
        "sample": sample,
        "trial_ids": trial_ids,
        "trials": len(means),
        "mean_ms": interval.mean if interval else (sum(means) / len(means) if means else None),
        "ci_low_ms": interval.low if interval else None,
        "ci_high_ms": interval.high if interval else None,
        "achieved_rate": sum(achieved) / len(achieved) if achieved else None,
        "failed_share": max(failed) if failed else None,
        "failure": failure,
    }


def _sample_key(sample: dict) -> tuple:
    return tuple(sorted(sample.items()))
