"""Experiment plans (TOML): load, validate with line-precise errors, expand.

    name = "fs-compare"
    include = ["common.toml"]           # vars, env, defaults and tests of other plans
    on_failure = "stop"                 # default for every test: stop | continue
    notify = ["mail-me", "{test} failed: {error}"]   # run when a run fails
    confidence = 0.95                   # of every interval; alpha = 1 - confidence
    outlier_z = 2.0                     # |z| above this warns
    interleave = true                   # one run of each test in turn; the default unless a test has if/while

    [vars]                              # scalars; strings may use earlier {vars}
    files = 200
    [env]                               # for every command and hook
    LC_ALL = "C"
    [defaults]                          # merged into every [[test]] (tables one level deep)
    stop = {min_runs = 3, max_runs = 10, until = "hw_pct < 5"}

    [[test]]
    name = "postmark-{fs}-{threads}"    # unique after expansion
    loop = {fs = ["ext4", "xfs"], threads = {from = 1, to = 4, factor = 2}}   # outermost first
    when = "not (fs == 'xfs' and threads == 4)"
    threads = "{threads}"               # processes/clients started together; each gets {thread} 1..N
    command = ["python3", "-m", "peakbench.harness.postmark", "--dir", "{mount}/t{thread}"]
    shell = false                       # true: command is one string for /bin/sh -c
    timeout = "10m"                     # per run
    parse = "json"                      # numbers of the last JSON object printed become metrics
    metrics = {tps = 'rate: ([0-9.]+)'} # or regular expressions (group 1 or (?P<value>...))
    metric = "elapsed"                  # what the stop rule looks at (trials: mean_ms)
    fs = {type = "{fs}", size = "320MB", options = ""}   # loop-mounted image at {mount}
    cache = ["remount"]                 # warm | drop | remount | chill, or {policy=[...], chill="2GiB", mount="/mnt/x"}
    monitor = {interval = "0.5s", processes = ["nfsd"], device = "auto"}
    on_failure = "continue"
    [test.hooks]                        # argv lists, templated; or {argv=[...], timeout="30s", shell=false}
    presetup = [["mkdir", "-p", "{mount}/data"]]
    setup = []
    cleanup = []
    postcleanup = []
    [test.stop]
    min_runs = 3
    check_every = 1
    until = "hw_pct < 5"                # names: count mean median sdev sdev_pct hw hw_pct min max
    max_runs = 10                       #   elapsed (s of runs so far) slope slope_pct drifting; metric.name

    [[test]]                            # a peakbench trial
    name = "mail-{rate}"
    loop = {rate = [100, 200]}
    workload = "mail"                   # canned name or workload file
    target = "/mnt/x"                   # a directory, file:///DIR or null:// (a command test may name
                                        #   its directory under test too, for the snapshot and monitors)
    rate = "{rate}"                     # total offered ops/s, split evenly over the clients
    warmup = "2s"
    runtime = "10s"

    [[test]]                            # steps that run peakbench's own commands on the plan's store
    name = "peak"
    kind = "search"                     # search | surface | sfs | replay
    workload = "mail"
    target = "sim://?capacity=400"
    args = ["--quick"]                  # the command's options, checked by its parser now
    if = "result('mail-100') < 5"       # decided at run time from stored results; [test.else] or skipped
    # while = "last.mean_ms < 50" with max_iterations = N repeats a test ({iteration})

The whole language, with an example of every construct: docs/plans.md.
Expansion turns the plan into a list of test instances (plain dicts, stored
with the plan so `plan resume` never re-reads the file). Templates use
{name}; {{ and }} are literal braces (templates.py). {run}, {thread}, {threads},
{mount}, {workdir}, {plan} and {test} are filled in when a run starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import io
import itertools
import json
import math
import os
import re
import shutil
import tomllib
from pathlib import Path

from .. import searching, surfaceplan
from ..errors import InputError
from ..surfaceplan import TOP_KEYS as SURFACE_KEYS
from ..templates import names_in, render
from ..tomlfile import syntax_error
from ..tomlpos import Positions
from ..units import parse_duration, parse_size
from .expr import Expression, ExpressionError

RUNTIME_NAMES = ("run", "thread", "threads", "mount", "workdir", "plan", "test")
TRIAL_SCHEMES = ("null://", "file://", "nfs://", "smb://", "http://")  # the URL targets targets.parse_target takes
# A plan may name its own variable `threads` (a loop over thread counts); the others are peakbench's.
RESERVED_NAMES = tuple(n for n in RUNTIME_NAMES if n != "threads")
TOP_KEYS = (
    "name",
    "description",
    "include",
    "vars",
    "env",
    "defaults",
    "test",
    "notify",
    "on_failure",
    "confidence",
    "outlier_z",
    "interleave",
)
TEST_KEYS = (
    "name",
    "kind",
    "loop",
    "when",
    "vars",
    "env",
    "threads",
    "clients",
    "command",
    "shell",
    "timeout",
    "parse",
    "metrics",
    "metric",
    "workload",
    "target",
    "rate",
    "warmup",
    "runtime",
    "scale",
    "seed",
    "max_outstanding",
    "docroot",
    "hooks",
    "stop",
    "cache",
    "fs",
    "monitor",
    "on_failure",
    "server_version",
    "if",
    "else",
    "while",
    "max_iterations",
    "args",
    "rcfile",
    "log",
    *SURFACE_KEYS,
)
TEST_KEYS = tuple(dict.fromkeys(TEST_KEYS))  # a surface's workload and target are a trial's keys too
CONTROL_KEYS = ("name", "loop", "when", "if", "else", "while", "max_iterations")
DEFAULTABLE = tuple(k for k in TEST_KEYS if k not in CONTROL_KEYS)
# Steps that run a peakbench command (in a child process, as a user would) and read its --json.
COMMAND_STEPS = {"search": ("workload", "target"), "surface": (), "sfs": ("rcfile",), "replay": ("log",)}
KINDS = ("command", "trial", *COMMAND_STEPS)
STEP_METRICS = {"search": "peak_rate", "surface": "elapsed", "sfs": "elapsed", "replay": "elapsed"}
# Exit statuses of a finished job: search and surface exit 3 when no peak was found, which is a result.
STEP_DONE_STATUSES = {"search": [0, 3], "surface": [0, 3], "sfs": [0], "replay": [0]}
STEP_ONLY_KEYS = {
    "args": tuple(COMMAND_STEPS),
    "rcfile": ("sfs",),
    "log": ("replay",),
    **{key: ("surface",) for key in SURFACE_KEYS if key not in ("workload", "target")},
}
MAX_ITERATIONS = 1_000
RESULT_FUNCTION = "result"  # result("test name"[, "stat"[, "metric"]]) in if and while conditions
HOOK_PHASES = ("presetup", "setup", "cleanup", "postcleanup")
HOOK_KEYS = ("argv", "command", "shell", "timeout", "ignore_errors")
STOP_KEYS = ("min_runs", "max_runs", "check_every", "until")
CACHE_POLICIES = ("warm", "drop", "remount", "chill", "reboot")
CACHE_KEYS = ("policy", "chill", "mount", "reboot", "reboot_wait")
DEFAULT_REBOOT_WAIT_S = 600.0
FS_KEYS = ("type", "size", "options")
FS_TYPES = ("ext4", "xfs", "btrfs")
MONITOR_KEYS = ("enabled", "interval", "processes", "device")
LOOP_RANGE_KEYS = ("from", "to", "step", "factor")
STOP_NAMES = (
    "count",
    "mean",
    "median",
    "sdev",
    "sdev_pct",
    "hw",
    "hw_pct",
    "min",
    "max",
    "elapsed",
    "slope",
    "slope_pct",
    "drifting",
    "runs",
    "failures",
)
COMMAND_METRICS = ("elapsed", "user", "system", "cpu", "exit_status")
TRIAL_METRICS = (
    "elapsed",
    "achieved_rate",
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "errors",
    "completed",
    "schedule_lag_p99_ms",
    "generator_saturated",
)
MAX_INSTANCES = 10_000
MAX_INCLUDE_DEPTH = 16
DEFAULT_TIMEOUT_S = 3600.0
DEFAULT_HOOK_TIMEOUT_S = 600.0

# ---------------------------------------------------------------------------------------------
# errors with places


@dataclasses.dataclass
class Source:
    """One plan file: its text and the positions of its keys."""

    path: Path
    text: str
    positions: Positions

    def error(self, path: tuple, message: str) -> InputError:
        field = _field_name(path)
        return InputError(message, file=self.path, line=self.positions.line_of(path), field=field or None)


def _field_name(path: tuple) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


# ---------------------------------------------------------------------------------------------
# loading and includes


@dataclasses.dataclass
class RawTest:
    table: dict
    source: Source
    index: int  # position in its file's [[test]] array

    def error(self, path: tuple, message: str) -> InputError:
        return self.source.error(("test", self.index, *path), message)


@dataclasses.dataclass
class Loaded:
    main: Source
    top: dict
    vars: list[tuple[str, object, Source]]
    env: list[tuple[str, object, Source]]
    defaults: list[tuple[str, object, Source]]
    tests: list[RawTest]
    sources: list[Source]


def _read(path: Path) -> tuple[Source, dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(
            f"cannot read plan: {error.strerror if isinstance(error, OSError) else error}", file=path
        ) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise syntax_error(path, error, text) from None
    return Source(path, text, Positions(text)), document


def _check_keys(table: dict, allowed: tuple[str, ...], source: Source, prefix: tuple) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            raise source.error(prefix + (key,), f"unknown key {key!r}; {hint}")


def _load(path: Path, loaded: Loaded | None, chain: tuple[Path, ...]) -> Loaded:
    path = Path(path)
    resolved = path.resolve()
    if resolved in chain:
        raise InputError("include cycle: " + " -> ".join(str(p) for p in (*chain, resolved)), file=path)
    if len(chain) > MAX_INCLUDE_DEPTH:
        raise InputError(f"includes nested deeper than {MAX_INCLUDE_DEPTH}", file=path)
    source, document = _read(path)
    _check_keys(document, TOP_KEYS, source, ())
    if loaded is None:
        loaded = Loaded(source, document, [], [], [], [], [])
    loaded.sources.append(source)
    includes = document.get("include", [])
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise source.error(("include",), "must be a file name or a list of file names")
    for number, name in enumerate(includes):
        included = path.parent / name
        if not included.is_file():
            raise source.error(
                ("include", number) if isinstance(document.get("include"), list) else ("include",),
                f"no such file to include: {included}",
            )
        _load(included, loaded, (*chain, resolved))
    for key, bucket in (("vars", loaded.vars), ("env", loaded.env), ("defaults", loaded.defaults)):
        table = document.get(key, {})
        if not isinstance(table, dict):
            raise source.error((key,), f"must be a table ([{key}])")
        for name, value in table.items():
            bucket.append((name, value, source))
    tests = document.get("test", [])
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise source.error(("test",), "must be an array of tables ([[test]])")
    for index, table in enumerate(tests):
        loaded.tests.append(RawTest(table, source, index))
    return loaded


# ---------------------------------------------------------------------------------------------
# the validated, expanded plan


@dataclasses.dataclass
class Plan:
    name: str
    path: str
    description: str
    sources: dict[str, str]  # every file read: path -> text (kept with the plan in the store)
    settings: dict  # confidence, outlier_z, notify
    tests: list[dict]  # expanded test instances, in run order
    notes: list[str]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def load_plan(path: str | Path, check_programs: bool = True) -> Plan:
    """Read, validate and expand a plan; any mistake raises InputError (file:line: field: message)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such plan file", file=path)
    loaded = _load(path, None, ())
    main = loaded.main
    top = loaded.top
    name = top.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise main.error(("name",), "must be a non-empty string")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise main.error(("description",), "must be a string")
    confidence = top.get("confidence", 0.95)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.5 <= confidence < 1:
        raise main.error(("confidence",), f"must be a number in [0.5, 1) (got {confidence!r})")
    outlier_z = top.get("outlier_z", 2.0)
    if isinstance(outlier_z, bool) or not isinstance(outlier_z, (int, float)) or not outlier_z > 0:
        raise main.error(("outlier_z",), f"must be a number > 0 (got {outlier_z!r})")
    interleave = top.get("interleave")  # None: interleaved unless a test has a condition (below)
    if interleave is not None and not isinstance(interleave, bool):
        raise main.error(("interleave",), f"must be true or false (got {interleave!r})")
    plan_failure = top.get("on_failure", "stop")
    if plan_failure not in ("stop", "continue"):
        raise main.error(("on_failure",), f"must be 'stop' or 'continue' (got {plan_failure!r})")

    variables = _plan_vars(loaded)
    environment = {}
    for key, value, source in loaded.env:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise source.error(("env", key), "must be a string or a number")
        environment[key] = _render_field(str(value), variables, source, ("env", key))
    defaults: dict = {}
    for key, value, source in loaded.defaults:
        if key not in DEFAULTABLE:
            close = difflib.get_close_matches(key, DEFAULTABLE, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(DEFAULTABLE)}"
            raise source.error(("defaults", key), f"unknown key {key!r}; {hint}")
        defaults[key] = (value, source)

    notify = None
    if "notify" in top:
        notify = _hook_command(
            top["notify"],
            main,
            ("notify",),
            variables,
            check_programs,
            extra_names=("error", "test", "run", "plan"),
            environment=environment,
        )

    instances: list[dict] = []
    notes: list[str] = []
    seen: dict[str, tuple] = {}
    if not loaded.tests:
        raise main.error(("test",), "the plan has no [[test]]")
    for raw in loaded.tests:
        expanded = _expand_test(raw, defaults, variables, environment, plan_failure, check_programs)
        if not expanded:
            notes.append(
                f"{raw.source.path}: test {raw.table.get('name', raw.index)!r}: `when` excludes every"
                " point of its loops; nothing to run"
            )
        for instance in expanded:
            if interleave and (instance["if"] or instance["while"]):
                raise raw.error(
                    ("if" if instance["if"] else "while",),
                    "a condition reads the results of earlier tests, which an interleaved plan"
                    " (interleave = true) has not finished when it comes up; run this plan without interleave",
                )
            if instance["name"] in seen:
                raise raw.error(
                    ("name",),
                    f"test name {instance['name']!r} is not unique after expansion (add a loop variable to the name)",
                )
            seen[instance["name"]] = instance["vars"]
            instances.append(instance)
            if len(instances) > MAX_INSTANCES:
                raise raw.error(("loop",), f"the plan expands to more than {MAX_INSTANCES} tests")
    if interleave is None:
        # Compared tests run back to back share less of the machine's drift: their A/A false-positive
        # rate was 10.7% at alpha 5% against 2.2% interleaved (BENCHMARKS §9), so interleaving is the default.
        interleave = len(instances) > 1 and not any(i["if"] or i["while"] for i in instances)
    _check_results_named(instances, {str(source.path): source for source in loaded.sources})
    for seq, instance in enumerate(instances):
        instance["seq"] = seq
        if instance.get("else"):
            instance["else"].update(seq=seq, key=instance["key"])
    return Plan(
        name=name,
        path=str(path.resolve()),
        description=description,
        sources={str(s.path): s.text for s in loaded.sources},
        settings={
            "confidence": float(confidence),
            "outlier_z": float(outlier_z),
            "notify": notify,
            "interleave": interleave,
        },
        tests=instances,
        notes=notes,
    )


