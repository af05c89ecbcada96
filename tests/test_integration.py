"""Real trials with the real engine on /dev/shm (tmpfs) and a loop-mounted ext4: what a user sees end to end."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from peakbench import fsimage
from peakbench.engine import Engine
from peakbench.errors import RunError
from peakbench.targets import parse_target
from peakbench.workload import find_workload, trial_spec

SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs /dev/shm")


@pytest.fixture
def shm_dir():
    path = Path(tempfile.mkdtemp(prefix="peakbench-test-", dir=SHM))
    yield path
    shutil.rmtree(path)


@pytest.fixture(params=["tmpfs", "ext4"])
def scratch_fs(request, tmp_path):
    """(a directory on a file system of the given type, that type); ext4 is loop-mounted (root)."""
    if request.param == "tmpfs":
        path = Path(tempfile.mkdtemp(prefix="peakbench-test-", dir=SHM))
        yield path, "tmpfs"
        shutil.rmtree(path)
        return
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("a loop-mounted ext4 needs root and mkfs.ext4")
    fs = fsimage.create(tmp_path / "fs", "ext4", size_mb=128)
    try:
        yield fs.mountpoint, "ext4"
    finally:
        fs.destroy()


def all_paths(root: Path) -> set[Path]:
    return {Path(dirpath, name) for dirpath, dirnames, filenames in os.walk(root) for name in dirnames + filenames}


def test_a_trial_of_a_canned_workload(engine_path, scratch_fs, cli, tmp_path):
    scratch, fstype = scratch_fs
    target = scratch / "target"
    target.mkdir()
    outside_before = all_paths(scratch) - all_paths(target)
    db, report = tmp_path / "p.db", tmp_path / "out.json"
    done = cli(
        "run",
        "web-server",
        "--target",
        str(target),
        "--rate",
        "200",
        "--warmup",
        "1",
        "--runtime",
        "3",
        "--db",
        str(db),
        "--json",
        str(report),
    )
    assert done.returncode == 0, done.stderr

    # The table, in the order of the mix.
    for heading in ("op", "mix %", "count", "mean", "stddev", "p50", "p99", "% time", "errors"):
        assert heading in done.stdout
    rows = [line.split("│")[1].strip() for line in done.stdout.splitlines() if line.startswith("│")]
    assert rows == ["getattr", "read", "lookup", "readdir", "fsstat", "access"]
    assert "offered 200.0 ops/s, achieved" in done.stdout

    # The JSON result.
    result = json.loads(report.read_text())
    assert result["requested_rate"] == 200.0
    assert result["achieved_rate"] == pytest.approx(200, rel=0.05)
    assert result["generator_saturated"] is False
    for name, op in result["ops"].items():
        assert {"count", "mean_ms", "p99_ms", "errors", "error_count"} <= set(op)
        assert op["error_count"] == 0, (name, op["errors"])
    assert {"mean_ms", "stddev_ms", "p50_ms", "p99_ms"} <= set(result["latency"])
    assert {"mean_ms", "p99_ms", "max_ms"} <= set(result["schedule_lag"])

    # The file set lives inside the target and nowhere else; the trial is in the store.
    assert all_paths(scratch) - all_paths(target) == outside_before
    assert result["fileset"]["files"] == find_workload("web-server").files_at(200)
    listing = cli("results", "list", "--db", str(db))
    assert listing.returncode == 0 and "web-server" in listing.stdout and "done" in listing.stdout
    shown = cli("results", "show", "1", "--db", str(db))
    assert shown.returncode == 0 and f"target file system: {fstype}" in shown.stdout
    exported = tmp_path / "trials.csv"
    assert cli("results", "export", "--csv", str(exported), "--db", str(db)).returncode == 0
    assert exported.read_text().splitlines()[1].startswith("1,")


def test_prepare_augments_and_leaves_only_the_file_set(engine_path, shm_dir, cli):
    target = shm_dir / "target"
    target.mkdir()
    first = cli("prepare", "news", "--target", str(target), "--rate", "20")
    assert first.returncode == 0, first.stderr
    files_before = all_paths(target)
    second = cli("prepare", "news", "--target", str(target), "--rate", "60")
    assert second.returncode == 0, second.stderr
    assert "100 already there" in second.stdout  # the 20 ops/s set is 100 files (min_files)
    assert files_before < all_paths(target)  # augmented, not rebuilt
    assert set(shm_dir.iterdir()) == {target}


def test_the_engine_itself_refuses_a_directory_it_did_not_create(engine_path, shm_dir):
    # peakbench checks this before calling the engine; the engine must refuse on its own too,
    # since it can be used alone.
    (shm_dir / "precious.txt").write_text("keep me")
    spec = trial_spec(find_workload("mail"), parse_target(str(shm_dir)), rate=10, warmup_s=0, runtime_s=1)
    with pytest.raises(RunError, match="refusing to prepare"):
        Engine(engine_path).prepare(spec)
    assert [p.name for p in shm_dir.iterdir()] == ["precious.txt"]


def test_a_trial_against_the_null_target(engine_path, cli, tmp_path):
    done = cli(
        "run",
        "specsfs97",
        "--target",
        "null://",
        "--rate",
        "1000",
        "--warmup",
        "0",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "p.db"),
    )
    assert done.returncode == 0, done.stderr
    assert "note: specsfs97: mix sums to 99, not 100; normalised to 100%" in done.stderr


DIRECTORY_WORKLOAD = """
name = "dirs"
description = "directories made and removed beside files created, removed and renamed"
[fileset]
files_per_dir = 20
dirs_per_dir = 4
max_depth = 1
file_sizes = {kind = "constant", value = "4KB"}
[scaling]
bytes_per_op = "4KB"
min_files = 100
[mix]
mkdir = 20
rmdir = 20
create = 15
remove = 15
rename = 10
getattr = 20
"""


def test_a_workload_that_makes_and_removes_directories_has_no_errors_of_its_own(engine_path, cli, shm_dir, tmp_path):
    # On a fresh directory every error would be the generator's own (an rmdir before any mkdir
    # named a directory its object set knew was not there): there must be none.
    workload = tmp_path / "dirs.toml"
    workload.write_text(DIRECTORY_WORKLOAD)
    out = tmp_path / "r.json"
    done = cli(
        "run",
        str(workload),
        "--target",
        str(shm_dir),
        "--rate",
        "300",
        "--warmup",
        "0",
        "--runtime",
        "3",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["outcomes"]["failed_share"] == 0, result["outcomes"]
    for name, op in result["ops"].items():
        assert op["error_count"] == 0, (name, op["errors"])
    assert result["ops"]["rmdir"]["successes"] > 100 and result["ops"]["mkdir"]["successes"] > 100
    assert result["restore"]["done"], result["restore"]
    assert "errors:" not in done.stdout
