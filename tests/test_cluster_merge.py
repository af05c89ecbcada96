"""Merging many clients' TrialResults: exact, over hand-made results whose every request is known."""

from __future__ import annotations

import random

import pytest
from hdrh.histogram import HdrHistogram
from peakbench.cluster.merge import add_histograms, encode, merge_results, new_histogram, summarize

OPS = ("getattr", "read", "write")


def histogram_of(values_ns) -> HdrHistogram:
    histogram = new_histogram()
    for value in values_ns:
        histogram.record_value(value)
    return histogram


def fake_result(
    rng: random.Random,
    rate: float,
    runtime_s: float = 10.0,
    *,
    saturated: bool = False,
    late_ms: float = 0.0,
    unsent: int = 0,
) -> tuple[dict, dict[str, list[int]], list[int]]:
    """An engine-shaped result over random latencies; returns it with the raw latencies per op and the lags."""
    values = {op: [rng.randint(1_000, 50_000_000) for _ in range(rng.randint(50, 400))] for op in OPS}
    lags = [rng.randint(1, 2_000_000) for _ in range(sum(map(len, values.values())))]
    ops = {}
    for op, latencies in values.items():
        ops[op] = {
            **summarize(histogram_of(latencies)),
            "errors": {"ENOENT": rng.randint(0, 3)},
            "shed": rng.randint(0, 5),
            "timeouts": rng.randint(0, 2),
            "cancellations": rng.randint(0, 2),
            "bytes": rng.randint(0, 10**6),
        }
    if rng.random() < 0.5:
        ops["read"]["errors"]["EIO"] = 1
    for op in ops.values():
        op["successes"] = op["count"] - sum(op["errors"].values()) - op["shed"] - op["timeouts"]
    # Each request falls in a quarter of the window by its due time.
    quarter_of = {(op, i): rng.randrange(4) for op, vs in values.items() for i in range(len(vs))}
    in_quarter = [[values[op][i] for (op, i), q in quarter_of.items() if q == quarter] for quarter in range(4)]
    sent = sum(map(len, values.values())) + unsent
    lag = summarize(histogram_of(lags))
    result = {
        "schema": "peakbench.trial-result/1",
        "engine_version": "0.1.0",
        "requested_rate": rate,
        "achieved_rate": rate * rng.uniform(0.9, 1.0),
        "sent": sent,
        "unsent": unsent,
        "completed": sent - unsent,
        "warmup_s": 1.0,
        "runtime_s": runtime_s,
        "ops": ops,
        "latency": {
            **summarize(histogram_of([v for vs in values.values() for v in vs])),
            "quarters_mean_ms": [sum(q) / len(q) / 1e6 if q else 0.0 for q in in_quarter],
            "quarters_count": [len(q) for q in in_quarter],
        },
        "outcomes": _outcomes(ops),
        "schedule_lag": {
            "mean_ms": lag["mean_ms"],
            "p99_ms": lag["p99_ms"],
            "max_ms": lag["max_ms"],
            "hist": lag["hist"],
            "quarters_mean_ms": [rng.uniform(0, 1) for _ in range(4)],
        },
        "generator_saturated": saturated,
        "saturation_reason": "the generator fell behind its own schedule" if saturated else None,
        "outstanding": {
            "cap": None,
            "cap_bound": 0,
            "max": rng.randint(1, 20),
            "threads": rng.randint(1, 20),
            "thread_limit_bound": rng.randint(0, 3),
        },
        "mix_actual": {op: len(vs) / (sent - unsent) for op, vs in values.items()},
        "engine_cpu_s": rng.uniform(0.1, 2),
        "peak_rss_kib": rng.randint(4000, 9000),
        "fileset": {"id": "ab12cd34", "files": rng.randint(10, 100), "dirs": 3, "symlinks": 0, "bytes": 4096},
        "restore": {"done": True, "errors": 0, "first_errors": []},
        "start": {"at_unix_s": 1.0, "requested_unix_s": 1.0, "late_ms": late_ms},
    }
    return result, values, lags


def _outcomes(ops: dict) -> dict:
    counts = {
        "succeeded": sum(op["successes"] for op in ops.values()),
        "errors": sum(sum(op["errors"].values()) for op in ops.values()),
        "shed": sum(op["shed"] for op in ops.values()),
        "timeouts": sum(op["timeouts"] for op in ops.values()),
        "cancelled": sum(op["cancellations"] for op in ops.values()),
    }
    return {**counts, "failed_share": (sum(counts.values()) - counts["succeeded"]) / sum(counts.values())}


@pytest.fixture
def three_clients():
    rng = random.Random(8)
    return [fake_result(rng, rate) for rate in (100.0, 100.0, 100.0)]