def _render_field(template: str, values: dict, source: Source, path: tuple, keep: tuple = ()) -> str:
    try:
        return render(template, values, keep=keep, final=not keep)
    except KeyError as error:
        known = sorted(set(values) | set(keep))
        close = difflib.get_close_matches(error.args[0], known, n=1)
        hint = f"did you mean {{{close[0]}}}?" if close else f"known: {', '.join(known)}"
        raise source.error(path, f"unknown variable {{{error.args[0]}}} in {template!r}; {hint}") from None
    except ValueError as error:
        raise source.error(path, str(error)) from None


def _plan_vars(loaded: Loaded) -> dict:
    variables: dict = {}
    for key, value, source in loaded.vars:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise source.error(("vars", key), "a variable name must be letters, digits and _")
        if key in RESERVED_NAMES:
            raise source.error(("vars", key), f"{key!r} is filled in by peakbench; choose another name")
        if not isinstance(value, (str, int, float, bool)):
            raise source.error(("vars", key), "must be a string, number or boolean (loops go in a test's loop)")
        variables[key] = _render_field(value, variables, source, ("vars", key)) if isinstance(value, str) else value
    return variables


def _expand_loop(raw: RawTest, loop: object) -> list[dict]:
    if not isinstance(loop, dict):
        raise raw.error(("loop",), "must be a table of variable = list or range, e.g. {n = [1, 2]}")
    axes = []
    for var, spec in loop.items():
        where = ("loop", var)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var) or var in RESERVED_NAMES:
            raise raw.error(where, f"{var!r} cannot be a loop variable")
        if isinstance(spec, list):
            for i, v in enumerate(spec):
                if not isinstance(v, (str, int, float, bool)):
                    raise raw.error(where + (i,), "loop values must be strings, numbers or booleans")
            values = list(spec)
        elif isinstance(spec, dict):
            values = _range(raw, where, spec)
        else:
            raise raw.error(where, "must be a list or a range {from, to, step | factor}")
        if not values:
            raise raw.error(where, "the loop expands to nothing")
        axes.append((var, values))
    combinations = math.prod(len(values) for _, values in axes)
    if combinations > MAX_INSTANCES:  # before itertools.product makes them
        raise raw.error(("loop",), f"the loops make {combinations:,} combinations, more than {MAX_INSTANCES:,}")
    return [dict(zip([a[0] for a in axes], point)) for point in itertools.product(*[a[1] for a in axes])]


