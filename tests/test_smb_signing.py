"""Signed SMB against a real smbd configured with `server signing = mandatory`: for SMB 2.1
(HMAC-SHA256), 3.0 (AES-128-CMAC) and 3.1.1 (AES-128-CMAC over the preauthentication hash),
every op succeeds, smbd reports the session as signed with that algorithm, and its counters
match what the result says was sent. Unsigned requests are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from peakbench.targets import parse_target

sys.path.insert(0, str(Path(__file__).parent))
from samba import Samba  # noqa: E402
from test_nfs import _engine  # noqa: E402
from test_smb import _spec  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def signing_samba():
    yield from Samba(extra_config="    server signing = mandatory").serve_module()


def sessions(server: Samba) -> list[tuple[str, str, str]]:
    """(protocol, encryption, signing) of each session smbd has (`smbstatus -p`)."""
    done = subprocess.run(["smbstatus", "-s", str(server.config), "-p"], capture_output=True, text=True, timeout=30)
    rows = [line.split() for line in done.stdout.splitlines() if line[:1].isdigit()]
    return [(row[-3], row[-2], row[-1]) for row in rows]


MIX = {"null": 0.2, "getattr": 0.4, "read": 0.2, "write": 0.2}


def trial_counted_by_smbd(engine_path, server: Samba, url: str) -> list[tuple[str, str, str]]:
    """Run a 1 s trial of MIX on `url`, check that every op succeeded and smbd counted what
    the result says was sent; return the sessions smbd listed halfway through."""
    spec = _spec(url, MIX, rate=200, runtime_s=1.0)
    _engine(engine_path, "prepare", spec)
    before = server.smb2_counts()
    seen_sessions: list[tuple[str, str, str]] = []
    probe = threading.Timer(0.5, lambda: seen_sessions.extend(sessions(server)))
    probe.start()
    try:
        result = _engine(engine_path, "run", spec)
    finally:
        probe.join()
    after = server.smb2_counts()
    seen = {name: after[name] - before[name] for name in after}
    ops = result["ops"]
    assert all(ops[op]["successes"] == ops[op]["count"] > 20 for op in MIX), ops
    assert seen["keepalive"] == ops["null"]["count"]
    assert seen["read"] == ops["read"]["count"] + 1  # and the manifest's
    queries = ops["getattr"]["count"]
    assert queries <= seen["getinfo"] <= queries + 5  # and the set-up's (test_smb.py)
    return seen_sessions


@pytest.mark.parametrize(
    "dialect, protocol, algorithm",
    [("2.1", "SMB2_10", "HMAC-SHA256"), ("3.0", "SMB3_00", "AES-128-CMAC"), ("3.1.1", "SMB3_11", "AES-128-CMAC")],
)
def test_signed_trials_succeed_and_smbd_counts_what_was_sent(engine_path, signing_samba, dialect, protocol, algorithm):
    url = signing_samba.url(f"signed-{dialect}", options=f"dialect={dialect}&signing=required")
    seen_sessions = trial_counted_by_smbd(engine_path, signing_samba, url)
    assert seen_sessions == [(protocol, "-", algorithm)]


def test_unsigned_sessions_are_refused_in_one_line(signing_samba, engine_path):
    # The engine's refusal; `peakbench validate` shows its line and exits 2 (test_smb.py's refusals).
    target = parse_target(signing_samba.url(options="signing=off"))
    done = subprocess.run(
        [str(engine_path), "validate-target", "-"], input=json.dumps(target), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "the server requires signed messages; use signing=if-offered" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
