"""Merging the TrialResults of many load clients into one: pure logic over result dicts.

The merged result has the engine's own schema (engine/SPEC.md), so everything
that reads one engine's result (the trial table, the store, the search's
Observation) reads a merged one unchanged. What merges exactly:

- counts add: sent, unsent, completed, per-op count, successes, errors by kind, shed,
  timeouts, cancellations, retransmissions, bytes, and the outcomes (failed_share is
  recomputed from the summed counts);
- rates add: requested_rate, achieved_rate (goodput) and completed_rate are sums over the clients;
- latency.quarters_mean_ms: each quarter's mean weighted by the clients' quarters_count;
- latency figures are recomputed from the sum of the clients' HDR histograms
  (per op, overall and schedule lag): a merged p99 is the p99 of every request
  of every client, exactly as one engine that had sent them all would report it.

Figures that are not additive are said so where they are made: outstanding.max
and .threads are sums of the clients' (an upper bound of the aggregate's at any
one instant), peak_rss_kib is the largest client's, schedule_lag.quarters_mean_ms
weights each client's quarter means by its number of lag samples (exact when
every client's quarters hold equal shares of its requests, as a steady schedule does).

The per-client figures are kept in `clients` (one summary per client, in
client order), and `lagging` names every client that fell behind its schedule
(see lag_reasons).

An access-log replay's own figures merge too (_merge_replay): bytes, issued
requests and output bandwidth add, each request class's histograms add, and
the log's summary is the whole log's, with every client's share listed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

from ..engine import outcomes
from ..table import error_count

# The engine's histograms: nanoseconds, 1 ns to 1 hour, 3 significant digits (engine/src/record.rs).
LOWEST_NS, HIGHEST_NS, DIGITS = 1, 3_600_000_000_000, 3
MS = 1e6
PERCENTILES = (("p50_ms", 50.0), ("p90_ms", 90.0), ("p95_ms", 95.0), ("p99_ms", 99.0), ("p999_ms", 99.9))


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)


def add_histograms(encoded: Sequence[str | None]) -> HdrHistogram:
    """The sum of base64 V2 histograms (None or "" count as empty)."""
    total = new_histogram()
    for text in encoded:
        if text:
            total.add(HdrHistogram.decode(text))
    return total


def encode(histogram: HdrHistogram) -> str:
    data = histogram.encode()
    return data.decode("ascii") if isinstance(data, bytes) else data


def _recorded(histogram: HdrHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indexes, counts, median-equivalent values) of the non-empty buckets, in value order.

    HdrHistogram's index -> value mapping, vectorised: index i lies in bucket
    (i >> half_magnitude) - 1 (bucket 0 also holds the first half-bucket), at
    sub-bucket (i & (half - 1)) + half; its lowest value is sub_bucket << (bucket +
    unit_magnitude), its range 1 << (bucket + unit_magnitude) wide, its median
    the lowest value plus half that width (hdrh's _hdr_median_equiv_value).
    """
    counts = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len].astype(np.int64)
    indexes = np.flatnonzero(counts)
    half, half_magnitude = histogram.sub_bucket_half_count, histogram.sub_bucket_half_count_magnitude
    bucket = (indexes >> half_magnitude) - 1
    sub_bucket = (indexes & (half - 1)) + half
    first = bucket < 0
    sub_bucket[first] -= half
    bucket[first] = 0
    shift = bucket + histogram.unit_magnitude
    lowest = sub_bucket << shift
    medians = (lowest + ((np.int64(1) << shift) >> 1)).astype(np.float64)
    return indexes, counts[indexes], medians


