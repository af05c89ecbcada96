"""The engine's contract (engine/SPEC.md) as Python types: TrialSpec in, TrialResult out.

The schema strings are defined here and nowhere else. `load` reads the engine's JSON (a dict) into
the dataclasses and `dump` writes them back; `dump(load(d)) == d` for every result the engine or
the cluster merge writes, so stored results keep every field. Figures the engine reports only in
some cases (NFS receive moderation, replay, restore, cluster summaries) stay optional, and fields
this version does not know are kept in `extra` rather than dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

SPEC_SCHEMA = "peakbench.trial-spec/1"
SPEC_SCHEMA_V2 = "peakbench.trial-spec/2"  # adds replay, load.clients and start_at_unix_s
RESULT_SCHEMA = "peakbench.trial-result/1"


class ContractError(ValueError):
    """A dict that is not the contract's: names the field."""


class _Record:
    """load/dump for a dataclass over a JSON object. Fields listed in OMITTED_WHEN_NONE are left out of
    the JSON when None (the engine writes them only sometimes); every other field is written, null or not.
    NESTED maps a field to the record type of its value (or of each item of a list field), NESTED_MAPS
    a field to the record type of each value of its object."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()
    NESTED: ClassVar[dict[str, type]] = {}
    NESTED_MAPS: ClassVar[dict[str, type]] = {}

    @classmethod
    def load(cls, data: dict, path: str = ""):
        """The record of a JSON object; `path` is where the object lies, for messages ("latency")."""
        if not isinstance(data, dict):
            raise ContractError(f"field {path or cls.__name__}: expected an object, not {type(data).__name__}")
        values: dict[str, Any] = {}
        extra = dict(data)
        for field in dataclasses.fields(cls):
            if field.name == "extra":
                continue
            if field.name not in data:
                if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                    raise ContractError(f"field {_join(path, field.name)} is missing")
                continue
            value = extra.pop(field.name)
            if value is not None and field.name in cls.NESTED:
                value = _load_nested(cls.NESTED[field.name], value, _join(path, field.name))
            elif value is not None and field.name in cls.NESTED_MAPS:
                kind = cls.NESTED_MAPS[field.name]
                value = {key: kind.load(item, _join(path, field.name, key)) for key, item in value.items()}
            values[field.name] = value
        return cls(**values, extra=extra)

    def dump(self) -> dict:
        data: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            if field.name == "extra":
                continue
            value = getattr(self, field.name)
            if value is None and field.name in self.OMITTED_WHEN_NONE:
                continue
            data[field.name] = _dump_nested(value)
        return {**data, **self.extra}


def _join(*names: str) -> str:
    return ".".join(name for name in names if name)


def _load_nested(kind: type, value, path: str):
    if isinstance(value, list):
        return [kind.load(item, f"{path}[{i}]") for i, item in enumerate(value)]
    return kind.load(value, path)


def _dump_nested(value):
    if isinstance(value, _Record):
        return value.dump()
    if isinstance(value, list):
        return [_dump_nested(item) for item in value]
    if isinstance(value, dict):
        return {key: _dump_nested(item) for key, item in value.items()}
    return value


# --- TrialSpec -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Load(_Record):
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {"arrivals", "max_outstanding", "drain_timeout_s", "lag_limit_ms", "clients"}
    )
    rate: float
    warmup_s: float
    runtime_s: float
    arrivals: str | None = None  # "uniform" | "poisson"
    max_outstanding: int | None = None
    drain_timeout_s: float | None = None
    lag_limit_ms: float | None = None
    clients: int | None = None  # v2: closed loop with N clients
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TrialSpec(_Record):
    """One trial's spec. Distributions, popularity, the target and replay stay JSON objects: they are
    the engine's to interpret (SPEC.md's DIST and POP tables), and Python only builds and passes them."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {"fileset", "mix", "read", "write", "progress_interval_s", "trace_ops", "start_at_unix_s", "replay"}
    )
    NESTED: ClassVar[dict[str, type]] = {"load": Load}
    schema: str
    target: dict
    seed: int
    load: Load
    fileset: dict | None = None
    mix: dict | None = None
    read: dict | None = None
    write: dict | None = None
    progress_interval_s: float | None = None
    trace_ops: int | None = None
    start_at_unix_s: float | None = None  # v2
    replay: dict | None = None  # v2
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, data: dict, path: str = "") -> TrialSpec:
        spec = super().load(data, path)
        if spec.schema not in (SPEC_SCHEMA, SPEC_SCHEMA_V2):
            raise ContractError(f"field schema: {spec.schema!r} is not {SPEC_SCHEMA!r} or {SPEC_SCHEMA_V2!r}")
        return spec


