"""Surface plans: what `peakbench surface PLAN.toml` maps.

A surface is one step of the plan language (docs/plans.md): a [[test]] with
kind = "surface" and the keys below. `peakbench surface` takes a plan with one
surface step, or the older surface-plan file written here, which is read as
that step. In both, templates are the plan's ({factor}; {{ }} for braces) and
durations the plan's (60, "60s", "2m"); the older `timeout_s` and
`ready_timeout_s` are still read. The older form:

    workload = "mail"                                    # canned name or workload .toml
    target = "sim://db-tp?disks={disks}&nfsds={nfsds}"   # {factor} is replaced per sample
    policy = "guided"                                    # optional
    fail_fast = false                                    # optional: stop at the first failed sample
    seeding = true                                       # optional: seed each search from its nearest peak

    [design]
    kind = "d-optimal"        # or "full-factorial"
    samples = 8               # d-optimal only

    [search]                  # optional: any search setting, or quick = true
    quick = true
    rsat_ms = 40

    [[factors]]
    name = "disks"
    levels = [1, 2, 3, 4]     # or "1,2,4"
    scale = "linear"          # or "log"

    [[factors]]               # a factor named like a workload knob (peakbench.workloadknobs)
    name = "zipf"             # sets that knob of the workload in each sample
    levels = [0.5, 0.75, 1.0]

    [fixed_rate]              # optional: instead of a peak search per sample, `trials` trials
    rate = 200                # at this offered load (warm-up and run time from [search]); the
    trials = 3                # response is the mean response time with its interval (Fstress Fig. 9)

    [configure]               # optional: run before each sample's search (argv, no shell)
    argv = ["./set-threads.sh", "{nfsds}"]               # or command = [...]
    timeout = "60s"
    ready = ["./probe.sh"]    # optional: retried until it exits 0 or ready_timeout passes
    ready_timeout = "30s"

Everything is checked on load; an error names the file, line and field.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

from . import targets, tomlfile
from .controller import DEFAULT_POLICY, POLICIES, SearchSettings
from .controller.design import Factor, Sample, d_optimal, full_factorial
from .errors import InputError
from .templates import names_in, render
from .units import MAX_RATE, parse_duration
from .workload import Workload, find_workload
from .workloadknobs import KNOBS, with_knobs

TABLES = ("design", "search", "factors", "configure", "fixed_rate")
TOP_KEYS = ("workload", "target", "policy", "fail_fast", "seeding", *TABLES)
DESIGNS = ("d-optimal", "full-factorial")
# argv or command; each duration also under its older name with _s (a number of seconds).
CONFIGURE_KEYS = ("argv", "command", "timeout", "timeout_s", "ready", "ready_timeout", "ready_timeout_s")
MAX_SAMPLES = 1_000  # searches in one surface: weeks of measurement already
MAX_CANDIDATES = 100_000  # combinations a D-optimal design chooses from, all held in memory
SETTINGS_FIELDS = tuple(f.name for f in dataclasses.fields(SearchSettings))
DURATION_SETTINGS = {name.removesuffix("_s"): name for name in SETTINGS_FIELDS if name.endswith("_s")}


@dataclasses.dataclass(frozen=True)
class Configure:
    command: tuple[str, ...]
    timeout_s: float
    ready: tuple[str, ...] | None
    ready_timeout_s: float


@dataclasses.dataclass(frozen=True)
class FixedRate:
    rate: float  # offered ops/s of every trial
    trials: int  # per sample


MAX_FIXED_TRIALS = 1_000


@dataclasses.dataclass(frozen=True)
class SurfacePlan:
    path: Path
    workload: str
    target: str  # a template: {factor} fields are replaced per sample
    policy: str
    factors: tuple[Factor, ...]
    samples: tuple[Sample, ...]  # in the design's order
    settings: SearchSettings
    quick: bool
    configure: Configure | None
    fail_fast: bool
    seeding: bool
    fixed_rate: FixedRate | None = None

    def workload_for(self, base: Workload, sample: Sample) -> Workload:
        """The base workload with the sample's workload-knob factors set."""
        knobs = {name: value for name, value in sample.items() if name in KNOBS}
        if not knobs:
            return base
        named = f"{base.name}[{','.join(f'{k}={v:g}' for k, v in knobs.items())}]"  # samples stored apart
        return dataclasses.replace(with_knobs(base, knobs, lambda knob: f"factors.{knob}"), name=named)

    def fill(self, template: str, sample: Sample) -> str:
        return render(template, {name: f"{value:g}" for name, value in sample.items()})

    def summary(self) -> dict:
        """The plan as plain data, as it is stored with the surface."""
        plan = dataclasses.asdict(self)
        plan["path"] = str(self.path)
        return plan


def load_plan(path: Path, quick_settings: dict) -> SurfacePlan:
    """A plan file's one surface step, the older surface-plan file, or the JSON a plan's step hands on."""
    path = Path(path)
    if path.suffix == ".json":  # written by the plan runner from a checked step
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise InputError(f"cannot read surface step: {error}", file=path) from None
        return parse_document(document, path, quick_settings)
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    if re.search(r"^\s*\[\[\s*test\s*\]\]", text, re.MULTILINE):  # a plan: its steps are [[test]]
        return _plan_step(path, quick_settings)
    return tomlfile.load(path, lambda document: parse_document(document, path, quick_settings), "surface plan")


