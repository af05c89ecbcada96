"""The peak-rate search against the simulator, in virtual time."""

import json
import math
import re

import pytest
from peakbench.controller import SearchSettings, find_peak, sweep_knee
from peakbench.controller.history import BELOW, LoadRecord, SearchHistory
from peakbench.controller.pickers import ModelGuided
from peakbench.controller.runlength import careful_runlength
from peakbench.controller.statistics import (
    accuracy,
    stated_response_interval,
    stein_interval,
    stein_trials,
    t_interval,
)
from peakbench.searching import QUICK
from peakbench.sim import SimulatedServer, SimulatedTarget, simulate, target_from_url

SETTINGS = SearchSettings()


@pytest.fixture(scope="module")
def side_by_side():
    """All four policies over 60 simulated servers with known true peaks (250–4000 ops/s)."""
    return {f.policy: f for f in simulate(("guided", "binsearch", "model", "linear"), 60, SETTINGS, seed=11).figures}


def test_found_peak_lies_within_the_stated_accuracy_at_the_stated_confidence(side_by_side):
    # "Within the stated accuracy": |λ_found − λ_true| / λ_true ≤ 1 − a (10%); failures count as misses.
    for figures in side_by_side.values():
        assert figures.samples >= 50
        assert figures.within_accuracy >= SETTINGS.confidence, figures


def test_interval_of_the_response_at_the_peak_holds_about_as_often_as_claimed(side_by_side):
    # 60 samples: the binomial standard error at 95% is ~3%, so allow two of them.
    figures = side_by_side["guided"]
    assert figures.response_ci_coverage >= SETTINGS.confidence - 0.06
    assert figures.mean_accuracy >= SETTINGS.accuracy


def test_guided_costs_at_most_half_of_binsearch_and_a_tenth_of_linear(side_by_side):
    assert side_by_side["guided"].total_cost_s <= 0.5 * side_by_side["binsearch"].total_cost_s
    assert side_by_side["guided"].total_cost_s < side_by_side["model"].total_cost_s
    assert side_by_side["guided"].total_cost_s <= 0.1 * side_by_side["linear"].total_cost_s


def test_a_peak_whose_stated_interval_falls_short_of_the_accuracy_says_so_and_names_the_one_it_claimed_on():
    # The search claims on the interval it steers by (Stein's); the one it states is wider by its allowances for
    # trials begun on an empty queue. 31 of 300 searches of this server stated "accuracy 89.3%" and the like in
    # their headline against a target of 90%, without a word; four of them among these seeds.
    shortfalls = 0
    for seed in range(40):
        result = find_peak(target_from_url("sim://?capacity=800&service_ms=5", seed=seed), SETTINGS)
        assert result.verdict == "peak", (seed, result.message)
        short = "short of the target 90%" in result.message
        assert short == (result.accuracy is not None and result.accuracy < SETTINGS.accuracy), (seed, result.message)
        if short and result.measured_load is not None:
            claimed = re.search(r"own interval \[[\d.]+, [\d.]+\] ms, accuracy ([\d.]+)%", result.message)
            assert float(claimed.group(1)) / 100 >= SETTINGS.accuracy, result.message
            shortfalls += 1
    assert shortfalls >= 2


def test_a_bracket_whose_low_end_may_have_read_low_is_split_before_the_search_gives_up_its_interval():
    # On this queue the search stopped between 682.6 ops/s (below, but near enough the region to have read low)
    # and 800, "located to accuracy 51.7%, short of the target 90%", with an interval of 500-800 ops/s, having
    # tried no load between them (a real Samba search did the same with 1,029 s of its budget left).
    truth = SimulatedServer(capacity=800, queue=True).true_peak(SETTINGS.rsat_ms)
    result = find_peak(target_from_url("sim://?capacity=800&queue=1", seed=15), SETTINGS, "guided")
    assert result.verdict == "peak" and result.accuracy >= SETTINGS.accuracy, result.message
    assert result.ci_low <= truth <= result.ci_high, result.message
    assert any(682.6 < t.load < 800 and t.purpose == "careful" for t in result.trace)


