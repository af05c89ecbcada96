"""`peakbench sfs` with FS_PROTOCOL=cifs: `\\\\server\\share` mount points, the rc file's SMB
login, and the specsfs2008-cifs workload run against a real smbd, whose own counters match
what peakbench says it sent."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from peakbench.errors import InputError
from peakbench.sfs.rcfile import read_rcfile
from peakbench.sfs.run import plan

sys.path.insert(0, str(Path(__file__).parent))
from samba import PASSWORD, USER, Samba, ServerUnavailable  # noqa: E402


def test_cifs_shares_become_smb_targets_with_the_rc_files_login(tmp_path):
    rc = tmp_path / "sfs_rc"
    rc.write_text(
        "LOAD=100\nFS_PROTOCOL=cifs\nUSERNAME=alice\nPASSWORD='s3cret word'\nDOMAIN=LAB\nPROCS=2\n"
        "MNT_POINTS='\\\\files\\data\\sets \\\\files:4455\\other'\n"
    )
    assert read_rcfile(rc).mount_points == ("smb://files/data/sets", "smb://files:4455/other")
    chosen = plan(rc, spec_rounding=False)
    assert chosen.workload.name == "specsfs2008-cifs" and chosen.workload.markov is not None
    first = chosen.groups[0].target
    assert (first["host"], first["share"], first["path"], first["user"], first["password"], first["domain"]) == (
        "files",
        "data",
        "sets",
        "alice",
        "s3cret word",
        "LAB",
    )
    assert chosen.groups[1].target["port"] == 4455 and "s3cret" not in chosen.label()


@pytest.mark.parametrize(
    "text, line, field, words",
    [
        ("FS_PROTOCOL=cifs\nUSERNAME=a\nMNT_POINTS='\\\\srv\\s'\n", 2, "FS_PROTOCOL", "needs PASSWORD"),
        ("FS_PROTOCOL=cifs\nUSERNAME=a\nPASSWORD=b\nMNT_POINTS=srv:/x\n", 5, "MNT_POINTS", "is not a CIFS share"),
        ("FS_PROTOCOL=cifs\nUSERNAME=a\nPASSWORD=b\nMNT_POINTS='\\\\srv'\n", 5, "MNT_POINTS", "is not a CIFS share"),
        (
            "FS_PROTOCOL=cifs\nUSERNAME=a\nPASSWORD=b\nMNT_POINTS='\\\\srv\\s'\nMIXFILE=x.mix\n",
            6,
            "MIXFILE",
            "Markov model",
        ),
    ],
)
def test_cifs_rc_mistakes_are_one_line_at_their_line(tmp_path, text, line, field, words):
    rc = tmp_path / "sfs_rc"
    rc.write_text("LOAD=100\n" + text)
    with pytest.raises(InputError, match=words) as raised:
        read_rcfile(rc)
    assert (raised.value.file, raised.value.line, raised.value.field) == (rc, line, field)


@pytest.mark.integration
def test_an_rc_file_with_fs_protocol_cifs_runs_two_load_points_that_smbd_counted(engine_path, cli, tmp_path):
    try:
        server = Samba().start()
    except ServerUnavailable as error:
        pytest.fail(f"smbd could not be started: {error}")
    try:
        (server.share_dir / "sfs").mkdir()
        rc = tmp_path / "sfs_rc"
        # No warm-up, so each point's op counts cover every request it sent.
        rc.write_text(
            f"LOAD='40 80'\nFS_PROTOCOL=cifs\nUSERNAME={USER}\nPASSWORD='{PASSWORD}'\n"
            f"MNT_POINTS='\\\\127.0.0.1:{server.port}\\share\\sfs'\nWARMUP_TIME=0\nRUNTIME=1.5\n"
        )
        db = tmp_path / "p.db"
        before = server.smb2_counts()
        done = cli("sfs", str(rc), "--db", str(db))
        after = server.smb2_counts()
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    seen = {name: after[name] - before[name] for name in after}
    with sqlite3.connect(db) as connection:
        results = [json.loads(r) for (r,) in connection.execute("SELECT result FROM trials ORDER BY id")]
    assert [r["requested_rate"] for r in results] == [40, 80]
    sent: dict[str, int] = {}
    for result in results:
        for op, counts in result["ops"].items():
            assert counts["successes"] == counts["count"], (op, counts)
            sent[op] = sent.get(op, 0) + counts["count"]
    assert set(sent) <= {"open", "close", "read", "write", "commit", "lock", "fgetattr", "fsetattr"} | {
        "getsecurity",
        "getattr",
        "readdir",
        "fsinfo",
        "null",
    }
    assert sent["open"] > 10 and sent["read"] > 10 and sent["getattr"] > 10
    # Commands only the trials send, one for one: ECHO per null, LOCK and unlock per lock.
    assert seen["keepalive"] == sent.get("null", 0)
    assert seen["lock"] == 2 * sent.get("lock", 0)
    # The rest also serve the set-up (the file set's build, its manifest) and the restore after
    # each point; the trials' own are a floor the server must have reached.
    assert seen["getinfo"] >= sent["getattr"] + sent["fgetattr"] + sent.get("getsecurity", 0) + sent.get("fsinfo", 0)
    assert seen["setinfo"] >= sent.get("fsetattr", 0)
    assert seen["read"] >= sent["read"] and seen["flush"] >= sent.get("commit", 0)
    # Every path query, listing and fs query is a CREATE ... CLOSE compound; every open one CREATE.
    assert seen["create"] >= sent["open"] + sent["getattr"] + sent.get("readdir", 0) + sent.get("fsinfo", 0)
    assert seen["close"] >= sent["close"] + sent["getattr"] + sent.get("readdir", 0) + sent.get("fsinfo", 0)
    # The password is never shown, nor stored: a resume reads it from the rc file again.
    assert PASSWORD not in done.stdout + done.stderr
    assert PASSWORD.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("p.db*"))
