"""Shared fixtures: the checkout's package on sys.path, the engine binary, and a CLI runner."""

from __future__ import annotations

import _posixsubprocess
import compileall
import os
import shutil
import socket
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
    """The checkout's engine: `cargo build --release` once (incremental), so the tests
    exercise this tree's engine, never a stale installed one.

    Without cargo, $PEAKBENCH_ENGINE or an installed binary stands in; tests that need
    the engine are skipped only when there is neither, and the run's summary says so
    loudly (see pytest_terminal_summary).
    """
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if os.access(cargo, os.X_OK):
        subprocess.run([cargo, "build", "--release", "--quiet"], cwd=REPO / "engine", check=True, timeout=1800)
        path = DEV_BUILD
    else:
        try:
            path = find_engine()
        except RunError:
            _engine_skips.append("no peakbench-engine binary and no cargo to build it")
            pytest.skip("peakbench-engine is absent and cargo is not available")
    os.environ["PEAKBENCH_ENGINE"] = str(path)  # CLI subprocesses use the same binary
    return path


# Tests that use these fixtures start the engine, the CLI or a server: they are integration tests.
PROCESS_FIXTURES = {"engine_path", "cli", "ganesha_server", "nfs_url", "nginx"}


def pytest_sessionstart(session):
    """Compile the checkout once. Where PYTHONDONTWRITEBYTECODE is set (as on this project's
    machines), each of the suite's hundreds of `peakbench` processes would otherwise compile
    every module again: about a second apiece."""
    compileall.compile_dir(REPO / "python", quiet=1)


def pytest_collection_modifyitems(items):
    for item in items:
        if PROCESS_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request, monkeypatch):
    """A test not marked integration must not start a process or listen on a socket, so that
    `pytest -m "not integration"` is the fast, process-free unit run it claims to be."""
    if request.node.get_closest_marker("integration"):
        return

    def refuse(*args, **kwargs):
        raise AssertionError(
            f"{request.node.nodeid} starts a process or a server: mark it @pytest.mark.integration "
            "(or use one of the fixtures in tests/conftest.py PROCESS_FIXTURES)"
        )

    for module, name in [
        (subprocess, "_fork_exec"),
        (_posixsubprocess, "fork_exec"),
        (os, "fork"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
        (socket.socket, "listen"),
    ]:
        monkeypatch.setattr(module, name, refuse)


def pytest_terminal_summary(terminalreporter):
    if _engine_skips:
        terminalreporter.write_line(f"WARNING: engine tests were SKIPPED ({_engine_skips[0]})", red=True, bold=True)


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`peakbench ARGS...` as a user runs it: a separate process, its exit status and output."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [sys.executable, "-m", "peakbench.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def ganesha_server():
    """A real nfs-ganesha on 127.0.0.1 (NFS port 2049, rpcbind 111) for the whole session.

    It must work wherever the suite runs (CI is root and installs the packages), so a
    server that cannot start fails the NFS tests instead of skipping them.
    """
    sys.path.insert(0, str(REPO / "tests"))
    from ganesha import Ganesha, ServerUnavailable

    server = Ganesha()
    try:
        server.start()
    except ServerUnavailable as error:
        pytest.fail(f"nfs-ganesha could not be started: {error}")
    yield server
    server.stop()


@pytest.fixture
def nfs_url(ganesha_server, request):
    """A fresh, empty directory of the export, as an nfs:// URL of its own."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return ganesha_server.url(name)


@pytest.fixture
def nginx(tmp_path):
    """Start nginx on 127.0.0.1 (a free port): `nginx(docroot, webdav=False, workers=1, access_log=True,
    shed_above=None)`
    returns a started peakbench.servers.nginx.Nginx; every server is stopped by PID at teardown.
    With access_log=True the log goes to a temporary file (server.access_log)."""
    from peakbench.servers import nginx as nginx_module

    if not nginx_module.available():
        pytest.skip("nginx is not installed")
    started = []

    def start(
        docroot: Path,
        *,
        webdav: bool = False,
        workers: int = 1,
        access_log: bool = True,
        shed_above: tuple[int, int] | None = None,
    ):
        log = tmp_path / f"access-{len(started)}.log" if access_log else None
        server = nginx_module.Nginx(
            docroot, webdav=webdav, workers=workers, access_log=log, shed_above=shed_above
        ).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
