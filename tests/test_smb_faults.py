"""SMB2 faults the real smbd cannot be made to show on demand (tests/fake_smb.py): garbage,
wrong NetBIOS lengths, silence, a stall mid-pipeline, withheld credits, expired sessions and a server that accepts
and never answers. Each is counted in the result, every wait is bounded, every trial ends
with a verdict. (A server killed mid-trial is tests/test_smb.py's, against the real smbd.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_server import spec_without_files  # noqa: E402
from fake_smb import HANDSHAKE_CREDITS, STALL_AFTER, FakeSmb  # noqa: E402

RATE, RUNTIME_S, TIMEOUT_MS = 100, 1.0, 200


def _run(
    engine_path: Path, url_target: dict, runtime_s: float = RUNTIME_S
) -> tuple[subprocess.CompletedProcess, float]:
    spec = spec_without_files(url_target, {"null": 1.0}, RATE, runtime_s)
    started = time.monotonic()
    done = subprocess.run(
        [str(engine_path), "run", "-"], input=json.dumps(spec), capture_output=True, text=True, timeout=60
    )
    return done, time.monotonic() - started


def _target(server: FakeSmb) -> dict:
    return {
        "kind": "smb",
        "host": "127.0.0.1",
        "port": server.port,
        "share": "share",
        "user": "u",
        "password": "p",
        "timeout_ms": float(TIMEOUT_MS),
    }


@pytest.mark.parametrize("mode", ["garbage", "long-frame", "short-frame", "silent", "stall", "no-credits", "expire"])
def test_faulty_replies_are_counted_and_every_trial_ends_in_time(engine_path, mode):
    server = FakeSmb(mode)
    try:
        done, took = _run(engine_path, _target(server), runtime_s=2.0 if mode == "expire" else RUNTIME_S)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    # The trial, its drain (bounded by the timeout) and the engine's start and stop.
    assert took < RUNTIME_S + 2.0 + 5.0
    result = json.loads(done.stdout)
    op = result["ops"]["null"]
    errors = op["errors"]
    # Every request has an outcome: none is left waiting past the drain (a cancellation).
    assert op["count"] == op["successes"] + sum(errors.values()) + op["timeouts"] and op["cancellations"] == 0, op
    assert op["count"] >= 0.9 * RATE * RUNTIME_S, op
    if mode in ("garbage", "long-frame", "short-frame"):
        # The first bad frame breaks the connection: what was in flight is malformed, and
        # requests made before the redial are connection errors.
        assert errors.get("SMB_MALFORMED_REPLY", 0) > 0 and set(errors) <= {"SMB_MALFORMED_REPLY", "SMB_CONNECTION"}, op
        assert result["smb"]["reconnects"] >= 1
        assert op["successes"] <= server.echoes
    elif mode == "silent":
        assert op["timeouts"] == op["count"] and not errors, op
    elif mode == "stall":
        # What the server answered succeeded; each request after the stall timed out in its turn.
        assert op["successes"] == STALL_AFTER and op["timeouts"] == op["count"] - STALL_AFTER and not errors, op
    elif mode == "no-credits":
        # The server saw exactly the requests the client had credit for; the rest failed at once.
        assert 0 < op["successes"] == server.echoes <= HANDSHAKE_CREDITS, op
        assert set(errors) == {"SMB_CREDITS_EXHAUSTED"} and op["timeouts"] == 0, op
    else:  # expire: each expired session is replaced by a fresh one, and the load goes on
        assert server.sessions >= 3 and result["smb"]["reauthentications"] == server.sessions - 1, result["smb"]
        assert errors.get("STATUS_NETWORK_SESSION_EXPIRED") == server.expired_replies > 0, op
        assert set(errors) <= {"STATUS_NETWORK_SESSION_EXPIRED", "SMB_CONNECTION"}, op
        assert op["successes"] >= 0.8 * op["count"], op


def test_a_server_that_accepts_and_never_answers_is_a_one_line_timeout(engine_path):
    server = FakeSmb("mute")
    try:
        done, took = _run(engine_path, _target(server))
    finally:
        server.close()
    assert took < 5.0, took
    assert done.returncode != 0 and not done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "NEGOTIATE: no reply (timed out)" in lines[0], done.stderr
