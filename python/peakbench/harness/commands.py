"""`peakbench plan ...` and `peakbench compare A B`.

    peakbench plan check PLAN.toml              validate and list the expanded tests; writes nothing
    peakbench plan run PLAN.toml [--db FILE] [--workdir DIR] [--json FILE]
    peakbench plan resume [PLAN_ID] [--db FILE]  finish a plan whose controller was killed
    peakbench plan report [PLAN_ID] [--db FILE] [--all-metrics] [--json FILE]
    peakbench plan list [--db FILE]
    peakbench compare A B [--metric M] [--alpha 0.05] [--plan ID] [--db FILE] [--json FILE]

A and B of compare: a test's name (in the latest plan that has it, or --plan),
PLAN_ID:TEST, a test id (#ID), or a file of numbers (one or more per line).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import analysis
from .. import store as store_module
from ..errors import InputError
from ..output import check_output, write_json
from . import importing, report, runner
from .expr import Expression, ExpressionError
from .plan import load_plan


def _console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=160)


def add_commands(commands, parser_class, store_option) -> None:
    plan = commands.add_parser("plan", help="run whole experiments from a plan file (loops, hooks, stop rules)")
    actions = plan.add_subparsers(dest="action", required=True, metavar="ACTION")

    check = actions.add_parser("check", help="validate a plan and show its expanded tests")
    check.add_argument("plan", type=Path, metavar="PLAN.toml")
    check.set_defaults(handler=command_check)

    run = actions.add_parser("run", parents=[store_option], help="run a plan unattended")
    run.add_argument("plan", type=Path, metavar="PLAN.toml")
    run.add_argument(
        "--workdir", type=Path, metavar="DIR", help="outputs, images and mount points (default STORE.work/)"
    )
    run.add_argument("--json", type=Path, metavar="FILE", help="also write the analysis to this JSON file")
    run.set_defaults(handler=command_run)

    resume = actions.add_parser("resume", parents=[store_option], help="finish a plan that was interrupted")
    resume.add_argument("plan_id", type=int, nargs="?", metavar="PLAN_ID", help="default: the latest unfinished")
    resume.add_argument("--json", type=Path, metavar="FILE", help="also write the analysis to this JSON file")
    resume.add_argument(
        "--after-reboot",
        action="store_true",
        help="for a boot script: resume the plan a reboot cache policy interrupted; else do nothing, exit 0",
    )
    resume.set_defaults(handler=command_resume)

    imported = actions.add_parser(
        "import", parents=[store_option], help="store other programs' results as a plan (for report and compare)"
    )
    imported.add_argument("name", metavar="NAME", help="the plan's name")
    imported.add_argument("files", type=Path, nargs="+", metavar="FILE")
    imported.add_argument("--format", required=True, choices=importing.FORMATS, help="how each file holds its runs")
    imported.add_argument("--metric", help="the tests' main metric (default: elapsed, else the first one read)")
    imported.add_argument(
        "--vars", metavar="COL[,COL]", help="columns (JSON keys) that are the runs' variables, not metrics"
    )
    imported.set_defaults(handler=command_import)

    show = actions.add_parser("report", parents=[store_option], help="getstats table and warnings of a plan")
    show.add_argument("plan_id", type=int, nargs="?", metavar="PLAN_ID", help="default: the latest plan")
    show.add_argument("--all-metrics", action="store_true", help="every metric, not only the stop metrics")
    show.add_argument(
        "--derive",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help="a metric computed from each run's metrics, e.g. 'ops_per_cpu_s=ops / cpu' (repeatable)",
    )
    show.add_argument("--where", metavar="EXPR", help="only tests whose variables satisfy it, e.g. \"fs == 'ext4'\"")
    show.add_argument(
        "--group-by", metavar="VAR[,VAR]", help="pool the runs of tests that share these loop variables' values"
    )
    show.add_argument("--json", type=Path, metavar="FILE", help="also write the analysis to this JSON file")
    show.set_defaults(handler=command_report)

    listing = actions.add_parser("list", parents=[store_option], help="the plans in the store")
    listing.set_defaults(handler=command_list)

    compare = commands.add_parser(
        "compare", parents=[store_option], help="do two results differ? Welch's t, F/Levene, CI of the difference"
    )
    compare.add_argument("a", metavar="A", help="a test name, PLAN_ID:TEST, #TEST_ID, or a file of numbers")
    compare.add_argument("b", metavar="B")
    compare.add_argument("--metric", help="which metric (default: the tests' stop metric)")
    compare.add_argument("--plan", type=int, metavar="ID", help="look test names up in this plan")
    compare.add_argument(
        "--alpha", type=float, default=analysis.DEFAULT_ALPHA, help="significance level (default 0.05)"
    )
    compare.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison to this JSON file")
    compare.set_defaults(handler=command_compare)


def command_check(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    console = _console()
    table = Table(title=f"plan {plan.name}: {len(plan.tests)} tests")
    for heading in ("#", "test", "kind", "threads", "stop", "cache", "fs"):
        table.add_column(heading, overflow="fold")
    for test in plan.tests:
        stop = test["stop"]
        rule = f"{stop['min_runs']}..{stop['max_runs']} runs" + (f", until {stop['until']}" if stop["until"] else "")
        table.add_row(
            str(test["seq"] + 1),
            test["name"],
            test["kind"],
            str(test["threads"]),
            rule,
            ",".join(test["cache"]["policy"]) or "-",
            test["fs"]["type"] if test["fs"] else "-",
        )
    console.print(table)
    for note in plan.notes:
        console.print(f"note: {note}", highlight=False)
    return 0


def _finish(db: Path, plan_id: int, status: str, json_path: Path | None) -> int:
    with store_module.Store(db, readonly=True) as store:
        data = report.plan_analysis(store, plan_id)
    report.print_plan_report(data, _console())
    write_json(json_path, finite(data), default=_json_default)
    return 0 if status == "done" else 1


def _json_default(value):
    return str(value)


def finite(value):
    """The same data with inf and nan as None, so the JSON files are standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def command_run(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)  # every input error surfaces here, before anything is written
    store_module.check_compatible(args.db)
    check_output(args.json, "--json")
    if args.workdir is not None and args.workdir.exists() and not args.workdir.is_dir():
        raise InputError(f"{args.workdir}: not a directory", field="--workdir")
    plan_id, status = runner.run_plan(plan, args.db, args.workdir)
    return _finish(args.db, plan_id, status, args.json)