def summarize(histogram: HdrHistogram) -> dict:
    """The engine's latency summary (record.rs `summarize`) computed from a histogram.

    The same definitions as HdrHistogram's (mean and deviation over bucket medians,
    percentiles as the highest value equivalent to the bucket that reaches the
    rank), vectorised: hdrh's own get_mean_value walks every bucket in Python.
    """
    count = histogram.get_total_count()
    summary = {"count": count}
    if count == 0:
        summary.update({key: 0.0 for key in ("mean_ms", "stddev_ms", "min_ms", "max_ms")})
        summary.update({key: 0.0 for key, _ in PERCENTILES})
        summary.update(total_ms=0.0, hist=encode(histogram))
        return summary
    indexes, counts, medians = _recorded(histogram)
    # Element-wise sums, not np.dot: BLAS threads cost milliseconds on a busy two-core machine.
    weights = counts.astype(np.float64)
    mean_ns = float((weights * medians).sum()) / count
    summary["mean_ms"] = mean_ns / MS
    summary["stddev_ms"] = math.sqrt(float((weights * (medians - mean_ns) ** 2).sum()) / count) / MS
    summary["min_ms"] = histogram.get_min_value() / MS
    summary["max_ms"] = histogram.get_max_value() / MS
    cumulative = np.cumsum(counts)
    for key, percentile in PERCENTILES:
        rank = histogram.get_target_count_at_percentile(percentile)
        index = int(indexes[min(int(np.searchsorted(cumulative, rank)), len(indexes) - 1)])
        summary[key] = histogram.get_highest_equivalent_value(histogram.get_value_from_index(index)) / MS
    summary["total_ms"] = mean_ns * count / MS
    summary["hist"] = encode(histogram)
    return summary


def _add_counts(dicts: Sequence[dict]) -> dict:
    total: dict = {}
    for d in dicts:
        for key, value in d.items():
            total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))


def merge_op(ops: Sequence[dict]) -> dict:
    """One op's record over clients: histogram sum, errors by kind, timeouts and bytes added."""
    merged = summarize(add_histograms([op.get("hist") for op in ops]))
    merged["errors"] = _add_counts([op.get("errors", {}) for op in ops])
    for key in ("successes", "shed", "timeouts", "cancellations", "retransmissions", "bytes"):
        merged[key] = sum(op.get(key, 0) for op in ops)
    return merged


def merge_outcomes(results: Sequence[dict]) -> dict:
    """The clients' outcomes added, failed_share recomputed from the sums."""
    counts = {
        key: sum(outcomes(r)[key] for r in results) for key in ("succeeded", "errors", "shed", "timeouts", "cancelled")
    }
    total = sum(counts.values())
    return {**counts, "failed_share": (total - counts["succeeded"]) / total if total else 0.0}


def _latency_quarters(results: Sequence[dict]) -> dict:
    """Each quarter's mean latency over every client's requests due in it (count-weighted), and
    the counts; nothing when a client's result has no quarters (an engine from before them)."""
    latencies = [r.get("latency", {}) for r in results]
    if not all("quarters_count" in lat and "quarters_mean_ms" in lat for lat in latencies):
        return {}
    counts = [sum(lat["quarters_count"][i] for lat in latencies) for i in range(4)]
    means = [
        sum(lat["quarters_mean_ms"][i] * lat["quarters_count"][i] for lat in latencies) / counts[i]
        if counts[i]
        else 0.0
        for i in range(4)
    ]
    return {"quarters_mean_ms": means, "quarters_count": counts}


def lag_reasons(result: dict, late_tolerance_ms: float) -> list[str]:
    """Why one client fell behind its schedule (empty when it kept up)."""
    reasons = []
    if result.get("generator_saturated"):
        reasons.append(result.get("saturation_reason") or "its generator saturated")
    if result.get("unsent", 0) > 0 and not result.get("generator_saturated"):
        reasons.append(f"{result['unsent']} of its window's requests were never sent")
    late = (result.get("start") or {}).get("late_ms") or 0.0
    if late > late_tolerance_ms:
        reasons.append(f"it started {late:.1f} ms after the agreed instant (tolerance {late_tolerance_ms:g} ms)")
    return reasons


def client_summary(name: str, result: dict, late_tolerance_ms: float) -> dict:
    """The per-client figures kept beside the merged ones."""
    latency = result.get("latency", {})
    lag = result.get("schedule_lag", {})
    return {
        "name": name,
        "requested_rate": result["requested_rate"],
        "achieved_rate": result["achieved_rate"],
        "sent": result.get("sent", 0),
        "unsent": result.get("unsent", 0),
        "completed": result.get("completed", 0),
        "errors": sum(error_count(op) for op in result.get("ops", {}).values()),
        "mean_ms": latency.get("mean_ms", 0.0),
        "p99_ms": latency.get("p99_ms", 0.0),
        "lag_p99_ms": lag.get("p99_ms", 0.0),
        "generator_saturated": bool(result.get("generator_saturated")),
        "start_late_ms": (result.get("start") or {}).get("late_ms", 0.0),
        "engine_cpu_s": result.get("engine_cpu_s", 0.0),
        "lagged": lag_reasons(result, late_tolerance_ms),
    }


