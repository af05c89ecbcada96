"""Other programs' results as a plan, so getstats, outliers, drift and compare work on them.

    peakbench plan import NAME FILE... --format csv|gnu-time|json [--metric M] --db FILE

Each run becomes a stored run of a test:
    csv       one run per row; a header names the metrics; a `test` column names the test
    gnu-time  one run per file of `/usr/bin/time -v` output: elapsed, user, system, cpu
              (user + system, as a command test measures it), max_rss_kb, exit_status...
    json      an object per run: a file of one object, a list of them, or one per line;
              numbers are metrics, a "test" string names the test
`--vars COL,...` names the columns (or keys) that are the runs' variables, like a plan's loop
variables: each set of their values is a test of its own, for `plan report --where/--group-by`.
Without a test name, a run belongs to the test named by its file: the name without its
extension and without a trailing run number ("ext4-2.csv" is a run of "ext4").
Every file is read and checked before anything is stored; a mistake is file:line.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

from .. import store as store_module
from ..errors import InputError
from ..locks import StoreLock
from . import runner
from .plan import Plan

FORMATS = ("csv", "gnu-time", "json")
MAX_RUNS = 1_000_000
# GNU time -v labels whose values are not plain numbers, or whose names are long.
TIME_NAMES = {
    "User time (seconds)": "user",
    "System time (seconds)": "system",
    "Percent of CPU this job got": "cpu_percent",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "elapsed",
    "Maximum resident set size (kbytes)": "max_rss_kb",
    "Average resident set size (kbytes)": "avg_rss_kb",
    "Exit status": "exit_status",
}
TIME_IGNORED = ("Command being timed",)


def test_of(path: Path) -> str:
    return re.sub(r"[-_.]\d+$", "", path.stem) or path.stem


def _number(text: str, path: Path, line: int, field: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise InputError(f"{text.strip()!r} is not a number", file=path, line=line, field=field) from None
    if not math.isfinite(value):
        raise InputError(f"{text.strip()!r} is not a finite number", file=path, line=line, field=field)
    return value


def _variable(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _csv(path: Path, text: str, variables: tuple[str, ...]) -> list[tuple[str, dict, dict]]:
    rows = list(csv.reader(text.splitlines()))
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise InputError("a CSV import needs a header row naming the metrics", file=path, line=1)
    header = [cell.strip() for cell in rows[0]]
    for name in variables:
        if name not in header:
            raise InputError(f"no column {name!r} (columns: {', '.join(header)})", file=path, line=1, field="--vars")
    runs = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(f"{len(row)} cells for {len(header)} columns", file=path, line=number)
        test, values, metrics = test_of(path), {}, {}
        for name, cell in zip(header, row):
            if name == "test":
                test = cell.strip() or test
            elif name in variables:
                values[name] = _variable(cell.strip())
            elif cell.strip():
                try:
                    metrics[name] = _number(cell, path, number, name)
                except InputError as error:
                    raise InputError(
                        f"{error.message} (a column of names or settings goes in --vars)",
                        file=path,
                        line=number,
                        field=name,
                    ) from None
        runs.append((test, values, metrics))
    return runs


def _elapsed(text: str, path: Path, line: int) -> float:
    parts = text.strip().split(":")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + _number(part, path, line, "elapsed")
    return seconds


def _gnu_time(path: Path, text: str, variables: tuple[str, ...]) -> list[tuple[str, dict, dict]]:
    if variables:
        raise InputError("GNU time output has no columns to take variables from", field="--vars")
    metrics: dict[str, float] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        label, colon, value = line.strip().rpartition(": ")
        if not colon or label in TIME_IGNORED:
            continue
        if label == "Elapsed (wall clock) time (h:mm:ss or m:ss)":
            metrics["elapsed"] = _elapsed(value, path, number)
            continue
        name = TIME_NAMES.get(label) or re.sub(r"\W+", "_", re.sub(r"\(.*?\)", "", label)).strip("_").lower()
        metrics[name] = _number(value, path, number, name)
    if "elapsed" not in metrics:
        raise InputError("not GNU `time -v` output: no 'Elapsed (wall clock) time' line", file=path, line=1)
    if "user" in metrics and "system" in metrics:
        metrics["cpu"] = metrics["user"] + metrics["system"]
    return [(test_of(path), {}, metrics)]


def _json(path: Path, text: str, variables: tuple[str, ...]) -> list[tuple[str, dict, dict]]:
    try:
        documents = [(1, json.loads(text))]
    except json.JSONDecodeError as error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if error.msg != "Extra data" or not lines:  # not JSON lines either
            raise InputError(f"invalid JSON: {error.msg}", file=path, line=error.lineno) from None
        documents = []
        for number, line in lines:
            try:
                documents.append((number, json.loads(line)))
            except json.JSONDecodeError as each:
                raise InputError(f"invalid JSON: {each.msg}", file=path, line=number) from None
    runs = []
    for line, document in documents:
        objects = document if isinstance(document, list) else [document]
        for item in objects:
            if not isinstance(item, dict):
                raise InputError("each run is a JSON object of metrics", file=path, line=line)
            missing = [name for name in variables if name not in item]
            if missing:
                raise InputError(f"a run without {missing[0]!r}", file=path, line=line, field="--vars")
            values = {name: item[name] for name in variables}
            metrics = {
                k: float(v)
                for k, v in item.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and k not in variables
            }
            if not metrics:
                raise InputError("a run with no numbers in it", file=path, line=line)
            test = item.get("test") if isinstance(item.get("test"), str) else test_of(path)
            runs.append((test, values, metrics))
    return runs


READERS = {"csv": _csv, "gnu-time": _gnu_time, "json": _json}


def read_runs(paths: list[Path], fmt: str, variables: tuple[str, ...] = ()) -> list[tuple[str, dict, dict]]:
    """(test, its variables, the run's metrics) for every run in the files."""
    runs = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"cannot read: {getattr(error, 'strerror', None) or error}", file=path) from None
        runs += READERS[fmt](Path(path), text, variables)
        if len(runs) > MAX_RUNS:
            raise InputError(f"more than {MAX_RUNS:,} runs", file=path)
    if not runs:
        raise InputError("no runs in the files", file=paths[0])
    return runs


