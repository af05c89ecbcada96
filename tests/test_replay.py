"""Access-log replay: parsing, build-docroot, modes, data-set size; checked against nginx's own log."""

import collections
import csv
import gzip
import json
from pathlib import Path

import pytest
from peakbench import tracegen

pytestmark = pytest.mark.usefixtures("engine_path")


def replayable(log: Path) -> list[tuple[str, str]]:
    """(method, path) of the log's successful GETs and HEADs, in order: what a replay sends."""
    opener = gzip.open if log.suffix == ".gz" else open
    out = []
    with opener(log, "rt") as lines:
        for line in lines:
            parts = line.split('"')
            if len(parts) < 3:
                continue
            method, path = parts[1].split()[:2]
            status = int(parts[2].split()[0])
            if method in ("GET", "HEAD") and (200 <= status < 300 or status == 304):
                out.append((method, path))
    return out


def served(server) -> list[tuple[str, str, int, int]]:
    """What nginx logged, less the engine's reachability probe (OPTIONS)."""
    return [entry for entry in server.access_log_entries() if entry[0] != "OPTIONS"]


def replay(cli, tmp_path, log, *args) -> tuple[object, dict]:
    """`peakbench replay LOG ARGS...` with a store and a JSON report in tmp_path: (process, report)."""
    report = tmp_path / "out.json"
    done = cli("replay", str(log), *args, "--db", str(tmp_path / "p.db"), "--json", str(report))
    assert done.returncode == 0, done.stderr
    return done, json.loads(report.read_text())


@pytest.fixture
def site(tmp_path, cli):
    """A generated log and the docroot built from it."""
    log = tracegen.write(tmp_path / "access.log.gz", tracegen.TraceShape(requests=3000, files=200, seed=7))
    docroot = tmp_path / "www"
    done = cli("replay", "--build-docroot", str(docroot), str(log))
    assert done.returncode == 0, done.stderr
    return log, docroot


def test_build_docroot_serves_every_successful_path_at_its_size(site, tmp_path, cli):
    log, docroot = site
    sizes: dict[str, int] = {}
    with gzip.open(log, "rt") as lines:
        for line in lines:
            parts = line.split('"')
            method, path = parts[1].split()[:2]
            status, size = (int(x) for x in parts[2].split()[:2])
            if status == 200 and method == "GET":
                name = path.lstrip("/") + ("index.html" if path.endswith("/") else "")
                sizes[name] = max(sizes.get(name, 0), size)
    for name, size in sizes.items():
        assert (docroot / name).stat().st_size == size, name
    # Deterministic content: the same log builds the same bytes.
    again = tmp_path / "again"
    assert cli("replay", "--build-docroot", str(again), str(log)).returncode == 0
    name = max(sizes, key=sizes.get)
    assert (docroot / name).read_bytes() == (again / name).read_bytes()
    # A directory peakbench did not make is refused.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "index.html").write_text("mine")
    refused = cli("replay", "--build-docroot", str(foreign), str(log))
    assert refused.returncode == 2 and "peakbench did not create it" in refused.stderr


def test_closed_loop_replay_matches_nginx_access_log(site, nginx, cli, tmp_path):
    log, docroot = site
    server = nginx(docroot)
    done, result = replay(
        cli, tmp_path, log, "--target", server.url, "--clients", "4", "--warmup", "0", "--runtime", "2"
    )
    assert result["mode"] == "closed" and result["requested_rate"] is None
    issued = result["issued"]
    assert issued == result["replay"]["issued"] > 0
    # The replay is the log's successful GETs and HEADs in order, looped: nginx saw exactly
    # the first `issued` of them (in completion order, so compare as multisets), all served.
    expected = replayable(log)
    sent = [expected[i % len(expected)] for i in range(issued)]
    log_lines = served(server)
    assert collections.Counter((m, p) for m, p, _, _ in log_lines) == collections.Counter(sent)
    assert all(status == 200 for _, _, status, _ in log_lines)
    assert sum(size for m, _, _, size in log_lines if m == "GET") == result["bytes"]
    assert result["ops"]["read"]["error_count"] == 0
    assert result["output_mbit_s"] == pytest.approx(result["bytes"] * 8 / 2 / 1e6)
    assert result["replay"]["loops"] > 1  # 2 s of 4 clients loops a 3,000-line log
    assert set(result["classes"]) <= {
        f"{m} {c} ok" for m in ("GET", "HEAD") for c in ("<1KiB", "1-10KiB", "10-100KiB", "100KiB-1MiB", ">=1MiB")
    }
    assert "per request class" in done.stdout and "closed loop with 4 clients" in done.stdout
    # The same store as every other target: listed, shown, exported.
    db = tmp_path / "p.db"
    assert "replay:access.log.gz" in cli("results", "list", "--db", str(db)).stdout
    assert "closed loop with 4 clients" in cli("results", "show", "1", "--db", str(db)).stdout
    exported = tmp_path / "trials.csv"
    assert cli("results", "export", "--csv", str(exported), "--db", str(db)).returncode == 0
    row = next(csv.DictReader(exported.open()))
    assert int(row["files"]) == result["replay"]["files"] and row["workload"] == "replay:access.log.gz"


