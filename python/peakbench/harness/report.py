"""A plan's results, read from the store, analysed with peakbench.analysis.

plan_analysis(store, plan_id) returns plain data for any report (the terminal
table here, the HTML report):
    {"plan": {...}, "tests": [...], "series": [...], "getstats": [...], "warnings": [...]}
print_plan_report renders it for the terminal.
"""

from __future__ import annotations

import json
import math

from rich.console import Console
from rich.table import Table

from .. import analysis
from .. import store as store_module
from ..errors import InputError
from .expr import Expression, ExpressionError

# Always-constant or bookkeeping metrics: no outlier or drift warnings on them.
QUIET_METRICS = {"exit_status", "generator_saturated", "errors"}
# Outliers are looked for in the stop metric and in these (Auto-pilot's elapsed and CPU times);
# the other metrics' outliers are only in the data (analysis.outliers on any series).
OUTLIER_METRICS = ("elapsed", "cpu")
DRIFT_METRICS = ("elapsed", "cpu", "user", "system", "mon_mem_available_end_mb")


def load_plan_runs(store: store_module.Store, plan_id: int) -> dict:
    """The plan row, its tests (in order) and each test's stored runs, decoded."""
    plan = store.connection.execute("SELECT * FROM plans WHERE id = ?", (plan_id,)).fetchone()
    if plan is None:
        return {}
    plan = store_module._decode(plan)
    tests = [
        store_module._decode(r)
        for r in store.connection.execute("SELECT * FROM plan_tests WHERE plan_id = ? ORDER BY seq", (plan_id,))
    ]
    for test in tests:
        test["runs"] = [
            store_module._decode(r)
            for r in store.connection.execute(
                "SELECT * FROM plan_runs WHERE test_id = ? ORDER BY attempt", (test["id"],)
            )
        ]
    events = [
        store_module._decode(r)
        for r in store.connection.execute("SELECT * FROM plan_events WHERE plan_id = ? ORDER BY id", (plan_id,))
    ]
    return {"plan": plan, "tests": tests, "events": events}


def counted_runs(test: dict) -> list[dict]:
    return [r for r in test["runs"] if r["status"] == "done" and not r["discarded"]]


def test_series(test: dict, metrics: list[str] | None = None) -> list[dict]:
    """One {"test", "metric", "values", "labels"} per metric of a test's counted runs (stop metric first)."""
    runs = counted_runs(test)
    names: list[str] = []
    primary = test["settings"]["metric"]
    for run in runs:
        for name in run["metrics"]:
            if name not in names:
                names.append(name)
    names.sort(key=lambda n: (n != primary, n.startswith("mon_"), n))
    if metrics is not None:
        names = [n for n in names if n in metrics]
    out = []
    for name in names:
        pairs = [
            (r["attempt"], float(r["metrics"][name])) for r in runs if isinstance(r["metrics"].get(name), (int, float))
        ]
        if pairs:
            out.append(
                {"test": test["name"], "metric": name, "labels": [p[0] for p in pairs], "values": [p[1] for p in pairs]}
            )
    return out


def warnings_for(series: list[dict], outlier_z: float, confidence: float) -> list[dict]:
    warnings = []
    for item in series:
        if item["metric"] in QUIET_METRICS:
            continue
        if item.get("primary") or item["metric"] in OUTLIER_METRICS:
            warnings.extend(
                analysis.outliers(
                    item["values"], [f"attempt {a}" for a in item["labels"]], outlier_z, item["metric"], item["test"]
                )
            )
        if item["metric"] in DRIFT_METRICS or item.get("primary"):
            warning = analysis.drift_warning(item["values"], item["metric"], item["test"], confidence)
            if warning:
                warnings.append(warning)
    return warnings


def _derive(tests: list[dict], derive: dict[str, Expression]) -> None:
    """Add each derived metric to every counted run whose metrics it can be computed from."""
    for test in tests:
        for run in counted_runs(test):
            for name, expression in derive.items():
                if expression.names <= set(run["metrics"]):
                    try:
                        value = expression.evaluate(run["metrics"])
                    except ExpressionError:
                        continue
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                        run["metrics"][name] = float(value)


def _selected(tests: list[dict], where: Expression) -> list[dict]:
    chosen = []
    for test in tests:
        try:
            if where.evaluate(test["vars"]):
                chosen.append(test)
        except ExpressionError as error:
            raise InputError(f"test {test['name']}: {error}", field="--where") from None
    return chosen


def _grouped(series: list[dict], tests: list[dict], group_by: list[str]) -> list[dict]:
    """Series of tests that share the group_by variables' values pooled into one, named by those values."""
    vars_of = {t["name"]: t["vars"] for t in tests}
    pooled: dict[tuple, dict] = {}
    for item in series:
        values = vars_of[item["test"]]
        missing = [v for v in group_by if v not in values]
        if missing:
            raise InputError(f"test {item['test']} has no variable {missing[0]!r}", field="--group-by")
        name = " ".join(f"{v}={values[v]}" for v in group_by)
        group = pooled.setdefault((name, item["metric"]), {**item, "test": name, "values": [], "labels": []})
        group["values"] += item["values"]
        group["labels"] += [f"{item['test']} run {label}" for label in item["labels"]]
    return list(pooled.values())


