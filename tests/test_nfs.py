"""The NFSv3 target against a real nfs-ganesha: canned workloads, the file set as the
server stores it, NFS errors, timeouts, a server killed mid-trial, bad URLs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from peakbench.errors import InputError
from peakbench.targets import parse_target, target_label
from peakbench.workload import find_workload

CANNED = ["specsfs97", "specsfs2008", "web-server", "web-proxy", "db-tp", "peer-to-peer", "mail", "news"]


def export_path(server, url: str) -> Path:
    return server.export_dir / url.split("/export/", 1)[1].split("?")[0]


# ---------------------------------------------------------------- URLs


def test_nfs_urls_parse_with_options():
    t = parse_target("nfs://127.0.0.1/export")
    assert t == {"kind": "nfs", "host": "127.0.0.1", "export": "/export", "url": "nfs://127.0.0.1/export"}
    t = parse_target(
        "nfs://server:2050/a/b/?mountport=635&uid=1000&gid=100&rsize=65536&wsize=32768"
        "&conns=4&max_outstanding=64&timeout=2s&retrans=3"
    )
    assert t["port"] == 2050 and t["export"] == "/a/b" and t["mount_port"] == 635
    assert (t["uid"], t["gid"], t["rsize"], t["wsize"]) == (1000, 100, 65536, 32768)
    assert (t["connections"], t["max_outstanding"], t["timeout_ms"], t["retrans"]) == (4, 64, 2000.0, 3)
    assert parse_target("nfs://h/e?timeout=250")["timeout_ms"] == 250.0
    assert parse_target("nfs://h/e?recv_wait=100us")["recv_wait_us"] == 100.0
    assert parse_target("nfs://h/e?recv_wait=0.2ms")["recv_wait_us"] == 200.0
    assert parse_target("nfs://h/e?recv_wait=0")["recv_wait_us"] == 0.0  # off; absent: adaptive
    assert (parse_target("nfs://h/e?biod_reads=4&biod_writes=0")["biod_reads"], t.get("biod_reads")) == (4, None)
    assert target_label(t).startswith("nfs://server:2050/a/b/")


@pytest.mark.parametrize(
    "url, message",
    [
        ("nfs://127.0.0.1", "no export path"),
        ("nfs:///export", "no server"),
        ("nfs://h/e?colour=blue", "unknown option 'colour'"),
        ("nfs://h/e?conns=0", "conns=0 must be 1 to 1024"),
        ("nfs://h/e?rsize=12", "rsize=12 must be 512 to 1048576"),
        ("nfs://h/e?uid=x", "uid=x is not a whole number"),
        ("nfs://h/e?timeout=0", "must be longer than 0"),
        ("nfs://h:99999/e", "port is not a number"),
        ("nfs://h/e?conns=2&conns=3", "given twice"),
        ("nfs://h/e?recv_wait=2ms", "recv_wait=2ms must be 0 to 1000us"),
        ("nfs://h/e?recv_wait=soon", "recv_wait=soon must be 0 to 1000us"),
        ("nfs://h/e?biod_writes=33", "biod_writes=33 must be 0 to 32"),
    ],
)
def test_bad_nfs_urls_are_one_line_input_errors(url, message):
    with pytest.raises(InputError) as raised:
        parse_target(url)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


# ---------------------------------------------------------------- workloads


@pytest.mark.parametrize("name", CANNED)
def test_canned_workload_runs_against_ganesha(engine_path, ganesha_server, nfs_url, tmp_path, cli, name):
    out = tmp_path / "result.json"
    done = cli(
        "run",
        name,
        "--target",
        nfs_url,
        "--rate",
        "100",
        "--scale",
        "0.01",
        "--warmup",
        "0.5",
        "--runtime",
        "2",
        "--db",
        str(tmp_path / "pb.db"),
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["achieved_rate"] == pytest.approx(100, rel=0.1)
    assert not result["generator_saturated"]
    assert result["restore"]["done"], result["restore"]
    # Every op of the mix was sent, and every one of them completed without error.
    mix = find_workload(name).mix
    sent = set(result["mix_actual"])
    assert sent <= {op for op, weight in mix.items() if weight > 0}
    if result["fileset"]["symlinks"] == 0:
        # A set this small may have no symlink: the generator then sends no readlink at all.
        assert "readlink" not in result["ops"]
    for op, summary in result["ops"].items():
        assert summary["errors"] == {}, (op, summary["errors"])
        assert summary["timeouts"] == 0 and summary["cancellations"] == 0
        assert summary["successes"] == summary["count"]
    # The server holds the file set the engine prepared, restored to its prepared state.
    root = export_path(ganesha_server, nfs_url)
    fileset = root / result["fileset"]["id"]
    files = [p for p in fileset.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) == result["fileset"]["files"]
    assert sum(p.stat().st_size for p in files) == result["fileset"]["bytes"]
    assert (root / ".peakbench-manifest.json").exists()


def test_reads_and_writes_move_the_bytes_the_server_sees(engine_path, ganesha_server, nfs_url, tmp_path, cli):
    """db-tp's logical 256 KiB writes are split into transfers; the bytes counted are the bytes moved."""
    out = tmp_path / "result.json"
    done = cli(
        "run",
        "db-tp",
        "--target",
        nfs_url + "?wsize=16384&rsize=8192",
        "--rate",
        "50",
        "--scale",
        "0.01",
        "--warmup",
        "0",
        "--runtime",
        "2",
        "--db",
        str(tmp_path / "pb.db"),
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["ops"]["read"]["bytes"] > 0 and result["ops"]["write"]["bytes"] > 0
    assert result["ops"]["write"]["errors"] == {}


def test_prepare_over_nfs_builds_the_same_tree_as_posix(engine_path, ganesha_server, nfs_url, tmp_path, cli):
    local = tmp_path / "local"
    local.mkdir()
    for target in (nfs_url, str(local)):
        done = cli("prepare", "specsfs97", "--target", target, "--rate", "50", "--scale", "0.01")
        assert done.returncode == 0, done.stderr
    remote = export_path(ganesha_server, nfs_url)

    def tree(root: Path) -> dict:
        out = {}
        for p in sorted(root.rglob("*")):
            rel = str(p.relative_to(root))
            if rel.startswith(".peakbench-manifest"):
                continue
            out[rel] = (
                ("link", os.readlink(p)) if p.is_symlink() else ("dir",) if p.is_dir() else ("file", p.stat().st_size)
            )
        return out

    assert tree(remote) == tree(local)
    assert len(tree(remote)) > 100


def test_a_capped_pipeline_mixed_with_blocking_ops_completes_every_request(engine_path, ganesha_server, nfs_url):
    """GETATTRs pipelined under a cap, among WRITEs that block a sender: each blocking op hands
    receiving back to the connection's reader thread and the leader takes it again, so no
    reply may be left unread (that would show as timeouts and cancellations)."""
    spec = _spec(nfs_url, {"getattr": 0.9, "write": 0.1}, rate=20_000, runtime_s=2)
    spec["load"]["max_outstanding"] = 8
    _engine(engine_path, "prepare", spec)
    result = _engine(engine_path, "run", spec)
    assert result["completed"] > 0
    for op, summary in result["ops"].items():
        assert summary["errors"] == {}, (op, summary["errors"])
        assert summary["timeouts"] == 0 and summary["cancellations"] == 0, (op, summary)
        assert summary["successes"] == summary["count"]


def test_receive_moderation_is_adaptive_by_default_reports_its_holds_and_spares_a_light_load(
    engine_path, ganesha_server, nfs_url
):
    """By default the reader holds off after a read that found few replies while 8+ calls are
    in flight, for a tenth of the latency it observes. Flat out (64 in flight) it must hold,
    say so in the result, and still read every reply; at a light load it never holds; with
    recv_wait=0 it never holds; a fixed recv_wait holds that long."""
    flat_out = _spec(nfs_url, {"getattr": 1.0}, rate=200_000, runtime_s=1.0)
    flat_out["load"]["max_outstanding"] = 64
    _engine(engine_path, "prepare", flat_out)
    light = _spec(nfs_url, {"getattr": 1.0}, rate=200, runtime_s=1.0)
    off = {**flat_out, "target": parse_target(nfs_url + "?recv_wait=0")}
    fixed = {**flat_out, "target": parse_target(nfs_url + "?recv_wait=1ms")}
    results = {
        name: _engine(engine_path, "run", spec)
        for name, spec in (("flat_out", flat_out), ("light", light), ("off", off), ("fixed", fixed))
    }
    for name, result in results.items():
        getattr_ = result["ops"]["getattr"]
        assert getattr_["timeouts"] == 0 and getattr_["cancellations"] == 0, (name, getattr_)
        assert getattr_["successes"] == getattr_["count"] > 150, (name, getattr_)
    held = results["flat_out"]["receive_moderation"]
    assert held["mode"] == "adaptive" and held["hold_cap_us"] == 200.0 and held["hold_fraction_of_latency"] == 0.1
    assert 0 < held["holds"] <= held["reads"], held
    assert_holds_are_a_small_share_of_the_latency(results["flat_out"])
    assert results["light"]["receive_moderation"]["holds"] == 0
    assert results["light"]["latency"]["p50_ms"] < 1.0
    assert results["off"]["receive_moderation"] == {
        "mode": "off",
        "reads": results["off"]["receive_moderation"]["reads"],
        "holds": 0,
        "mean_hold_us": 0.0,
        "max_hold_us": 0.0,
    }
    fixed_holds = results["fixed"]["receive_moderation"]
    assert fixed_holds["mode"] == "fixed" and fixed_holds["hold_us"] == 1000.0
    assert fixed_holds["holds"] > 0 and fixed_holds["mean_hold_us"] >= 1000.0, fixed_holds


def assert_holds_are_a_small_share_of_the_latency(result: dict) -> None:
    """Adaptive holds are a tenth of the latency observed so far (a moving average), at most 200 us: all
    together they are a small share of the latency the trial measured. (Against the trial's mean latency
    a few holds in a moment of high latency can be long: 4 holds of 165 us beside a mean of 285 us.)"""
    held = result["receive_moderation"]
    completed = sum(op["successes"] for op in result["ops"].values())
    total_latency_us = completed * result["latency"]["mean_ms"] * 1000
    assert 0 < held["holds"] * held["mean_hold_us"] < total_latency_us / 10, (held, result["latency"])


def _run_watching_threads(engine_path, spec: dict) -> tuple[dict, set[str]]:
    """Run a trial and collect the names of the engine's threads while it runs."""
    run = subprocess.Popen(
        [str(engine_path), "run", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    run.stdin.write(json.dumps(spec))
    run.stdin.close()
    names: set[str] = set()
    while run.poll() is None:
        for task in Path(f"/proc/{run.pid}/task").glob("*/comm"):
            try:
                names.add(task.read_text().strip())
            except OSError:
                pass  # the thread ended meanwhile
        time.sleep(0.05)
    assert run.returncode == 0, run.stderr.read()
    return json.loads(run.stdout.read()), names


def test_one_thread_sends_reads_and_completes_a_pipelined_nfs_run(engine_path, ganesha_server, nfs_url):
    """Flat out at 16 in flight, the leading sender reads the replies itself: no reader thread
    per connection, whose wake-up and hand-off per reply cost the client CPU (issue 21). Every
    call still completes, and a light load's latency stays that of one round trip."""
    flat_out = _spec(nfs_url, {"getattr": 1.0}, rate=200_000, runtime_s=1.5)
    flat_out["load"]["max_outstanding"] = 16
    _engine(engine_path, "prepare", flat_out)
    result, names = _run_watching_threads(engine_path, flat_out)
    assert "pb-sender" in names and not any("reader" in n for n in names), names
    getattr_ = result["ops"]["getattr"]
    assert getattr_["successes"] == getattr_["count"] > 1000, getattr_
    assert getattr_["timeouts"] == 0 and getattr_["cancellations"] == 0, getattr_
    light = _engine(engine_path, "run", _spec(nfs_url, {"getattr": 1.0}, rate=200, runtime_s=1.0))
    assert light["ops"]["getattr"]["successes"] == light["ops"]["getattr"]["count"] > 150
    assert light["latency"]["p50_ms"] < 1.0


def test_ganesha_saw_the_op_mix_and_bytes_that_the_result_reports(engine_path, ganesha_server, nfs_url):
    """ganesha's own NFSv3 counters (over D-Bus) against the result, as deltas around the run
    (after prepare, which makes the files). Procedures that only the mix calls must match
    exactly; each logical write (one transfer here) is one WRITE and one COMMIT. The run's own
    setup reads the file-set manifest once (one READ of its size), looks up the file set and
    lists it to check it (LOOKUP, READDIRPLUS), asks FSINFO, and afterwards restores the files
    that writes grew (SETATTR): nothing else may show."""
    mix = {"getattr": 0.3, "access": 0.15, "fsstat": 0.1, "pathconf": 0.05, "read": 0.2, "write": 0.2}
    spec = _spec(nfs_url, mix, rate=600, runtime_s=1.0)
    before, result, after, seen = _counted_run(engine_path, ganesha_server, spec)
    ops = result["ops"]
    assert all(ops[op]["successes"] == ops[op]["count"] > 10 for op in mix), ops
    for op in ("getattr", "access", "fsstat", "pathconf", "write"):
        assert seen.pop(op.upper()) == ops[op]["count"], (op, seen, ops[op]["count"])
    assert seen.pop("COMMIT") == ops["write"]["count"]
    assert after["write_bytes"] - before["write_bytes"] == ops["write"]["bytes"] > 0
    manifest = next(export_path(ganesha_server, nfs_url).rglob(".peakbench-manifest.json"))
    assert seen.pop("READ") == ops["read"]["count"] + 1
    assert after["read_bytes"] - before["read_bytes"] == ops["read"]["bytes"] + manifest.stat().st_size
    assert {name for name, n in seen.items() if n} <= {"LOOKUP", "READDIRPLUS", "FSINFO", "SETATTR"}, seen


def test_transfers_in_flight_split_each_logical_io_as_ganesha_counts_it(engine_path, ganesha_server, nfs_url):
    """BIOD_MAX_READS/WRITES = 4: each 16 KiB logical read or write is four 4 KiB transfers sent
    four at a time; ganesha sees every one (and one COMMIT per write), with the bytes the result reports."""
    spec = _spec(nfs_url + "?rsize=4096&wsize=4096&biod_reads=4&biod_writes=4", {"read": 0.5, "write": 0.5}, rate=200,
                 runtime_s=1.0)  # fmt: skip
    spec["fileset"]["file_sizes"] = {"kind": "constant", "value": 16384}
    for io in ("read", "write"):
        spec[io] = {"size": {"kind": "constant", "value": 16384}, "pattern": "random"}  # the whole file, at 0
    before, result, after, seen = _counted_run(engine_path, ganesha_server, spec)
    ops = result["ops"]
    assert all(ops[op]["successes"] == ops[op]["count"] > 50 for op in ("read", "write")), ops
    manifest = next(export_path(ganesha_server, nfs_url).rglob(".peakbench-manifest.json"))
    reads_of_manifest = -(-manifest.stat().st_size // 4096)
    assert seen["READ"] == 4 * ops["read"]["count"] + reads_of_manifest
    assert (seen["WRITE"], seen["COMMIT"]) == (4 * ops["write"]["count"], ops["write"]["count"])
    assert after["write_bytes"] - before["write_bytes"] == ops["write"]["bytes"] == 16384 * ops["write"]["count"]


def test_a_receive_wait_beyond_the_limit_is_a_one_line_spec_error(engine_path, tmp_path):
    spec = _spec("nfs://127.0.0.1/export", {"getattr": 1.0}, rate=10, runtime_s=1.0)
    spec["target"]["recv_wait_us"] = 5000
    done = _engine(engine_path, "run", spec, check=False)
    assert done.returncode != 0
    assert "target.recv_wait_us" in done.stderr and "0 to 1000" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_more_than_32_transfers_in_flight_is_a_one_line_spec_error(engine_path, tmp_path):
    spec = _spec("nfs://127.0.0.1/export", {"read": 1.0}, rate=10, runtime_s=1.0)
    spec["target"]["biod_reads"] = 33
    done = _engine(engine_path, "run", spec, check=False)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "target.biod_reads" in done.stderr and "0 to 32" in done.stderr


def test_nfs_errors_are_counted_by_status(engine_path, ganesha_server, nfs_url, tmp_path):
    """Files removed behind the engine's back, on the server: every GETATTR of one is an NFS
    error, counted by its status. RMDIR, with no directory made by the trial to remove, is
    never sent: the generator issues nothing its own object set knows will fail."""
    spec = _spec(nfs_url, {"rmdir": 0.5, "getattr": 0.5}, rate=200, runtime_s=1.0)
    _engine(engine_path, "prepare", spec)
    removed = [p for p in export_path(ganesha_server, nfs_url).rglob("f*") if p.is_file()]
    for path in removed[: len(removed) // 2]:
        path.unlink()
    result = _engine(engine_path, "run", spec)
    assert set(result["ops"]) == {"getattr"} and result["mix_actual"] == {"getattr": 1.0}
    getattr_ = result["ops"]["getattr"]
    assert getattr_["errors"] and all(kind.startswith("NFS3ERR_") for kind in getattr_["errors"]), getattr_
    assert 0 < getattr_["successes"] < getattr_["count"]
    assert result["outcomes"]["errors"] == sum(getattr_["errors"].values())


def test_a_stopped_server_times_out_and_a_killed_one_fails_cleanly(engine_path, ganesha_server, nfs_url):
    spec = _spec(nfs_url + "?timeout=300ms&retrans=1", {"getattr": 1.0}, rate=100, runtime_s=2.0, warmup_s=0.0)
    spec["load"]["drain_timeout_s"] = 3.0
    _engine(engine_path, "prepare", spec)
    # A server that stops answering: every request in the pause times out after one retransmission.
    pid = ganesha_server.pid
    timer = threading.Timer(0.5, os.kill, (pid, signal.SIGSTOP))
    timer.start()
    resume = threading.Timer(1.5, os.kill, (pid, signal.SIGCONT))
    resume.start()
    try:
        started = time.monotonic()
        result = _engine(engine_path, "run", spec)
        assert time.monotonic() - started < 2.0 + 3.0 + 5.0
    finally:
        timer.join()
        resume.join()
        os.kill(pid, signal.SIGCONT)
    getattr_ = result["ops"]["getattr"]
    assert getattr_["timeouts"] > 0 or getattr_["errors"], getattr_
    assert getattr_["retransmissions"] > 0
    assert getattr_["successes"] > 0
    # A server killed mid-trial: the trial ends within its timeouts and the engine exits cleanly.
    killer = threading.Timer(0.7, ganesha_server.kill)
    killer.start()
    try:
        started = time.monotonic()
        result = _engine(engine_path, "run", spec, check=False)
        assert time.monotonic() - started < 2.0 + 3.0 + 10.0
    finally:
        killer.join()
        ganesha_server.start()
    if isinstance(result, dict):
        failed = sum(sum(op["errors"].values()) + op["timeouts"] + op["cancellations"] for op in result["ops"].values())
        assert failed > 0
    else:
        assert result.returncode == 1 and result.stderr.strip()


def test_directories_made_and_removed_over_nfs_give_no_errors(engine_path, ganesha_server, nfs_url):
    # Requests overlap on the pipelined connection: rmdir takes the oldest directory the trial
    # made, never one its object set knows is gone or not yet made.
    mix = {"mkdir": 0.2, "rmdir": 0.2, "create": 0.15, "remove": 0.15, "rename": 0.1, "getattr": 0.2}
    spec = _spec(nfs_url, mix, rate=300, runtime_s=2.0)
    _engine(engine_path, "prepare", spec)
    result = _engine(engine_path, "run", spec)
    assert result["outcomes"]["failed_share"] == 0, (
        result["outcomes"],
        {k: o["errors"] for k, o in result["ops"].items()},
    )
    assert result["ops"]["rmdir"]["successes"] > 50
    assert result["restore"]["done"], result["restore"]


def test_a_paused_server_times_out_and_its_timeouts_are_no_goodput(engine_path, ganesha_server, nfs_url):
    # ganesha stopped (SIGSTOP) for 1.5 s of a 3 s window at 100 ops/s: the requests due in the
    # pause time out (300 ms, one retransmission) and complete in the window, but achieved
    # counts only successful replies.
    spec = _spec(nfs_url + "?timeout=300ms&retrans=1", {"getattr": 1.0}, rate=100, runtime_s=3.0, warmup_s=0.5)
    spec["load"]["drain_timeout_s"] = 3.0
    _engine(engine_path, "prepare", spec)
    pid = ganesha_server.pid
    pause = threading.Timer(1.0, os.kill, (pid, signal.SIGSTOP))
    resume = threading.Timer(2.5, os.kill, (pid, signal.SIGCONT))
    pause.start()
    resume.start()
    try:
        result = _engine(engine_path, "run", spec)
    finally:
        pause.join()
        resume.join()
        os.kill(pid, signal.SIGCONT)
    outcomes = result["outcomes"]
    assert outcomes["timeouts"] > 50, outcomes  # about 1.5 s x 100/s, less the requests that got through the retry
    assert outcomes["succeeded"] + outcomes["timeouts"] + outcomes["errors"] + outcomes["cancelled"] == result["sent"]
    assert result["achieved_rate"] == pytest.approx(outcomes["succeeded"] / 3.0, abs=100 / 3.0 * 0.5)
    assert result["achieved_rate"] < 0.9 * result["requested_rate"], result["achieved_rate"]
    assert result["completed_rate"] > result["achieved_rate"] + 10
    assert outcomes["failed_share"] > 0.1


def test_unreachable_server_and_missing_export_are_one_line_errors(engine_path, ganesha_server, tmp_path, cli):
    done = cli(
        "run",
        "mail",
        "--target",
        "nfs://127.0.0.1/no-such-export",
        "--rate",
        "10",
        "--scale",
        "0.01",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "pb.db"),
    )
    assert done.returncode == 1
    assert "nfs://127.0.0.1/no-such-export: MOUNT MNT /no-such-export" in done.stderr
    # ... and names what the server does export (MOUNT EXPORT), so the fix is plain.
    assert "; the server exports /export" in done.stderr
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    url = f"nfs://127.0.0.1:{free}/export?mountport={free}&timeout=500ms"
    done = cli(
        "run",
        "mail",
        "--target",
        url,
        "--rate",
        "10",
        "--scale",
        "0.01",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "pb.db"),
    )
    assert done.returncode == 1
    assert f"{url}: MOUNT MNT /export at 127.0.0.1:{free}: connection: connect to" in done.stderr


# ---------------------------------------------------------------- helpers


def _spec(url: str, mix: dict, *, rate: float, runtime_s: float, warmup_s: float = 0.0) -> dict:
    return {
        "schema": "peakbench.trial-spec/1",
        "target": parse_target(url),
        "seed": 1,
        "load": {"rate": rate, "warmup_s": warmup_s, "runtime_s": runtime_s},
        "fileset": {
            "seed": 1,
            "files": 50,
            "files_per_dir": {"kind": "constant", "value": 10},
            "dirs_per_dir": {"kind": "constant", "value": 3},
            "max_depth": 2,
            "file_sizes": {"kind": "constant", "value": 4096},
        },
        "mix": mix,
    }


def _counted_run(engine_path, ganesha_server, spec: dict) -> tuple[dict, dict, dict, dict]:
    """Prepare, then run with ganesha's NFSv3 counters read around the run: (before, result, after,
    calls seen per procedure)."""
    _engine(engine_path, "prepare", spec)
    before = ganesha_server.nfs3_stats()
    result = _engine(engine_path, "run", spec)
    after = ganesha_server.nfs3_stats()
    return (
        before,
        result,
        after,
        {name: after["calls"].get(name, 0) - before["calls"].get(name, 0) for name in after["calls"]},
    )


def _engine(engine_path, command: str, spec: dict, check: bool = True):
    done = subprocess.run(
        [str(engine_path), command, "-"], input=json.dumps(spec), capture_output=True, text=True, timeout=120
    )
    if not check and done.returncode != 0:
        return done
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
