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


def _sessions(server: Samba) -> list[tuple[str, str]]:
    """(protocol, signing algorithm) of each session smbd has (`smbstatus -p`)."""
    done = subprocess.run(["smbstatus", "-s", str(server.config), "-p"], capture_output=True, text=True, timeout=30)
    rows = [line.split() for line in done.stdout.splitlines() if line[:1].isdigit()]
    return [(row[-3], row[-1]) for row in rows]


@pytest.mark.parametrize(
    "dialect, protocol, algorithm",
    [("2.1", "SMB2_10", "HMAC-SHA256"), ("3.0", "SMB3_00", "AES-128-CMAC"), ("3.1.1", "SMB3_11", "AES-128-CMAC")],
)
def test_signed_trials_succeed_and_smbd_counts_what_was_sent(engine_path, signing_samba, dialect, protocol, algorithm):
    mix = {"null": 0.2, "getattr": 0.4, "read": 0.2, "write": 0.2}
    url = signing_samba.url(f"signed-{dialect}", options=f"dialect={dialect}&signing=required")
    spec = _spec(url, mix, rate=200, runtime_s=1.0)
    _engine(engine_path, "prepare", spec)
    before = signing_samba.smb2_counts()
    seen_sessions: list[tuple[str, str]] = []
    probe = threading.Timer(0.5, lambda: seen_sessions.extend(_sessions(signing_samba)))
    probe.start()
    try:
        result = _engine(engine_path, "run", spec)
    finally:
        probe.join()
    after = signing_samba.smb2_counts()
    seen = {name: after[name] - before[name] for name in after}
    ops = result["ops"]
    assert all(ops[op]["successes"] == ops[op]["count"] > 20 for op in mix), ops
    assert seen_sessions == [(protocol, algorithm)]
    assert seen["keepalive"] == ops["null"]["count"]
    assert seen["read"] == ops["read"]["count"] + 1  # and the manifest's
    queries = ops["getattr"]["count"]
    assert queries <= seen["getinfo"] <= queries + 5  # and the set-up's (test_smb.py)


def test_unsigned_sessions_are_refused_in_one_line(signing_samba, engine_path):
    # The engine's refusal; `peakbench validate` shows its line and exits 2 (test_smb.py's refusals).
    target = parse_target(signing_samba.url(options="signing=off"))
    done = subprocess.run(
        [str(engine_path), "validate-target", "-"], input=json.dumps(target), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "the server requires signed messages; use signing=if-offered" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