def import_plan(
    name: str, paths: list[Path], fmt: str, db: Path, metric: str | None, variables: tuple[str, ...] = ()
) -> tuple[int, int, int]:
    """Store the runs as a finished plan of tests, one per test name and values of `variables` (its loop
    variables, for report --where and --group-by); returns (plan id, tests, runs)."""
    runs = read_runs(paths, fmt, variables)
    tests: dict[str, list[dict]] = {}
    values_of: dict[str, dict] = {}
    for test, values, metrics in runs:
        full = "-".join([test, *(str(values[v]) for v in variables)])
        tests.setdefault(full, []).append(metrics)
        values_of[full] = values
    names = {key for metrics in tests.values() for run in metrics for key in run}
    chosen = metric or ("elapsed" if "elapsed" in names else next(iter(runs[0][2])))
    if chosen not in names:
        raise InputError(f"no run has the metric {chosen!r}; they have: {', '.join(sorted(names))}", field="--metric")
    instances = [
        {"name": test, "kind": "imported", "vars": values_of[test], "metric": chosen, "seq": seq, "threads": 1}
        for seq, test in enumerate(tests)
    ]
    plan = Plan(
        name=name,
        path=str(Path(paths[0]).resolve()),
        description=f"imported from {len(paths)} {fmt} file(s)",
        sources={},
        settings={"confidence": 0.95, "outlier_z": 2.0, "notify": None},
        tests=instances,
        notes=[],
    )
    store_module.check_compatible(db)
    with StoreLock(db) as lock:
        lock.acquire(f"importing {name}")
        with store_module.Store(db) as store:
            plan_id = store.add_plan(
                name=plan.name,
                path=plan.path,
                sources=plan.sources,
                plan=plan.to_dict(),
                workdir=str(runner.default_workdir(db)),
                tests=plan.tests,
                notes=plan.notes,
            )
            for row in runner.Runner(store, plan_id).tests:
                for attempt, metrics in enumerate(tests[row["name"]], start=1):
                    runner.commit_run(
                        store,
                        plan_id=plan_id,
                        test_id=row["id"],
                        attempt=attempt,
                        status="done",
                        discarded=False,
                        metrics=metrics,
                        threads=[],
                        hooks=[],
                        cache=[],
                        monitor=None,
                        sysinfo={},
                        result=None,
                        trial_ids=[],
                        error=None,
                    )
                store.update_plan_test(row["id"], status="done", stop_reason=f"imported ({fmt})")
            store.update_plan(plan_id, status="done", finished=runner._now())
    return plan_id, len(tests), len(runs)
