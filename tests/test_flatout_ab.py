"""benchmarks/flatout_ab.py's fio peer does the work the engines do: its getattr job stats each file by a
path relative to the file-set root, as the engines and the raw loop pass to fstatat on the root's
descriptor, not by the absolute path (five components longer under /dev/shm, 1.26-1.29x the CPU per stat;
BENCHMARKS.md §2). Runs fio, so an integration test; skipped where fio is not installed."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import flatout_ab  # noqa: E402

pytestmark = pytest.mark.integration


def files_fio_adds(args: list[str], cwd) -> list[str]:
    """The names fio's job will open or stat, as `--debug=file` prints them ("add file NAME")."""
    done = subprocess.run(["fio", "--debug=file", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split("add file ", 1)[1].strip() for line in done.stdout.splitlines() if "add file " in line]


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
def test_the_fio_getattr_peer_stats_paths_relative_to_the_file_set_root(tmp_path):
    root = tmp_path / "fs"
    (root / "d1").mkdir(parents=True)
    for name in ["f0", "d1/f1", "d1/f2"]:
        (root / name).write_bytes(b"x" * 65536)  # the 64 KiB of bench_posix: the job reads in 64 KiB blocks
    jobs = {tool: (args, cwd) for tool, args, cwd in flatout_ab.fio_jobs("getattr", root, runtime_s=1)}
    args, cwd = jobs["fio"]
    assert sorted(files_fio_adds(args, cwd)) == ["./d1/f1", "./d1/f2", "./f0"]
    # The definition before, kept beside it as its own row: the absolute path.
    args, cwd = jobs["fio abs"]
    assert sorted(files_fio_adds(args, cwd)) == [f"{root}/d1/f1", f"{root}/d1/f2", f"{root}/f0"]
