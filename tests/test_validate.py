"""`peakbench validate`: every operation checked in a scratch directory, then removed;
and the NFS client against a server that answers wrongly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from corrupting_proxy import READ_CAUGHT, CorruptingProxy, assert_caught, flipped_content, nfs_mode  # noqa: E402
from fake_nfs import FakeNfs  # noqa: E402
from fake_server import spec_without_files  # noqa: E402

OPS = {
    "null",
    "mkdir",
    "create",
    "write",
    "commit",
    "read",
    "setattr",
    "getattr",
    "lookup",
    "access",
    "rename",
    "link",
    "symlink",
    "readlink",
    "readdir",
    "readdirplus",
    "remove",
    "rmdir",
    "fsstat",
    "fsinfo",
    "pathconf",
    "lock",
}


def _check_all_passed(done, out: Path, where: Path) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert {c["op"] for c in result["checks"]} == OPS
    # Byte-range locks are SMB's alone so far: the others report them as skipped, not failed.
    lock = next(c for c in result["checks"] if c["op"] == "lock")
    assert lock["status"] == "skipped" and lock["detail"] == "the protocol has no such operation"
    others = [c for c in result["checks"] if c["op"] != "lock"]
    assert all(c["status"] == "pass" for c in others), [c for c in others if c["status"] != "pass"]
    assert result["ok"] and result["cleaned_up"]
    assert "all operations passed: 21 passed, 0 failed; scratch directory removed" in done.stdout
    assert list(where.iterdir()) == []  # nothing left behind


def test_validate_posix(engine_path, tmp_path, cli):
    target = tmp_path / "dir"
    target.mkdir()
    _check_all_passed(cli("validate", str(target), "--json", str(tmp_path / "v.json")), tmp_path / "v.json", target)


def test_validate_ganesha(engine_path, ganesha_server, nfs_url, tmp_path, cli):
    where = ganesha_server.export_dir / nfs_url.split("/export/")[1]
    _check_all_passed(cli("validate", nfs_url, "--json", str(tmp_path / "v.json")), tmp_path / "v.json", where)


@pytest.mark.integration
def test_validate_catches_a_byte_the_nfs_server_returns_changed(engine_path, ganesha_server, nfs_url, tmp_path, cli):
    proxy = CorruptingProxy(("127.0.0.1", 2049), flipped_content(16384))
    try:
        url = nfs_url.replace("nfs://127.0.0.1/", f"nfs://127.0.0.1:{proxy.port}/")
        done = cli("validate", url, "--json", str(tmp_path / "v.json"))
    finally:
        proxy.close()
    assert_caught(done, tmp_path / "v.json", proxy, "read", READ_CAUGHT)


@pytest.mark.integration
def test_validate_catches_a_mode_the_nfs_server_reports_wrong(engine_path, ganesha_server, nfs_url, tmp_path, cli):
    proxy = CorruptingProxy(("127.0.0.1", 2049), nfs_mode(0o600, 0o677))
    try:
        url = nfs_url.replace("nfs://127.0.0.1/", f"nfs://127.0.0.1:{proxy.port}/")
        done = cli("validate", url, "--json", str(tmp_path / "v.json"))
    finally:
        proxy.close()
    detail = r"SETATTR \.peakbench-validate-\d+/file: mode 677 read back after setting 600"
    assert_caught(done, tmp_path / "v.json", proxy, "setattr", detail)


def test_validate_names_what_failed_and_why(engine_path, tmp_path, cli):
    server = FakeNfs("ok-status", status=10004)  # NFS3ERR_NOTSUPP for everything
    try:
        done = cli("validate", server.url("timeout=2s"), "--json", str(tmp_path / "v.json"))
    finally:
        server.close()
    assert done.returncode == 1
    result = json.loads((tmp_path / "v.json").read_text())
    by_op = {c["op"]: c for c in result["checks"]}
    assert by_op["null"]["status"] == "pass" and by_op["fsinfo"]["status"] == "pass"
    assert by_op["mkdir"]["status"] == "fail"
    assert re.fullmatch(r"MKDIR \.peakbench-validate-\d+: NFS3ERR_NOTSUPP", by_op["mkdir"]["detail"])
    assert by_op["read"]["status"] == "skipped"
    assert "VALIDATION FAILED" in done.stdout


def test_validate_refuses_null_and_bad_urls(cli):
    assert cli("validate", "null://").returncode == 2
    done = cli("validate", "nfs://127.0.0.1/export?bogus=1")
    assert done.returncode == 2 and "unknown option 'bogus'" in done.stderr


@pytest.mark.parametrize("mode", ["garbage", "truncated", "wrong-xid", "oversized", "silent"])
def test_bad_replies_are_counted_never_a_hang(engine_path, mode):
    """Malformed, truncated, unmatched and oversized replies, and none at all: errors or
    timeouts counted per op; the engine finishes within its timeouts and exits 0."""
    server = FakeNfs(mode)
    try:
        target = {
            "kind": "nfs",
            "host": "127.0.0.1",
            "export": "/export",
            "port": server.port,
            "mount_port": server.port,
            "timeout_ms": 200.0,
            "retrans": 1,
        }
        spec = spec_without_files(target, {"fsstat": 0.5, "pathconf": 0.5}, 50, 1.0)
        started = time.monotonic()
        done = subprocess.run(
            [str(engine_path), "run", "-"], input=json.dumps(spec), capture_output=True, text=True, timeout=60
        )
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert elapsed < 1.0 + 2.0 + 5.0
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    failed = sum(sum(op["errors"].values()) + op["timeouts"] + op["cancellations"] for op in result["ops"].values())
    assert failed == sum(op["count"] + op["cancellations"] for op in result["ops"].values()) > 0
    if mode in ("silent", "wrong-xid"):
        assert sum(op["timeouts"] for op in result["ops"].values()) > 0
        assert sum(op["retransmissions"] for op in result["ops"].values()) > 0
