"""Shared fixtures: the checkout's package on sys.path, the engine binary, and a CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))  # test the checkout, installed or not

from peakbench.engine import DEV_BUILD, find_engine  # noqa: E402
from peakbench.errors import RunError  # noqa: E402

_engine_skips: list[str] = []


@pytest.fixture(scope="session")
def engine_path() -> Path:
    """The engine binary: an installed or built one, else `cargo build --release` once.

    Tests that need it are skipped only when there is no binary and no cargo to
    build one, and the run's summary says so loudly (see pytest_terminal_summary).
    """
    try:
        path = find_engine()
    except RunError:
        cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
        if not os.access(cargo, os.X_OK):
            _engine_skips.append("no peakbench-engine binary and no cargo to build it")
            pytest.skip("peakbench-engine is absent and cargo is not available")
        subprocess.run([cargo, "build", "--release", "--quiet"], cwd=REPO / "engine", check=True)
        path = DEV_BUILD
    os.environ["PEAKBENCH_ENGINE"] = str(path)  # CLI subprocesses use the same binary
    return path


def pytest_terminal_summary(terminalreporter):
    if _engine_skips:
        terminalreporter.write_line(
            f"WARNING: engine tests were SKIPPED ({_engine_skips[0]})", red=True, bold=True
        )


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`peakbench ARGS...` as a user runs it: a separate process, its exit status and output."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [sys.executable, "-m", "peakbench.cli", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    )


@pytest.fixture
def cli():
    return run_cli