def careful_runlengths(result):
    return {t.runlength_s for t in result.trace if t.purpose == "careful"}


def test_guided_runs_short_careful_trials_until_the_noise_needs_longer_ones():
    quiet = search(SimulatedServer.with_peak(2000, service_ms=10))
    assert quiet.verdict == "peak" and quiet.accuracy >= SETTINGS.accuracy
    assert careful_runlengths(quiet) == {SETTINGS.min_runlength}
    # Near saturation (service 2.5 ms against Rsat 40 ms) at 300 ops/s, R̄ varies ~20% between 60 s trials.
    noisy = search(SimulatedServer.with_peak(300, service_ms=2.5))
    assert noisy.verdict == "peak" and abs(noisy.peak_rate - 300) <= 0.1 * 300
    assert max(careful_runlengths(noisy)) > SETTINGS.min_runlength
    assert careful_runlengths(search(SimulatedServer.with_peak(2000, service_ms=10), "binsearch")) == {
        SETTINGS.runlength_s
    }
    fixed = SearchSettings(min_runlength_s=SETTINGS.runlength_s)
    assert careful_runlengths(search(SimulatedServer.with_peak(300, service_ms=2.5), settings=fixed)) == {
        SETTINGS.runlength_s
    }


def test_the_chosen_runlength_lets_the_pilot_alone_reach_the_accuracy():
    pilot = 4
    assert careful_runlength(SETTINGS, [], pilot) == SETTINGS.min_runlength
    assert SearchSettings(**{**QUICK, "runlength_s": 1.0}).min_runlength == 1.0  # --quick --runlength 1
    assert careful_runlength(SETTINGS, [1e-6, 50.0], pilot) == SETTINGS.runlength_s
    variance_seconds = [0.2, 0.45]  # variance of log R̄ × runlength of two loads; the noisier one decides
    runlength = careful_runlength(SETTINGS, variance_seconds, pilot)
    assert SETTINGS.min_runlength < runlength < SETTINGS.runlength_s
    # (1% either side of the boundary, where N = pilot exactly.)
    assert stein_trials(math.sqrt(0.45 / (1.01 * runlength)), SETTINGS.confidence, SETTINGS.accuracy, pilot) == pilot
    assert stein_trials(math.sqrt(0.45 / (0.99 * runlength)), SETTINGS.confidence, SETTINGS.accuracy, pilot) > pilot


def search(server, policy="guided", settings=SETTINGS, **kwargs):
    return find_peak(SimulatedTarget(server, settings.warmup_s, settings.psat, seed=5), settings, policy, **kwargs)


@pytest.mark.parametrize("policy", ["guided", "binsearch", "model", "linear"])
def test_peak_result_carries_intervals_and_the_trace(policy):
    server = SimulatedServer.with_peak(700, service_ms=5)
    events = []
    result = search(server, policy, progress=lambda load, n, width: events.append((load, n, width)))
    assert result.verdict == "peak" and result.policy == policy
    assert abs(result.peak_rate - 700) / 700 <= 0.1
    assert result.response_ci_low_ms <= result.response_ms <= result.response_ci_high_ms
    assert result.response_ci_low_ms <= SETTINGS.region_high_ms and result.response_ci_high_ms >= SETTINGS.region_low_ms
    # The stated interval may be wider than the one claimed on (its allowances, or fresh trials): then it says so.
    assert result.accuracy >= SETTINGS.accuracy or f"short of the target {SETTINGS.accuracy:.0%}" in result.message
    assert len(events) == result.trials == len(result.trace)
    assert math.isclose(result.cost_seconds, sum(t.observation.cost_s for t in result.trace))
    assert math.isclose(result.trace[-1].cumulative_cost_s, result.cost_seconds)
    assert math.isclose(sum(s.cost_s for s in result.loads), result.cost_seconds)
    assert sum(s.trials for s in result.loads) == result.trials
    assert [t.load_factor for t in result.trace] == [t.load / result.peak_rate for t in result.trace]
    assert result.measured_load in {t.load for t in result.trace}  # λ* is a measured load
    assert result.ci_low <= result.peak_rate <= result.ci_high
    data = json.loads(result.to_json())
    for key in (
        "peak_rate",
        "ci_low",
        "ci_high",
        "confidence",
        "accuracy",
        "cost_seconds",
        "trials",
        "verdict",
        "message",
        "trace",
    ):
        assert key in data


