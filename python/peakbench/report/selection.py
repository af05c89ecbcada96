"""Which stored results a report covers: `peakbench report [SELECTOR ...]`.

Selectors:
    search:ID        a peak-rate search and its trials
    sfs:ID           a `peakbench sfs` load-point curve and its trials
    trial:ID         one trial (also run:ID); trial:ID-ID for a range
    surface:ID       a `peakbench surface` response surface (its fitted model and samples)
    plan:ID          an experiment plan's results (getstats, outlier and drift warnings)
    (none)           the newest search or sfs run; with neither, every trial

Loose trials (trial:…) form one series per workload and target. A search or
sfs run that is still running, failed or was killed is reported with what it
has, and `missing` says what is not there.
"""

from __future__ import annotations

import re

from ..errors import InputError
from ..store import Store, point_key
from .model import ReportData, Series

FIELD = "SELECTOR"
SQLITE_MAX_ID = 2**63 - 1
_SELECTOR = re.compile(r"(search|sfs|trial|run|surface|plan):(\d+)(?:-(\d+))?")


def select(store: Store, selectors: list[str]) -> ReportData:
    if not selectors:
        return _default(store)
    series: list[Series] = []
    loose: list[dict] = []
    missing: list[str] = []
    extra: dict = {"surfaces": []}
    for text in selectors:
        match = _SELECTOR.fullmatch(text.strip().lower())
        if match is None:
            raise InputError(
                f"{text!r} is not a selector; write search:ID, sfs:ID, surface:ID, plan:ID, trial:ID"
                " or trial:FIRST-LAST",
                field=FIELD,
            )
        # SQLite's ids are signed 64-bit: a larger one names nothing, and must not overflow the query.
        kind, first, last = match.group(1), min(int(match.group(2)), SQLITE_MAX_ID), match.group(3)
        if kind == "surface":
            extra["surfaces"] += _surface(store, first, missing)
        elif kind == "plan":
            extra["harness"] = _plan_results(store, first)
        elif kind == "search":
            series.append(_search_series(store, first, missing))
        elif kind == "sfs":
            series.append(_sfs_series(store, first, missing))
        else:
            last = min(int(last), SQLITE_MAX_ID) if last else first
            if last < first:
                raise InputError(f"{text!r}: the range ends before it starts", field=FIELD)
            found = store.trials_between(first, last)
            if not found:
                raise InputError(f"no trial {text.split(':', 1)[1]} in the store", file=store.path)
            loose.extend(found)
    series.extend(_loose_series(loose))
    unique = list({s.key: s for s in series}.values())  # a run named twice is reported once
    data = ReportData(str(store.path), unique, list(dict.fromkeys(missing)))
    data.extra.update(extra)
    return data


def _surface(store: Store, ident: int, missing: list[str]) -> list[dict]:
    """The stored SurfaceResult of surface `ident` (none, said in `missing`, if it did not finish)."""
    record = store.surface(ident)
    if record is None:
        raise InputError(f"no surface {ident} in the store", file=store.path)
    if record["result"] is None:
        missing.append(
            f"surface {ident} has no fitted result ({record['status']}"
            + (f": {record['error']}" if record["error"] else "")
            + ")"
        )
        return []
    return [record["result"]]


def _plan_results(store: Store, ident: int) -> dict:
    """A plan's analysis in the shape sections/harness.py reads."""
    from ..harness.report import plan_analysis  # the harness is only loaded when a plan is reported

    analysis = plan_analysis(store, ident)
    if not analysis:
        raise InputError(f"no plan {ident} in the store", file=store.path)
    keys = {
        "count": "COUNT",
        "mean": "MEAN",
        "median": "MEDIAN",
        "low": "LOW",
        "high": "HIGH",
        "min": "MIN",
        "max": "MAX",
        "sdev_pct": "SDEV%",
        "hw_pct": "HW%",
        "overhead_pct": "O/H",
    }
    rows = [
        {
            "test": row["test"],
            "metric": row["metric"],
            "unit": "",
            **{ours: row[theirs] for ours, theirs in keys.items()},
        }
        for row in analysis["getstats"]
    ]
    return {
        "getstats": rows,
        "comparisons": _against_baseline(analysis["series"]),
        "warnings": [{"kind": w["kind"], "message": w["message"]} for w in analysis["warnings"]],
        "plotted": _plotted(analysis["series"]),
        "tests": [{"name": t["name"], "vars": t["vars"]} for t in analysis["tests"]],
        "confidence": analysis["confidence"],
        "name": f"plan-{ident}",
    }


