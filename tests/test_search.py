"""`peakbench search` as a user runs it: on a simulated server (virtual time), with bad
settings, and for real on a loop-mounted ext4 whose disk is throttled, so the file
system saturates long before the generator (needs root); there, a dense sweep of the
same target checks the peak the search found."""

import dataclasses
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from peakbench import cgroups, fsimage, searching
from peakbench.contract import RESULT_SCHEMA
from peakbench.controller import Observation, SearchSettings, saturated, saturation_signal, sweep_knee
from peakbench.controller.observation import Outcomes
from peakbench.engine import Engine
from peakbench.sim import SimulatedServer
from peakbench.workload import find_workload, trial_spec


def test_a_search_on_a_simulated_server_finds_its_peak(cli, tmp_path):
    # One seed, so that a failure repeats: about one search in ten of this server states its peak's R̄ interval
    # short of the target accuracy, and says so (test_controller_search).
    out = tmp_path / "peak.json"
    done = cli("search", "mail", "--target", "sim://?capacity=800&service_ms=5", "--seed", "1000", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "peak rate" in done.stdout
    result = json.loads(out.read_text())
    truth = SimulatedServer(capacity=800, service_ms=5).true_peak(40)  # 700 ops/s
    assert result["verdict"] == "peak"
    assert abs(result["peak_rate"] - truth) / truth <= 0.10  # a = 90%
    assert result["confidence"] == 0.95 and result["accuracy"] >= 0.90
    assert result["cost_seconds"] > 0 and result["trials"] == len(result["trace"])
    assert {"ci_low", "ci_high", "verdict", "trace"} <= set(result)


def test_the_loads_table_counts_the_trials_each_interval_rests_on_and_says_whose_interval_is_whose(cli, tmp_path):
    # A load's row read "trials 10" beside "95% CI [43.7, 49.3] ms over 9 trials" and an "R interval" of
    # 44.04 .. 49.85: the scout trial is in the count but not in the interval, and the why column quotes the
    # interval the search steered by, not the one it states. The table now says both.
    out = tmp_path / "peak.json"
    done = cli("search", "mail", "--target", "sim://?capacity=800", "--seed", "1162186644", "--json", str(out))
    assert done.returncode == 0, done.stderr
    loads = json.loads(out.read_text())["loads"]
    scouted = [load for load in loads if load["ci_low_ms"] is not None and load["trials"] > 1]
    assert scouted
    for load in scouted:
        scouts = sum(
            1 for t in json.loads(out.read_text())["trace"] if t["load"] == load["load"] and t["purpose"] == "scout"
        )
        assert f"over {load['trials'] - scouts} careful trials" in load["reason"]
    assert "why: the interval the search steered by; R interval: the one it states" in done.stdout


def test_a_search_that_never_saturates_says_what_to_change(cli, tmp_path):
    done = cli("search", "mail", "--target", "sim://?capacity=800", "--max-rate", "300", "--start-rate", "100")
    assert done.returncode == 3
    assert "not-saturated" in done.stdout and "--max-rate" in done.stdout


def test_a_generator_bound_search_says_in_the_engines_words_why_it_fell_behind(engine_path, cli, tmp_path):
    # Four million ops/s is past what one engine schedules (its floor is about one million), and null://
    # answers at once, so the engine and nothing else is what cannot keep up.
    done = cli(
        "search", "specsfs97", "--target", "null://", "--quick", "--seed-rate", "4000000", "--max-rate", "8000000",
        "--db", str(tmp_path / "p.db"), "--json", str(tmp_path / "out.json"),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["verdict"] == "generator-bound"
    # Which of the engine's two tests fired (a schedule lag that grew, or requests it never sent) is said.
    assert "the engine, not the target, limited this trial" in result["message"]
    assert "fell behind its own schedule" in result["message"] or "never sent" in result["message"]


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--confidence", "1.5", "confidence must lie strictly between 0 and 1"),
        ("--width", "0", "peak region"),
        ("--accuracy", "0", "accuracy"),
    ],
)
def test_contradictory_criteria_are_one_line_errors(cli, tmp_path, option, value, words):
    done = cli("search", "mail", "--target", "sim://?capacity=800", option, value, "--db", str(tmp_path / "p.db"))
    assert done.returncode == 2
    assert words in done.stderr and option in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.db").exists()