def test_guided_scouts_far_loads_with_one_short_trial():
    result = search(SimulatedServer.with_peak(2000, service_ms=5))
    far = [s for s in result.loads if s.load_factor < 0.5]
    assert far and all(s.trials == 1 and s.reason.startswith("scout") for s in far)
    assert all(t.runlength_s == SETTINGS.scout_runlength for t in result.trace if t.purpose == "scout")


def test_binsearch_doubles_from_the_start_load_then_bisects():
    result = search(SimulatedServer.with_peak(700, service_ms=5), "binsearch")
    loads = list(dict.fromkeys(t.load for t in result.trace))
    assert loads[:5] == [50, 100, 200, 400, 800]
    assert loads[5] == 600  # bisecting [400, 800]


def test_seeded_search_starts_at_the_seed_and_costs_less():
    server = SimulatedServer.with_peak(1500, service_ms=5)
    seeded = search(server, "binsearch", seed_load=1400)
    assert seeded.trace[0].load == 1400
    assert seeded.cost_seconds < search(server, "binsearch").cost_seconds


def test_not_saturated_up_to_the_maximum_rate():
    settings = SearchSettings(max_load=400)
    for policy in ("guided", "binsearch"):
        result = search(SimulatedServer.with_peak(2000), policy, settings)
        assert result.verdict == "not-saturated" and result.peak_rate is None
        assert "--max-rate" in result.message


def test_saturated_already_at_the_lowest_rate():
    settings = SearchSettings(min_load=10, start_load=10)
    for policy in ("guided", "binsearch"):
        result = search(SimulatedServer(capacity=1000, service_ms=60), policy, settings)
        assert result.verdict == "saturated-at-min"
        assert "--min-rate" in result.message


def test_a_knee_too_noisy_to_settle_is_bracketed_by_settled_loads():
    # Short trials on a steep knee (the quick preset, a 5 ms server peaking at ~200 ops/s like the
    # throttled disk of the main job): R̄ at loads near the peak varies too much to settle within
    # max_trials, so bisecting there ends nowhere. The search probes just outside those loads until
    # settled loads bound the peak closely, and claims it from them.
    quick = SearchSettings(**QUICK)
    results = [
        find_peak(
            SimulatedTarget(SimulatedServer.with_peak(194, service_ms=5), quick.warmup_s, quick.psat, seed=seed),
            quick,
            "guided",
        )
        for seed in range(60)
    ]
    within = [r for r in results if r.peak_rate is not None and abs(r.peak_rate / 194 - 1) <= 1 - quick.accuracy]
    assert len(within) >= quick.confidence * len(results), [r.message for r in results if r not in within]
    bracketed = [r for r in results if r.verdict == "peak" and "did not settle which side they are on" in r.message]
    assert bracketed
    assert all(r.ci_low < r.peak_rate < r.ci_high for r in bracketed)
    # A claim meets the accuracy unless its low end may have read low (search.maybe_read_low): then its
    # interval reaches further down, and the message says so beside the accuracy it does reach.
    assert all(r.accuracy >= quick.accuracy or "reaches down to" in r.message for r in bracketed)


def test_noisy_when_the_trial_budget_runs_out():
    settings = SearchSettings(max_trials=6)
    result = search(SimulatedServer.with_peak(300, noise=30, floor_cv=0.5), "binsearch", settings)
    assert result.verdict == "noisy" and result.peak_rate is None
    assert "runlength" in result.message
    limit = search(SimulatedServer.with_peak(3000), "binsearch", SearchSettings(max_total_trials=4))
    assert limit.verdict == "trial-limit" and limit.trials == 4 and "--max-trials" in limit.message


