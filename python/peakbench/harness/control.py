"""A plan's control flow at run time: IF/ELSE and WHILE, and the reboot checkpoint.

Conditions are evaluated when their test comes up, from the plan's variables and
the committed runs of earlier tests, so a resumed plan takes the same branches:
nothing a condition reads changes once it is stored.

    if = "result('warm-up', 'mean') > 5"         # else: the test's [test.else] keys, or skipped
    while = "last.mean_ms < 50"                   # checked before every iteration after the first

A reboot is a checkpoint, then a command: the checkpoint (an event naming the
test and attempt, committed first) tells the next `plan resume` that this
attempt's reboot was done, so the run goes on from its measurement instead of
rebooting again.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from . import stoprule
from .expr import Expression, ExpressionError
from .plan import RESULT_FUNCTION

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class ConditionError(Exception):
    """A condition that cannot be evaluated (a test it names has no counted run, a type error)."""


def boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _counted(runs: list[dict]) -> list[dict]:
    return [r["metrics"] for r in runs if r["status"] == "done" and not r["discarded"]]


def summary(test: dict, runs: list[dict], confidence: float) -> dict:
    """What `last.NAME` reads: the stop metric's statistics (mean, hw_pct, count...), every metric's
    mean by its name, and runs and failures."""
    counted = _counted(runs)
    values = stoprule.predicate_values(
        test["metric"], counted, len(runs), sum(r["status"] != "done" for r in runs), 0.0, confidence
    )
    means = {name: stats["mean"] for name, stats in values.items() if isinstance(stats, dict)}
    plain = {name: value for name, value in values.items() if not isinstance(value, dict)}
    return {**means, **plain}


class Flow:
    """Decides, for each stored test row, whether it runs, which branch, or why it is skipped."""

    def __init__(self, tests: list[dict], stored_runs, confidence: float):
        self.tests = tests
        self.stored_runs = stored_runs  # test id -> its runs, from the store
        self.confidence = confidence
        self.by_name = {row["name"]: row for row in tests}

    def _result(self, name, stat="mean", metric=None):
        row = self.by_name.get(name)
        if row is None:
            raise ExpressionError(f"no test {name!r} in this plan")
        test = row["settings"]
        runs = self.stored_runs(row["id"])
        counted = _counted(runs)
        if not counted:
            raise ExpressionError(f"test {name!r} has no counted run (status {row['status']})")
        metric = metric or test["metric"]
        values = [float(r[metric]) for r in counted if metric in r]
        if not values:
            raise ExpressionError(f"test {name!r} has no metric {metric!r}")
        statistics = stoprule.statistics_of(values, self.confidence)
        if stat not in statistics:
            raise ExpressionError(f"no statistic {stat!r}; known: {', '.join(statistics)}")
        return statistics[stat]

    def _holds(self, text: str, variables: dict) -> bool:
        try:
            value = Expression(text, functions=(RESULT_FUNCTION,)).evaluate(variables, {RESULT_FUNCTION: self._result})
        except ExpressionError as error:
            raise ConditionError(str(error)) from None
        if isinstance(value, float) and math.isnan(value):
            return False
        return bool(value)

    def choose(self, row: dict) -> tuple[dict | None, str]:
        """(the row to run, with the else branch's settings if that is taken, or None to skip it; why)."""
        test = row["settings"]
        loop = test.get("while")
        earlier = [
            r
            for r in self.tests
            if loop
            and (r["settings"].get("while") or {}).get("group") == loop["group"]
            and r["settings"]["while"]["iteration"] < loop["iteration"]
        ]
        if earlier:  # the iteration before this one (a `when` may have left some out)
            previous = max(earlier, key=lambda r: r["settings"]["while"]["iteration"])
            done = previous["settings"]["while"]["iteration"]
            if previous["status"] == "skipped":
                return None, f"the while loop ended before iteration {loop['iteration']}"
            last = summary(previous["settings"], self.stored_runs(previous["id"]), self.confidence)
            if not self._holds(loop["condition"], {**test["vars"], "last": last}):
                return None, f"while {loop['condition']!r} no longer held after iteration {done}"
        if test.get("if"):
            if self._holds(test["if"], test["vars"]):
                return row, f"if {test['if']!r} held"
            if test.get("else"):
                return {**row, "settings": test["else"]}, f"if {test['if']!r} did not hold: else branch"
            return None, f"if {test['if']!r} did not hold"
        return row, ""


def reboot_done(events: list[dict], test_id: int, attempt: int) -> dict | None:
    """The checkpoint of this attempt's reboot, if one was committed before the command ran."""
    for event in events:
        detail = json.loads(event["detail"]) if isinstance(event["detail"], str) else event["detail"]
        if detail and detail.get("test_id") == test_id and detail.get("attempt") == attempt:
            return detail
    return None