# --- TrialResult -----------------------------------------------------------------------------------


@dataclasses.dataclass
class OpStats(_Record):
    """One op's figures, or (in `latency`) all ops' together; latencies in ms from the intended send time."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {
            "successes",
            "errors",
            "shed",
            "timeouts",
            "retransmissions",
            "cancellations",
            "bytes",
            "quarters_mean_ms",
            "quarters_count",
        }
    )
    count: int
    mean_ms: float = 0.0
    stddev_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0
    p50_ms: float = 0.0
    p90_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    total_ms: float = 0.0
    hist: str = ""  # HdrHistogram V2, base64, nanoseconds
    successes: int | None = None
    errors: dict[str, int] | None = None
    shed: int | None = None
    timeouts: int | None = None
    retransmissions: int | None = None
    cancellations: int | None = None
    bytes: int | None = None
    quarters_mean_ms: list[float] | None = None  # latency only
    quarters_count: list[int] | None = None  # latency only
    extra: dict = dataclasses.field(default_factory=dict)

    def failed_count(self) -> int:
        """All failed requests: errors by kind (errno, NFS status), shed replies, timeouts and cancellations."""
        return sum((self.errors or {}).values()) + (self.shed or 0) + (self.timeouts or 0) + (self.cancellations or 0)


@dataclasses.dataclass
class Outcomes(_Record):
    succeeded: int
    errors: int
    shed: int
    timeouts: int
    cancelled: int
    failed_share: float
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, succeeded: int, errors: int, shed: int, timeouts: int, cancelled: int) -> Outcomes:
        """The outcomes of these counts, failed_share computed from them (0 when there are none)."""
        total = succeeded + errors + shed + timeouts + cancelled
        return cls(succeeded, errors, shed, timeouts, cancelled, (total - succeeded) / total if total else 0.0)


@dataclasses.dataclass
class ScheduleLag(_Record):
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"quarters_mean_ms"})
    mean_ms: float
    p99_ms: float
    max_ms: float
    hist: str
    quarters_mean_ms: list[float] | None = None
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Outstanding(_Record):
    cap: int | None
    max: int
    threads: int
    cap_bound: int = 0
    thread_limit_bound: int = 0
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class FilesetInfo(_Record):
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"id"})
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    bytes: int = 0
    id: str | None = None
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Start(_Record):
    at_unix_s: float
    requested_unix_s: float | None = None
    late_ms: float = 0.0
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Restore(_Record):
    """How the file set was restored after the trial."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"reason"})
    done: bool
    errors: int = 0
    first_errors: list = dataclasses.field(default_factory=list)
    reason: str | None = None
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ReceiveModeration(_Record):
    """What the NFS or SMB target held replies back for (SPEC.md "receive moderation"); latencies
    include it. A fixed wait reports hold_us, the adaptive one its fraction of latency and cap."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"hold_us", "hold_fraction_of_latency", "hold_cap_us"})
    mode: str  # "off" | "fixed" | "adaptive"
    reads: int
    holds: int
    mean_hold_us: float
    max_hold_us: float
    hold_us: float | None = None
    hold_fraction_of_latency: float | None = None
    hold_cap_us: float | None = None
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ClassStats(_Record):
    """A replay's figures for one request class (method, size class by the size the log served, outcome)."""

    count: int
    bytes: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    hist: str
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ReplaySummary(_Record):
    """What a replay read from its log and sent (SPEC.md "replay"); a PrepareResult of a replay has it too.
    `skipped` counts lines left out by reason, `first_unparseable` holds {line, error, text} of the first
    few unparseable ones, and `share` is the part of the stream one load client replayed."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"share"})
    log: str
    format: str
    lines: int
    replayable: int
    skipped: dict[str, int]
    first_unparseable: list[dict]
    requests: int  # the (truncated) stream
    files: int
    dataset_bytes: int
    log_files: int = 0
    log_dataset_bytes: int = 0
    truncated: bool = False
    span_s: int = 0
    parse_s: float = 0.0
    share: dict | None = None
    issued: int = 0
    loops: float = 0.0
    exhausted_at_s: float | None = None
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ClientSummary(_Record):
    """One load client's own figures, kept beside a merged result (cluster/merge.py `client_summary`)."""

    name: str
    requested_rate: float | None  # None: closed loop
    achieved_rate: float
    sent: int
    unsent: int
    completed: int
    errors: int  # failed requests (OpStats.failed_count over its ops)
    mean_ms: float
    p99_ms: float
    lag_p99_ms: float
    generator_saturated: bool
    start_late_ms: float
    engine_cpu_s: float
    lagged: list[str] = dataclasses.field(default_factory=list)  # why it fell behind; empty: it kept up
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ClusterRun(_Record):
    """How a merged trial's clients were run (cluster/fanout.py): who finished, was lost or failed, the
    hosts, the clock check and the start skew. Results stored by older versions lack some fields, so
    each is optional and written back only when present (start_skew_ms is always written: null when
    it was not measured)."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {
            "clients",
            "finished",
            "lost",
            "failed",
            "verdict",
            "hosts",
            "clock",
            "skew_bound_ms",
            "start_lead_s",
            "merge_s",
            "shared_fileset",
        }
    )
    clients: int | None = None
    finished: list[str] | None = None
    lost: list[str] | None = None
    failed: list[str] | None = None
    verdict: str | None = None
    hosts: dict[str, str] | None = None
    clock: dict[str, dict] | None = None  # name -> offset_ms, uncertainty_ms
    skew_bound_ms: float | None = None
    start_skew_ms: float | None = None
    start_lead_s: float | None = None
    merge_s: float | None = None
    shared_fileset: bool | None = None
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TrialResult(_Record):
    """One trial's result (SPEC.md "TrialResult"), from one engine or merged over load clients.

    `clients` is the closed loop's N in one engine's result; in a merged result it is the list of the
    load clients' own summaries (cluster/merge.py `client_summary`), and `lagging` names those that
    fell behind."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {
            "completed_rate",
            "outcomes",
            "interrupted",
            "issued",
            "bytes",
            "output_mbit_s",
            "mode",
            "engine_clock",
            "window_cpu_s",
            "fileset",
            "start",
            "restore",
            "receive_moderation",
            "classes",
            "replay",
            "op_trace",
            "lagging",
            "cluster",
            "window",
        }
    )
    NESTED_MAPS: ClassVar[dict[str, type]] = {"ops": OpStats, "classes": ClassStats}
    NESTED: ClassVar[dict[str, type]] = {
        "replay": ReplaySummary,
        "receive_moderation": ReceiveModeration,
        "latency": OpStats,
        "outcomes": Outcomes,
        "schedule_lag": ScheduleLag,
        "outstanding": Outstanding,
        "fileset": FilesetInfo,
        "start": Start,
        "restore": Restore,
        "cluster": ClusterRun,
    }
    schema: str
    engine_version: str | None
    requested_rate: float | None  # None: closed loop
    achieved_rate: float  # goodput: successful completions in the window / runtime
    sent: int
    unsent: int
    completed: int
    warmup_s: float
    runtime_s: float
    ops: dict[str, OpStats]
    latency: OpStats
    schedule_lag: ScheduleLag
    generator_saturated: bool
    saturation_reason: str | None
    outstanding: Outstanding
    mix_actual: dict[str, float]
    engine_cpu_s: float
    peak_rss_kib: int
    clients: int | list[dict] | None = None
    completed_rate: float | None = None
    outcomes: Outcomes | None = None
    interrupted: bool | None = None
    issued: int | None = None
    bytes: int | None = None
    output_mbit_s: float | None = None
    mode: str | None = None  # "open" | "closed" | "timed"
    engine_clock: str | None = None
    window_cpu_s: float | None = None  # engine_cpu_s spent while the window ran (engines from 2026-11-28)
    fileset: FilesetInfo | None = None
    start: Start | None = None
    restore: Restore | None = None
    receive_moderation: ReceiveModeration | None = None  # NFS and SMB
    classes: dict[str, ClassStats] | None = None  # replay only
    replay: ReplaySummary | None = None  # replay only
    op_trace: list | None = None  # only when the spec asked for trace_ops
    lagging: list[str] | None = None  # merged results only
    cluster: ClusterRun | None = None  # merged results only
    window: dict | None = None  # merged interrupted results only: the common window (cluster/merge.py)
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, data: dict, path: str = "") -> TrialResult:
        result = super().load(data, path)
        if result.schema != RESULT_SCHEMA:
            raise ContractError(f"field schema: {result.schema!r} is not {RESULT_SCHEMA!r}")
        return result

    def client_summaries(self) -> list[ClientSummary] | None:
        """A merged result's per-client figures; None for one engine's result (whose `clients` is a
        closed loop's count, or absent)."""
        if not isinstance(self.clients, list):
            return None
        return [ClientSummary.load(client, f"clients[{i}]") for i, client in enumerate(self.clients)]