def plan_analysis(
    store: store_module.Store,
    plan_id: int,
    metrics: list[str] | None = None,
    derive: dict[str, Expression] | None = None,
    where: Expression | None = None,
    group_by: list[str] | None = None,
) -> dict:
    """`derive` adds metrics computed per run, `where` keeps the tests whose variables satisfy it,
    `group_by` pools the runs of tests that share those variables' values (getstats transformations)."""
    data = load_plan_runs(store, plan_id)
    if not data:
        return {}
    settings = json.loads(data["plan"]["plan"]) if isinstance(data["plan"]["plan"], str) else data["plan"]["plan"]
    confidence = settings["settings"]["confidence"]
    z = settings["settings"]["outlier_z"]
    if where is not None:
        data["tests"] = _selected(data["tests"], where)
    _derive(data["tests"], derive or {})
    series = []
    for test in data["tests"]:
        for item in test_series(test, metrics):
            item["primary"] = item["metric"] == test["settings"]["metric"] or item["metric"] in (derive or {})
            series.append(item)
    if group_by:
        series = _grouped(series, data["tests"], group_by)
    # getstats: all tests for one metric together, baseline = the first test with that metric
    ordered = sorted(series, key=lambda s: (not s["primary"], s["metric"].startswith("mon_"), s["metric"]))
    metric_order: list[str] = []
    for item in ordered:
        if item["metric"] not in metric_order:
            metric_order.append(item["metric"])
    by_metric = [s for m in metric_order for s in series if s["metric"] == m]
    rows = analysis.getstats_rows(by_metric, confidence)
    warnings = warnings_for(series, z, confidence)
    return {
        "plan": {k: data["plan"][k] for k in ("id", "name", "path", "status", "created", "finished", "error")},
        "tests": [
            {
                "id": t["id"],
                "seq": t["seq"],
                "name": t["name"],
                "kind": t["kind"],
                "vars": t["vars"],
                "status": t["status"],
                "stop_reason": t["stop_reason"],
                "metric": t["settings"]["metric"],
                "runs": len(t["runs"]),
                "counted": len(counted_runs(t)),
            }
            for t in data["tests"]
        ],
        "series": series,
        "getstats": rows,
        "warnings": warnings,
        "events": [e for e in data["events"] if e["kind"] in ("failure", "notify", "warning", "resume", "note")],
        "confidence": confidence,
    }


def _num(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.2f}"
    return f"{value:.4g}"


def getstats_table(rows: list[dict], title: str) -> Table:
    table = Table(title=title)
    for column in analysis.GETSTATS_COLUMNS:
        table.add_column(
            column, justify="left" if column in ("test", "metric") else "right", no_wrap=column not in ("test",)
        )
    for row in rows:
        table.add_row(
            row["test"],
            row["metric"],
            str(row["COUNT"]),
            *(_num(row[c]) for c in ("MEAN", "MEDIAN", "LOW", "HIGH", "MIN", "MAX")),
            _num(row["SDEV%"]),
            _num(row["HW%"]),
            "base" if row["O/H"] is None else _num(row["O/H"]),
        )
    return table


def print_plan_report(analysis_data: dict, console: Console, all_metrics: bool = False) -> None:
    plan = analysis_data["plan"]
    console.print(
        f"[bold]plan {plan['id']}: {plan['name']}[/bold] ({plan['status']})"
        + (f": {plan['error']}" if plan.get("error") else "")
    )
    tests = Table(title="tests")
    for heading in ("#", "test", "status", "runs", "counted", "why it stopped"):
        tests.add_column(heading, overflow="fold")
    for test in analysis_data["tests"]:
        tests.add_row(
            str(test["seq"] + 1),
            test["name"],
            test["status"],
            str(test["runs"]),
            str(test["counted"]),
            test["stop_reason"] or "",
        )
    console.print(tests)
    rows = analysis_data["getstats"]
    if not all_metrics:
        primary = {(s["test"], s["metric"]) for s in analysis_data["series"] if s["primary"]}
        keep = {"elapsed", "cpu"}
        rows = [r for r in rows if (r["test"], r["metric"]) in primary or r["metric"] in keep]
    confidence = analysis_data["confidence"]
    console.print(getstats_table(rows, f"getstats ({confidence:.0%} intervals; O/H % against the first test)"))
    for warning in analysis_data["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning['message']}", highlight=False)
    for event in analysis_data["events"]:
        if event["kind"] in ("failure", "warning"):
            console.print(f"[red]{event['kind']}:[/red] {event['message']}", highlight=False)
