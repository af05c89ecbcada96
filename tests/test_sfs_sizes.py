"""The canned specsfs2008 at SPECsfs2008's sizes: each size the User's Guide states (docs/sources.md,
SPECsfs2008: 120 MB of file set per op/s, 30% of the files accessed, files up to 32 MB, logical
reads and writes up to 256 KB), checked on the file set and op stream the engine generates."""

from __future__ import annotations

import math
import os

import pytest
from peakbench import distributions
from peakbench.engine import Engine
from peakbench.workload import find_workload, trial_spec, with_mixfile

pytestmark = pytest.mark.integration

KiB = 1024
MiB = 1024 * KiB
SPEC_SCALE = 1000  # the canned workload keeps a thousandth of SPEC's file set per op/s by default
SPEC_BYTES_PER_OP = 120e6
SPEC_MAX_FILE = 32 * MiB
SPEC_MAX_TRANSFER = 256 * KiB
SPEC_ACCESSED = 0.3


@pytest.fixture(scope="module")
def workload():
    return find_workload("specsfs2008")


def sizes_on_disk(root) -> list[int]:
    return [
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(root)
        for name in names
        if not name.startswith(".") and not os.path.islink(os.path.join(folder, name))
    ]


def test_files_reach_32_mb_and_no_further(engine_path, workload, tmp_path):
    # 946 files (about 70 MB): enough that the 32 MiB bucket (1 file in 600) is drawn.
    spec = trial_spec(workload, {"kind": "posix", "path": str(tmp_path)}, rate=1000, warmup_s=0, runtime_s=1)
    Engine(engine_path).prepare(spec)
    sizes = sizes_on_disk(tmp_path)
    assert len(sizes) == spec["fileset"]["files"]
    assert max(sizes) == SPEC_MAX_FILE
    assert set(sizes) <= {value for value, _ in workload.fileset["file_sizes"]["points"]}
    assert sum(size > 1 * MiB for size in sizes) >= 2  # a tail above SFS 3.0's 1 MB, not one outlier


def test_spec_scale_builds_120_mb_of_file_set_per_op(engine_path, workload):
    rate = 10.0
    spec = trial_spec(workload, {"kind": "null"}, rate=rate, warmup_s=0, runtime_s=0.2, scale=SPEC_SCALE)
    built = Engine(engine_path).run(spec)["fileset"]
    # The file set the engine generates, not only the expectation it was sized by: a drawn set of
    # about 9,500 files lands within the guide's 10% growth allowance of 120 MB per op/s.
    assert built["files"] == spec["fileset"]["files"]
    assert built["bytes"] / rate == pytest.approx(SPEC_BYTES_PER_OP, rel=0.1)


def test_thirty_percent_of_the_files_are_read_or_written(engine_path, workload):
    # ~950 files; 2 s at 5,000 ops/s draws about 2,800 reads and writes, enough to touch every
    # accessible file many times over, so the files touched are the accessible ones.
    spec = trial_spec(workload, {"kind": "null"}, rate=5000, warmup_s=0, runtime_s=2, scale=0.2)
    spec["trace_ops"] = 100_000
    result = Engine(engine_path).run(spec)
    files = spec["fileset"]["files"]
    # Files the trial's creates add (indices past the set) are written too; the guide's share is of the
    # files created before the run.
    touched = {index for op, index in result["op_trace"] if op in ("read", "write") and index < files}
    tolerance = 4 * math.sqrt(SPEC_ACCESSED * (1 - SPEC_ACCESSED) / files)  # each file is accessible or not
    assert len(touched) / files == pytest.approx(SPEC_ACCESSED, abs=tolerance)


def test_logical_reads_and_writes_go_up_to_256_kb(engine_path, workload, tmp_path):
    assert workload.read["size"] == workload.write["size"]  # one distribution for both
    assert max(value for value, _ in workload.write["size"]["points"]) == SPEC_MAX_TRANSFER
    # The op stream: the write sizes the engine draws (the canned file set, writes only) average the
    # distribution's mean, far above SFS 3.0's fixed 8 KiB.
    (tmp_path / "writes.mix").write_text("SFS MIXFILE VERSION 2\nwrite 100%\n")
    writes = with_mixfile(workload, tmp_path / "writes.mix")
    target = tmp_path / "target"
    target.mkdir()
    spec = trial_spec(writes, {"kind": "posix", "path": str(target)}, rate=300, warmup_s=0, runtime_s=2)
    engine = Engine(engine_path)
    engine.prepare(spec)
    ops = engine.run(spec)["ops"]["write"]
    mean = distributions.mean(workload.write["size"])
    points = workload.write["size"]["points"]
    spread = math.sqrt(sum(w * v * v for v, w in points) / sum(w for _, w in points) - mean * mean)
    assert ops["count"] >= 500 and ops["errors"] == {}
    assert ops["bytes"] / ops["count"] == pytest.approx(mean, abs=4 * spread / math.sqrt(ops["count"]))