def _plotted(series: list[dict]) -> list[str]:
    """The metrics a plan's figures show: the tests' stop metrics, then elapsed and CPU time, as
    `plan report` prints them."""
    from ..harness.report import OUTLIER_METRICS

    primary = [s["metric"] for s in series if s.get("primary")]
    return list(dict.fromkeys(primary + [s["metric"] for s in series if s["metric"] in OUTLIER_METRICS]))


def _against_baseline(series: list[dict]) -> list[dict]:
    """Each test against the first test with the same stop metric (getstats' O/H baseline), as
    `peakbench compare` would judge them: the difference B − A, its interval, the test and p."""
    from ..analysis import compare

    rows, baselines = [], {}
    for item in (s for s in series if s.get("primary") and len(s["values"]) >= 2):
        base = baselines.setdefault(item["metric"], item)
        if base is item:
            continue
        result = compare(item["values"], base["values"], names=(item["test"], base["test"]))
        rows.append(
            {
                "a": base["test"],
                "b": item["test"],
                "metric": item["metric"],
                "difference": result["welch"]["difference"],
                "ci_low": result["welch"]["low"],
                "ci_high": result["welch"]["high"],
                "test": result["rests_on"],
                "p_value": result["hypotheses"][2]["p_value"],
                "verdict": result["verdict"],
            }
        )
    return rows


def _default(store: Store) -> ReportData:
    newest = [(r["created"], r["id"], "search") for r in store.searches()]
    newest += [(r["created"], r["id"], "sfs") for r in store.sfs_runs()]
    missing: list[str] = []
    if newest:
        _, ident, kind = max(newest)
        chosen = _search_series(store, ident, missing) if kind == "search" else _sfs_series(store, ident, missing)
        return ReportData(str(store.path), [chosen], missing)
    trials = store.trials()
    if not trials:
        raise InputError(
            "the store holds no trials yet (run a search, `peakbench sfs` or a trial first)", file=store.path
        )
    return ReportData(str(store.path), _loose_series(trials), missing)


def _search_series(store: Store, ident: int, missing: list[str]) -> Series:
    record = store.search(ident)
    if record is None:
        raise InputError(f"no search {ident} in the store", file=store.path)
    trials = store.search_trials(ident)
    label = f"search {ident}"
    if record["status"] == "running":
        missing.append(
            f"{label} has no result yet (still running, or killed): its trace, verdict and peak are"
            f" rebuilt from its {len(trials)} stored trials"
        )
    elif record["status"] == "failed":
        missing.append(f"{label} failed ({record['error']}): shown up to its last stored trial")
    if not trials:
        missing.append(f"{label} has no stored trials")
    title = f"{label}: {record['workload']} on {record['target']} ({record['policy']} policy)"
    return Series(label, "search", title, record, trials)


def _sfs_series(store: Store, ident: int, missing: list[str]) -> Series:
    record = store.sfs_run(ident)
    if record is None:
        raise InputError(f"no sfs run {ident} in the store", file=store.path)
    trials = store.sfs_run_trials(ident)
    label = f"sfs {ident}"
    planned = record["settings"].get("loads", [])
    done = {point_key(t["rate"]) for t in trials if t["status"] == "done"}
    absent = [load for load in planned if point_key(load) not in done]
    if record["status"] != "done" and absent:
        why = "failed: " + record["error"] if record["status"] == "failed" else "still running, or killed"
        missing.append(
            f"{label} ({why}) has no result at {len(absent)} of its {len(planned)} load points:"
            f" {' '.join(f'{a:g}' for a in absent)} ops/s"
        )
    title = f"{label}: {record['workload']} on {record['target']} (SPECsfs-style load points)"
    return Series(label, "sfs", title, record, trials)


def _loose_series(trials: list[dict]) -> list[Series]:
    """One series per workload and target; replay trials apart from workload trials."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for trial in sorted({t["id"]: t for t in trials}.values(), key=lambda t: t["id"]):
        kind = "replay" if "replay" in trial["spec"] else "trials"
        groups.setdefault((kind, trial["workload"], trial["target"]), []).append(trial)
    return [
        Series(
            f"trials {ts[0]['id']}-{ts[-1]['id']}" if len(ts) > 1 else f"trial {ts[0]['id']}",
            kind,
            f"{workload} on {target} ({len(ts)} trial{'s' if len(ts) > 1 else ''})",
            None,
            ts,
        )
        for (kind, workload, target), ts in groups.items()
    ]