def _range(raw: RawTest, where: tuple, spec: dict) -> list:
    _check_keys(spec, LOOP_RANGE_KEYS, raw.source, ("test", raw.index, *where))
    for key in ("from", "to"):
        if key not in spec:
            raise raw.error(where, f"a range needs {key!r}")
    numbers = {}
    for key, value in spec.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise raw.error(where + (key,), f"must be a number (got {value!r})")
        numbers[key] = value
    if "step" in numbers and "factor" in numbers:
        raise raw.error(where + ("factor",), "give step or factor, not both")
    start, stop = numbers["from"], numbers["to"]
    values = []
    if "factor" in numbers:
        factor = numbers["factor"]
        if factor <= 1 or start <= 0:
            raise raw.error(where + ("factor",), "a factor range needs factor > 1 and from > 0")
        # Counted before any value is made: a factor of 1.0000000001 would make billions.
        count = math.floor(math.log(stop / start) / math.log(factor) + 1e-9) + 1 if stop >= start else 0
        if count > MAX_INSTANCES:
            raise raw.error(where, f"the range has {count:,} values, more than {MAX_INSTANCES:,}")
        value = start
        while value <= stop * (1 + 1e-12):
            values.append(value)
            value *= factor
    else:
        step = numbers.get("step", 1)
        if step == 0:
            raise raw.error(where + ("step",), "step must not be 0")
        count = math.floor((stop - start) / step * (1 + 1e-12)) + 1
        if count > MAX_INSTANCES:
            raise raw.error(where, f"the range has {count:,} values, more than {MAX_INSTANCES:,}")
        values = [start + i * step for i in range(max(0, count))]
    integral = all(isinstance(numbers[k], int) for k in numbers)
    if integral:
        values = [int(round(v)) for v in values]
    if len(values) > MAX_INSTANCES:
        raise raw.error(where, f"the range has more than {MAX_INSTANCES} values")
    return values


