"""Workload knobs: a workload regenerated along named dimensions (Fstress §5 and §5.1).

    with_knobs(base, {"memory_hit": 0.6, "disk_hit": 0.3})  ->  a new Workload

One function maps knobs to a workload, for `peakbench workloads model`,
`peakbench workloads derive` and the factors of surface plans alike.

The models of Fstress Figure 3 set the ops a client request causes (the
"model ops": getattr, lookup, read, create, write, commit, remove); every other
op of the base mix (readdir, fsstat, access, ...) keeps its share.
- web proxy (memory_hit H, disk_hit D): a memory hit checks the file's time
  stamp, one getattr; a miss looks the file up, then on a disk hit reads it
  sequentially (reads_per_file reads), on a disk miss creates it, writes it
  sequentially (as many writes), commits it and, with the cache full, evicts
  another (eviction: "full" = one remove per create, "none" = a cache still
  filling, or a number = removes per create). Per request:
      getattr H, lookup 1−H, read (1−H)·D·n,
      create = commit = (1−H)(1−D), write (1−H)(1−D)·n, remove (1−H)(1−D)·e
  H = 0.5625, D = 3/14, n = 2, e = 1 gives Fstress Table 2's proxy mix.
- web server (hit H): getattr H; lookup 1−H and (1−H)·n sequential reads; no
  writes. H = 0.8, n = 2 gives Table 2's web-server mix.
Reads and writes are sequential transfers of the base's read and write size.

Knobs that regenerate one dimension of the base (Fstress §5):
- zipf: the Zipf exponent of file popularity (its skew);
- read_write: the read:write ratio (a number or "A:B"), keeping the two ops'
  total share;
- mean_file_size: the file-size distribution scaled to this mean, so its shape
  (and the self-scaling bytes per op) stays; every size parameter is scaled;
- files_per_dir: the directory-size distribution scaled to this mean.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

from . import distributions
from .errors import InputError
from .mix import OPS
from .units import format_size, parse_size
from .workload import Workload, load_workload

PROXY_KNOBS = ("memory_hit", "disk_hit", "eviction")
SERVER_KNOBS = ("hit",)
MODEL_OPS = ("getattr", "lookup", "read", "create", "write", "commit", "remove")
KNOBS = (*PROXY_KNOBS, *SERVER_KNOBS, "reads_per_file", "zipf", "read_write", "mean_file_size", "files_per_dir")
DEFAULT_READS_PER_FILE = 2.0  # Fstress: "about two 8 KB reads per file" (docs/sources.md, Fstress)
EVICTIONS = {"full": 1.0, "none": 0.0}
MAX_ZIPF = 10.0  # rank 2 already gets 2^-10 of rank 1's weight
MAX_READS_PER_FILE = 1_000_000.0
MAX_MEAN_FILE_SIZE = 2.0**40


def _number(value: object, field: str, low: float, high: float, what: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(f"{value!r} is not a number ({what})", field=field) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InputError(f"must be {what} (got {value!r})", field=field)
    return float(value)


def _share(value: object, field: str) -> float:
    return _number(value, field, 0.0, 1.0, "a share from 0 to 1")


def _eviction(value: object, field: str) -> float:
    if isinstance(value, str) and value in EVICTIONS:
        return EVICTIONS[value]
    return _number(value, field, 0.0, 1.0, "full, none, or removes per create from 0 to 1")


def _ratio(value: object, field: str) -> tuple[float, float]:
    """(read, write) parts of a read:write ratio written as a number or "A:B"."""
    if isinstance(value, str) and ":" in value:
        parts = value.split(":")
        reads, writes = (_number(p.strip(), field, 0.0, math.inf, 'a ratio "A:B" of numbers >= 0') for p in parts[:2])
        if len(parts) != 2 or not math.isfinite(reads + writes) or reads + writes == 0:
            raise InputError(f'must be a ratio "A:B" of finite numbers, not both 0 (got {value!r})', field=field)
        return reads, writes
    return _number(value, field, 0.0, 1e12, 'a read:write ratio >= 0 (a number or "A:B")'), 1.0


def _size(value: object, field: str) -> float:
    size = parse_size(value, field) if isinstance(value, str) else _number(value, field, 0, math.inf, "bytes")
    if not 0 < size <= MAX_MEAN_FILE_SIZE:
        raise InputError(f"must be above 0 and at most 1 TiB (got {value!r})", field=field)
    return size


def _mean_count(value: object, field: str) -> float:
    return _number(
        value, field, 1e-9, distributions.MAX_COUNT, f"a mean count above 0, at most {distributions.MAX_COUNT:,}"
    )


def parse_assignment(text: str, field: str = "--set") -> tuple[str, str]:
    """KEY=VALUE of `derive --set`, the key checked against the knobs."""
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not value.strip():
        raise InputError(f"{text!r}: write KEY=VALUE, e.g. zipf=0.9", field=field)
    if key not in KNOBS:
        raise InputError(f"unknown knob {key!r}; knobs: {', '.join(KNOBS)}", field=field)
    return key, value.strip()


def with_knobs(base: Workload, knobs: dict[str, object], field: Callable[[str], str] = str) -> Workload:
    """`base` with `knobs` applied (see the module doc); `field(knob)` names a knob in errors."""
    for key in knobs:
        if key not in KNOBS:
            raise InputError(f"unknown knob {key!r}; knobs: {', '.join(KNOBS)}", field=field(key))
    changed = base
    notes = []
    proxy = [k for k in PROXY_KNOBS if k in knobs]
    if proxy and "hit" in knobs:
        raise InputError("hit is the web-server model's; memory_hit and disk_hit the web proxy's", field=field("hit"))
    if "reads_per_file" in knobs and not (proxy or "hit" in knobs):
        raise InputError(
            "reads_per_file goes with a model (memory_hit and disk_hit, or hit)", field=field("reads_per_file")
        )
    reads = (
        _number(knobs["reads_per_file"], field("reads_per_file"), 1e-9, MAX_READS_PER_FILE, "a number above 0")
        if "reads_per_file" in knobs
        else DEFAULT_READS_PER_FILE
    )
    if proxy:
        for needed in ("memory_hit", "disk_hit"):
            if needed not in knobs:
                raise InputError("the web-proxy model needs memory_hit and disk_hit", field=field(needed))
        memory, disk = _share(knobs["memory_hit"], field("memory_hit")), _share(knobs["disk_hit"], field("disk_hit"))
        evict = _eviction(knobs.get("eviction", "full"), field("eviction"))
        miss, write_miss = 1 - memory, (1 - memory) * (1 - disk)
        per_request = {
            "getattr": memory,
            "lookup": miss,
            "read": miss * disk * reads,
            "create": write_miss,
            "write": write_miss * reads,
            "commit": write_miss,
            "remove": write_miss * evict,
        }
        changed = _modelled(changed, per_request)
        notes.append(
            f"web-proxy model: memory hit {memory:g}, disk hit {disk:g}, {reads:g} reads per file, eviction {evict:g}"
        )
    elif "hit" in knobs:
        hit = _share(knobs["hit"], field("hit"))
        changed = _modelled(changed, {"getattr": hit, "lookup": 1 - hit, "read": (1 - hit) * reads})
        notes.append(f"web-server model: hit {hit:g}, {reads:g} reads per file")
    if "read_write" in knobs:
        reads_part, writes_part = _ratio(knobs["read_write"], field("read_write"))
        total = changed.mix.get("read", 0.0) + changed.mix.get("write", 0.0)
        if total == 0:
            raise InputError("the mix has no reads or writes to rebalance", field=field("read_write"))
        whole = reads_part + writes_part
        mix = {**changed.mix, "read": total * reads_part / whole, "write": total * writes_part / whole}
        changed = dataclasses.replace(changed, mix={op: share for op, share in mix.items() if share > 0})
        notes.append(f"read:write {reads_part:g}:{writes_part:g}")
    fileset = dict(changed.fileset)
    if "zipf" in knobs:
        alpha = _number(knobs["zipf"], field("zipf"), 0.0, MAX_ZIPF, f"a Zipf exponent from 0 to {MAX_ZIPF:g}")
        fileset["file_popularity"] = {"kind": "zipf", "alpha": alpha}
        notes.append(f"file popularity Zipf {alpha:g}")
    if "mean_file_size" in knobs:
        wanted = _size(knobs["mean_file_size"], field("mean_file_size"))
        fileset["file_sizes"] = _scaled_to(fileset["file_sizes"], wanted, field("mean_file_size"))
        notes.append(f"mean file size {format_size(wanted)}")
    if "files_per_dir" in knobs:
        wanted = _mean_count(knobs["files_per_dir"], field("files_per_dir"))
        fileset["files_per_dir"] = _scaled_to(fileset["files_per_dir"], wanted, field("files_per_dir"))
        notes.append(f"{wanted:g} files per directory")
    changed = dataclasses.replace(changed, fileset=fileset, mix_note=None)
    if notes:
        changed = dataclasses.replace(
            changed, description=f"{base.description} Regenerated: {'; '.join(notes)}.".strip()
        )
    return changed


def _modelled(base: Workload, per_request: dict[str, float]) -> Workload:
    """The base's mix with the model ops replaced by `per_request` and the other ops kept at their shares."""
    others = {op: share for op, share in base.mix.items() if op not in MODEL_OPS}
    room = 1 - math.fsum(others.values())
    total = math.fsum(per_request.values())
    mix = {**others, **{op: room * weight / total for op, weight in per_request.items() if weight > 0}}
    read = {**base.read, "pattern": "sequential"}
    write = {**base.write, "pattern": "sequential"}
    return dataclasses.replace(base, mix=mix, read=read, write=write)


