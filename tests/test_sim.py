"""The simulated server (sim://) and `peakbench simulate`."""

import json
import random
import statistics

import pytest
from peakbench.sim import SimulatedServer, SimulatedTarget, main, target_from_url


def spread(server, load, runlength, n=300):
    rng = random.Random(1)
    means = [server.trial(load, runlength, 0, 95, rng).mean_ms for _ in range(n)]
    return statistics.stdev(means) / statistics.mean(means)


def test_true_peak_is_where_the_mean_response_equals_rsat():
    server = SimulatedServer.with_peak(800, rsat_ms=40, service_ms=6)
    assert server.true_peak(40) == pytest.approx(800)
    assert server.mean_response_ms(800) == pytest.approx(40)


def test_noise_shrinks_with_runlength_and_grows_towards_saturation():
    server = SimulatedServer(capacity=500, service_ms=5, floor_cv=0)
    assert spread(server, 450, 30) > 2 * spread(server, 450, 300)
    assert spread(server, 450, 60) > 3 * spread(server, 150, 60)


def test_overloaded_server_completes_less_than_offered_and_trials_cost_virtual_time():
    server = SimulatedServer(capacity=500, service_ms=5, overhead_s=2)
    target = SimulatedTarget(server, warmup_s=30, seed=1)
    over = target(800, 60)
    assert over.achieved_rate == pytest.approx(500) and over.mean_ms > 1000
    under = target(100, 60)
    assert under.achieved_rate == 100 and under.cost_s == 30 + 60 + 2
    assert not under.generator_saturated


def test_deterministic_for_a_seed():
    server = SimulatedServer(capacity=500)
    first = [SimulatedTarget(server, seed=7)(300, 60) for _ in range(2)]
    assert first[0] == first[1]
    assert SimulatedTarget(server, seed=8)(300, 60) != first[0]


def test_sim_urls():
    plain = target_from_url("sim://?capacity=900&service_ms=4&generator_limit=700")
    assert plain.server.capacity == 900 and plain.server.generator_limit == 700
    sample = target_from_url("sim://db-tp?disks=2&nfsds=16")
    assert sample.server.true_peak(40) > 0
    for url, words in [
        ("sim://?service_ms=4", "capacity"),
        ("sim://nosuch?x=1", "unknown surface"),
        ("sim://db-tp?disks=2", "nfsds"),
        ("sim://?capacity=9&colour=3", "unknown parameter"),
        ("sim://?capacity=fast", "name=number"),
    ]:
        with pytest.raises(ValueError, match=words):
            target_from_url(url)


def test_simulate_command(capsys):
    assert main(["--samples", "5", "--policies", "guided,binsearch"]) == 0
    table = capsys.readouterr().out
    assert "guided" in table and "binsearch" in table and "5 simulated servers" in table
    assert main(["--samples", "3", "--policies", "guided", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policies"]["figures"][0]["policy"] == "guided"
    assert main(["--policies", "fastest"]) == 2
    assert "policy must be one of" in capsys.readouterr().err