def command_resume(args: argparse.Namespace) -> int:
    check_output(args.json, "--json")
    if args.after_reboot and not runner.waiting_for_reboot(args.db, args.plan_id):
        print(f"peakbench: no plan in {args.db} waits for a reboot; nothing to resume", file=sys.stderr)
        return 0
    plan_id, status = runner.resume_plan(args.db, args.plan_id)
    return _finish(args.db, plan_id, status, args.json)


def _open(db: Path) -> store_module.Store:
    return store_module.Store(db, readonly=True)


def command_report(args: argparse.Namespace) -> int:
    check_output(args.json, "--json")
    with _open(args.db) as store:
        plan_id = args.plan_id
        if plan_id is None:
            plan_id = store.last_plan_id()
            if plan_id is None:
                raise InputError("no plans in the store", file=args.db)
        data = report.plan_analysis(store, plan_id, **_transformations(args))
    if not data:
        raise InputError(f"no plan {plan_id} in the store", file=args.db)
    report.print_plan_report(data, _console(), all_metrics=args.all_metrics)
    write_json(args.json, finite(data), default=_json_default)
    return 0


def _transformations(args: argparse.Namespace) -> dict:
    """--derive, --where and --group-by, checked before the store is read."""
    derive = {}
    for text in args.derive:
        name, equals, formula = text.partition("=")
        name = name.strip()
        if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise InputError(f"{text!r}: write NAME=EXPRESSION, e.g. ops_per_cpu_s=ops / cpu", field="--derive")
        try:
            derive[name] = Expression(formula)
        except ExpressionError as error:
            raise InputError(str(error), field="--derive") from None
    where = None
    if args.where:
        try:
            where = Expression(args.where)
        except ExpressionError as error:
            raise InputError(str(error), field="--where") from None
    group_by = [v.strip() for v in args.group_by.split(",") if v.strip()] if args.group_by else None
    return {"derive": derive, "where": where, "group_by": group_by}


def command_import(args: argparse.Namespace) -> int:
    variables = tuple(v.strip() for v in (args.vars or "").split(",") if v.strip())
    plan_id, tests, runs = importing.import_plan(args.name, args.files, args.format, args.db, args.metric, variables)
    print(f"plan {plan_id} ({args.name}): {runs} runs of {tests} test(s) imported into {args.db}", file=sys.stderr)
    return _finish(args.db, plan_id, "done", None)


def command_list(args: argparse.Namespace) -> int:
    with _open(args.db) as store:
        rows = store.plan_summaries()
    table = Table()
    for heading in ("id", "created (UTC)", "plan", "status", "tests done"):
        table.add_column(heading)
    for row in rows:
        table.add_row(
            str(row["id"]),
            row["created"][:16].replace("T", " "),
            row["name"],
            row["status"],
            f"{row['done']}/{row['tests']}",
        )
    _console().print(table)
    return 0


# ---------------------------------------------------------------------------------------------
# compare


def _numbers_file(path: Path, field: str) -> list[float]:
    values = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for token in line.split("#", 1)[0].replace(",", " ").split():
            try:
                value = float(token)
            except ValueError:
                raise InputError(f"{token!r} is not a number", file=path, line=number) from None
            if not math.isfinite(value):
                raise InputError(f"{token!r} is not a finite number", file=path, line=number)
            values.append(value)
    if len(values) < 2:
        raise InputError(f"needs at least two numbers (found {len(values)})", file=path, field=field)
    return values


