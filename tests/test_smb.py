"""The SMB2/3 target against a real Samba smbd: URLs, validate, refused logins, shares and
dialects, a trial whose op counts match what smbd counted, and a server killed mid-trial."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from peakbench.cli import main
from peakbench.errors import InputError
from peakbench.targets import parse_target, target_label
from peakbench.workload import find_workload, trial_spec

sys.path.insert(0, str(Path(__file__).parent))
from corrupting_proxy import READ_CAUGHT, CorruptingProxy, assert_caught, flipped_content  # noqa: E402
from samba import Samba  # noqa: E402
from test_http_loop import run_sampled  # noqa: E402
from test_nfs import _engine, _run_watching_threads, assert_holds_are_a_small_share_of_the_latency  # noqa: E402
from test_nfs import _spec as nfs_spec  # noqa: E402


@pytest.fixture(scope="module")
def samba():
    yield from Samba().serve_module()


# ---------------------------------------------------------------- URLs


def test_smb_urls_parse_with_options_and_never_show_the_password():
    t = parse_target("smb://alice:s%40cret@files.example:4450/data/sets/a?domain=LAB&conns=4&timeout=2s&dialect=3.0")
    assert (t["kind"], t["host"], t["port"], t["share"], t["path"]) == ("smb", "files.example", 4450, "data", "sets/a")
    assert (t["user"], t["password"], t["domain"], t["connections"], t["timeout_ms"], t["dialect"]) == (
        "alice",
        "s@cret",
        "LAB",
        4,
        2000.0,
        "3.0",
    )
    assert "s%40cret" not in target_label(t) and target_label(t).startswith("smb://alice:***@files.example:4450/data")
    assert parse_target("smb://h/s")["path"] == "" and "port" not in parse_target("smb://h/s")


@pytest.mark.parametrize(
    "url, message",
    [
        ("smb://h", "no share"),
        ("smb:///share", "no server"),
        ("smb://h/s?colour=blue", "unknown option 'colour'"),
        ("smb://h/s?dialect=1.0", "dialect=1.0 must be one of 2.1, 3.0, 3.0.2, 3.1.1"),
        ("smb://h/s?signing=yes", "signing=yes must be one of off, if-offered, required"),
        ("smb://h/s?conns=0", "conns=0 must be 1 to 1024"),
        ("smb://u:pw@h/s?conns=2&conns=3", "given twice"),
    ],
)
def test_bad_smb_urls_are_one_line_input_errors(url, message):
    with pytest.raises(InputError) as raised:
        parse_target(url)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert ":pw@" not in str(raised.value)


# ---------------------------------------------------------------- validate and refusals


def test_validate_passes_every_smb2_operation_and_skips_those_smb2_lacks(samba, engine_path, cli, tmp_path):
    out = tmp_path / "v.json"
    done = cli("validate", samba.url(), "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["op"]: c for c in json.loads(out.read_text())["checks"]}
    assert {op for op, c in checks.items() if c["status"] == "skipped"} == {"symlink", "readlink", "pathconf"}
    assert checks["lock"]["detail"] == "locked and released"
    assert all(c["status"] == "pass" for op, c in checks.items() if op not in ("symlink", "readlink", "pathconf"))
    assert not any(samba.share_dir.iterdir())  # the scratch directory is gone


@pytest.mark.integration
def test_validate_catches_a_byte_smbd_returns_changed(samba, engine_path, cli, tmp_path):
    proxy = CorruptingProxy(("127.0.0.1", samba.port), flipped_content(16384))
    try:
        url = samba.url().replace(f"127.0.0.1:{samba.port}/", f"127.0.0.1:{proxy.port}/")
        done = cli("validate", url, "--json", str(tmp_path / "v.json"))
    finally:
        proxy.close()
    assert_caught(done, tmp_path / "v.json", proxy, "read", READ_CAUGHT)


def test_wrong_password_missing_share_and_refused_dialect_are_one_line_errors(samba, engine_path, capsys):
    # In-process `peakbench validate` (each a separate interpreter would cost seconds on a loaded machine).
    def validate(url: str) -> tuple[int, str]:
        status = main(["validate", url])
        return status, capsys.readouterr().err

    wrong = validate(samba.url(password="not-it"))
    assert wrong[0] == 2 and "STATUS_LOGON_FAILURE" in wrong[1], wrong
    missing = validate(samba.url(share="nope"))
    assert missing[0] == 2 and 'no share "nope"; it offers share' in missing[1], missing
    with Samba(max_protocol="SMB2_10") as old:
        refused = validate(old.url(options="dialect=3.0"))
    assert refused[0] == 2 and "refused SMB 3.0" in refused[1], refused
    for _, stderr in (wrong, missing, refused):
        assert len(stderr.strip().splitlines()) == 1 and "not-it" not in stderr


# ---------------------------------------------------------------- trials


def _spec(url: str, mix: dict, *, rate: float, runtime_s: float) -> dict:
    """test_nfs's small file set (50 files of 4 KiB), with a bounded drain."""
    spec = nfs_spec(url, mix, rate=rate, runtime_s=runtime_s)
    spec["load"]["drain_timeout_s"] = 3.0
    return spec


