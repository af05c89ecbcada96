"""The HTTP target against a real nginx: the canned web workloads, WebDAV writes, faults."""

import collections
import json
import random
import socket
import threading
import time
from pathlib import Path

import pytest
from peakbench import searching
from peakbench import store as store_module
from peakbench.controller import SearchSettings, saturated, saturation_signal
from peakbench.engine import Engine
from peakbench.servers.nginx import free_port
from peakbench.targets import parse_target
from peakbench.workload import find_workload


def tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_web_server_against_read_only_nginx_with_a_docroot(engine_path, nginx, cli, tmp_path):
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot)  # no WebDAV: GET and HEAD only
    report, db = tmp_path / "out.json", tmp_path / "p.db"
    done = cli(
        "run",
        "web-server",
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--rate",
        "300",
        "--warmup",
        "0",
        "--runtime",
        "3",
        "--db",
        str(db),
        "--json",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    assert result["achieved_rate"] == pytest.approx(300, rel=0.05)
    assert result["generator_saturated"] is False
    for name, op in result["ops"].items():
        assert op["error_count"] == 0, (name, op["errors"])
    assert result["ops"]["read"]["bytes"] > 0 and result["output_mbit_s"] > 0

    # What nginx says it served is what peakbench says it sent (no warm-up: every request is counted).
    served = collections.Counter(method for method, _, _, _ in server.access_log_entries())
    ops = {name: op["count"] for name, op in result["ops"].items()}
    assert result["issued"] == sum(ops.values())
    assert served["GET"] == ops["read"] + ops.get("readdir", 0)
    assert served["HEAD"] == ops["getattr"] + ops["lookup"] + ops.get("access", 0) + ops.get("fsstat", 0)
    assert served["OPTIONS"] == 2  # the engine's reachability probe, at prepare and at run
    # Bytes of the file GETs (nginx counts a chunked directory listing with its chunk framing).
    file_bytes = sum(
        size for method, path, status, size in server.access_log_entries() if method == "GET" and not path.endswith("/")
    )
    assert file_bytes == result["ops"]["read"]["bytes"]
    assert all(status in (200, 206) for method, _, status, _ in server.access_log_entries() if method != "OPTIONS")

    listing = cli("results", "list", "--db", str(db))
    assert listing.returncode == 0 and server.url in listing.stdout
    shown = cli("results", "show", "1", "--db", str(db))
    assert shown.returncode == 0 and "target file system:" in shown.stdout  # the docroot's


def test_web_proxy_writes_through_webdav_and_restores_the_file_set(engine_path, nginx, cli, tmp_path):
    docroot = tmp_path / "dav"
    docroot.mkdir()
    server = nginx(docroot, webdav=True)
    prepared = cli("prepare", "web-proxy", "--target", server.url, "--rate", "200")
    assert prepared.returncode == 0, prepared.stderr
    before = tree(docroot)
    assert len(before) > 100 and before.pop(".peakbench-manifest.json")
    report = tmp_path / "out.json"
    done = cli(
        "run",
        "web-proxy",
        "--target",
        server.url,
        "--rate",
        "200",
        "--warmup",
        "0",
        "--runtime",
        "3",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    for name, op in result["ops"].items():
        assert op["error_count"] == 0, (name, op["errors"])
    methods = collections.Counter(method for method, _, _, _ in server.access_log_entries())
    assert methods["PUT"] >= result["ops"]["write"]["count"] + result["ops"]["create"]["count"]
    assert methods["DELETE"] >= result["ops"]["remove"]["count"]
    assert result["restore"]["done"] is True
    after = tree(docroot)
    after.pop(".peakbench-manifest.json")
    assert after == before  # created files removed, removed ones back, written ones at their size


def test_a_read_only_server_cannot_take_the_web_proxy_mix(engine_path, nginx, cli, tmp_path):
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot)
    done = cli(
        "run",
        "web-proxy",
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--rate",
        "50",
        "--warmup",
        "0",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "p.db"),
    )
    assert done.returncode == 1
    assert "cannot do" in done.stderr


