"""Workload files (TOML): what to create, what to do, and how the file set scales.

    name = "web-server"
    description = "..."
    source = "where the numbers come from"

    [fileset]                  # the creation-phase knobs of Fstress
    files_per_dir = {kind = "uniform", low = 12, high = 60}
    dirs_per_dir = 4
    symlinks_per_dir = 0       # optional, default 0
    max_depth = 3
    file_sizes = {kind = "lognormal", mean = "10.5KB", median = "1.3KB", max = "138MB"}
    file_popularity = {kind = "zipf", alpha = 0.75}   # optional, default uniform
    dir_popularity = 1                                # optional
    symlink_popularity = 1                            # optional
    active_fraction = 1.0      # optional: share of files that are ever accessed
    seed = 1                   # optional: layout seed, independent of the op seed

    [scaling]                  # self-scaling: the file set follows the offered load
    bytes_per_op = "100KB"     # per op/s of offered load; or files_per_op = 10
    min_files = 100            # optional

    [mix]                      # percentages or weights, normalised to 1
    getattr = 55
    read = 28
    # or: mixfile = "specsfs2008.mix"   (SPECsfs MIXFILE VERSION 2)
    # or: markov = "markov/specsfs2008-cifs.toml"  (a Markov model over handle states, markov.py)

    [read]                     # optional, default 8KiB random
    size = "8KiB"
    pattern = "whole_file"     # random | sequential | whole_file
    [write]                    # optional, default 8KiB random
    size = "8KiB"
    pattern = "append"         # random | sequential | append | whole_file
    [load]                     # optional
    arrivals = "uniform"       # uniform (Fstress metronome) | poisson
    [cluster]                  # optional: many load clients (--clients, --cluster)
    fileset = "per-client"     # per-client (each its own part) | shared (read-only mixes)

Unknown keys are errors, so a typo cannot silently fall back to a default.
Every error names the file, the line of the offending key, and the field.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from . import distributions, markov, tomlfile
from .contract import SPEC_SCHEMA
from .errors import InputError
from .mix import OPS, normalise
from .mixfile import read_mixfile
from .targets import refuse_unsupported
from .units import parse_size

MIX_FILESET_WORKLOAD = "specsfs2008"  # a bare SPECsfs mix file runs on this canned workload's file set
READ_ONLY_OPS = frozenset(
    {
        "null",
        "getattr",
        "lookup",
        "access",
        "readlink",
        "read",
        "readdir",
        "readdirplus",
        "fsstat",
        "fsinfo",
        "pathconf",
    }
)
CANNED_DIR = Path(__file__).parent / "workloads"

TABLES = ("fileset", "scaling", "mix", "read", "write", "load", "cluster")
TOP_KEYS = ("name", "description", "source", *TABLES)
FILESET_DISTS = {  # key -> what its samples measure
    "files_per_dir": "count",
    "dirs_per_dir": "count",
    "symlinks_per_dir": "count",
    "file_sizes": "size",
    "file_popularity": "popularity",
    "dir_popularity": "popularity",
    "symlink_popularity": "popularity",
}
FILESET_KEYS = (*FILESET_DISTS, "max_depth", "active_fraction", "seed")
FILESET_REQUIRED = ("files_per_dir", "dirs_per_dir", "max_depth", "file_sizes")
FILESET_DEFAULTS = {"symlinks_per_dir": 0, "file_popularity": 1, "dir_popularity": 1, "symlink_popularity": 1}
SCALING_KEYS = ("files_per_op", "bytes_per_op", "min_files")
READ_PATTERNS = ("random", "sequential", "whole_file")
WRITE_PATTERNS = ("random", "sequential", "append", "whole_file")
ARRIVALS = ("uniform", "poisson")
CLUSTER_FILESETS = ("per-client", "shared")
DEFAULT_IO = {"size": "8KiB", "pattern": "random"}
# The engine numbers files with 32 bits (SPEC.md refuses more).
MAX_FILES = 2**32 - 2
# Far beyond SPEC's 120 MB per op/s; more is a typo, not a file set.
MAX_FILES_PER_OP = 1_000_000
MAX_BYTES_PER_OP = 2.0**40


@dataclasses.dataclass(frozen=True)
class Scaling:
    """How many files a trial at a given offered load gets (exactly one per-op figure is set)."""

    files_per_op: float | None
    bytes_per_op: float | None
    min_files: int


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    description: str
    source: str
    path: Path
    fileset: dict  # the engine's "fileset" without "files", which depends on the load
    scaling: Scaling
    mix: dict[str, float]  # shares summing to 1
    mix_note: str | None  # set when the written mix had to be rescaled
    read: dict
    write: dict
    arrivals: str
    cluster_fileset: str = "per-client"  # how many load clients split the file set: per-client | shared
    markov: dict | None = None  # the engine's Markov chain (then `mix` is its long-run mix)

    @property
    def mean_file_size(self) -> float:
        return distributions.mean(self.fileset["file_sizes"])

    def _wanted(self, rate: float, scale: float) -> float:
        s = self.scaling
        per_op = s.files_per_op if s.files_per_op is not None else s.bytes_per_op / self.mean_file_size
        return max(float(s.min_files), rate * scale * per_op)

    def _refuse(self, rate: float, scale: float, wanted: float) -> InputError:
        count = f"{wanted:.3g} files" if math.isfinite(wanted) else "more files than a float can count"
        return InputError(
            f"at {rate:g} ops/s and scale {scale:g} the file set would have {count}, more than the"
            f" engine's {MAX_FILES:,}; lower the rate or the scale",
            file=self.path,
        )

    def files_at(self, rate: float, scale: float = 1.0) -> int:
        """Self-scaling: the file count for an offered load of `rate` ops/s."""
        wanted = self._wanted(rate, scale)
        if not wanted <= MAX_FILES:
            raise self._refuse(rate, scale, wanted)
        return math.ceil(wanted)

    def bytes_at(self, rate: float, scale: float = 1.0) -> float:
        """The file set's expected size in bytes at that load (also for a set too large to build,
        so a space check can say how large)."""
        wanted = self._wanted(rate, scale)
        if not math.isfinite(wanted * self.mean_file_size):
            raise self._refuse(rate, scale, wanted)
        return math.ceil(wanted) * self.mean_file_size


def canned_names() -> list[str]:
    return sorted(path.stem for path in CANNED_DIR.glob("*.toml"))


def find_workload(name_or_path: str) -> Workload:
    """A canned workload by name, a workload file by path (./NAME for a file named like a canned one),
    or a SPECsfs mix file (.mix) on the file set of MIX_FILESET_WORKLOAD."""
    if name_or_path in canned_names():
        return load_workload(CANNED_DIR / f"{name_or_path}.toml")
    path = Path(name_or_path)
    if path.suffix == ".mix":
        return with_mixfile(find_workload(MIX_FILESET_WORKLOAD), path)
    if path.suffix == ".toml" or path.is_file():
        return load_workload(path)
    raise InputError(
        f"unknown workload {name_or_path!r}; known: {', '.join(canned_names())} (or give a path to a .toml file)"
    )


def with_mixfile(workload: Workload, path: Path) -> Workload:
    """`workload` with the op mix of a SPECsfs mix file instead of its own; the name says so."""
    mix, note = normalise(read_mixfile(path))
    return dataclasses.replace(workload, name=f"{workload.name}+{Path(path).name}", mix=mix, mix_note=note)


def load_workload(path: Path) -> Workload:
    path = Path(path)
    return tomlfile.load(path, lambda document: _parse(document, path), "workload file")


def _table(document: dict, key: str, required: bool) -> dict:
    value = document.get(key)
    if value is None:
        if required:
            raise InputError(f"the workload needs a [{key}] table", field=key)
        return {}
    if not isinstance(value, dict):
        raise InputError(f"must be a table ([{key}])", field=key)
    return value


def _string(document: dict, key: str, default: str) -> str:
    value = document.get(key, default)
    if not isinstance(value, str):
        raise InputError("must be a string", field=key)
    return value


def _choice(table: dict, key: str, prefix: str, choices: tuple[str, ...], default: str) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise InputError(f"must be one of {', '.join(choices)} (got {value!r})", field=f"{prefix}{key}")
    return value


def _positive_number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise InputError(f"must be a number > 0 (got {value!r})", field=field)
    return float(value)


def _parse(document: dict, path: Path) -> Workload:
    tomlfile.check_keys(document, TOP_KEYS, "")
    base_dir = path.parent
    fileset = _parse_fileset(_table(document, "fileset", required=True), base_dir)
    scaling = _parse_scaling(_table(document, "scaling", required=True))
    mean_size = distributions.mean(fileset["file_sizes"])
    if not mean_size < math.inf:
        # No file set size to check space for, whichever way it scales.
        raise InputError(
            "the mean file size is infinite (a pareto with alpha <= 1 needs a max)", field="fileset.file_sizes"
        )
    if scaling.bytes_per_op is not None and mean_size == 0:
        raise InputError("scaling by bytes_per_op needs a non-zero mean file size", field="fileset.file_sizes")
    mix_table = _table(document, "mix", required=True)
    chain = None
    if "markov" in mix_table:
        chain, mix, mix_note = _parse_markov(mix_table, base_dir)
    else:
        mix, mix_note = _parse_mix(mix_table, base_dir)
    cluster_fileset = _parse_cluster(_table(document, "cluster", required=False))
    read = _parse_io(_table(document, "read", required=False), "read", READ_PATTERNS, base_dir)
    write = _parse_io(_table(document, "write", required=False), "write", WRITE_PATTERNS, base_dir)
    for name, io in (("read", read), ("write", write)):
        if chain and io["pattern"] == "sequential":
            raise InputError(
                "a sequential run crosses files; a Markov workload's reads and writes stay on an open handle's file",
                field=f"{name}.pattern",
            )
    if cluster_fileset == "shared":
        check_shareable(mix)
    return Workload(
        name=_string(document, "name", path.stem),
        description=_string(document, "description", ""),
        source=_string(document, "source", ""),
        path=path,
        fileset=fileset,
        scaling=scaling,
        mix=mix,
        mix_note=mix_note,
        read=read,
        write=write,
        arrivals=_choice(_table(document, "load", required=False), "arrivals", "load.", ARRIVALS, "uniform"),
        cluster_fileset=cluster_fileset,
        markov=chain,
    )


def check_shareable(mix: dict[str, float]) -> None:
    """A file set that several load clients share must not be written: each would change files
    the others count on."""
    writes = sorted(op for op, share in mix.items() if share > 0 and op not in READ_ONLY_OPS)
    if writes:
        raise InputError(
            f"a file set shared by several clients needs a read-only mix; this one has"
            f" {', '.join(writes)} (use a per-client file set)",
            field="cluster.fileset",
        )


def _parse_cluster(table: dict) -> str:
    tomlfile.check_keys(table, ("fileset",), "cluster.")
    return _choice(table, "fileset", "cluster.", CLUSTER_FILESETS, "per-client")


def _parse_fileset(table: dict, base_dir: Path) -> dict:
    tomlfile.check_keys(table, FILESET_KEYS, "fileset.")
    for key in FILESET_REQUIRED:
        if key not in table:
            raise InputError(f"[fileset] needs {key!r}", field=f"fileset.{key}")
    fileset = {}
    for key, quantity in FILESET_DISTS.items():
        written = table.get(key, FILESET_DEFAULTS.get(key))
        fileset[key] = distributions.parse_distribution(
            written, field=f"fileset.{key}", quantity=quantity, base_dir=base_dir
        )
    depth = table["max_depth"]
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= 64:
        raise InputError(f"must be a whole number from 0 to 64 (got {depth!r})", field="fileset.max_depth")
    fileset["max_depth"] = depth
    fraction = table.get("active_fraction", 1.0)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise InputError(f"must be a share in (0, 1] (got {fraction!r})", field="fileset.active_fraction")
    fileset["active_fraction"] = float(fraction)
    seed = table.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise InputError(f"must be a whole number >= 0 (got {seed!r})", field="fileset.seed")
    fileset["seed"] = seed
    return fileset


def _parse_scaling(table: dict) -> Scaling:
    tomlfile.check_keys(table, SCALING_KEYS, "scaling.")
    if ("files_per_op" in table) == ("bytes_per_op" in table):
        raise InputError("give exactly one of files_per_op or bytes_per_op", field="scaling")
    files_per_op = bytes_per_op = None
    if "files_per_op" in table:
        files_per_op = _positive_number(table["files_per_op"], "scaling.files_per_op")
        if files_per_op > MAX_FILES_PER_OP:
            raise InputError(
                f"must be at most {MAX_FILES_PER_OP:,} files per op/s (got {files_per_op:g})",
                field="scaling.files_per_op",
            )
    else:
        bytes_per_op = parse_size(table["bytes_per_op"], "scaling.bytes_per_op")
        if not 0 < bytes_per_op <= MAX_BYTES_PER_OP:
            raise InputError(
                f"must be above 0 and at most 1 TiB per op/s (got {bytes_per_op:g} bytes)", field="scaling.bytes_per_op"
            )
    min_files = table.get("min_files", 1)
    if isinstance(min_files, bool) or not isinstance(min_files, int) or not 1 <= min_files <= MAX_FILES:
        raise InputError(
            f"must be a whole number from 1 to {MAX_FILES:,} (got {min_files!r})", field="scaling.min_files"
        )
    return Scaling(files_per_op, bytes_per_op, min_files)


def _parse_mix(table: dict, base_dir: Path) -> tuple[dict[str, float], str | None]:
    if "mixfile" in table:
        if len(table) > 1:
            raise InputError("give either mixfile or op weights, not both", field="mix.mixfile")
        if not isinstance(table["mixfile"], str):
            raise InputError("must be a file name", field="mix.mixfile")
        return normalise(read_mixfile(base_dir / table["mixfile"]))
    tomlfile.check_keys(table, OPS, "mix.")
    for op, weight in table.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise InputError(f"must be a percentage or weight >= 0 (got {weight!r})", field=f"mix.{op}")
    if not any(weight > 0 for weight in table.values()):
        raise InputError("the mix has no op with a weight above 0", field="mix")
    return normalise(table)


def _parse_markov(table: dict, base_dir: Path) -> tuple[dict, dict[str, float], None]:
    if len(table) > 1:
        raise InputError("give either markov or op weights, not both", field="mix.markov")
    if not isinstance(table["markov"], str):
        raise InputError("must be a file name", field="mix.markov")
    chain, mix = markov.load_model(base_dir / table["markov"])
    return chain, mix, None


def _parse_io(table: dict, name: str, patterns: tuple[str, ...], base_dir: Path) -> dict:
    tomlfile.check_keys(table, ("size", "pattern"), f"{name}.")
    size = distributions.parse_distribution(
        table.get("size", DEFAULT_IO["size"]), field=f"{name}.size", quantity="size", base_dir=base_dir
    )
    return {"size": size, "pattern": _choice(table, "pattern", f"{name}.", patterns, DEFAULT_IO["pattern"])}


def trial_spec(
    workload: Workload,
    target: dict,
    *,
    rate: float,
    warmup_s: float,
    runtime_s: float,
    seed: int = 1,
    scale: float = 1.0,
    max_outstanding: int | None = None,
    arrivals: str | None = None,
    drain_timeout_s: float = 10.0,
) -> dict:
    """The engine's TrialSpec (SPEC.md) for one trial of `workload` at `rate` ops/s.

    `target` is the engine's target object (see targets.py); `arrivals`
    overrides the workload's own choice; `scale` multiplies the file set.
    """
    refuse_unsupported(target, workload.mix, workload.name)
    return {
        "schema": SPEC_SCHEMA,
        "target": target,
        "seed": seed,
        "load": {
            "rate": rate,
            "arrivals": arrivals or workload.arrivals,
            "warmup_s": warmup_s,
            "runtime_s": runtime_s,
            "max_outstanding": max_outstanding,
            "drain_timeout_s": drain_timeout_s,
        },
        "fileset": {**workload.fileset, "files": workload.files_at(rate, scale)},
        "mix": workload.mix,
        "read": workload.read,
        "write": workload.write,
        **({"markov": workload.markov} if workload.markov else {}),
    }
