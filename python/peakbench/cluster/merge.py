"""Merging the TrialResults of many load clients into one: pure logic over typed results (contract.py).

The merged result has the engine's own schema (engine/SPEC.md), so everything
that reads one engine's result (the trial table, the store, the search's
Observation) reads a merged one unchanged. What merges exactly:

- counts add: sent, unsent, completed, per-op count, successes, errors by kind, shed,
  timeouts, cancellations, retransmissions, bytes, and the outcomes (failed_share is
  recomputed from the summed counts);
- rates add: requested_rate, achieved_rate (goodput), completed_rate and output_mbit_s are sums over the
  clients, as are issued and bytes; the trial is interrupted if any client's was;
- an interrupted trial's clients were cut a few milliseconds apart: its runtime_s is the shortest
  client's (the part every client measured) and `window` says where that lies and how long each
  client measured; each client's counts and rates are over its own window, so the sums slightly
  exceed what the common window alone held (histograms cannot be cut to it);
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

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

from ..contract import (
    ClassStats,
    ClientSummary,
    ContractError,
    FilesetInfo,
    OpStats,
    Outcomes,
    Outstanding,
    ReceiveModeration,
    Restore,
    ScheduleLag,
    TrialResult,
)
from ..engine import outcomes

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


def _sum(values) -> int | float:
    return sum(value or 0 for value in values)


def merge_op(ops: Sequence[OpStats]) -> OpStats:
    """One op's record over clients: histogram sum, errors by kind, timeouts and bytes added."""
    merged = OpStats.load(summarize(add_histograms([op.hist for op in ops])))
    merged.errors = _add_counts([op.errors or {} for op in ops])
    for key in ("successes", "shed", "timeouts", "cancellations", "retransmissions", "bytes"):
        setattr(merged, key, _sum(getattr(op, key) for op in ops))
    return merged


def merge_outcomes(results: Sequence[TrialResult]) -> Outcomes:
    """The clients' outcomes added, failed_share recomputed from the sums."""
    each = [outcomes(r) for r in results]  # derived from the ops for a result from before outcomes
    return Outcomes.of(
        *(sum(getattr(o, key) for o in each) for key in ("succeeded", "errors", "shed", "timeouts", "cancelled"))
    )


def _latency_quarters(results: Sequence[TrialResult]) -> tuple[list[float] | None, list[int] | None]:
    """Each quarter's mean latency over every client's requests due in it (count-weighted), and
    the counts; (None, None) when a client's result has no quarters (an engine from before them)."""
    latencies = [r.latency for r in results]
    if any(lat.quarters_count is None or lat.quarters_mean_ms is None for lat in latencies):
        return None, None
    counts = [sum(lat.quarters_count[i] for lat in latencies) for i in range(4)]
    means = [
        sum(lat.quarters_mean_ms[i] * lat.quarters_count[i] for lat in latencies) / counts[i] if counts[i] else 0.0
        for i in range(4)
    ]
    return means, counts


def lag_reasons(result: TrialResult, late_tolerance_ms: float) -> list[str]:
    """Why one client fell behind its schedule (empty when it kept up). Requests a client never sent are its
    engine's to judge, as one engine's are (engine/SPEC.md, generator_saturated); they add to the merged unsent."""
    reasons = []
    if result.generator_saturated:
        reasons.append(result.saturation_reason or "its generator saturated")
    late = result.start.late_ms if result.start else 0.0
    if late > late_tolerance_ms:
        reasons.append(f"it started {late:.1f} ms after the agreed instant (tolerance {late_tolerance_ms:g} ms)")
    return reasons


def client_summary(name: str, result: TrialResult, late_tolerance_ms: float) -> ClientSummary:
    """The per-client figures kept beside the merged ones."""
    return ClientSummary(
        name=name,
        requested_rate=result.requested_rate,
        achieved_rate=result.achieved_rate,
        sent=result.sent,
        unsent=result.unsent,
        completed=result.completed,
        errors=sum(op.failed_count() for op in result.ops.values()),
        mean_ms=result.latency.mean_ms,
        p99_ms=result.latency.p99_ms,
        lag_p99_ms=result.schedule_lag.p99_ms,
        generator_saturated=result.generator_saturated,
        start_late_ms=result.start.late_ms if result.start else 0.0,
        engine_cpu_s=result.engine_cpu_s,
        lagged=lag_reasons(result, late_tolerance_ms),
    )


