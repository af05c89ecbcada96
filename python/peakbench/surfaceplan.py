"""Surface plans: the TOML file `peakbench surface PLAN.toml` reads.

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

    [configure]               # optional: run before each sample's search (argv, no shell)
    command = ["./set-threads.sh", "{nfsds}"]
    timeout_s = 60
    ready = ["./probe.sh"]    # optional: retried until it exits 0 or ready_timeout_s passes
    ready_timeout_s = 30

Everything is checked on load; an error names the file, line and field.
"""

from __future__ import annotations

import dataclasses
import math
import string
from pathlib import Path

from . import targets, tomlfile
from .controller import DEFAULT_POLICY, POLICIES, SearchSettings
from .controller.design import Factor, Sample, d_optimal, full_factorial
from .errors import InputError
from .workload import find_workload

TABLES = ("design", "search", "factors", "configure")
TOP_KEYS = ("workload", "target", "policy", "fail_fast", "seeding", *TABLES)
DESIGNS = ("d-optimal", "full-factorial")
MAX_SAMPLES = 1_000  # searches in one surface: weeks of measurement already
MAX_CANDIDATES = 100_000  # combinations a D-optimal design chooses from, all held in memory
SETTINGS_FIELDS = tuple(f.name for f in dataclasses.fields(SearchSettings))


@dataclasses.dataclass(frozen=True)
class Configure:
    command: tuple[str, ...]
    timeout_s: float
    ready: tuple[str, ...] | None
    ready_timeout_s: float


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

    def fill(self, template: str, sample: Sample) -> str:
        return template.format_map({name: f"{value:g}" for name, value in sample.items()})

    def summary(self) -> dict:
        """The plan as plain data, as it is stored with the surface."""
        plan = dataclasses.asdict(self)
        plan["path"] = str(self.path)
        return plan


def load_plan(path: Path, quick_settings: dict) -> SurfacePlan:
    path = Path(path)
    return tomlfile.load(path, lambda document: _parse(document, path, quick_settings), "surface plan")


def _parse(document: dict, path: Path, quick_settings: dict) -> SurfacePlan:
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
    )
    if plan.target.startswith("sim://"):
        targets.check_simulated(plan.fill(plan.target, sample) for sample in plan.samples)
    return plan


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
    tomlfile.check_keys(table, ("quick", *SETTINGS_FIELDS), "search.")
    quick = _boolean(table, "quick", False, "search.")
    chosen = dict(quick_settings) if quick else {}
    chosen.update({k: v for k, v in table.items() if k != "quick"})
    try:
        return quick, SearchSettings(**chosen)
    except (ValueError, TypeError) as error:
        field = next((f for f in SETTINGS_FIELDS if str(error).startswith(f)), None)
        raise InputError(str(error), field=f"search.{field}" if field else "search") from None


def _configure(table: dict, factors: tuple[Factor, ...]) -> Configure | None:
    if not table:
        return None
    tomlfile.check_keys(table, ("command", "timeout_s", "ready", "ready_timeout_s"), "configure.")
    command = _argv(table.get("command"), "configure.command", factors)
    ready = _argv(table["ready"], "configure.ready", factors) if "ready" in table else None
    return Configure(command, _seconds(table, "timeout_s", 60.0), ready, _seconds(table, "ready_timeout_s", 30.0))


def _argv(value: object, field: str, factors: tuple[Factor, ...]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(w, str) for w in value):
        raise InputError("must be a command as a non-empty list of strings (argv; no shell)", field=field)
    for word in value:
        _check_template(word, factors, field)
    return tuple(value)


def _check_template(template: str, factors: tuple[Factor, ...], field: str) -> None:
    names = {f.name for f in factors}
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise InputError(f"{template!r}: {error} (write {{{{ and }}}} for literal braces)", field=field) from None
    for name in fields:
        if name not in names:
            raise InputError(f"{{{name}}} names no factor; factors: {', '.join(sorted(names))}", field=field)


def _seconds(table: dict, key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86_400:
        raise InputError(f"must be a number of seconds in (0, 86400] (got {value!r})", field=f"configure.{key}")
    return float(value)


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