def _weighted_quarters(results: Sequence[dict]) -> list[float]:
    weights = [add_histograms([r.get("schedule_lag", {}).get("hist")]).get_total_count() for r in results]
    total = sum(weights)
    quarters = [r.get("schedule_lag", {}).get("quarters_mean_ms", [0.0] * 4) for r in results]
    if total == 0:
        return [0.0] * 4
    return [sum(w * q[i] for w, q in zip(weights, quarters)) / total for i in range(4)]


def merge_results(
    results: Sequence[dict], names: Sequence[str], *, shared_fileset: bool = False, late_tolerance_ms: float = 10.0
) -> dict:
    """One TrialResult over the clients' results (in the same order as `names`)."""
    if not results:
        raise ValueError("nothing to merge: no client returned a result")
    if len(results) != len(names):
        raise ValueError("one name per result")
    first = results[0]
    for name, result in zip(names, results):
        for key in ("schema", "engine_version", "warmup_s", "runtime_s"):
            if result.get(key) != first.get(key):
                raise ValueError(f"{name}: {key} {result.get(key)!r} differs from {names[0]}'s {first.get(key)!r}")

    op_names = sorted({op for r in results for op in r.get("ops", {})})
    ops = {op: merge_op([r["ops"][op] for r in results if op in r.get("ops", {})]) for op in op_names}
    latency = summarize(add_histograms([op["hist"] for op in ops.values()])) | _latency_quarters(results)
    lag_hist = add_histograms([r.get("schedule_lag", {}).get("hist") for r in results])
    lag = summarize(lag_hist)
    sent = sum(r.get("sent", 0) for r in results)

    mix_counts: dict = {}
    for r in results:
        for op, share in r.get("mix_actual", {}).items():
            mix_counts[op] = mix_counts.get(op, 0.0) + share * r.get("sent", 0)
    mix_actual = {op: count / sent for op, count in sorted(mix_counts.items())} if sent else {}

    summaries = [client_summary(name, r, late_tolerance_ms) for name, r in zip(names, results)]
    saturated = [s["name"] for s in summaries if s["generator_saturated"]]
    outstanding = [r.get("outstanding", {}) for r in results]
    caps = [o.get("cap") for o in outstanding]
    filesets = [r.get("fileset", {}) for r in results]
    restores = [r.get("restore") for r in results if r.get("restore") is not None]

    merged = {
        "schema": first["schema"],
        "engine_version": first.get("engine_version"),
        # A closed loop or a replay at the log's times requests no rate.
        "requested_rate": (
            None if any(r["requested_rate"] is None for r in results) else sum(r["requested_rate"] for r in results)
        ),
        "achieved_rate": sum(r["achieved_rate"] for r in results),
        "outcomes": merge_outcomes(results),
        "sent": sent,
        "unsent": sum(r.get("unsent", 0) for r in results),
        "completed": sum(r.get("completed", 0) for r in results),
        "warmup_s": first.get("warmup_s"),
        "runtime_s": first.get("runtime_s"),
        "ops": ops,
        "latency": latency,
        "schedule_lag": {
            "mean_ms": lag["mean_ms"],
            "p99_ms": lag["p99_ms"],
            "max_ms": lag["max_ms"],
            "hist": lag["hist"],
            "quarters_mean_ms": _weighted_quarters(results),
        },
        "generator_saturated": bool(saturated),
        "saturation_reason": (
            "; ".join(f"{s['name']}: {s['lagged'][0]}" for s in summaries if s["generator_saturated"])
            if saturated
            else None
        ),
        "outstanding": {
            "cap": None if all(c is None for c in caps) else sum(c or 0 for c in caps),
            "cap_bound": sum(o.get("cap_bound", 0) for o in outstanding),
            "max": sum(o.get("max", 0) for o in outstanding),
            "threads": sum(o.get("threads", 0) for o in outstanding),
            "thread_limit_bound": sum(o.get("thread_limit_bound", 0) for o in outstanding),
        },
        "mix_actual": mix_actual,
        "engine_cpu_s": sum(r.get("engine_cpu_s", 0.0) for r in results),
        "peak_rss_kib": max(r.get("peak_rss_kib", 0) for r in results),
        "fileset": None if "replay" in first else _merge_filesets(filesets, shared_fileset),
        "clients": summaries,
        "lagging": [s["name"] for s in summaries if s["lagged"]],
    }
    if "replay" in first:
        merged.update(_merge_replay(results))
    if all("completed_rate" in r for r in results):
        merged["completed_rate"] = sum(r["completed_rate"] for r in results)
    moderations = [r["receive_moderation"] for r in results if "receive_moderation" in r]
    if moderations:
        merged["receive_moderation"] = _merge_moderation(moderations)
    if restores:
        merged["restore"] = {
            "done": all(r.get("done", False) for r in restores),
            "errors": sum(r.get("errors", 0) for r in restores),
            "first_errors": [e for r in restores for e in r.get("first_errors", [])][:5],
        }
        reasons = [r["reason"] for r in restores if r.get("reason")]
        if reasons:
            merged["restore"]["reason"] = reasons[0]
    return merged