def test_smbd_counted_the_requests_the_result_reports(engine_path, samba):
    """Samba's own SMB2 counters (smbstatus --profile) as deltas around a 1.5 s trial at a fixed
    rate. Each op is a fixed set of SMB2 commands (target/smb/mod.rs): getattr and access are
    CREATE + QUERY_INFO + CLOSE, setattr CREATE + SET_INFO + CLOSE, null an ECHO, a read or write
    one READ or WRITE on a handle kept open, and a lock two LOCKs (lock, unlock) on it. The run's own set-up and restore account for
    the rest, which is bounded by the file set's size."""
    mix = {"null": 0.1, "getattr": 0.3, "access": 0.1, "setattr": 0.05, "read": 0.2, "write": 0.2, "lock": 0.05}
    spec = _spec(samba.url("counts"), mix, rate=400, runtime_s=1.5)
    _engine(engine_path, "prepare", spec)
    before = samba.smb2_counts()
    result = _engine(engine_path, "run", spec)
    after = samba.smb2_counts()
    seen = {name: after[name] - before[name] for name in after}
    ops = result["ops"]
    assert all(ops[op]["successes"] == ops[op]["count"] > 10 for op in mix), ops
    assert result["achieved_rate"] == pytest.approx(400, rel=0.1)
    assert seen["keepalive"] == ops["null"]["count"]
    assert seen["lock"] == 2 * ops["lock"]["count"]  # lock and unlock
    assert seen["read"] == ops["read"]["count"] + 1  # and one READ of the file set's manifest
    assert seen["setinfo"] >= ops["setattr"]["count"]
    queries = ops["getattr"]["count"] + ops["access"]["count"]
    # Set-up: the manifest, the file set's root and each handle the reads and writes open.
    assert queries <= seen["getinfo"] <= queries + 5
    assert seen["write"] - ops["write"]["count"] in range(0, 51)  # the restore rewrites grown files
    opened = queries + ops["setattr"]["count"]
    assert opened <= seen["create"] <= opened + 2 * 50 + 10
    assert seen["create"] - seen["close"] in range(0, 51)  # the kept handles close with the session