def test_histograms_add_exactly(three_clients):
    results = [r for r, _, _ in three_clients]
    merged = merge_results(results, ["client-0", "client-1", "client-2"])
    for op in OPS:
        every_value = [v for _, values, _ in three_clients for v in values[op]]
        expected = summarize(histogram_of(every_value))
        got = merged["ops"][op]
        assert got["count"] == len(every_value)
        for key in ("count", "min_ms", "max_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms"):
            assert got[key] == expected[key], (op, key)
        assert got["mean_ms"] == pytest.approx(expected["mean_ms"], rel=1e-12)
        assert got["stddev_ms"] == pytest.approx(expected["stddev_ms"], rel=1e-12)
        # Bucket for bucket the same histogram as one engine that saw every request.
        assert HdrHistogram.decode(got["hist"]).equals(histogram_of(every_value))
    all_values = [v for _, values, _ in three_clients for vs in values.values() for v in vs]
    assert merged["latency"]["count"] == len(all_values)
    assert HdrHistogram.decode(merged["latency"]["hist"]).equals(histogram_of(all_values))
    assert merged["latency"]["p99_ms"] == summarize(histogram_of(all_values))["p99_ms"]
    all_lags = [v for _, _, lags in three_clients for v in lags]
    assert HdrHistogram.decode(merged["schedule_lag"]["hist"]).equals(histogram_of(all_lags))
    assert merged["schedule_lag"]["p99_ms"] == summarize(histogram_of(all_lags))["p99_ms"]


def test_counts_and_rates_add(three_clients):
    results = [r for r, _, _ in three_clients]
    merged = merge_results(results, ["a", "b", "c"])
    for key in ("sent", "unsent", "completed"):
        assert merged[key] == sum(r[key] for r in results)
    assert merged["requested_rate"] == 300.0
    assert merged["achieved_rate"] == pytest.approx(sum(r["achieved_rate"] for r in results), rel=1e-15)
    for op in OPS:
        assert merged["ops"][op]["timeouts"] == sum(r["ops"][op]["timeouts"] for r in results)
        assert merged["ops"][op]["bytes"] == sum(r["ops"][op]["bytes"] for r in results)
        assert merged["ops"][op]["errors"]["ENOENT"] == sum(r["ops"][op]["errors"]["ENOENT"] for r in results)
    eio = sum(r["ops"]["read"]["errors"].get("EIO", 0) for r in results)
    assert merged["ops"]["read"]["errors"].get("EIO", 0) == eio
    assert merged["engine_cpu_s"] == pytest.approx(sum(r["engine_cpu_s"] for r in results))
    assert merged["peak_rss_kib"] == max(r["peak_rss_kib"] for r in results)
    assert merged["outstanding"]["threads"] == sum(r["outstanding"]["threads"] for r in results)
    assert merged["fileset"]["files"] == sum(r["fileset"]["files"] for r in results)
    assert sum(merged["mix_actual"].values()) == pytest.approx(1.0)
    for op in OPS:  # the merged mix is each op's share of everything sent
        assert merged["mix_actual"][op] == pytest.approx(merged["ops"][op]["count"] / merged["sent"])
    assert [c["name"] for c in merged["clients"]] == ["a", "b", "c"]
    assert [c["sent"] for c in merged["clients"]] == [r["sent"] for r in results]
    assert merged["lagging"] == [] and merged["generator_saturated"] is False
    assert merged["restore"] == {"done": True, "errors": 0, "first_errors": []}


def test_a_shared_file_set_is_counted_once(three_clients):
    results = [r for r, _, _ in three_clients]
    merged = merge_results(results, ["a", "b", "c"], shared_fileset=True)
    assert merged["fileset"] == results[0]["fileset"]


def test_a_lagging_client_is_named():
    rng = random.Random(3)
    ok, _, _ = fake_result(rng, 50.0)
    saturated, _, _ = fake_result(rng, 50.0, saturated=True)
    late, _, _ = fake_result(rng, 50.0, late_ms=25.0)
    unsent, _, _ = fake_result(rng, 50.0, unsent=7)
    merged = merge_results(
        [ok, saturated, late, unsent], ["client-0", "client-1", "client-2", "client-3"], late_tolerance_ms=10.0
    )
    # client-3's engine gave up 7 requests at the window's end but judged itself on schedule (its lag test):
    # it is not named, as one engine that did so is not generator-bound; the 7 count in the merged unsent.
    assert merged["lagging"] == ["client-1", "client-2"]
    assert merged["unsent"] == sum(r["unsent"] for r in (ok, saturated, late, unsent)) >= 7
    assert merged["generator_saturated"] is True
    assert merged["saturation_reason"].startswith("client-1: ")
    by_name = {c["name"]: c for c in merged["clients"]}
    assert "25.0 ms after the agreed instant" in by_name["client-2"]["lagged"][0]
    assert by_name["client-3"]["lagged"] == [] and by_name["client-3"]["unsent"] == 7
    assert by_name["client-0"]["lagged"] == []


def test_one_client_merges_to_itself():
    rng = random.Random(5)
    result, _, _ = fake_result(rng, 80.0)
    merged = merge_results([result], ["client-0"])
    for key in ("requested_rate", "achieved_rate", "sent", "unsent", "completed", "mix_actual"):
        assert merged[key] == pytest.approx(result[key])
    for op in OPS:
        for key, value in result["ops"][op].items():
            assert merged["ops"][op][key] == (pytest.approx(value) if isinstance(value, float) else value)


