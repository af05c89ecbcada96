"""An SMB password never reaches the store: a search against smbd, killed and resumed, leaves no trace of it in
the SQLite file, and resuming the killed search takes it from PEAKBENCH_SMB_PASSWORD (a one-line error without)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from peakbench.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from samba import PASSWORD, Samba  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def samba():
    yield from Samba().serve_module()


def _store_bytes(db: Path) -> bytes:
    """The store as it lies on disk, with any journal beside it."""
    return b"".join(path.read_bytes() for path in db.parent.glob(db.name + "*") if path.is_file())


def _stored_trials(db: Path) -> int:
    try:
        with sqlite3.connect(db) as connection:
            return connection.execute("SELECT COUNT(*) FROM trials WHERE status = 'done'").fetchone()[0]
    except sqlite3.OperationalError:  # the store is not made yet
        return 0


@pytest.fixture(scope="module")
def killed_search(samba, tmp_path_factory):
    """The store of a search against smbd (password in its URL) killed after its first trial, as a crash
    would leave it."""
    db = tmp_path_factory.mktemp("store") / "search.db"
    search = ["search", "specsfs2008-cifs", "--target", samba.url("pw"), "--quick", "--warmup", "0"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    env.pop("PEAKBENCH_SMB_PASSWORD", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "peakbench.cli", *search, "--max-trials", "2", "--db", str(db)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while _stored_trials(db) < 1:
        assert process.poll() is None and time.monotonic() < deadline, "the search stored no trial"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    return db


def test_a_killed_search_keeps_no_smb_password_and_resumes_only_when_given_one(killed_search, monkeypatch, capsys):
    db = killed_search
    assert PASSWORD.encode() not in _store_bytes(db)
    monkeypatch.delenv("PEAKBENCH_SMB_PASSWORD", raising=False)
    assert main(["resume", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PEAKBENCH_SMB_PASSWORD" in err and "search 1" in err, err


@pytest.mark.slow
def test_a_search_resumed_with_the_password_from_the_environment_finishes_and_still_keeps_none(
    killed_search, monkeypatch, capsys
):
    db = killed_search
    monkeypatch.setenv("PEAKBENCH_SMB_PASSWORD", PASSWORD)
    assert main(["resume", "--db", str(db)]) in (0, 3)  # a peak, or none within 2 trials: finished either way
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT status FROM searches WHERE id = 1").fetchone()[0] == "done"
        failed = connection.execute("SELECT COUNT(*) FROM trials WHERE status != 'done'").fetchone()[0]
    assert _stored_trials(db) == 2 and failed == 0  # the resumed trial logged on with the password
    assert PASSWORD.encode() not in _store_bytes(db)
    capsys.readouterr()
    assert main(["results", "show", "2", "--db", str(db)]) == 0
    assert PASSWORD not in capsys.readouterr().out