def test_a_killed_server_is_counted_and_the_trial_ends_in_time(engine_path, samba):
    spec = _spec(samba.url("killed", options="timeout=300ms"), {"getattr": 0.7, "null": 0.3}, rate=200, runtime_s=2.0)
    _engine(engine_path, "prepare", spec)
    killer = threading.Timer(0.7, samba.kill)
    killer.start()
    try:
        started = time.monotonic()
        result = _engine(engine_path, "run", spec, check=False)
        took = time.monotonic() - started
    finally:
        killer.join()
        samba.process = None
        samba.stop()
        samba.start()
    assert took < 2.0 + 3.0 + 5.0
    assert isinstance(result, dict), result.stderr
    ops = result["ops"]
    failed = sum(sum(op["errors"].values()) + op["timeouts"] + op["cancellations"] for op in ops.values())
    succeeded = sum(op["successes"] for op in ops.values())
    assert failed > 100 and succeeded > 50, ops
    assert set().union(*(op["errors"] for op in ops.values())) <= {"SMB_CONNECTION"}, ops


def test_a_mix_with_ops_smb2_lacks_is_refused_before_anything_is_prepared(samba, engine_path, tmp_path, capsys):
    url = samba.url("refused")
    status = main(
        ["run", "specsfs2008", "--target", url, "--rate", "50", "--runtime", "1", "--db", str(tmp_path / "pb.db")]
    )
    err = capsys.readouterr().err
    assert status == 2 and "readlink" in err and "smb:// targets cannot do" in err, err
    assert len(err.strip().splitlines()) == 1
    assert not any((samba.share_dir / "refused").iterdir())


def _cifs_on_few_files(samba, subdir: str, io_bytes: int) -> dict:
    """specsfs2008-cifs at 1,500 ops/s for 2 s over 5 files of `io_bytes`, every read and write `io_bytes` long."""
    spec = trial_spec(
        find_workload("specsfs2008-cifs"), parse_target(samba.url(subdir)), rate=1500, warmup_s=0, runtime_s=2
    )
    spec["fileset"].update(files=5, file_sizes={"kind": "constant", "value": io_bytes}, active_fraction=1.0)
    for io in ("read", "write"):
        spec[io] = {**spec[io], "size": {"kind": "constant", "value": io_bytes}}
    spec["load"]["drain_timeout_s"] = 3.0
    return spec


def _run_with_pauses(engine_path, samba, spec: dict) -> dict:
    """Run `spec` while smbd is paused four times for 0.2 s (SIGSTOP: a real server that stops answering
    for a moment), so that opens, reads and writes stay in flight while the workload moves on."""

    def pauses():
        for _ in range(4):
            time.sleep(0.25)
            os.killpg(samba.process.pid, signal.SIGSTOP)
            time.sleep(0.2)
            os.killpg(samba.process.pid, signal.SIGCONT)

    pausing = threading.Thread(target=pauses)
    pausing.start()
    try:
        return _engine(engine_path, "run", spec)
    finally:
        pausing.join()


def _file_closed(ops: dict) -> int:
    return sum(o["errors"].get("STATUS_FILE_CLOSED", 0) for o in ops.values())


def test_a_file_closed_and_reopened_while_its_open_is_in_flight_keeps_every_request(engine_path, samba):
    """The SPECsfs CIFS workload may close a file and open it again before the first open has answered.
    The second open took over the ops waiting on the first: they were never sent nor timed out, and were
    counted cancelled at the drain (546 of 3,000 here), while the first open's reply sent the second's ops on
    a handle the workload was closing (STATUS_FILE_CLOSED)."""
    spec = _cifs_on_few_files(samba, "reopen", 65536)
    _engine(engine_path, "prepare", spec)
    ops = _run_with_pauses(engine_path, samba, spec)["ops"]
    assert not {op: o["cancellations"] for op, o in ops.items() if o["cancellations"]}, ops
    assert _file_closed(ops) == 0, ops