def test_a_simulated_server_has_no_requests_in_flight_to_cap(cli):
    done = cli("search", "mail", "--target", "sim://?capacity=800", "--max-outstanding", "10")
    assert done.returncode == 2
    assert "--max-outstanding" in done.stderr and len(done.stderr.strip().splitlines()) == 1


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mkfs.ext4") is None or not cgroups.BLKIO.is_dir(),
    reason="needs root, mkfs.ext4 and the cgroup v1 blkio controller",
)


def throttled_ext4_target(workdir, options=""):
    """A target directory on a fresh ext4 image mounted with `options`, its disk held to 200 I/Os a second."""
    fs = fsimage.create(workdir / "fs", "ext4", size_mb=256, options=options)
    try:
        target = fs.mountpoint / "target"
        target.mkdir()
        with cgroups.throttled_device(fs.device_numbers, read_iops=200, write_iops=200):
            yield target
    finally:
        fs.destroy()


@pytest.fixture
def throttled_ext4(tmp_path):
    yield from throttled_ext4_target(tmp_path)


@pytest.fixture
def throttled_sync_ext4():
    """Every write reaches the disk before it returns (sync), as one write I/O: no cache flush
    (nobarrier), and no journal commit for the timestamps (lazytime) or, for an overwrite in
    place, for anything else. So each op costs the throttled disk the same, however many
    queue, and the capacity holds still from minute to minute. The image lives in memory
    (/dev/shm): on the machine's disk, other work's write-back could stall the loop device."""
    workdir = Path(tempfile.mkdtemp(prefix="peakbench-test-", dir="/dev/shm"))
    try:
        yield from throttled_ext4_target(workdir, "sync,nobarrier,lazytime")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@needs_root
@pytest.mark.slow  # about 75 s on a real disk; test_known_curve checks the same growth against M/D/1 in CI
def test_open_loop_latency_grows_with_the_queue_on_a_saturated_disk(engine_path, cli, throttled_ext4, tmp_path):
    def trial(rate):
        out = tmp_path / f"{rate}.json"
        done = cli(
            "run",
            "mail",
            "--target",
            str(throttled_ext4),
            "--rate",
            str(rate),
            "--warmup",
            "1",
            "--runtime",
            "4",
            "--db",
            str(tmp_path / "p.db"),
            "--json",
            str(out),
        )
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())

    easy, overloaded = trial(20), trial(600)
    # The disk, not the generator, is the limit: the generator kept its schedule ...
    assert overloaded["generator_saturated"] is False
    # ... the requests the disk could not serve queued up: hundreds outstanding at once where the
    # easy load had one or two. (The completions in the window are no measure of it: only the
    # commits, a quarter of the mail mix, wait for the disk, and the journal groups the queued ones
    # into fewer writes, so the longer the queue the more the disk completes. At 600 ops/s they
    # fell 2-9% short in most runs and once not at all; at 1,200 the generator, not the disk,
    # became the limit on a busy machine.) ...
    assert overloaded["outstanding"]["max"] > 50 * easy["outstanding"]["max"]
    # ... and the queue shows in the latency.
    assert overloaded["latency"]["mean_ms"] > 20 * easy["latency"]["mean_ms"]
    assert overloaded["ops"]["commit"]["mean_ms"] > 50