def test_an_empty_histogram_and_an_absent_op():
    rng = random.Random(9)
    first, _, _ = fake_result(rng, 10.0)
    second, _, _ = fake_result(rng, 10.0)
    del second["ops"]["write"]
    merged = merge_results([first, second], ["a", "b"])
    assert merged["ops"]["write"]["count"] == first["ops"]["write"]["count"]
    assert summarize(new_histogram())["count"] == 0
    assert add_histograms([None, "", encode(new_histogram())]).get_total_count() == 0


def test_results_that_do_not_belong_together_are_refused():
    rng = random.Random(1)
    first, _, _ = fake_result(rng, 10.0, runtime_s=10.0)
    second, _, _ = fake_result(rng, 10.0, runtime_s=5.0)
    with pytest.raises(ValueError, match="runtime_s"):
        merge_results([first, second], ["a", "b"])
    with pytest.raises(ValueError, match="nothing to merge"):
        merge_results([], [])


def test_receive_moderation_is_merged_so_the_table_still_says_what_was_held(three_clients):
    """NFS clients report the replies their readers held back; the merged trial reports them all."""
    results = [result for result, _, _ in three_clients]
    for result, (reads, holds, mean, longest) in zip(
        results, ((100, 10, 50.0, 90.0), (200, 30, 150.0, 400.0), (50, 0, 0.0, 0.0))
    ):
        result["receive_moderation"] = {
            "mode": "adaptive",
            "reads": reads,
            "holds": holds,
            "mean_hold_us": mean,
            "max_hold_us": longest,
            "hold_fraction_of_latency": 0.1,
            "hold_cap_us": 200.0,
        }
    merged = merge_results(results, ["a", "b", "c"])["receive_moderation"]
    assert merged == {
        "mode": "adaptive",
        "reads": 350,
        "holds": 40,
        "mean_hold_us": (10 * 50 + 30 * 150) / 40,
        "max_hold_us": 400.0,
        "hold_fraction_of_latency": 0.1,
        "hold_cap_us": 200.0,
    }
    # Other targets report none, and neither does their merge.
    others = [{k: v for k, v in result.items() if k != "receive_moderation"} for result in results]
    assert "receive_moderation" not in merge_results(others, ["a", "b", "c"])


def test_outcomes_and_latency_quarters_merge_exactly(three_clients):
    results = [r for r, _, _ in three_clients]
    merged = merge_results(results, ["a", "b", "c"])
    for key in ("succeeded", "errors", "shed", "timeouts", "cancelled"):
        assert merged["outcomes"][key] == sum(r["outcomes"][key] for r in results)
    assert merged["outcomes"] == _outcomes(merged["ops"])  # the per-op counts add up to the same
    for op in OPS:
        for key in ("successes", "shed", "cancellations"):
            assert merged["ops"][op][key] == sum(r["ops"][op][key] for r in results)
    # Each quarter's mean is the mean over every client's requests due in it.
    quarters = [[] for _ in range(4)]
    for result, values, _ in three_clients:
        for quarter, (mean, count) in enumerate(
            zip(result["latency"]["quarters_mean_ms"], result["latency"]["quarters_count"])
        ):
            quarters[quarter].append((mean, count))
    for quarter, parts in enumerate(quarters):
        count = sum(c for _, c in parts)
        assert merged["latency"]["quarters_count"][quarter] == count
        assert merged["latency"]["quarters_mean_ms"][quarter] == pytest.approx(sum(m * c for m, c in parts) / count)


def test_a_merged_trial_keeps_the_bytes_the_requests_and_the_interruption(three_clients):
    """What one engine reports about its window (bytes moved, requests issued, Mbit/s, an early end)
    is reported for the clients together too, not dropped."""
    results = [r for r, _, _ in three_clients]
    for index, result in enumerate(results):
        result.update(issued=1000 + index, bytes=10**6 * (index + 1), output_mbit_s=0.8 * (index + 1))
        result.update(interrupted=index == 2, mode="open", engine_clock="tsc")
    merged = merge_results(results, ["a", "b", "c"])
    assert merged["issued"] == 3003 and merged["bytes"] == 6 * 10**6
    assert merged["output_mbit_s"] == pytest.approx(4.8)
    assert merged["interrupted"] is True and merged["mode"] == "open" and merged["engine_clock"] == "tsc"


def test_a_result_missing_a_field_is_refused_naming_the_client_and_the_field(three_clients):
    results = [r for r, _, _ in three_clients]
    del results[1]["schedule_lag"]["p99_ms"]
    with pytest.raises(ValueError, match="b: field schedule_lag.p99_ms is missing"):
        merge_results(results, ["a", "b", "c"])


def test_window_cpu_adds_up_only_when_every_client_reports_it(three_clients):
    results = [dict(r, window_cpu_s=0.1 * (i + 1)) for i, (r, _, _) in enumerate(three_clients)]
    merged = merge_results(results, ["a", "b", "c"])
    assert merged["window_cpu_s"] == pytest.approx(0.6)
    del results[1]["window_cpu_s"]  # an engine from before window_cpu_s
    assert "window_cpu_s" not in merge_results(results, ["a", "b", "c"])