def _weighted_quarters(results: Sequence[TrialResult]) -> list[float]:
    weights = [add_histograms([r.schedule_lag.hist]).get_total_count() for r in results]
    total = sum(weights)
    if total == 0:
        return [0.0] * 4
    quarters = [r.schedule_lag.quarters_mean_ms or [0.0] * 4 for r in results]
    return [sum(w * q[i] for w, q in zip(weights, quarters)) / total for i in range(4)]


def _same(values: list):
    """The value every client reported, or None when they differ."""
    return values[0] if all(value == values[0] for value in values) else None


def merge_results(
    results: Sequence[dict], names: Sequence[str], *, shared_fileset: bool = False, late_tolerance_ms: float = 10.0
) -> dict:
    """One TrialResult over the clients' results (in the same order as `names`), as the engine's JSON."""
    typed = []
    for name, result in zip(names, results):
        try:
            typed.append(TrialResult.load(result))
        except ContractError as error:
            raise ContractError(f"{name}: {error}") from None
    return merge(typed, names, shared_fileset=shared_fileset, late_tolerance_ms=late_tolerance_ms).dump()


def merge(
    results: Sequence[TrialResult],
    names: Sequence[str],
    *,
    shared_fileset: bool = False,
    late_tolerance_ms: float = 10.0,
) -> TrialResult:
    """One TrialResult over the clients' results (in the same order as `names`)."""
    if not results:
        raise ValueError("nothing to merge: no client returned a result")
    if len(results) != len(names):
        raise ValueError("one name per result")
    first = results[0]
    # Ctrl-C reaches the clients' engines a few milliseconds apart, so an interrupted trial's windows differ.
    cut = any(r.interrupted for r in results)
    for name, result in zip(names, results):
        for key in ("schema", "engine_version", "warmup_s") + (() if cut else ("runtime_s",)):
            if getattr(result, key) != getattr(first, key):
                raise ValueError(
                    f"{name}: {key} {getattr(result, key)!r} differs from {names[0]}'s {getattr(first, key)!r}"
                )

    op_names = sorted({op for r in results for op in r.ops})
    ops = {op: merge_op([r.ops[op] for r in results if op in r.ops]) for op in op_names}
    latency = OpStats.load(summarize(add_histograms([op.hist for op in ops.values()])))
    latency.quarters_mean_ms, latency.quarters_count = _latency_quarters(results)
    lag = OpStats.load(summarize(add_histograms([r.schedule_lag.hist for r in results])))
    sent = sum(r.sent for r in results)

    mix_counts: dict = {}
    for r in results:
        for op, share in r.mix_actual.items():
            mix_counts[op] = mix_counts.get(op, 0.0) + share * r.sent
    mix_actual = {op: count / sent for op, count in sorted(mix_counts.items())} if sent else {}

    summaries = [client_summary(name, r, late_tolerance_ms) for name, r in zip(names, results)]
    saturated = [s for s in summaries if s.generator_saturated]
    caps = [r.outstanding.cap for r in results]
    restores = [r.restore for r in results if r.restore is not None]
    moderations = [r.receive_moderation for r in results if r.receive_moderation is not None]
    requested = [r.requested_rate for r in results]

    return TrialResult(
        schema=first.schema,
        engine_version=first.engine_version,
        requested_rate=None if None in requested else sum(requested),
        achieved_rate=sum(r.achieved_rate for r in results),
        completed_rate=None
        if any(r.completed_rate is None for r in results)
        else sum(r.completed_rate for r in results),
        outcomes=merge_outcomes(results),
        sent=sent,
        unsent=sum(r.unsent for r in results),
        completed=sum(r.completed for r in results),
        issued=None if any(r.issued is None for r in results) else sum(r.issued for r in results),
        bytes=None if any(r.bytes is None for r in results) else sum(r.bytes for r in results),
        output_mbit_s=None if any(r.output_mbit_s is None for r in results) else sum(r.output_mbit_s for r in results),
        interrupted=None if all(r.interrupted is None for r in results) else any(r.interrupted for r in results),
        mode=_same([r.mode for r in results]),
        engine_clock=_same([r.engine_clock for r in results]),
        warmup_s=first.warmup_s,
        runtime_s=min(r.runtime_s for r in results),
        window=_common_window(results) if cut else None,
        ops=ops,
        latency=latency,
        schedule_lag=ScheduleLag(
            mean_ms=lag.mean_ms,
            p99_ms=lag.p99_ms,
            max_ms=lag.max_ms,
            hist=lag.hist,
            quarters_mean_ms=_weighted_quarters(results),
        ),
        generator_saturated=bool(saturated),
        saturation_reason="; ".join(f"{s.name}: {s.lagged[0]}" for s in saturated) if saturated else None,
        outstanding=Outstanding(
            cap=None if all(c is None for c in caps) else sum(c or 0 for c in caps),
            cap_bound=sum(r.outstanding.cap_bound for r in results),
            max=sum(r.outstanding.max for r in results),
            threads=sum(r.outstanding.threads for r in results),
            thread_limit_bound=sum(r.outstanding.thread_limit_bound for r in results),
        ),
        mix_actual=mix_actual,
        engine_cpu_s=sum(r.engine_cpu_s for r in results),
        window_cpu_s=None if any(r.window_cpu_s is None for r in results) else sum(r.window_cpu_s for r in results),
        peak_rss_kib=max(r.peak_rss_kib for r in results),
        fileset=None if first.replay else _merge_filesets([r.fileset for r in results if r.fileset], shared_fileset),
        clients=[s.dump() for s in summaries],
        lagging=[s.name for s in summaries if s.lagged],
        receive_moderation=_merge_moderation(moderations) if moderations else None,
        restore=_merge_restores(restores) if restores else None,
        **(_merge_replay(results) if first.replay else {}),
    )