def _merged(raw: RawTest, defaults: dict) -> dict[str, tuple[object, Source, tuple]]:
    """Each key of the test with where it was written (the test, or [defaults])."""
    merged: dict = {}
    for key, (value, source) in defaults.items():
        merged[key] = (value, source, ("defaults", key))
    for key, value in raw.table.items():
        if key in merged and isinstance(value, dict) and isinstance(merged[key][0], dict) and key != "loop":
            combined = {**merged[key][0], **value}
            merged[key] = (combined, raw.source, ("test", raw.index, key))
        else:
            merged[key] = (value, raw.source, ("test", raw.index, key))
    return merged


class _Fields:
    """Typed access to one test's (merged) keys, rendering templates, with located errors."""

    def __init__(self, merged: dict, values: dict, environment: dict, fallback: tuple | None = None):
        self.merged = merged
        self.values = values
        self.environment = environment
        self.fallback = fallback  # (source, path) of the test itself, for keys it left to defaults

    def _where(self, key: str) -> tuple:
        if key in self.merged:
            return self.merged[key][1], self.merged[key][2]
        source, where = self.fallback
        return source, where + (key,)

    def has(self, key: str) -> bool:
        return key in self.merged

    def raw(self, key: str, default=None):
        return self.merged[key][0] if key in self.merged else default

    def error(self, path: tuple, message: str) -> InputError:
        source, where = self._where(path[0])
        return source.error(where + tuple(path[1:]), message)

    def text(self, path: tuple, value: object, keep: tuple = ()) -> str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise self.error(path, f"must be a string (got {value!r})")
        source, where = self._where(path[0])
        return _render_field(str(value), self.values, source, where + tuple(path[1:]), keep)

    def number(
        self,
        path: tuple,
        value: object,
        *,
        integer: bool = False,
        minimum: float | None = None,
        above: float | None = None,
    ):
        if isinstance(value, str):
            rendered = self.text(path, value)
            try:
                value = int(rendered) if integer else float(rendered)
            except ValueError:
                raise self.error(path, f"must be a {'whole ' if integer else ''}number (got {rendered!r})") from None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or (integer and not float(value).is_integer())
        ):
            raise self.error(path, f"must be a {'whole ' if integer else ''}number (got {value!r})")
        if minimum is not None and value < minimum:
            raise self.error(path, f"must be at least {minimum:g} (got {value!r})")
        if above is not None and value <= above:
            raise self.error(path, f"must be above {above:g} (got {value!r})")
        return int(value) if integer else float(value)

    def duration(self, path: tuple, value: object) -> float:
        if isinstance(value, str):
            value = self.text(path, value)
        try:
            seconds = parse_duration(value, _field_name(path))
        except InputError as error:
            raise self.error(path, error.message) from None
        if seconds < 0:
            raise self.error(path, "must not be negative")
        return seconds

    def size(self, path: tuple, value: object) -> float:
        if isinstance(value, str):
            value = self.text(path, value)
        try:
            return parse_size(value, _field_name(path))
        except InputError as error:
            raise self.error(path, error.message) from None

    def boolean(self, path: tuple, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false (got {value!r})")
        return value

    def table(self, key: str, allowed: tuple[str, ...]) -> dict:
        value = self.raw(key, {})
        if not isinstance(value, dict):
            raise self.error((key,), "must be a table")
        for sub in value:
            if sub not in allowed:
                close = difflib.get_close_matches(sub, allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
                raise self.error((key, sub), f"unknown key {sub!r}; {hint}")
        return value


def _condition(raw: RawTest, key: str) -> Expression | None:
    """A run-time condition (if, while): parsed now, its names checked per instance."""
    if key not in raw.table:
        return None
    try:
        return Expression(raw.table[key], functions=(RESULT_FUNCTION,))
    except ExpressionError as error:
        raise raw.error((key,), str(error)) from None


def _iterations(raw: RawTest, points: list[dict]) -> list[dict]:
    """A WHILE test's instances: its loop points in order (or 1..max_iterations), each with {iteration}."""
    table = raw.table
    if "max_iterations" in table and "while" not in table:
        raise raw.error(("max_iterations",), "max_iterations bounds a while loop; this test has no while")
    if "while" not in table:
        return points
    bound = table.get("max_iterations")
    if bound is None and "loop" not in table:
        raise raw.error(("while",), "a while loop needs max_iterations = N (or a loop whose points it walks)")
    if bound is not None and (
        isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= MAX_ITERATIONS
    ):
        raise raw.error(("max_iterations",), f"must be a whole number from 1 to {MAX_ITERATIONS:,} (got {bound!r})")
    if "iteration" in points[0]:
        raise raw.error(("loop", "iteration"), "{iteration} is filled in by the while loop; choose another name")
    if "loop" not in table:
        points = [{} for _ in range(bound)]
    return [{**point, "iteration": number} for number, point in enumerate(points[:bound], start=1)]


def _expand_test(
    raw: RawTest, defaults: dict, plan_vars: dict, plan_env: dict, plan_failure: str, check_programs: bool
) -> list[dict]:
    table = raw.table
    _check_keys(table, TEST_KEYS, raw.source, ("test", raw.index))
    if "name" not in table:
        raise raw.error((), "a [[test]] needs a name")
    if not isinstance(table["name"], str) or not table["name"].strip():
        raise raw.error(("name",), "must be a non-empty string")
    points = _iterations(raw, _expand_loop(raw, table["loop"]) if "loop" in table else [{}])
    when = None
    if "when" in table:
        try:
            when = Expression(table["when"])
        except ExpressionError as error:
            raise raw.error(("when",), str(error)) from None
    condition, repeat = _condition(raw, "if"), _condition(raw, "while")
    otherwise = table.get("else")
    if otherwise is not None:
        if condition is None:
            raise raw.error(("else",), "an else branch belongs to a test with if = '...'")
        if not isinstance(otherwise, dict):
            raise raw.error(("else",), "must be a table of the keys that differ when the condition is false")
        _check_keys(otherwise, DEFAULTABLE, raw.source, ("test", raw.index, "else"))
    merged = _merged(raw, defaults)
    instances = []
    for point in points:
        values = {**plan_vars, **point}
        if when is not None:
            try:
                when.check_names(values)
                selected = when.evaluate(values)
            except ExpressionError as error:
                raise raw.error(("when",), str(error)) from None
            if not selected:
                continue
        instance = _instance(raw, merged, dict(values), point, plan_env, plan_failure, check_programs)
        for key, expression in (("if", condition), ("while", repeat)):
            if expression is not None:
                try:
                    expression.check_names(values, dotted_ok={"last"} if key == "while" else set())
                except ExpressionError as error:
                    raise raw.error((key,), str(error)) from None
        instance["if"] = condition.text if condition else None
        instance["while"] = (
            {"condition": repeat.text, "group": f"{raw.source.path}#{raw.index}", "iteration": point["iteration"]}
            if repeat
            else None
        )
        if otherwise is not None:
            branch = {**merged, **{k: (v, raw.source, ("test", raw.index, "else", k)) for k, v in otherwise.items()}}
            instance["else"] = _instance(raw, branch, dict(values), point, plan_env, plan_failure, check_programs)
        instances.append(instance)
    return instances


def _check_results_named(instances: list[dict], sources: dict) -> None:
    """result("name") in a condition must name a test that runs before the one asking."""
    earlier: set[str] = set()
    for instance in instances:
        for key in ("if", "while"):
            text = instance[key] if key == "if" else (instance[key] or {}).get("condition")
            if not text:
                continue
            for function, arguments in Expression(text, functions=(RESULT_FUNCTION,)).calls:
                if function != RESULT_FUNCTION:
                    continue
                wanted = arguments[0] if arguments else None
                if not isinstance(wanted, str) or wanted not in earlier:
                    where = instance["source"]
                    source = sources[where["file"]]
                    raise source.error(
                        ("test", where["index"], key),
                        f"result({wanted!r}): the first argument must name a test that runs earlier"
                        f" (earlier: {', '.join(sorted(earlier)) or 'none'})",
                    )
        earlier.add(instance["name"])


def _instance(
    raw: RawTest, merged: dict, values: dict, point: dict, plan_env: dict, plan_failure: str, check_programs: bool
) -> dict:
    f = _Fields(merged, values, plan_env, fallback=(raw.source, ("test", raw.index)))
    # test-level vars, rendered with everything before them
    test_vars = f.raw("vars", {})
    if not isinstance(test_vars, dict):
        raise f.error(("vars",), "must be a table")
    for key, value in test_vars.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or key in RESERVED_NAMES:
            raise f.error(("vars", key), f"{key!r} cannot be a variable name")
        if not isinstance(value, (str, int, float, bool)):
            raise f.error(("vars", key), "must be a string, number or boolean")
        values[key] = f.text(("vars", key), value) if isinstance(value, str) else value
    name = f.text(("name",), raw.table["name"])
    environment = dict(plan_env)
    env = f.raw("env", {})
    if not isinstance(env, dict):
        raise f.error(("env",), "must be a table")
    for key, value in env.items():
        environment[key] = f.text(("env", key), value, keep=RUNTIME_NAMES)

    kind = f.raw("kind")
    if kind is None:
        kind = "trial" if f.has("workload") else "command"
    if kind not in KINDS:
        raise f.error(("kind",), f"must be one of {', '.join(KINDS)} (got {kind!r})")
    for key, owners in STEP_ONLY_KEYS.items():
        if f.has(key) and kind not in owners:
            raise f.error((key,), f"{key!r} belongs to a {' or '.join(owners)} step, not a {kind} test")
    if f.has("threads") and f.has("clients"):
        raise f.error(("clients",), "give threads or clients, not both (they are the same thing)")
    threads_key = "clients" if f.has("clients") else "threads"
    threads = f.number((threads_key,), f.raw(threads_key, 1), integer=True, minimum=1) if f.has(threads_key) else 1
    if threads > 1024:
        raise f.error((threads_key,), "at most 1024 threads")

    instance: dict = {
        "name": name,
        "kind": kind,
        "vars": {k: v for k, v in values.items()},
        "loop": point,
        "env": environment,
        "threads": threads,
        "on_failure": f.raw("on_failure", plan_failure),
        "source": {
            "file": str(raw.source.path),
            "line": raw.source.positions.line_of(("test", raw.index)),
            "index": raw.index,
        },
    }
    if instance["on_failure"] not in ("stop", "continue"):
        raise f.error(("on_failure",), f"must be 'stop' or 'continue' (got {instance['on_failure']!r})")
    instance["key"] = json.dumps(
        {"test": raw.table["name"], "file": raw.source.path.name, "index": raw.index, "point": point}, sort_keys=True
    )

    metric_names: set[str] = set()
    parses_json = False
    if kind in COMMAND_STEPS:
        for key in ("command", "shell", "parse", "metrics", "rate", "warmup", "runtime", "threads", "clients"):
            if f.has(key):
                raise f.error((key,), f"{key!r} does not apply to a {kind} step (give its options in args = [...])")
        instance["step"] = _command_step(f, raw, kind)
        instance.update(command=None, shell=False, parse="json" if instance["step"]["json"] else "none", metrics={})
        instance["target"] = None
        parses_json = instance["step"]["json"]
        metric_names = set(COMMAND_METRICS)
        default_metric = STEP_METRICS[kind]
    elif kind == "command":
        for key in ("workload", "rate", "warmup", "runtime", "scale", "seed", "max_outstanding", "docroot"):
            if f.has(key):
                raise f.error((key,), f"{key!r} belongs to a trial test (kind = 'trial'), not a command")
        if not f.has("command"):
            raise raw.error((), "a command test needs command = [argv...] (or workload = ... for a trial)")
        shell = f.boolean(("shell",), f.raw("shell", False))
        command = _argv_or_shell(f, ("command",), f.raw("command"), shell, check_programs, environment)
        instance.update(command=command, shell=shell)
        # optional: the directory under test, for the snapshot (its file system) and the disk monitor
        instance["target"] = f.text(("target",), f.raw("target"), keep=RUNTIME_NAMES) if f.has("target") else None
        parse = f.raw("parse", "none")
        if parse not in ("json", "none"):
            raise f.error(("parse",), f"must be 'json' or 'none' (got {parse!r})")
        parses_json = parse == "json"
        instance["parse"] = parse
        metrics = f.raw("metrics", {})
        if not isinstance(metrics, dict):
            raise f.error(("metrics",), "must be a table of name = 'regular expression'")
        regexes = {}
        for metric, pattern in metrics.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", metric):
                raise f.error(("metrics", metric), "a metric name must be letters, digits and _")
            if metric in COMMAND_METRICS:
                raise f.error(("metrics", metric), f"{metric!r} is measured by peakbench itself")
            if not isinstance(pattern, str):
                raise f.error(("metrics", metric), "must be a regular expression string")
            try:
                compiled = re.compile(pattern, re.MULTILINE)
            except re.error as error:
                raise f.error(("metrics", metric), f"bad regular expression: {error}") from None
            if compiled.groups < 1:
                raise f.error(("metrics", metric), "the regular expression needs a (group) around the number")
            regexes[metric] = pattern
        instance["metrics"] = regexes
        metric_names = set(COMMAND_METRICS) | set(regexes)
        default_metric = "elapsed"
    else:
        for key in ("command", "shell", "parse", "metrics"):
            if f.has(key):
                raise f.error((key,), f"{key!r} belongs to a command test, not a trial")
        for key in ("workload", "target", "rate"):
            if not f.has(key):
                raise raw.error((), f"a trial test needs {key!r}")
        trial = {
            "workload": f.text(("workload",), f.raw("workload")),
            "target": f.text(("target",), f.raw("target"), keep=RUNTIME_NAMES),
            "rate": f.number(("rate",), f.raw("rate"), above=0),
            "warmup_s": f.duration(("warmup",), f.raw("warmup", 1.0)),
            "runtime_s": f.duration(("runtime",), f.raw("runtime", 10.0)),
            "scale": f.number(("scale",), f.raw("scale", 1.0), above=0),
            "seed": f.number(("seed",), f.raw("seed", 1), integer=True, minimum=0),
            "max_outstanding": (
                f.number(("max_outstanding",), f.raw("max_outstanding"), integer=True, minimum=1)
                if f.has("max_outstanding")
                else None
            ),
        }
        if trial["runtime_s"] <= 0:
            raise f.error(("runtime",), "must be longer than 0")
        from ..workload import find_workload  # the workload file's own errors name that file

        try:
            find_workload(trial["workload"])
        except InputError as error:
            if error.file is None:
                raise f.error(("workload",), error.message) from None
            raise
        target = trial["target"]
        if "://" in target and not target.startswith(TRIAL_SCHEMES):
            raise f.error(
                ("target",),
                "a trial target is a directory, file:///DIR, nfs://SERVER/EXPORT, smb://USER:PASSWORD@SERVER/SHARE,"
                " http://HOST:PORT/ or null://",
            )
        if threads > 1 and target.startswith(("nfs://", "smb://", "http://")):
            # Each client would build and use the same files at the same place on the server.
            raise f.error((threads_key,), "one client per trial on an nfs://, smb:// or http:// target")
        trial["docroot"] = f.text(("docroot",), f.raw("docroot"), keep=RUNTIME_NAMES) if f.has("docroot") else None
        if trial["docroot"] is not None and not target.startswith("http://"):
            raise f.error(("docroot",), "a docroot goes with an http:// target only")
        instance["trial"] = trial
        metric_names = set(TRIAL_METRICS)
        default_metric = "mean_ms"
    instance["timeout_s"] = f.duration(("timeout",), f.raw("timeout", DEFAULT_TIMEOUT_S)) or DEFAULT_TIMEOUT_S

    metric = f.raw("metric", default_metric)
    if not isinstance(metric, str):
        raise f.error(("metric",), "must be a metric name")
    if metric not in metric_names and not parses_json:
        raise f.error(("metric",), f"unknown metric {metric!r}; known: {', '.join(sorted(metric_names))}")
    instance["metric"] = metric

    # hooks
    hooks_table = f.table("hooks", HOOK_PHASES)
    hooks = {}
    for phase in HOOK_PHASES:
        hooks[phase] = _hook_list(f, ("hooks", phase), hooks_table.get(phase, []), check_programs, environment)
    instance["hooks"] = hooks

    # stop rule
    stop = f.table("stop", STOP_KEYS)
    # A search, surface, sfs run or replay is a whole experiment: once, unless the plan asks for more.
    default_min = 1 if kind in COMMAND_STEPS else 3
    min_runs = f.number(("stop", "min_runs"), stop.get("min_runs", default_min), integer=True, minimum=1)
    check_every = f.number(("stop", "check_every"), stop.get("check_every", 1), integer=True, minimum=1)
    until = None
    if "until" in stop:
        try:
            expression = Expression(stop["until"])
            dotted = None if parses_json else metric_names
            expression.check_names(set(STOP_NAMES), dotted_ok=dotted)
        except ExpressionError as error:
            raise f.error(("stop", "until"), str(error)) from None
        until = stop["until"]
    default_max = min_runs if until is None else max(min_runs, 30)
    max_runs = f.number(("stop", "max_runs"), stop.get("max_runs", default_max), integer=True, minimum=1)
    if max_runs < min_runs:
        raise f.error(("stop", "max_runs"), f"must be at least min_runs ({min_runs})")
    instance["stop"] = {"min_runs": min_runs, "max_runs": max_runs, "check_every": check_every, "until": until}

    # file system image
    fs = None
    if f.has("fs"):
        fs_table = f.table("fs", FS_KEYS)
        if "type" not in fs_table:
            raise f.error(("fs",), "an fs table needs type = 'ext4' | 'xfs' | 'btrfs'")
        fstype = f.text(("fs", "type"), fs_table["type"])
        if fstype not in FS_TYPES:
            raise f.error(("fs", "type"), f"must be one of {', '.join(FS_TYPES)} (got {fstype!r})")
        size = f.size(("fs", "size"), fs_table.get("size", "320MB"))
        minimum = 320e6 if fstype == "xfs" else 128e6
        if size < minimum:
            raise f.error(("fs", "size"), f"{fstype} needs an image of at least {minimum / 1e6:.0f}MB")
        fs = {
            "type": fstype,
            "size_mb": int(math.ceil(size / 2**20)),
            "options": f.text(("fs", "options"), fs_table.get("options", "")),
        }
    instance["fs"] = fs

    # cache policy
    cache_value = f.raw("cache", [])
    if isinstance(cache_value, str):
        cache_value = {"policy": [cache_value]}
    elif isinstance(cache_value, list):
        cache_value = {"policy": cache_value}
    if not isinstance(cache_value, dict):
        raise f.error(("cache",), "must be a policy name, a list of them, or a table {policy, chill, mount}")
    for sub in cache_value:
        if sub not in CACHE_KEYS:
            raise f.error(("cache", sub), f"unknown key {sub!r}; allowed: {', '.join(CACHE_KEYS)}")
    policy = cache_value.get("policy", [])
    if isinstance(policy, str):
        policy = [policy]
    if not isinstance(policy, list):
        raise f.error(("cache",), "the policy must be a list of names")
    for i, item in enumerate(policy):
        if item not in CACHE_POLICIES:
            raise f.error(("cache",), f"unknown cache policy {item!r}; choose from {', '.join(CACHE_POLICIES)}")
    mount = None
    if "mount" in cache_value:
        mount = f.text(("cache", "mount"), cache_value["mount"], keep=RUNTIME_NAMES)
    if "remount" in policy and fs is None and mount is None:
        raise f.error(("cache",), "remount needs the test's fs image or cache.mount = '/the/mount/point'")
    chill_bytes = f.size(("cache", "chill"), cache_value["chill"]) if "chill" in cache_value else None
    reboot = None
    if "reboot" in policy:
        if "reboot" not in cache_value:
            raise f.error(("cache",), 'the reboot policy needs its command: reboot = ["systemctl", "reboot"]')
        reboot = _hook_entry(f, ("cache", "reboot"), cache_value["reboot"], check_programs, environment)
        reboot["wait_s"] = f.duration(("cache", "reboot_wait"), cache_value.get("reboot_wait", DEFAULT_REBOOT_WAIT_S))
    elif "reboot" in cache_value or "reboot_wait" in cache_value:
        raise f.error(("cache", "reboot"), "a reboot command belongs to policy = ['reboot']")
    instance["cache"] = {"policy": policy, "mount": mount, "chill_bytes": chill_bytes, "reboot": reboot}

    # monitors
    monitor = f.table("monitor", MONITOR_KEYS)
    processes = monitor.get("processes", [])
    if not isinstance(processes, list) or not all(isinstance(p, str) for p in processes):
        raise f.error(("monitor", "processes"), "must be a list of process names")
    device = monitor.get("device", "auto")
    if not isinstance(device, str):
        raise f.error(("monitor", "device"), "must be 'auto', 'none' or a device such as '/dev/sda'")
    instance["monitor"] = {
        "enabled": f.boolean(("monitor", "enabled"), monitor.get("enabled", True)),
        "interval_s": f.duration(("monitor", "interval"), monitor.get("interval", 0.5)) or 0.5,
        "processes": processes,
        "device": f.text(("monitor", "device"), device, keep=RUNTIME_NAMES),
    }
    server_version = None
    if f.has("server_version"):
        server_version = _hook_command(
            f.raw("server_version"),
            None,
            ("server_version",),
            values,
            check_programs,
            fields=f,
            environment=environment,
        )
    instance["server_version"] = server_version
    return instance


def _argv_or_shell(
    f: _Fields, path: tuple, value: object, shell: bool, check_programs: bool, environment: dict
) -> list[str] | str:
    if shell:
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise f.error(path, "must be a list of strings")
            value = " ".join(value)
        if not isinstance(value, str) or not value.strip():
            raise f.error(path, "with shell = true, the command is one string for /bin/sh -c")
        return f.text(path, value, keep=RUNTIME_NAMES)
    if isinstance(value, str):
        raise f.error(path, 'must be an argv list such as ["prog", "arg"] (or set shell = true for a string)')
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise f.error(path, "must be a non-empty list of strings (argv)")
    argv = [f.text(path + (i,), v, keep=RUNTIME_NAMES) for i, v in enumerate(value)]
    if check_programs:
        _check_program(f, path + (0,), argv[0], environment)
    return argv


def _check_program(f: _Fields, path: tuple, program: str, environment: dict) -> None:
    if names_in(program):  # filled in at run time; checked then
        return
    search = environment.get("PATH", os.environ.get("PATH", ""))
    if "/" in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise f.error(path, f"{program}: no such executable file")
    elif shutil.which(program, path=search) is None:
        raise f.error(path, f"{program!r}: no such program on PATH")


def _hook_list(f: _Fields, path: tuple, value: object, check_programs: bool, environment: dict) -> list[dict]:
    if value == []:
        return []
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        value = [value]  # one argv list
    if isinstance(value, dict) or isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise f.error(path, "must be a list of commands (argv lists or tables {argv, timeout, shell})")
    return [_hook_entry(f, path + (i,), item, check_programs, environment) for i, item in enumerate(value)]


def _hook_entry(f: _Fields, path: tuple, item: object, check_programs: bool, environment: dict) -> dict:
    if isinstance(item, list):
        item = {"argv": item}
    elif isinstance(item, str):
        raise f.error(
            path, 'a hook is an argv list ["prog", "arg"]; for a shell line use {command = "...", shell = true}'
        )
    if not isinstance(item, dict):
        raise f.error(path, "a hook is an argv list or a table {argv, timeout, shell, ignore_errors}")
    for key in item:
        if key not in HOOK_KEYS:
            close = difflib.get_close_matches(key, HOOK_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(HOOK_KEYS)}"
            raise f.error(path + (key,), f"unknown key {key!r}; {hint}")
    shell = f.boolean(path + ("shell",), item.get("shell", False))
    if "argv" in item and "command" in item:
        raise f.error(path, "give argv or command, not both")
    if "argv" not in item and "command" not in item:
        raise f.error(path, 'a hook needs argv = [...] (or command = "..." with shell = true)')
    key = "argv" if "argv" in item else "command"
    command = _argv_or_shell(f, path + (key,), item[key], shell, check_programs, environment)
    timeout = f.duration(path + ("timeout",), item.get("timeout", DEFAULT_HOOK_TIMEOUT_S)) or DEFAULT_HOOK_TIMEOUT_S
    ignore = f.boolean(path + ("ignore_errors",), item.get("ignore_errors", False))
    return {"command": command, "shell": shell, "timeout_s": timeout, "ignore_errors": ignore}


class _TopFields(_Fields):
    """_Fields over a top-level key of the main plan file (for notify)."""

    def __init__(self, source: Source, key: str, value, values: dict, environment: dict):
        super().__init__({key: (value, source, (key,))}, values, environment)


def _hook_command(
    value,
    source: Source | None,
    path: tuple,
    values: dict,
    check_programs: bool,
    extra_names: tuple = (),
    fields: _Fields | None = None,
    environment: dict | None = None,
) -> dict:
    """A single command outside the hooks table (notify, server_version): an argv list, a shell
    string, or a table {argv | command, shell, timeout}; `extra_names` are filled in when it runs."""
    environment = environment or {}
    if fields is None:
        fields = _TopFields(source, path[0], value, dict(values), environment)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = {"argv": value}
    elif isinstance(value, str):
        value = {"command": value, "shell": True}
    keep = tuple(set(RUNTIME_NAMES) | set(extra_names))
    return _hook_entry_keep(fields, path, value, check_programs, environment, keep)


def _hook_entry_keep(f: _Fields, path: tuple, item, check_programs: bool, environment: dict, keep: tuple) -> dict:
    if not isinstance(item, dict):
        raise f.error(path, "must be an argv list or a table {argv, timeout, shell}")
    for key in item:
        if key not in HOOK_KEYS:
            raise f.error(path + (key,), f"unknown key {key!r}; allowed: {', '.join(HOOK_KEYS)}")
    shell = f.boolean(path + ("shell",), item.get("shell", False))
    key = "argv" if "argv" in item else "command"
    if key not in item:
        raise f.error(path, 'needs argv = [...] (or command = "..." with shell = true)')
    value = item[key]
    if shell:
        if not isinstance(value, str):
            raise f.error(path + (key,), "with shell = true, the command is one string")
        command = f.text(path + (key,), value, keep=keep)
    else:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise f.error(path + (key,), "must be a non-empty list of strings (argv)")
        command = [f.text(path + (key, i), v, keep=keep) for i, v in enumerate(value)]
        if check_programs:
            _check_program(f, path + (key, 0), command[0], environment)
    timeout = f.duration(path + ("timeout",), item.get("timeout", 60)) or 60.0
    return {
        "command": command,
        "shell": shell,
        "timeout_s": timeout,
        "ignore_errors": f.boolean(path + ("ignore_errors",), item.get("ignore_errors", True)),
    }


def _command_step(f: _Fields, raw: RawTest, kind: str) -> dict:
    """The peakbench command line a search, surface, sfs or replay step runs (without --db and --json,
    which the runner adds), checked now by that command's own argument parser."""
    for key in COMMAND_STEPS[kind]:
        if not f.has(key):
            raise raw.error((), f"a {kind} step needs {key!r}")
    args = f.raw("args", [])
    if not isinstance(args, list) or not all(
        isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in args
    ):
        raise f.error(("args",), f'must be a list of `peakbench {kind}` options, e.g. ["--seed", "3"]')
    args = [f.text(("args", i), a, keep=RUNTIME_NAMES) for i, a in enumerate(args)]
    for word in args:
        if word.split("=")[0] in ("--db", "--json"):
            raise f.error(("args",), f"{word.split('=')[0]} is set by the plan (its store, and the metrics it reads)")
    surface = None
    if kind == "search":
        argv = ["search", f.text(("workload",), f.raw("workload")), "--target", f.text(("target",), f.raw("target"))]
    elif kind == "sfs":
        argv = ["sfs", _beside(raw, f.text(("rcfile",), f.raw("rcfile")))]
    elif kind == "replay":
        argv = ["replay", _beside(raw, f.text(("log",), f.raw("log")))]
        if f.has("target"):
            argv += ["--target", f.text(("target",), f.raw("target"))]
    else:
        surface = _surface_document(f)
        argv = ["surface", "{surface_file}"]
    argv += args
    if not any(names_in(word) for word in argv if word != "{surface_file}"):  # else checked when it runs
        _check_arguments(f, argv)
    return {"argv": argv, "json": kind != "sfs", "done_statuses": STEP_DONE_STATUSES[kind], "surface": surface}


def _beside(raw: RawTest, name: str) -> str:
    """A file a step names, relative to the plan file that names it (as includes are)."""
    return name if names_in(name) else str(raw.source.path.parent / name)


def _check_arguments(f: _Fields, argv: list[str]) -> None:
    from ..cli import build_parser  # the command's own parser: one definition of its options

    words = [word if word != "{surface_file}" else os.devnull for word in argv]
    shown = io.StringIO()
    try:
        with contextlib.redirect_stderr(shown), contextlib.redirect_stdout(shown):
            build_parser().parse_args(words)
    except SystemExit:
        message = shown.getvalue().strip().splitlines()[-1:] or ["bad arguments"]
        raise f.error(("args",) if f.has("args") else ("kind",), message[0].removeprefix("peakbench ")) from None


def _surface_document(f: _Fields) -> dict:
    """A surface step's keys as a surface plan, checked by surfaceplan itself; {factor} names stay for
    each sample, every other {name} is filled in now."""
    document = {key: f.raw(key) for key in SURFACE_KEYS if f.has(key)}
    factors = document.get("factors") if isinstance(document.get("factors"), list) else []
    names = [t["name"] for t in factors if isinstance(t, dict) and isinstance(t.get("name"), str)]
    keep = (*names, *RUNTIME_NAMES)
    if isinstance(document.get("target"), str):
        document["target"] = f.text(("target",), document["target"], keep=keep)
    configure = document.get("configure")
    if isinstance(configure, dict):
        for key in ("argv", "command", "ready"):
            words = configure.get(key)
            if isinstance(words, list):
                configure = {
                    **configure,
                    key: [f.text(("configure", key, i), w, keep=keep) for i, w in enumerate(words)],
                }
        document["configure"] = configure
    try:
        surfaceplan.parse_document(document, Path("plan"), searching.QUICK)
    except InputError as error:
        if error.file is not None:  # the workload file's own error
            raise
        raise f.error(_field_path(error.field or "kind"), error.message) from None
    return document


def _field_path(field: str) -> tuple:
    path: list = []
    for part in field.split("."):
        indexed = re.fullmatch(r"(\w+)\[(\d+)\]", part)
        path += [indexed.group(1), int(indexed.group(2))] if indexed else [part]
    return tuple(path)