def test_open_loop_replay_at_a_fixed_rate(site, nginx, cli, tmp_path):
    log, docroot = site
    server = nginx(docroot)
    _, result = replay(cli, tmp_path, log, "--target", server.url, "--rate", "400", "--warmup", "0", "--runtime", "2")
    assert result["mode"] == "open" and result["requested_rate"] == 400
    assert result["sent"] == 800 and result["issued"] == 800
    assert result["achieved_rate"] == pytest.approx(400, rel=0.05)
    assert len(served(server)) == 800
    expected = replayable(log)[:800]
    assert collections.Counter((m, p) for m, p, _, _ in served(server)) == collections.Counter(expected)


def test_timed_replay_follows_the_log_clock(tmp_path, nginx, cli):
    docroot = tmp_path / "www"
    log = tmp_path / "access.log"
    # 10 requests in each of the log's seconds 0..5.
    lines = [
        f'h - - [01/Jan/2024:00:00:0{second} +0000] "GET /f{i % 3} HTTP/1.1" 200 {100 * (i % 3 + 1)}'
        for second in range(6)
        for i in range(10)
    ]
    log.write_text("\n".join(lines) + "\n")
    assert cli("replay", "--build-docroot", str(docroot), str(log), "--format", "common").returncode == 0
    server = nginx(docroot)
    # At twice the log's speed a 2 s window holds the log's first 4 seconds: 40 requests.
    _, result = replay(
        cli,
        tmp_path,
        log,
        "--target",
        server.url,
        "--timed",
        "--speed",
        "2",
        "--format",
        "common",
        "--warmup",
        "0",
        "--runtime",
        "2",
    )
    assert result["mode"] == "timed"
    assert result["sent"] == 40
    assert result["requested_rate"] == pytest.approx(20)
    assert result["ops"]["read"]["error_count"] == 0
    assert len(served(server)) == 40


