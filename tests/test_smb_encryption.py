"""Encrypted SMB 3.x against a real smbd configured with `server smb encrypt = required`:
for SMB 3.0 (AES-128-CCM) and 3.1.1 (AES-128-GCM, the cipher peakbench prefers), every op
succeeds, smbd reports the session as encrypted with that cipher, and its counters match
what the result says was sent. A client that will not encrypt is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from peakbench.errors import InputError
from peakbench.targets import parse_target

sys.path.insert(0, str(Path(__file__).parent))
from samba import Samba  # noqa: E402
from test_smb_signing import trial_counted_by_smbd  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def encrypting_samba():
    yield from Samba(extra_config="    server smb encrypt = required").serve_module()


@pytest.mark.parametrize(
    "dialect, encrypt, protocol, cipher",
    [("3.0", "desired", "SMB3_00", "AES-128-CCM"), ("3.1.1", "required", "SMB3_11", "AES-128-GCM")],
)
def test_encrypted_trials_succeed_and_smbd_counts_what_was_sent(
    engine_path, encrypting_samba, dialect, encrypt, protocol, cipher
):
    url = encrypting_samba.url(f"sealed-{dialect}", options=f"dialect={dialect}&encrypt={encrypt}&conns=2")
    seen_sessions = trial_counted_by_smbd(engine_path, encrypting_samba, url)
    assert [s[:2] for s in seen_sessions] == [(protocol, cipher)] * 2


@pytest.mark.parametrize(
    "options, message",
    [
        (
            "encrypt=off",
            "STATUS_ACCESS_DENIED with encrypt=off: the server may require encryption; use encrypt=desired",
        ),
        (
            "dialect=2.1&encrypt=required",
            "encrypt=required, but the server offers no cipher peakbench speaks for SMB 2.1",
        ),
        ("dialect=2.1", "STATUS_ACCESS_DENIED over SMB 2.1, which has no cipher: the server may require encryption"),
    ],
)
def test_sessions_that_will_not_encrypt_are_refused_in_one_line(encrypting_samba, engine_path, options, message):
    # The engine's refusal; `peakbench validate` shows its line and exits 2 (test_smb.py's refusals).
    target = parse_target(encrypting_samba.url(options=options))
    done = subprocess.run(
        [str(engine_path), "validate-target", "-"], input=json.dumps(target), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_an_unknown_encrypt_value_is_refused_naming_the_choices():
    with pytest.raises(InputError, match="encrypt=maybe must be one of off, desired, required"):
        parse_target("smb://server/share?encrypt=maybe")