def _merge_replay(results: Sequence[dict]) -> dict:
    """The replay figures of load clients that each replayed a share of one log (replay.share)."""
    first = results[0]
    classes = {}
    for label in sorted({label for r in results for label in r.get("classes", {})}):
        parts = [r["classes"][label] for r in results if label in r.get("classes", {})]
        summary = summarize(add_histograms([part.get("hist") for part in parts]))
        classes[label] = {
            "count": sum(part["count"] for part in parts),
            "bytes": sum(part["bytes"] for part in parts),
            **{key: summary[key] for key in ("mean_ms", "p50_ms", "p99_ms", "max_ms", "hist")},
        }
    replays = [r["replay"] for r in results]
    issued = sum(replay.get("issued", 0) for replay in replays)
    exhausted = [replay["exhausted_at_s"] for replay in replays if replay.get("exhausted_at_s") is not None]
    replay = {key: value for key, value in first["replay"].items() if key != "share"}
    replay.update(
        issued=issued,
        loops=issued / replay["requests"] if replay.get("requests") else 0.0,
        exhausted_at_s=max(exhausted) if exhausted else None,
        shares=[{**replay_part.get("share", {}), "issued": replay_part.get("issued", 0)} for replay_part in replays],
    )
    return {
        "mode": first.get("mode"),
        "issued": sum(r.get("issued", 0) for r in results),
        "bytes": sum(r.get("bytes", 0) for r in results),
        "output_mbit_s": sum(r.get("output_mbit_s", 0.0) for r in results),
        "classes": classes,
        "replay": replay,
    }


def _merge_moderation(reports: Sequence[dict]) -> dict:
    """The clients' NFS receive-moderation reports as one: reads and holds added, the mean hold
    weighted by holds, the longest hold of any; the policy (one spec for all) from the first."""
    holds = sum(m.get("holds", 0) for m in reports)
    return {
        **reports[0],
        "reads": sum(m.get("reads", 0) for m in reports),
        "holds": holds,
        "mean_hold_us": sum(m.get("mean_hold_us", 0.0) * m.get("holds", 0) for m in reports) / holds if holds else 0.0,
        "max_hold_us": max(m.get("max_hold_us", 0.0) for m in reports),
    }


def _merge_filesets(filesets: Sequence[dict], shared: bool) -> dict:
    if shared or not filesets:
        return dict(filesets[0]) if filesets else {}
    ids = sorted({f.get("id") for f in filesets if f.get("id")})
    merged = {"id": ids[0] if len(ids) == 1 else ",".join(ids)}
    for key in ("files", "dirs", "symlinks", "bytes"):
        merged[key] = sum(f.get(key, 0) for f in filesets)
    return merged