def test_dataset_size_sweep_truncates_the_log(site, cli, tmp_path):
    log, docroot = site
    report = tmp_path / "sweep.json"
    # Against the directory itself: a GET is a lookup and a whole-file read.
    done = cli(
        "replay",
        str(log),
        "--target",
        str(docroot),
        "--dataset-size",
        "200KB,1MB",
        "--clients",
        "2",
        "--warmup",
        "0",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(report.read_text())
    assert [row["replay"]["dataset_bytes"] <= limit for row, limit in zip(rows, (200_000, 1_000_000))] == [True, True]
    small, large = rows
    assert small["replay"]["truncated"] and small["replay"]["files"] < large["replay"]["files"]
    assert small["replay"]["requests"] < large["replay"]["requests"]
    for row in rows:
        assert row["ops"]["read"]["error_count"] == 0 and row["bytes"] > 0
    assert "data-set size sweep" in done.stdout

    # The truncated docroot holds only the prefix's files.
    small_root = tmp_path / "small"
    assert cli("replay", "--build-docroot", str(small_root), str(log), "--dataset-size", "200KB").returncode == 0
    total = sum(p.stat().st_size for p in small_root.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert total == small["replay"]["dataset_bytes"] <= 200_000


def test_unparseable_lines_are_counted_and_quoted_with_their_line(tmp_path, cli):
    docroot = tmp_path / "www"
    log = tmp_path / "access.log"
    good = 'h - - [01/Jan/2024:00:00:00 +0000] "GET /a HTTP/1.1" 200 10 "-" "x"'
    log.write_text(
        "\n".join(
            [
                good,
                "this is not a log line",
                good,
                'h - - [01/Jan/2024:00:00:00 +0000] "GET /a HTTP/1.1" 2000 10 "-" "x"',
                'h - - [01/Jan/2024:00:00:00 +0000] "POST /a HTTP/1.1" 200 10 "-" "x"',
            ]
        )
        + "\n"
    )
    done = cli("replay", "--build-docroot", str(docroot), str(log))
    assert done.returncode == 0, done.stderr
    assert "skipped 2 unparseable, 1 not GET/HEAD" in done.stderr
    assert "line 2: column 1" in done.stderr and "this is not a log line" in done.stderr
    assert "line 4: bad status" in done.stderr
    empty = tmp_path / "empty.log"
    empty.write_text("junk\n")
    failed = cli("replay", "--build-docroot", str(tmp_path / "w2"), str(empty))
    assert failed.returncode == 2 and "nothing to replay in 1 lines (1 unparseable" in failed.stderr
    assert not (tmp_path / "w2").exists()  # bad input: no half-built docroot


def test_format_strings_and_gzip(tmp_path, cli):
    log = tmp_path / "nginx.log.gz"
    with gzip.open(log, "wt") as out:
        out.write('127.0.0.1 [01/Jan/2024:00:00:00 +0000] "GET /x/y.html?q=1 HTTP/1.1" 200 1234 0.001\n')
        out.write('127.0.0.1 [01/Jan/2024:00:00:01 +0000] "GET /x/ HTTP/1.1" 200 99 0.001\n')
    docroot = tmp_path / "www"
    done = cli(
        "replay",
        "--build-docroot",
        str(docroot),
        str(log),
        "--format",
        '$remote_addr [$time_local] "$request" $status $body_bytes_sent $request_time',
    )
    assert done.returncode == 0, done.stderr
    assert (docroot / "x/y.html").stat().st_size == 1234
    assert (docroot / "x/index.html").stat().st_size == 99
    bad = cli("replay", "--build-docroot", str(tmp_path / "w2"), str(log), "--format", "%h %t")
    assert bad.returncode == 2 and "no request line" in bad.stderr
    assert not (tmp_path / "w2").exists()


REAL_LOG = Path("/usr/share/logstalgia/example.log")  # Debian's logstalgia: 3,260 lines of a 2009 web server
REAL_FORMAT = '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i" "%{X-Forwarded-For}i"'


@pytest.mark.skipif(not REAL_LOG.exists(), reason="needs Debian's logstalgia (scripts/install.sh installs it)")
def test_a_real_access_log_from_debian(tmp_path, nginx, cli):
    # Combined plus one more quoted field: with plain "combined" every line is refused, and said so.
    refused = cli("replay", "--build-docroot", str(tmp_path / "no"), str(REAL_LOG))
    assert refused.returncode == 2
    assert "nothing to replay in 3260 lines (3260 unparseable" in refused.stderr
    assert "line 1: column" in refused.stderr and "unexpected text after the last field" in refused.stderr

    docroot = tmp_path / "www"
    built = cli("replay", "--build-docroot", str(docroot), str(REAL_LOG), "--format", REAL_FORMAT)
    assert built.returncode == 0, built.stderr
    assert "3,260 lines, 2,724 replayable; skipped 0 unparseable" in built.stderr
    server = nginx(docroot)
    _, result = replay(
        cli,
        tmp_path,
        REAL_LOG,
        "--target",
        server.url,
        "--format",
        REAL_FORMAT,
        "--clients",
        "8",
        "--warmup",
        "0",
        "--runtime",
        "2",
    )
    expected = replayable(REAL_LOG)
    assert len(expected) == 2724
    sent = [expected[i % len(expected)] for i in range(result["issued"])]
    assert collections.Counter((m, p) for m, p, _, _ in served(server)) == collections.Counter(sent)
    assert result["ops"]["read"]["error_count"] == 0


def test_a_replay_from_two_load_clients_splits_the_log_and_merges(site, nginx, cli, tmp_path):
    """The paper's two client machines: --clients 4 --load-clients 2 deals the closed loop out (2 + 2),
    each load client replays every other request of the log, and nginx saw exactly their union."""
    log, docroot = site
    server = nginx(docroot)
    done, result = replay(
        cli,
        tmp_path,
        log,
        "--target",
        server.url,
        "--clients",
        "4",
        "--load-clients",
        "2",
        "--clock-tolerance",
        "500",  # a start check, not what is tested; a loaded test machine measures clocks slowly
        "--warmup",
        "0",
        "--runtime",
        "1",
    )
    shares = result["replay"]["shares"]
    assert [(s["index"], s["count"]) for s in shares] == [(0, 2), (1, 2)]
    expected = replayable(log)
    sent = []
    for share in shares:
        mine = expected[share["index"] :: share["count"]]
        assert share["requests"] == len(mine)
        sent += [mine[i % len(mine)] for i in range(share["issued"])]
    log_lines = served(server)
    assert collections.Counter((m, p) for m, p, _, _ in log_lines) == collections.Counter(sent)
    # Merged like every distributed trial: counts and bytes add, both clients listed.
    assert result["issued"] == result["replay"]["issued"] == len(sent)
    assert sum(size for m, _, _, size in log_lines if m == "GET") == result["bytes"]
    assert [c["name"] for c in result["clients"]] == ["client-0", "client-1"]
    assert result["mode"] == "closed" and result["requested_rate"] is None
    assert "per client (2 of 2 finished" in done.stdout