def _plan_step(path: Path, quick_settings: dict) -> SurfacePlan:
    from .harness.plan import load_plan as load_experiment_plan

    plan = load_experiment_plan(path)
    steps = [test for test in plan.tests if test["kind"] == "surface"]
    if len(steps) != 1:
        names = ", ".join(t["name"] for t in steps) or "none"
        raise InputError(
            f"`peakbench surface` maps a plan with one surface step (this one has {len(steps)}: {names});"
            " run the plan with `peakbench plan run`",
            file=path,
        )
    return parse_document(steps[0]["step"]["surface"], path, quick_settings)


def parse_document(document: dict, path: Path, quick_settings: dict) -> SurfacePlan:
    tomlfile.check_keys(document, TOP_KEYS, "")
    workload = _required_string(document, "workload")
    try:
        find_workload(workload)
    except InputError as error:
        if error.file is not None:  # a workload file's own error names that file and line
            raise
        raise InputError(error.message, field="workload") from None
    target = _required_string(document, "target")
    policy = document.get("policy", DEFAULT_POLICY)
    if policy not in POLICIES:
        raise InputError(f"must be one of {', '.join(sorted(POLICIES))} (got {policy!r})", field="policy")
    factors = _factors(document.get("factors"))
    for template, field in ((target, "target"),):
        _check_template(template, factors, field)
    quick, settings = _settings(_table(document, "search"), quick_settings)
    configure = _configure(_table(document, "configure"), factors)
    fixed_rate = _fixed_rate(_table(document, "fixed_rate"))
    plan = SurfacePlan(
        path,
        workload,
        target,
        policy,
        factors,
        _design(_table(document, "design"), factors),
        settings,
        quick,
        configure,
        _boolean(document, "fail_fast", False),
        _boolean(document, "seeding", True),
        fixed_rate,
    )
    if plan.target.startswith("sim://"):
        targets.check_simulated(plan.fill(plan.target, sample) for sample in plan.samples)
    _check_knobs(plan, find_workload(workload))
    return plan


def _fixed_rate(table: dict) -> FixedRate | None:
    if not table:
        return None
    tomlfile.check_keys(table, ("rate", "trials"), "fixed_rate.")
    rate = table.get("rate")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= MAX_RATE:
        raise InputError(f"must be ops/s above 0, at most {MAX_RATE:,} (got {rate!r})", field="fixed_rate.rate")
    trials = table.get("trials", 3)
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_FIXED_TRIALS:
        raise InputError(
            f"must be a whole number from 1 to {MAX_FIXED_TRIALS:,} (got {trials!r})", field="fixed_rate.trials"
        )
    return FixedRate(float(rate), trials)


def _check_knobs(plan: SurfacePlan, base: Workload) -> None:
    """Every sample's workload is made now, so a level a knob cannot take is refused before any trial."""
    if plan.fixed_rate is not None and plan.target.startswith("sim://"):
        raise InputError("a simulated target answers searches only; fixed_rate needs a real target", field="fixed_rate")
    knob_factors = [index for index, factor in enumerate(plan.factors) if factor.name in KNOBS]
    if not knob_factors:
        return
    if plan.target.startswith("sim://"):
        raise InputError(
            f"a simulated target has no workload: factor {plan.factors[knob_factors[0]].name} cannot apply",
            field=f"factors[{knob_factors[0]}].name",
        )
    for sample in plan.samples:
        try:
            plan.workload_for(base, sample)
        except InputError as error:
            index = next((i for i in knob_factors if error.field == f"factors.{plan.factors[i].name}"), None)
            raise InputError(
                f"at {', '.join(f'{k}={v:g}' for k, v in sample.items())}: {error.message}",
                field=f"factors[{index}].levels" if index is not None else "factors",
            ) from None


def _factors(value: object) -> tuple[Factor, ...]:
    if not isinstance(value, list) or not value:
        raise InputError("the plan needs at least one [[factors]] table", field="factors")
    factors = []
    for index, table in enumerate(value):
        where = f"factors[{index}]"
        if not isinstance(table, dict):
            raise InputError("must be a table ([[factors]])", field=where)
        tomlfile.check_keys(table, ("name", "levels", "scale"), f"{where}.")
        name = table.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise InputError(f"must be a name of letters, digits and _ (got {name!r})", field=f"{where}.name")
        if name in (f.name for f in factors):
            raise InputError(f"factor {name!r} is named twice", field=f"{where}.name")
        levels = table.get("levels")
        try:
            if isinstance(levels, str):
                factor = Factor.parse(name, levels, table.get("scale", "linear"))
            elif isinstance(levels, list) and not any(isinstance(v, bool) for v in levels):
                factor = Factor(name, tuple(levels), table.get("scale", "linear"))
            else:
                raise ValueError(f'factor {name}: levels must be a list of numbers or a string such as "1,2,4"')
        except ValueError as error:
            field = "scale" if "scale" in str(error) else "levels"
            raise InputError(str(error), field=f"{where}.{field}") from None
        factors.append(factor)
    return tuple(factors)