@needs_root
def test_a_real_search_finds_the_disk_bound_peak(engine_path, cli, throttled_sync_ext4, tmp_path):
    db, out = tmp_path / "p.db", tmp_path / "peak.json"
    # The README's main job (peakbench.demo): a quick search of sync-overwrite on a throttled ext4
    # whose capacity holds still, so it settles in a minute or two; a busy machine takes longer.
    target = str(throttled_sync_ext4)
    # As the demo does, a cap on requests in flight queues the excess past the peak for the disk
    # instead of holding a sender thread for each synchronous write.
    search = ["search", "sync-overwrite", "--target", target, "--quick", "--max-outstanding", "128"]
    done = cli(*search, "--db", str(db), "--json", str(out), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "quick preset" in done.stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "peak"
    peak = result["peak_rate"]

    # Check λ* against trials of the same target on either side of it: well below it the disk
    # keeps up under Rsat, well above it the response time is past Rsat or the disk falls behind.
    # (The next test, a soak, checks λ* against a dense sweep of the same target.)
    def saturated(rate):
        report = tmp_path / f"check-{rate:.0f}.json"
        run = cli(
            "run",
            "sync-overwrite",
            "--target",
            target,
            "--rate",
            f"{rate:.1f}",
            "--warmup",
            "1",
            "--runtime",
            "4",
            "--db",
            str(db),
            "--json",
            str(report),
        )
        assert run.returncode == 0, run.stderr
        r = json.loads(report.read_text())
        return r["latency"]["mean_ms"] > 40 or r["achieved_rate"] < 0.95 * rate

    assert not saturated(0.5 * peak)
    assert saturated(1.6 * peak)

    # The search and every one of its trials are in the store.
    with sqlite3.connect(db) as connection:
        (searches,) = connection.execute("SELECT count(*) FROM searches WHERE status = 'done'").fetchone()
        (trials,) = connection.execute("SELECT count(*) FROM trials WHERE search_id = 1").fetchone()
    assert searches == 1 and trials == result["trials"]

    # Its report, rebuilt from the store alone, states and marks the peak the search found.
    html = tmp_path / "report.html"
    shown = cli("report", "--db", str(db), "--html", str(html))
    assert shown.returncode == 0, shown.stderr
    assert f"peak rate λ* found by the search {peak:,.1f} ops/s" in shown.stdout
    page = html.read_text()
    assert f"peak {peak:,.1f} ops/s" in page and "peak region 36-44 ms" in page


@needs_root
@pytest.mark.slow  # a sweep of many trials on a real disk (about 2 minutes): keeps CI within 30 minutes
def test_a_real_search_agrees_with_a_dense_sweep(engine_path, cli, throttled_sync_ext4, tmp_path):
    db, out = tmp_path / "p.db", tmp_path / "peak.json"
    # Each write holds a sender thread until the disk takes it, so past the peak the engine would
    # start hundreds of threads a second; on a busy machine they start late and the engine rightly
    # calls itself the bottleneck. A cap on requests in flight (three times what the peak needs)
    # makes the queue past it wait for the disk, not for new threads.
    cap = ("--max-outstanding", "128")
    done = cli(
        "search",
        "sync-overwrite",
        "--target",
        str(throttled_sync_ext4),
        "--quick",
        *cap,
        "--db",
        str(db),
        "--json",
        str(out),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "peak"
    peak, accuracy = result["peak_rate"], result["target_accuracy"]  # a, as the simulator's goal (1) reads it

    # A dense linear sweep of the same target across 0.6–1.4 λ*, one trial of the search's own
    # runlength per rate, each judged by the search's own criteria: R̄ above Rsat, or a
    # one-trial signal (the disk falling behind the offered load, Psat above Lsat).
    settings = SearchSettings(**searching.QUICK)

    def trial(rate, attempts=3):
        # A trial the engine says it could not drive (a machine busy with other work can starve
        # it) tells nothing about the disk: it is run again.
        report = tmp_path / f"sweep-{rate:.0f}.json"
        for _ in range(attempts):
            run = cli(
                "run",
                "sync-overwrite",
                "--target",
                str(throttled_sync_ext4),
                "--rate",
                f"{rate:.1f}",
                "--warmup",
                str(settings.warmup_s),
                "--runtime",
                str(settings.runlength_s),
                *cap,
                "--db",
                str(db),
                "--json",
                str(report),
            )
            assert run.returncode == 0, run.stderr
            result = json.loads(report.read_text())
            if not result["generator_saturated"]:
                return searching.observation_of(result, rate, settings.psat, cost_s=0)
        pytest.fail(
            f"the engine could not drive {rate:.1f} ops/s in {attempts} attempts: {result['saturation_reason']}"
        )

    sweep = [trial(peak * (0.6 + 0.08 * step)) for step in range(11)]
    shown = ", ".join(f"{o.requested_rate:.0f}{'*' if saturated(o, settings) else ''}" for o in sweep)
    # The sweep crosses from unsaturated to saturated once, and its knee (the midpoint of the
    # crossing) is where the search said the peak is, within the stated accuracy: |knee − λ*| ≤ (1 − a)·λ*.
    knee = sweep_knee(sweep, settings)
    assert knee is not None, f"the sweep (* saturated) does not cross once: {shown}"
    assert abs(knee - peak) <= (1 - accuracy) * peak, f"λ* {peak:.1f}, knee {knee:.1f}; sweep: {shown}"


def test_a_poisson_schedule_that_happened_to_offer_less_is_not_a_shortfall(engine_path):
    # A server that completes every arrival it was offered kept up, however far the Poisson
    # count fell below the nominal rate (at 100 arrivals a trial, one standard deviation is 10%).
    settings = SearchSettings(**searching.QUICK)
    short = 0.05
    for seed in range(1, 100):
        spec = trial_spec(
            find_workload("specsfs97"),
            {"kind": "null"},
            rate=50,
            warmup_s=0.2,
            runtime_s=2,
            seed=seed,
            arrivals="poisson",
        )
        result = Engine(engine_path).run(spec)
        if result["sent"] < (1 - short) * 50 * 2:
            break
    else:
        pytest.fail("no seed gave a Poisson count more than 5% under the nominal rate")
    assert result["achieved_rate"] < (1 - short) * 50  # nominally "short" ...
    observation = searching.observation_of(result, 50, settings.psat, cost_s=2.2)
    assert saturation_signal(observation, settings) is None  # ... yet every arrival was served


def _near_capacity(**outcome) -> Observation:
    # Issue 20's case: 189.6 req/s offered to an M/D/1 server with λ* 189.5; the Poisson window
    # drew 201/s, and 180/s completed inside it (the rest just after it). Nothing failed.
    return Observation(
        requested_rate=189.6,
        achieved_rate=180.1,
        mean_ms=46.8,
        percentile_ms=130.0,
        generator_saturated=False,
        cost_s=5.0,
        offered_rate=201.0,
        **outcome,
    )


def test_a_noisy_window_near_capacity_with_no_failures_is_not_saturated():
    settings = SearchSettings(**searching.QUICK)
    assert saturation_signal(_near_capacity(), settings) is None
    # Nor when the window drew fewer arrivals than nominal and the goodput is far below the nominal rate.
    thin = dataclasses.replace(_near_capacity(), offered_rate=170.0, achieved_rate=165.0)
    assert saturation_signal(thin, settings) is None


def test_a_trial_whose_requests_fail_beyond_the_share_allowed_is_saturated_and_the_message_counts_them():
    settings = SearchSettings()
    assert settings.max_failed_share == 0.01
    seen = Outcomes(succeeded=700, errors=0, shed=96, timeouts=4, cancelled=0)
    shedding = _near_capacity(failed_share=0.125, shed_share=0.12, outcomes=seen, shed_label="HTTP 503")
    assert saturation_signal(shedding, settings) == (
        "12% of the window's 800 requests failed: 96 shed (HTTP 503), 0 errors, 4 timeouts, 0 cancelled"
        " (more than the 1.0% allowed)"
    )
    # Shares alone (no counts, as a simulator gives them) still name what failed.
    assert "5.0% shed: the server said it was overloaded" in saturation_signal(
        _near_capacity(failed_share=0.05, shed_share=0.05), settings
    )
    # At or under the share allowed: not saturated; with no failures allowed, one is enough.
    assert saturation_signal(_near_capacity(failed_share=0.01), settings) is None
    assert saturation_signal(_near_capacity(failed_share=0.001), SearchSettings(max_failed_share=0)) is not None


def test_the_failed_share_is_a_search_option_in_percent_or_as_a_fraction(cli, tmp_path):
    helped = cli("search", "--help")
    assert "--max-failed-share" in helped.stdout and "(default 1%)" in " ".join(helped.stdout.split())
    for given in ("2%", "0.02"):
        out = tmp_path / f"s{given}.json"
        done = cli("search", "mail", "--target", "sim://?capacity=800", "--max-failed-share", given, "--json", str(out))
        assert done.returncode == 0, done.stderr
    bad = cli("search", "mail", "--target", "sim://?capacity=800", "--max-failed-share", "150%")
    assert bad.returncode == 2 and "max_failed_share" in bad.stderr and "--max-failed-share" in bad.stderr


def test_an_observation_of_a_result_stored_before_outcomes_derives_them_from_the_per_op_counts():
    # An older engine counted a 503 among the errors and had no outcomes or latency quarters; every
    # other field its results had (from the first engine on) is there.
    older = {
        "schema": RESULT_SCHEMA,
        "engine_version": "0.1.0",
        "requested_rate": 100.0,
        "completed": 300,
        "warmup_s": 1.0,
        "schedule_lag": {"mean_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "hist": ""},
        "saturation_reason": None,
        "outstanding": {"cap": None, "max": 3, "threads": 4},
        "mix_actual": {"read": 0.67, "getattr": 0.33},
        "engine_cpu_s": 0.1,
        "peak_rss_kib": 9000,
        "achieved_rate": 100.0,
        "generator_saturated": False,
        "sent": 300,
        "unsent": 0,
        "runtime_s": 3.0,
        "latency": {"mean_ms": 2.0, "count": 300},
        "ops": {
            "read": {
                "count": 200,
                "successes": 150,
                "errors": {"http_503": 45, "http_404": 5},
                "timeouts": 0,
                "cancellations": 0,
            },
            "getattr": {"count": 100, "successes": 96, "errors": {}, "timeouts": 4, "cancellations": 0},
        },
    }
    observation = searching.observation_of(older, 100.0, 95.0, cost_s=4.0)
    assert observation.outcomes == Outcomes(succeeded=246, errors=5, shed=45, timeouts=4, cancelled=0)
    assert observation.failed_share == pytest.approx(54 / 300) and observation.shed_share == pytest.approx(45 / 300)
    assert observation.quarter_means_ms is None
    assert "45 shed" in saturation_signal(observation, SearchSettings())


def test_a_window_whose_requests_all_waited_behind_the_cap_is_saturated_not_far_below():
    # A scout far past the peak with 128 requests in flight allowed: the cap filled in the warm-up,
    # so none of the window's requests was sent, none completed, and the latency mean is 0 ms.
    held = {
        "schema": RESULT_SCHEMA,
        "engine_version": "0.1.0",
        "requested_rate": 102400.0,
        "completed": 0,
        "warmup_s": 0.25,
        "schedule_lag": {"mean_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "hist": ""},
        "saturation_reason": None,
        "outstanding": {"cap": 128, "max": 128, "threads": 128},
        "mix_actual": {},
        "engine_cpu_s": 0.1,
        "peak_rss_kib": 9000,
        "achieved_rate": 0.0,
        "generator_saturated": False,
        "sent": 0,
        "unsent": 102400,
        "runtime_s": 1.0,
        "latency": {"mean_ms": 0.0, "count": 0},
        "outcomes": {"succeeded": 0, "errors": 0, "shed": 0, "timeouts": 0, "cancelled": 0, "failed_share": 0.0},
        "ops": {},
    }
    observation = searching.observation_of(held, 102400.0, 95.0, cost_s=1.5)
    assert observation.failed_share == 1.0
    signal = saturation_signal(observation, SearchSettings(**searching.QUICK))
    assert signal is not None and "102400 never sent (held behind the in-flight cap)" in signal
    # A generator that fell behind is its own verdict: its unsent requests are not the server's failures.
    behind = searching.observation_of({**held, "generator_saturated": True}, 102400.0, 95.0, cost_s=1.5)
    assert behind.failed_share == 0.0