def _common_window(results: Sequence[TrialResult]) -> dict:
    """The window every client of an interrupted trial measured: from the latest client's start of
    measurement to the earliest cut (None when a client's result has no start), and each client's own
    measured seconds, over which its counts and rates run."""
    starts = [r.start.at_unix_s + r.warmup_s if r.start else None for r in results]
    known = None not in starts
    return {
        "from_unix_s": max(starts) if known else None,
        "to_unix_s": min(s + r.runtime_s for s, r in zip(starts, results)) if known else None,
        "clients_runtime_s": [r.runtime_s for r in results],
    }


def _merge_restores(restores: Sequence[Restore]) -> Restore:
    reasons = [r.reason for r in restores if r.reason]
    return Restore(
        done=all(r.done for r in restores),
        errors=sum(r.errors for r in restores),
        first_errors=[e for r in restores for e in r.first_errors][:5],
        reason=reasons[0] if reasons else None,
    )


def _merge_replay(results: Sequence[TrialResult]) -> dict:
    """The replay figures of load clients that each replayed a share of one log (replay.share)."""
    classes = {}
    for label in sorted({label for r in results for label in r.classes or {}}):
        parts = [r.classes[label] for r in results if label in (r.classes or {})]
        summary = OpStats.load(summarize(add_histograms([part.hist for part in parts])))
        classes[label] = ClassStats(
            count=sum(part.count for part in parts),
            bytes=sum(part.bytes for part in parts),
            mean_ms=summary.mean_ms,
            p50_ms=summary.p50_ms,
            p99_ms=summary.p99_ms,
            max_ms=summary.max_ms,
            hist=summary.hist,
        )
    replays = [r.replay for r in results]
    issued = sum(replay.issued for replay in replays)
    exhausted = [replay.exhausted_at_s for replay in replays if replay.exhausted_at_s is not None]
    replay = dataclasses.replace(
        replays[0],
        share=None,
        issued=issued,
        loops=issued / replays[0].requests if replays[0].requests else 0.0,
        exhausted_at_s=max(exhausted) if exhausted else None,
        extra={**replays[0].extra, "shares": [{**(part.share or {}), "issued": part.issued} for part in replays]},
    )
    return {"classes": classes, "replay": replay}


def _merge_moderation(reports: Sequence[ReceiveModeration]) -> ReceiveModeration:
    """The clients' NFS receive-moderation reports as one: reads and holds added, the mean hold
    weighted by holds, the longest hold of any; the policy (one spec for all) from the first."""
    holds = sum(m.holds for m in reports)
    return dataclasses.replace(
        reports[0],
        reads=sum(m.reads for m in reports),
        holds=holds,
        mean_hold_us=sum(m.mean_hold_us * m.holds for m in reports) / holds if holds else 0.0,
        max_hold_us=max(m.max_hold_us for m in reports),
    )


def _merge_filesets(filesets: Sequence[FilesetInfo], shared: bool) -> FilesetInfo | None:
    if not filesets:
        return None
    if shared:
        return filesets[0]
    ids = sorted({f.id for f in filesets if f.id})
    return FilesetInfo(
        id=ids[0] if len(ids) == 1 else ",".join(ids),
        files=sum(f.files for f in filesets),
        dirs=sum(f.dirs for f in filesets),
        symlinks=sum(f.symlinks for f in filesets),
        bytes=sum(f.bytes for f in filesets),
    )