def resolve_side(
    store: store_module.Store | None, text: str, metric: str | None, plan_id: int | None, field: str
) -> tuple[str, list[float], str, list[int] | None]:
    """(label, values, metric, stored run ids in run order, None for a file) of one side of a comparison."""
    path = Path(text)
    if path.is_file():
        return text, _numbers_file(path, field), metric or "value", None
    if store is None:
        raise InputError(f"{text!r} is neither a file of numbers nor, without a store, a test", field=field)
    match = re.fullmatch(r"#(\d+)", text)
    plan_match = re.fullmatch(r"(\d+):(.+)", text)
    if match:
        test = store.plan_test(int(match.group(1)))
    else:
        name, chosen = (plan_match.group(2), int(plan_match.group(1))) if plan_match else (text, plan_id)
        test = store.plan_test_named(name, chosen)
    if test is None:
        raise InputError(f"no test {text!r} in the store (nor a file of that name)", field=field)
    test["runs"] = store.plan_runs(test["id"])
    chosen_metric = metric or test["settings"]["metric"]
    values = [
        float(r["metrics"][chosen_metric])
        for r in report.counted_runs(test)
        if isinstance(r["metrics"].get(chosen_metric), (int, float))
    ]
    if len(values) < 2:
        raise InputError(
            f"test {test['name']!r} has {len(values)} counted run(s) with metric {chosen_metric!r};"
            " a comparison needs at least two",
            field=field,
        )
    return f"{test['name']} (plan {test['plan_id']})", values, chosen_metric, [r["id"] for r in test["runs"]]


def _interleaved(runs_a: list[int] | None, runs_b: list[int] | None) -> bool | None:
    """Whether two tests' runs alternated (each side ran between the other's first and last run);
    None when a side's order is not known."""
    if runs_a is None or runs_b is None:
        return None
    return min(runs_a) < max(runs_b) and min(runs_b) < max(runs_a)


def command_compare(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 0.5:
        raise InputError(f"{args.alpha}: alpha must be in (0, 0.5)", field="--alpha")
    check_output(args.json, "--json")
    store = None
    needs_store = not (Path(args.a).is_file() and Path(args.b).is_file())
    if needs_store:
        store = _open(args.db)
    try:
        label_a, a, metric_a, runs_a = resolve_side(store, args.a, args.metric, args.plan, "A")
        label_b, b, metric_b, runs_b = resolve_side(store, args.b, args.metric or metric_a, args.plan, "B")
    finally:
        if store is not None:
            store.close()
    if metric_a != metric_b and args.metric is None and metric_a != "value" and metric_b != "value":
        raise InputError(f"A's metric is {metric_a!r} and B's {metric_b!r}; choose one with --metric", field="B")
    result = analysis.compare(
        a, b, alpha=args.alpha, names=(label_a, label_b), interleaved=_interleaved(runs_a, runs_b)
    )
    result["metric"] = metric_a
    print_comparison(result, _console())
    write_json(args.json, finite(result), default=_json_default)
    return 0


def print_comparison(result: dict, console: Console) -> None:
    na, nb = result["names"]
    summaries = Table(title=f"{result['metric']}: {result['confidence']:.0%} intervals")
    for heading in ("", "COUNT", "MEAN", "MEDIAN", "LOW", "HIGH", "SDEV%", "HW%", "normal? (Shapiro-Wilk p)"):
        summaries.add_column(heading, justify="left" if not heading or heading.startswith("normal") else "right")
    for name, s, norm in zip((na, nb), result["summaries"], result["normality"]):
        normal = "n/a" if norm["normal"] is None else f"{'yes' if norm['normal'] else 'NO'} ({norm['p_value']:.3g})"
        summaries.add_row(
            f"u{1 if name == na else 2} = {name}",
            str(s["count"]),
            report._num(s["mean"]),
            report._num(s["median"]),
            report._num(s["low"]),
            report._num(s["high"]),
            report._num(s["sdev_pct"]),
            report._num(s["hw_pct"]),
            normal,
        )
    console.print(summaries)
    w = result["welch"]
    console.print(
        f"difference of means u1 - u2 = {w['difference']:+.6g}; {result['confidence']:.0%} CI (Welch)"
        f" {w['low']:+.6g} .. {w['high']:+.6g}; t = {w['t']:.4g}, df = {w['df']:.4g}",
        highlight=False,
    )
    tests = Table(title=f"hypotheses (alpha = {result['alpha']:g}, {result['rests_on']})")
    for heading in ("null hypothesis", "p-value", "decision"):
        tests.add_column(heading)
    for h in result["hypotheses"]:
        tests.add_row(h["null"], f"{h['p_value']:.4g}", h["decision"])
    console.print(tests)
    v = result["variances"]
    console.print(
        f"variances: F = {v['f_test']['F']:.4g} (p = {v['f_test']['p_value']:.3g}), Levene p ="
        f" {v['levene']['p_value']:.3g}: {'they differ' if v['differ'] else 'no evidence they differ'}"
        f" ({v['rests_on']}); Welch's test does not assume equal variances",
        highlight=False,
    )
    rank = result["rank"]
    console.print(f"rank test (Mann-Whitney U = {rank['U']:.4g}): p = {rank['p_two_sided']:.3g}", highlight=False)
    console.print(f"[bold]verdict:[/bold] {result['verdict']}", highlight=False)