def _scaled_to(dist: dict, wanted_mean: float, field: str) -> dict:
    mean = distributions.mean(dist)
    if not 0 < mean < math.inf:
        raise InputError(f"the base distribution's mean is {mean:g}: it cannot be scaled to a mean", field=field)
    return distributions.scaled(dist, wanted_mean / mean)


# Writing a workload file ------------------------------------------------------------------------


def to_document(workload: Workload) -> dict:
    """The workload as a TOML document that load_workload reads back to the same workload."""
    scaling = workload.scaling
    per_op = (
        {"files_per_op": scaling.files_per_op}
        if scaling.files_per_op is not None
        else {"bytes_per_op": scaling.bytes_per_op}
    )
    return {
        "name": workload.name,
        "description": workload.description,
        "source": workload.source,
        "fileset": workload.fileset,
        "scaling": {**per_op, "min_files": scaling.min_files},
        "mix": {op: workload.mix[op] for op in OPS if op in workload.mix},
        "read": workload.read,
        "write": workload.write,
        "load": {"arrivals": workload.arrivals},
        "cluster": {"fileset": workload.cluster_fileset},
    }


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be written to TOML")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"{type(value).__name__} has no TOML form")


def toml_text(document: dict) -> str:
    lines = [f"{key} = {_toml_value(value)}" for key, value in document.items() if not isinstance(value, dict)]
    for key, table in document.items():
        if isinstance(table, dict):
            lines += ["", f"[{key}]", *(f"{k} = {_toml_value(v)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def write_workload(workload: Workload, path: Path) -> None:
    """Write `workload` to `path` whole or not at all: built beside it, read back, then renamed."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.writing-{os.getpid()}.toml")
    try:
        partial.write_text(toml_text(to_document(workload)))
        load_workload(partial)  # what was written must be a workload run and search accept
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