def _design(table: dict, factors: tuple[Factor, ...]) -> tuple[Sample, ...]:
    tomlfile.check_keys(table, ("kind", "samples"), "design.")
    kind = table.get("kind", "full-factorial")
    if kind not in DESIGNS:
        raise InputError(f"must be one of {', '.join(DESIGNS)} (got {kind!r})", field="design.kind")
    # Counted before any combination is made: 10 factors of 10 levels are 10^10 of them.
    combinations = math.prod(len(factor.levels) for factor in factors)
    if kind == "full-factorial" and combinations > MAX_SAMPLES:
        raise InputError(
            f"a full factorial of these levels is {combinations:,} searches, more than {MAX_SAMPLES:,};"
            ' use kind = "d-optimal" or fewer levels',
            field="design.kind",
        )
    if combinations > MAX_CANDIDATES:
        raise InputError(
            f"the levels make {combinations:,} combinations for the D-optimal choice, more than"
            f" {MAX_CANDIDATES:,}; use fewer levels",
            field="factors",
        )
    if kind == "full-factorial":
        if "samples" in table:
            raise InputError(
                "a full factorial runs every combination of levels; samples is for d-optimal", field="design.samples"
            )
        return tuple(full_factorial(factors))
    count = table.get("samples")
    if isinstance(count, bool) or not isinstance(count, int):
        raise InputError(f"must be a whole number of samples (got {count!r})", field="design.samples")
    try:
        return tuple(d_optimal(factors, count))
    except ValueError as error:
        raise InputError(str(error), field="design.samples") from None


def _settings(table: dict, quick_settings: dict) -> tuple[bool, SearchSettings]:
    tomlfile.check_keys(table, ("quick", *SETTINGS_FIELDS, *DURATION_SETTINGS), "search.")
    quick = _boolean(table, "quick", False, "search.")
    chosen = dict(quick_settings) if quick else {}
    for key, value in table.items():
        if key in DURATION_SETTINGS:  # runlength = "4s", the plan's duration syntax, for runlength_s = 4
            if DURATION_SETTINGS[key] in table:
                raise InputError(f"give {key} or {DURATION_SETTINGS[key]}, not both", field=f"search.{key}")
            chosen[DURATION_SETTINGS[key]] = parse_duration(value, f"search.{key}")
        elif key != "quick":
            chosen[key] = value
    try:
        return quick, SearchSettings(**chosen)
    except (ValueError, TypeError) as error:
        field = next((f for f in SETTINGS_FIELDS if str(error).startswith(f)), None)
        raise InputError(str(error), field=f"search.{field}" if field else "search") from None


def _configure(table: dict, factors: tuple[Factor, ...]) -> Configure | None:
    if not table:
        return None
    tomlfile.check_keys(table, CONFIGURE_KEYS, "configure.")
    key = "argv" if "argv" in table else "command"
    command = _argv(table.get(key), f"configure.{key}", factors)
    ready = _argv(table["ready"], "configure.ready", factors) if "ready" in table else None
    return Configure(command, _seconds(table, "timeout", 60.0), ready, _seconds(table, "ready_timeout", 30.0))


def _argv(value: object, field: str, factors: tuple[Factor, ...]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(w, str) for w in value):
        raise InputError("must be a command as a non-empty list of strings (argv; no shell)", field=field)
    for word in value:
        _check_template(word, factors, field)
    return tuple(value)


def _check_template(template: str, factors: tuple[Factor, ...], field: str) -> None:
    names = {f.name for f in factors}
    try:
        render(template, {}, keep=tuple(names_in(template)))
    except ValueError as error:
        raise InputError(str(error), field=field) from None
    for name in sorted(names_in(template)):
        if name not in names:
            raise InputError(f"{{{name}}} names no factor; factors: {', '.join(sorted(names))}", field=field)


def _seconds(table: dict, key: str, default: float) -> float:
    if key in table and f"{key}_s" in table:
        raise InputError(f"give {key} or {key}_s, not both", field=f"configure.{key}")
    written = key if key in table else f"{key}_s"
    seconds = parse_duration(table.get(written, default), f"configure.{written}")
    if not 0 < seconds <= 86_400:
        raise InputError(f"must be a duration in (0 s, 1 day] (got {seconds:g} s)", field=f"configure.{written}")
    return seconds


def _table(document: dict, key: str) -> dict:
    value = document.get(key, {})
    if not isinstance(value, dict):
        raise InputError(f"must be a table ([{key}])", field=key)
    return value


def _required_string(document: dict, key: str) -> str:
    value = document.get(key)
    if not isinstance(value, str) or not value:
        raise InputError("the plan needs this as a non-empty string", field=key)
    return value


def _boolean(table: dict, key: str, default: bool, prefix: str = "") -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise InputError(f"must be true or false (got {value!r})", field=f"{prefix}{key}")
    return value
