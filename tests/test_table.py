from peakbench.cli import json_report
from peakbench.contract import RESULT_SCHEMA
from peakbench.table import print_trial
from rich.console import Console

SPEC = {"load": {"arrivals": "uniform"}, "mix": {"getattr": 0.6, "read": 0.4}}


def op(count, mean, total, errors=None, timeouts=0, shed=0):
    errors = errors or {}
    return {
        "count": count,
        "mean_ms": mean,
        "stddev_ms": 0.1,
        "p50_ms": mean,
        "p99_ms": mean * 3,
        "total_ms": total,
        "errors": errors,
        "shed": shed,
        "timeouts": timeouts,
        "successes": count - sum(errors.values()) - shed - timeouts,
    }


def result(**overrides):
    base = {  # a TrialResult as the contract has it (contract.py), with figures chosen for each test
        "schema": RESULT_SCHEMA,
        "engine_version": "test",
        "mix_actual": {"getattr": 0.6, "read": 0.4},
        "engine_cpu_s": 0.5,
        "peak_rss_kib": 10_000,
        "requested_rate": 100.0,
        "achieved_rate": 99.5,
        "sent": 1000,
        "unsent": 0,
        "completed": 995,
        "warmup_s": 1,
        "runtime_s": 10,
        "ops": {"getattr": op(600, 0.1, 60.0), "read": op(395, 0.5, 197.5, {"EIO": 2}, timeouts=1)},
        "latency": {"count": 995, "mean_ms": 0.26, "stddev_ms": 0.2, "p50_ms": 0.1, "p99_ms": 1.5},
        "schedule_lag": {"mean_ms": 0.01, "p99_ms": 0.05, "max_ms": 0.3, "hist": ""},
        "generator_saturated": False,
        "saturation_reason": None,
        "outstanding": {"cap": None, "cap_bound": 0, "max": 4, "threads": 4},
    }
    return {**base, **overrides}


def render(res) -> str:
    console = Console(width=120, record=True)
    print_trial(SPEC, res, console)
    return console.export_text()


def test_the_table_has_fstress_columns_and_the_overall_figures():
    text = render(result())
    for heading in ("op", "mix %", "count", "mean", "stddev", "p50", "p99", "% time", "errors"):
        assert heading in text
    read_row = next(line for line in text.splitlines() if "│ read" in line)
    assert "40.0" in read_row and "395" in read_row and "76.7" in read_row  # 197.5 of 257.5 ms
    assert "offered 100.0 ops/s, achieved (successful) 99.5 ops/s (99.5%)" in text
    assert ("window's 995 requests: 992 succeeded, errors 2 (0.2%), shed 0, timeouts 1 (0.1%), cancelled 0") in text
    assert "latency mean 0.260 ± 0.200 ms (n=995)" in text
    assert "errors: read EIO×2, read timeout×1" in text
    assert "SATURATED" not in text


def test_shed_replies_are_shown_apart_from_errors_with_their_share_and_the_target_called_saturated():
    shedding = result(
        achieved_rate=75.0,
        completed_rate=99.5,
        ops={"getattr": op(600, 0.1, 60.0, shed=150), "read": op(395, 0.5, 197.5, shed=99)},
    )
    text = render(shedding)
    getattr_row = next(line for line in text.splitlines() if "│ getattr" in line)
    # errors, shed, timeouts, cancelled, failed %
    assert getattr_row.split("│")[9:14] == ["      0 ", "  150 ", "        0 ", "         0 ", "     25.0 "]
    assert "achieved (successful) 75.0 ops/s (75.0%)" in text
    assert "window's 995 requests (99.5 ops/s completed): 746 succeeded, errors 0, shed 249 (25.0%)" in text
    assert "the target shed 249 requests" in text and "probably saturated" in text
    assert "getattr shed×150" in text


def test_shed_replies_stored_by_an_older_engine_among_the_errors_count_as_shed():
    older = result(ops={"getattr": op(600, 0.1, 60.0, errors={"http_503": 30}), "read": op(395, 0.5, 197.5)})
    for o in older["ops"].values():
        del o["shed"]
    text = render(older)
    assert "shed 30 (3.0%)" in text and "errors 0," in text


def test_a_saturated_generator_is_shouted_about():
    text = render(result(generator_saturated=True, saturation_reason="schedule lag grew to 40 ms"))
    assert "WARNING: THE LOAD GENERATOR SATURATED (schedule lag grew to 40 ms)" in text


def test_a_saturated_target_is_hinted_at():
    assert "probably saturated" in render(result(achieved_rate=60.0))


def test_json_report_keeps_error_kinds_and_adds_a_count():
    report = json_report(3, "w", result())
    assert report["ops"]["read"]["errors"] == {"EIO": 2}
    assert report["ops"]["read"]["error_count"] == 3
    assert report["trial_id"] == 3 and report["requested_rate"] == 100.0


def test_receive_holds_are_stated_beside_the_latencies_they_inflate():
    adaptive = {
        "mode": "adaptive",
        "reads": 5000,
        "holds": 0,
        "mean_hold_us": 0.0,
        "max_hold_us": 0.0,
        "hold_fraction_of_latency": 0.1,
        "hold_cap_us": 200.0,
    }
    assert "receive moderation" not in render(result(receive_moderation=adaptive))
    held = {**adaptive, "holds": 1234, "mean_hold_us": 151.2, "max_hold_us": 262.0}
    text = " ".join(render(result(receive_moderation=held)).split())  # as one line, however it wraps
    assert (
        "receive moderation (adaptive, 10% of the observed latency, at most 200 µs, while 8+ calls were in"
        " flight): 1,234 of 5,000 reads held replies back, mean 151 µs, max 262 µs"
    ) in text
    fixed = {"mode": "fixed", "reads": 10, "holds": 3, "mean_hold_us": 100.0, "max_hold_us": 120.0, "hold_us": 100.0}
    assert "receive moderation (fixed, 100 µs, while" in render(result(receive_moderation=fixed))


def test_output_bandwidth_is_stated_in_megabytes_and_megabits():
    text = render(result(bytes=25_000_000, output_mbit_s=20.0))  # 2.5 MB/s over a 10 s window
    assert "output 2.50 MB/s = 20.00 Mb/s (25,000,000 bytes in the window)" in text