def test_generator_bound_is_never_reported_as_a_peak():
    for policy in ("guided", "binsearch", "model", "linear"):
        result = search(SimulatedServer.with_peak(2000, generator_limit=500), policy)
        assert result.verdict == "generator-bound" and result.peak_rate is None
        assert "add clients" in result.message


def test_model_guided_falls_back_to_bisection_when_the_fit_is_no_server_curve():
    history = SearchHistory()
    history.add(LoadRecord(100, BELOW, 20.0, None, True, False, ""))
    history.add(LoadRecord(200, BELOW, 10.0, None, True, False, ""))  # R falling with load
    assert ModelGuided(SETTINGS).next_load(history) == 400


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("width", 0.0, "width"),
        ("width", -0.1, "peak region"),
        ("confidence", 1.0, "confidence"),
        ("confidence", 0.0, "confidence"),
        ("accuracy", 1.5, "accuracy"),
        ("min_trials", 1, "min_trials"),
        ("max_trials", 1, "max_trials"),
        ("rsat_ms", -1.0, "rsat_ms"),
        ("runlength_s", 0.0, "runlength_s"),
        ("min_runlength_s", 0.0, "min_runlength_s"),
        ("min_runlength_s", float("inf"), "min_runlength_s"),
        ("start_load", 0.5, "start_load"),
        ("max_load", 0.5, "max_load"),
        ("psat", 100.0, "psat"),
        ("max_failed_share", 1.0, "max_failed_share"),
        ("max_failed_share", -0.01, "max_failed_share"),
        ("confidence", float("nan"), "confidence"),
    ],
)
def test_bad_settings_raise_a_clear_one_line_error(field, value, words):
    with pytest.raises(ValueError, match=words) as error:
        SearchSettings(**{field: value})
    assert "\n" not in str(error.value)


def test_bad_policy_and_seed_raise():
    with pytest.raises(ValueError, match="policy must be one of"):
        find_peak(lambda load, r: None, SETTINGS, "fastest")
    with pytest.raises(ValueError, match="seed_load"):
        find_peak(lambda load, r: None, SETTINGS, "guided", seed_load=-5)


def test_t_interval_and_accuracy():
    interval = t_interval([1.0, 2.0, 3.0], 0.95)
    assert interval.mean == 2.0
    assert math.isclose(interval.high - interval.mean, 4.302652729911275 / math.sqrt(3))
    assert math.isclose(accuracy(36, 44), 0.9)
    assert stein_interval([1.0, 2.0, 3.0], 1.0, 3, 0.95) == interval


def test_the_stated_response_interval_holds_its_point_however_far_its_trials_spread():
    # The low end is raised for the low read of trials from an empty queue by exp(0.75·s²), which outgrows
    # the interval's half-width once the trials' log means spread by s ≈ 3 over a dozen trials.
    means = [math.exp(3.0 * (i - 5.5) / 3.5) for i in range(12)]
    interval = stated_response_interval(means, [], 0.90)
    assert 0 < interval.low <= interval.mean <= interval.high
    steady = stated_response_interval([10.0, 11.0, 9.0, 10.5], [0.0] * 4, 0.90)
    assert 0 < steady.low < 10 < steady.high


def test_a_dense_sweep_of_a_simulated_server_finds_its_knee_at_the_true_peak():
    server = SimulatedServer.with_peak(800)
    run_trial = SimulatedTarget(server, seed=3)
    sweep = [run_trial(800 * (0.6 + 0.08 * step), SETTINGS.runlength_s) for step in range(11)]
    knee = sweep_knee(sweep, SETTINGS)
    assert knee is not None and abs(knee - 800) <= 0.04 * 800  # half a sweep step
    # A sweep that never reaches saturation has no knee, nor one that goes back below it.
    assert sweep_knee(sweep[:4], SETTINGS) is None
    assert sweep_knee(sweep + sweep[:1], SETTINGS) is None
