"""`peakbench workloads train-markov`: a Markov model counted from a real SMB2 session (Debian's
smbclient against the tests' smbd, recorded by dumpcap on lo), that validates, counts what the capture
holds, and drives the engine; and bad captures refused in one line with nothing written."""

from __future__ import annotations

import collections
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from peakbench.cli import main
from peakbench.markov import load_model
from peakbench.workload import CANNED_DIR, find_workload

sys.path.insert(0, str(Path(__file__).parent))
from debian import apt_install  # noqa: E402
from samba import PASSWORD, USER, Samba  # noqa: E402
from test_cifs_markov import generate  # noqa: E402

pytestmark = pytest.mark.integration

# A session as a user's would go: list, fetch, store, inspect, change and remove files.
SESSION = "ls; get a.txt {out}; put {src} b.txt; allinfo a.txt; setmode a.txt +r; ls; del b.txt; cd sub; ls"
READ, WRITE, QUERY_DIRECTORY, SET_INFO = "8", "9", "14", "17"


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.stat().st_size > 0):
        if time.monotonic() > deadline:
            pytest.fail(f"dumpcap wrote nothing to {path} in {timeout_s} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """A pcapng of one smbclient session against smbd, and smbd's port."""
    if apt_install(("tshark", "smbclient")) is not None:
        pytest.fail("tshark and smbclient are needed (apt-get install tshark smbclient)")
    work = tmp_path_factory.mktemp("capture")
    for server in Samba().serve_module():
        (server.share_dir / "a.txt").write_bytes(b"peakbench " * 2000)
        (server.share_dir / "sub").mkdir()
        pcap = work / "session.pcapng"
        dumpcap = subprocess.Popen(
            ["dumpcap", "-q", "-i", "lo", "-f", f"tcp port {server.port}", "-w", str(pcap)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for(pcap, 10)  # the pcapng header is written once dumpcap listens
            session = SESSION.format(out=work / "a.out", src=Path(__file__))
            done = subprocess.run(
                ["smbclient", "//127.0.0.1/share", "-p", str(server.port), "-U", f"{USER}%{PASSWORD}", "-c", session],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            time.sleep(0.5)  # the last replies reach dumpcap's ring
        finally:
            dumpcap.terminate()
            dumpcap.wait(timeout=10)
        yield pcap, server.port


def _requests(pcap: Path, port: int) -> list[tuple[str, str]]:
    """(command, FileId) of every SMB2 request in the capture, read by tshark independently."""
    out = subprocess.run(
        ["tshark", "-n", "-r", str(pcap), "-d", f"tcp.port=={port},nbss", "-Y", "smb2.flags.response == 0"]
        + ["-T", "fields", "-E", "occurrence=f", "-e", "smb2.cmd", "-e", "smb2.fid"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [tuple((line.split("\t") + [""])[:2]) for line in out.splitlines()]


def _op_counts(model: Path) -> collections.Counter:
    counts = collections.Counter()
    for state in tomllib.loads(model.read_text())["states"].values():
        for step in state["next"]:
            counts[step["op"]] += step["weight"]
    return counts


def test_a_model_trained_from_smbclients_session_counts_its_requests_and_drives_the_engine(
    capture, tmp_path, engine_path
):
    pcap, port = capture
    model = tmp_path / "markov" / "site.toml"
    model.parent.mkdir()
    assert main(["workloads", "train-markov", str(pcap), "--output", str(model)]) == 0
    load_model(model)  # it validates

    ops = _op_counts(model)
    requests = _requests(pcap, port)
    by_command = collections.Counter(command for command, _ in requests)
    assert ops["read"] == by_command[READ] > 0 and ops["write"] == by_command[WRITE] > 0
    assert ops["fsetattr"] == by_command[SET_INFO] > 0
    # Each directory listing (a handle queried for its entries, by `ls` and `cd`) is one readdir.
    assert ops["readdir"] == len({fid for command, fid in requests if command == QUERY_DIRECTORY}) >= 3
    assert ops["open"] == ops["close"] > 0
    source = tomllib.loads(model.read_text())["source"]
    assert pcap.name in source and f"{sum(ops.values())} ops over {ops['open']} handles on 1 connections" in source

    # A workload naming the model runs in the engine: valid handle sequences in the model's mix.
    workload = (CANNED_DIR / "specsfs2008-cifs.toml").read_text().replace("specsfs2008-cifs.toml", "site.toml")
    (tmp_path / "site.toml").write_text(workload)
    for dist in ("sfs2008-file-sizes.dist", "sfs2008-io-sizes.dist"):
        (tmp_path / dist).write_text((CANNED_DIR / dist).read_text())
    n = 200_000
    generated = generate(engine_path, find_workload(str(tmp_path / "site.toml")), n, tmp_path)
    assert generated["invalid"] == 0 and set(generated["ops"]) == set(ops)
    _, mix = load_model(model)
    for op, share in mix.items():
        assert generated["ops"][op] / n == pytest.approx(share, abs=0.01), (op, generated["ops"], mix)


def _bad_captures(pcap: Path, tmp_path: Path) -> dict[str, Path]:
    text = tmp_path / "notes.pcap"
    text.write_text("not a capture\n")
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(pcap.read_bytes()[: pcap.stat().st_size // 2])
    # The same session's TCP handshake only: a capture with no SMB2 in it.
    handshake = tmp_path / "handshake.pcapng"
    subprocess.run(
        ["tshark", "-r", str(pcap), "-Y", "tcp.len == 0 && frame.number <= 3", "-w", str(handshake)],
        capture_output=True,
        timeout=60,
        check=True,
    )
    return {"not a packet capture": text, "truncated": cut, "no SMB2 request": handshake}


def test_bad_captures_are_one_line_naming_the_file_and_write_nothing(capture, tmp_path, capsys):
    pcap, _ = capture
    out = tmp_path / "out"
    out.mkdir()
    for message, bad in _bad_captures(pcap, tmp_path).items():
        assert main(["workloads", "train-markov", str(bad), "--output", str(out / "model.toml")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"peakbench: {bad}: ") and message in err, err
        assert list(out.iterdir()) == []