def test_reads_and_writes_of_several_messages_finish_before_their_file_is_closed(engine_path, samba):
    """A read or write larger than one message (64 KiB) is several READs or WRITEs, one after another. They
    took the blocking way, which the workload's close of the same file did not wait for: the close went out
    between two of them, and the rest were answered STATUS_FILE_CLOSED (about 0.35% of a careful search's
    requests; 10 and 42 of about 800 reads and writes here). Every read and write here is 256 KiB, four
    messages."""
    spec = _cifs_on_few_files(samba, "multi", 4 * 65536)
    _engine(engine_path, "prepare", spec)
    ops = _run_with_pauses(engine_path, samba, spec)["ops"]
    assert ops["read"]["count"] > 100 and ops["write"]["count"] > 50, ops
    assert _file_closed(ops) == 0, ops
    assert not {op: o["cancellations"] for op, o in ops.items() if o["cancellations"]}, ops


def test_the_sender_reads_smbd_responses_itself_and_holds_them_only_with_many_in_flight(engine_path, samba):
    """Issue 17: no reader thread per connection, whose wake-up per response cost the client
    CPU; the leading sender reads smbd's responses itself. Offered more reads and path queries
    than smbd answers on one connection, many requests are in flight: each still completes with
    its 4 KiB or its answer (or, before smbd has granted enough credits, fails at once as
    SMB_CREDITS_EXHAUSTED), and the result says how long receive moderation held responses back
    (a tenth of the observed latency at most). At a light load nothing is held. With
    max_outstanding every call blocks, reading for itself or waiting for whoever reads."""
    mix = {"read": 0.5, "getattr": 0.5}
    flat_out = _spec(samba.url("moderated"), mix, rate=3000, runtime_s=0.5)
    _engine(engine_path, "prepare", flat_out)
    light = _spec(samba.url("moderated"), mix, rate=100, runtime_s=1.0)
    blocking = {**flat_out, "load": {**flat_out["load"], "rate": 200_000, "max_outstanding": 16}}
    results = {}
    for name, spec in (("flat_out", flat_out), ("light", light), ("blocking", blocking)):
        results[name], threads = _run_watching_threads(engine_path, spec)
        assert "pb-sender" in threads and not any("reader" in t for t in threads), (name, threads)
    for name, result in results.items():
        for op in mix:
            stats = result["ops"][op]
            assert stats["timeouts"] == 0 and stats["cancellations"] == 0, (name, op, stats)
            assert set(stats["errors"]) <= {"SMB_CREDITS_EXHAUSTED"}, (name, op, stats)
            assert stats["successes"] > 20, (name, op, stats)
        assert result["ops"]["read"]["bytes"] == 4096 * result["ops"]["read"]["successes"], name
    held = results["flat_out"]["receive_moderation"]
    assert held["mode"] == "adaptive" and held["hold_fraction_of_latency"] == 0.1 and held["hold_cap_us"] == 200.0
    # The sender may send up to half a hold late, so that one write carries the requests due meanwhile.
    assert held["send_slack_fraction_of_hold"] == 0.5, held
    assert 0 < held["holds"] and 0 < held["reads"], held
    assert_holds_are_a_small_share_of_the_latency(results["flat_out"])
    assert results["light"]["receive_moderation"]["holds"] == 0
    assert results["light"]["ops"]["getattr"]["errors"] == {}


def test_the_first_read_of_each_file_opens_it_without_a_sender_thread_of_its_own(engine_path, samba):
    """A file's first read opened its handle the blocking way: the open took a sender thread of its own
    (the trial's hand-off), which read responses for itself while it waited, so at a trial's start dozens
    of them (one per file) contended for the connection's receive side and stalled everything behind it.
    Now the open goes out pipelined, and the read when it answers: one sender does the whole trial, and
    every read still gets its 4 KiB."""
    spec = _spec(samba.url("first-reads"), {"read": 1.0}, rate=500, runtime_s=1.0)
    _engine(engine_path, "prepare", spec)
    result = _engine(engine_path, "run", spec)
    reads = result["ops"]["read"]
    assert reads["successes"] == reads["count"] > 400 and reads["errors"] == {}, reads
    assert reads["bytes"] == 4096 * reads["successes"], reads
    assert result["outstanding"]["threads"] == 1, result["outstanding"]