def test_no_server_is_one_clear_line(engine_path, cli, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/"
    done = cli("prepare", "web-server", "--target", url, "--rate", "50")
    assert done.returncode == 1
    assert "ECONNREFUSED" in done.stderr and url in done.stderr
    bad = cli("prepare", "web-server", "--target", "https://127.0.0.1/", "--rate", "50")
    assert bad.returncode == 2 and "https:// takes one option: ca=FILE" in bad.stderr


def test_search_finds_its_way_on_an_http_target(engine_path, nginx, cli, tmp_path):
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot)
    db = tmp_path / "p.db"
    done = cli(
        "search",
        "web-server",
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--quick",
        "--budget",
        "12",
        "--db",
        str(db),
    )
    assert done.returncode in (0, 3), done.stderr  # a peak, or an honest "no peak" within the budget
    listing = cli("results", "list", "--db", str(db))
    assert server.url in listing.stdout and "done" in listing.stdout


class MisbehavingServer:
    """A tiny HTTP server on 127.0.0.1 whose paths misbehave on purpose."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        with conn:
            data = b""
            while not self.stop.is_set():
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                head, data = data.split(b"\r\n\r\n", 1)
                method, path = head.split(b" ")[:2]
                if method == b"OPTIONS" or path == b"/ok":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                elif path == b"/truncated":  # promises 100 bytes, sends 10, closes
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                    return
                elif path == b"/slow":  # never answers within the timeout
                    time.sleep(1.5)
                    return
                elif path == b"/hangup":  # closes without a response
                    return
                elif path == b"/once":  # answers, then closes the kept-alive connection without notice
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                    return
                elif path == b"/garbage":
                    conn.sendall(b"SPAM SPAM SPAM\r\n\r\n")
                    return
                elif path == b"/random":  # bytes that cannot be HTTP, and the connection left open
                    conn.sendall(random.Random(16).randbytes(4096))
                    self.stop.wait(15)
                    return
                elif path == b"/huge-status":
                    conn.sendall(b"HTTP/1.1 999999999999 OK\r\nContent-Length: 0\r\n\r\n")
                else:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    def close(self):
        self.stop.set()
        self.sock.close()


def test_faults_are_counted_per_kind_and_the_trial_ends(engine_path, cli, tmp_path):
    server = MisbehavingServer()
    try:
        log = tmp_path / "access.log"
        # After /once the client's pooled connection is dead: the next request is retried, not failed.
        paths = ["/ok", "/truncated", "/slow", "/hangup", "/garbage", "/once", "/ok"]
        log.write_text("".join(f'h - - [01/Jan/2024:00:00:00 +0000] "GET {p} HTTP/1.1" 200 5\n' for p in paths))
        report = tmp_path / "out.json"
        started = time.monotonic()
        done = cli(
            "replay",
            str(log),
            "--target",
            f"http://127.0.0.1:{server.port}/",
            "--clients",
            "1",
            "--no-loop",
            "--warmup",
            "0",
            "--runtime",
            "5",
            "--timeout",
            "0.5",
            "--format",
            "common",
            "--db",
            str(tmp_path / "p.db"),
            "--json",
            str(report),
        )
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started < 30
        result = json.loads(report.read_text())
        read = result["ops"]["read"]
        assert read["count"] == len(paths)
        # A reply that never came is a timeout (Fstress's separate count), the rest errors by kind.
        assert read["errors"] == {"http_truncated": 1, "http_eof": 1, "http_bad_response": 1}
        assert read["timeouts"] == 1
        assert read["bytes"] == 15  # the three good responses
        assert result["replay"]["exhausted_at_s"] is not None
    finally:
        server.close()


def test_a_reply_that_cannot_be_http_is_a_bad_reply_at_once_not_a_timeout(engine_path, cli, tmp_path):
    """Random bytes on an open connection, and a status of twelve digits: both bad replies, found
    as they arrive, although the timeout is 10 s (the server is a fake: nginx cannot send these)."""
    server = MisbehavingServer()
    try:
        log = tmp_path / "access.log"
        log.write_text(
            "".join(
                f'h - - [01/Jan/2024:00:00:00 +0000] "GET {p} HTTP/1.1" 200 5\n' for p in ["/random", "/huge-status"]
            )
        )
        report = tmp_path / "out.json"
        started = time.monotonic()
        done = cli(
            *("replay", str(log), "--target", f"http://127.0.0.1:{server.port}/", "--clients", "1", "--no-loop"),
            *("--warmup", "0", "--runtime", "2", "--timeout", "10", "--format", "common"),
            *("--db", str(tmp_path / "p.db"), "--json", str(report)),
        )
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started < 10
        read = json.loads(report.read_text())["ops"]["read"]
        assert read["errors"] == {"http_bad_response": 2}
        assert read["timeouts"] == 0
    finally:
        server.close()


def test_getattr_as_a_conditional_get(engine_path, nginx, tmp_path):
    from peakbench.engine import Engine
    from peakbench.workload import find_workload, trial_spec

    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot)
    target = {"kind": "http", "url": server.url, "docroot": str(docroot), "getattr": "conditional"}
    spec = trial_spec(find_workload("web-server"), target, rate=200, warmup_s=0, runtime_s=1)
    spec["mix"] = {"getattr": 1.0}
    engine = Engine(engine_path)
    engine.prepare(spec)
    result = engine.run(spec)
    assert result["ops"]["getattr"]["count"] == 200 and not result["ops"]["getattr"]["errors"]
    statuses = collections.Counter((method, status) for method, _, status, _ in server.access_log_entries())
    assert statuses[("GET", 304)] == 200  # If-None-Match: * on an existing file


@pytest.mark.parametrize("status", [503, 429])
def test_a_server_that_sheds_load_achieves_only_its_successful_replies(engine_path, nginx, cli, tmp_path, status):
    # nginx serves 100 requests/s and answers the rest with `status` (limit_req, no burst): at
    # 300/s about two thirds are shed. Achieved is the successful replies, not every reply.
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot, shed_above=(100, status))
    report = tmp_path / "out.json"
    done = cli(
        "run",
        "web-server",
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--rate",
        "300",
        "--warmup",
        "1",
        "--runtime",
        "3",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    served = collections.Counter(code for _, _, code, _ in server.access_log_entries())
    outcomes = result["outcomes"]
    assert outcomes["errors"] == 0 and outcomes["timeouts"] == 0, outcomes
    assert outcomes["succeeded"] + outcomes["shed"] == result["sent"]
    assert outcomes["shed"] > 0.5 * result["sent"], outcomes
    assert served[status] >= outcomes["shed"]  # nginx says it refused them (the warm-up's too)
    assert all(f"http_{status}" not in op["errors"] for op in result["ops"].values())
    assert sum(op["shed"] for op in result["ops"].values()) == outcomes["shed"]
    assert result["achieved_rate"] == pytest.approx(100, rel=0.15)  # goodput: the limit
    assert result["completed_rate"] == pytest.approx(300, rel=0.05)  # every reply
    assert outcomes["failed_share"] == pytest.approx(outcomes["shed"] / result["sent"])
    assert "achieved (successful)" in done.stdout and f"shed {outcomes['shed']} (" in done.stdout


def test_the_search_sees_a_shedding_server_as_saturated_and_says_it_shed(engine_path, nginx, tmp_path):
    # The search's own trial path (EngineTrials) against nginx shedding above 100 requests/s:
    # replies come back fast (503 costs nginx nothing), so neither the response time nor the
    # completions show the overload; the shed replies do.
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot, shed_above=(100, 503))
    settings = SearchSettings(**{**searching.QUICK, "warmup_s": 1.0})
    target = parse_target(server.url, str(docroot))
    with store_module.Store(tmp_path / "p.db") as store:
        search_id = store.add_search(workload="web-server", target=server.url, policy="guided", settings={})
        trials = searching.EngineTrials(
            find_workload("web-server"), target, Engine(engine_path), store, search_id, settings, sysinfo={}
        )
        below, above = trials(50.0, 3.0), trials(300.0, 3.0)
    assert saturation_signal(below, settings) is None and not saturated(below, settings)
    assert above.mean_ms < settings.rsat_ms and above.percentile_ms < settings.lsat_ms
    assert above.outcomes.shed > 300 and above.shed_share > 0.5
    signal = saturation_signal(above, settings)
    assert signal is not None and saturated(above, settings)
    assert f"{above.outcomes.shed} shed (HTTP 503" in signal and "overloaded, on purpose" in signal
    assert f"of the window's {above.outcomes.requests} requests failed" in signal
