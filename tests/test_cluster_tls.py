"""Load clients behind a Dask scheduler that speaks only TLS: a self-signed certificate made here
with openssl, a scheduler and two workers started with it (`dask scheduler/worker --tls-*`), and
the controller reaching them with --tls-ca-file, --tls-cert and --tls-key (docs/clusters.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 120.0

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_cluster(engine_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("tls")
    cert, key = work / "cert.pem", work / "key.pem"
    # One self-signed certificate (its own CA) for the scheduler, the workers and the controller.
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=peakbench-test"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    tls = ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)]
    address = f"tls://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "PEAKBENCH_ENGINE": str(engine_path)}
    started = []
    try:
        scheduler = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", address.rsplit(":", 1)[0]]
        scheduler += ["--port", address.rsplit(":", 1)[1], "--no-dashboard", *tls]
        started.append(subprocess.Popen(scheduler, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for name in ("w0", "w1"):
            worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1"]
            worker += ["--name", name, "--no-dashboard", "--host", "127.0.0.1", *tls]
            started.append(subprocess.Popen(worker, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ready = subprocess.run(
            [
                sys.executable,
                "-c",
                "from distributed import Client, Security;"
                f" s = Security(tls_ca_file={str(cert)!r}, tls_client_cert={str(cert)!r},"
                f" tls_client_key={str(key)!r}, require_encryption=True);"
                f" Client({address!r}, security=s, timeout=60).wait_for_workers(2, timeout={WAIT_S})",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT_S + 60,
        )
        assert ready.returncode == 0, ready.stderr[-2000:]
        yield address, tls, env
    finally:
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def run(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "peakbench.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow  # a TLS Dask cluster of two workers takes minutes on a busy 2-core machine
def test_a_two_client_trial_over_tls_merges(tls_cluster, tmp_path):
    address, tls, env = tls_cluster
    out = tmp_path / "trial.json"
    # A wide clock tolerance: this checks the TLS path, not start skew on a loaded machine.
    done = run(
        env,
        *("run", "mail", "--target", "null://", "--rate", "400", "--warmup", "0.5", "--runtime", "1.5"),
        *("--cluster", address, "--clients", "2", "--clock-tolerance", "500", *tls),
        *("--db", str(tmp_path / "p.db"), "--json", str(out)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"cluster: 2 load clients (workers of {address})" in done.stderr
    result = json.loads(out.read_text())
    assert [c["requested_rate"] for c in result["clients"]] == [200.0, 200.0]
    assert result["cluster"]["verdict"] == "complete"
    assert result["achieved_rate"] == pytest.approx(400.0, rel=0.02)


def test_tls_without_its_files_or_without_a_tls_address_is_one_line_and_exit_2(tmp_path, capsys):
    from peakbench.cli import main

    pem = tmp_path / "any.pem"
    pem.write_text("never read: the options are refused before any file is opened\n")
    tls = ["--tls-ca-file", str(pem), "--tls-cert", str(pem), "--tls-key", str(pem)]
    trial = ["run", "mail", "--target", "null://", "--rate", "100", "--db", str(tmp_path / "p.db")]
    cases = {
        "tls://127.0.0.1:9": (
            [],
            "field --cluster: tls://127.0.0.1:9: a tls:// scheduler needs --tls-ca-file, --tls-cert and --tls-key",
        ),
        "tls://127.0.0.1:8": (tls[:4], "field --tls-key: TLS needs --tls-key as well"),
        "tcp://127.0.0.1:9": (
            tls,
            "field --tls-ca-file: applies to a tls:// --cluster address (got tcp://127.0.0.1:9)",
        ),
        "tls://127.0.0.1:7": (
            tls[:5] + [str(tmp_path / "absent.pem")],
            f"field --tls-key: {tmp_path / 'absent.pem'}: no such file",
        ),
    }
    for address, (options, message) in cases.items():
        assert main([*trial, "--cluster", address, *options]) == 2
        assert capsys.readouterr().err.strip() == f"peakbench: {message}"
    assert not (tmp_path / "p.db").exists()