def _sampled_run(engine_path, spec: dict, samba, pause_at_s: float | None, pause_s: float = 1.0) -> tuple[dict, int]:
    """Run `spec`, with smbd stopped (SIGSTOP) for `pause_s` from `pause_at_s` unless that is None: the
    engine's result and the most threads /proc showed it with (test_http_loop's sampling)."""

    def pause():
        time.sleep(pause_at_s)
        os.killpg(samba.process.pid, signal.SIGSTOP)
        try:
            time.sleep(pause_s)
        finally:
            os.killpg(samba.process.pid, signal.SIGCONT)

    pausing = threading.Thread(target=pause)
    if pause_at_s is not None:
        pausing.start()
    try:
        return run_sampled(engine_path, spec)
    finally:
        if pause_at_s is not None:
            pausing.join()


def test_readdirs_removes_and_renames_wait_out_a_stalled_server_without_a_thread_each(engine_path, samba):
    """A readdir (CREATE, QUERY_DIRECTORY until STATUS_NO_MORE_FILES, CLOSE), a remove and a rename (after
    the close of the file's kept handle) took the blocking way: each held a sender thread while it waited,
    so while smbd stood still for a second the trial spawned a thread per readdir (BENCHMARKS.md §13: 7–383).
    Now each goes out pipelined, the next message when the one before answers: one sender does the trial,
    and every op still gets its verdict when smbd answers again. Every op succeeds: the getattrs and reads of
    renamed files name them as renamed, so the renames took effect. And a listing of a directory of 700 files
    (a readdirplus is two pages of names and attributes before STATUS_NO_MORE_FILES) has the bytes of every
    entry in the server's directory."""
    mix = {
        "readdir": 0.25,
        "readdirplus": 0.25,
        "getattr": 0.2,
        "read": 0.1,
        "rename": 0.1,
        "remove": 0.05,
        "create": 0.05,
    }
    spec = _spec(samba.url("stalled-listings"), mix, rate=150, runtime_s=3.0)
    spec["fileset"].update(files=1400, files_per_dir={"kind": "constant", "value": 700}, max_depth=1)
    spec["fileset"]["dirs_per_dir"] = {"kind": "constant", "value": 2}
    spec["load"]["drain_timeout_s"] = 5.0
    _engine(engine_path, "prepare", spec)
    result, peak_threads = _sampled_run(engine_path, spec, samba, pause_at_s=1.0)
    ops = result["ops"]
    assert ops["readdir"]["count"] + ops["readdirplus"]["count"] > 150, ops
    for op, stats in ops.items():
        assert stats["successes"] == stats["count"] > 0, (op, stats)
    assert result["outstanding"]["threads"] == 1, result["outstanding"]
    # The main thread, the monitor, the sender and a few more: not one per readdir waiting.
    assert peak_threads <= 8, peak_threads

    one_dir = _spec(samba.url("listed"), {"readdir": 0.5, "readdirplus": 0.5}, rate=20, runtime_s=1.0)
    one_dir["fileset"].update(files=700, files_per_dir={"kind": "constant", "value": 700}, max_depth=0)
    _engine(engine_path, "prepare", one_dir)
    listed = _engine(engine_path, "run", one_dir)
    (root,) = [p for p in (samba.share_dir / "listed").iterdir() if p.is_dir()]
    names = [".", "..", *os.listdir(root)]
    assert len(names) == 702, len(names)
    # An entry is a fixed part and its UTF-16 name, 8-byte aligned (a page's last entry may go unpadded).
    for op, fixed, pages in (("readdir", 12, 1), ("readdirplus", 104, 2)):
        want = sum((fixed + 2 * len(n) + 7) // 8 * 8 for n in names)
        stats = listed["ops"][op]
        assert stats["successes"] == stats["count"] > 5, (op, stats)
        assert want - 8 * pages <= stats["bytes"] / stats["count"] <= want, (op, stats["bytes"] / stats["count"], want)
