"""The HTTP target over TLS (rustls) against nginx serving HTTPS with a certificate the test
signs with its own CA (openssl CLI): verified with ca=FILE, refused with the wrong CA or a
server speaking plain HTTP, and accepted unverified with insecure=1 (with a warning)."""

import json
import subprocess
from pathlib import Path

import pytest
from debian import apt_install
from peakbench.servers.nginx import Nginx, make_certificates
from peakbench.targets import parse_http

pytestmark = pytest.mark.integration

FILE = "/f.bin"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """ca.pem signed server.pem (for 127.0.0.1); other.pem is a CA that signed nothing here."""
    if apt_install(("openssl",)) is not None:
        pytest.fail("the openssl command is needed to make the certificates (apt-get install openssl)")
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def www(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("www")
    (d / FILE.lstrip("/")).write_bytes(b"x" * 4096)
    (d.parent / "replay.log").write_text(f'h - - [01/Jan/2024:00:00:00 +0000] "GET {FILE} HTTP/1.1" 200 4096\n')
    return d


@pytest.fixture(scope="module")
def https_server(certs, www):
    with Nginx(www, access_log=www.parent / "access.log", tls=(certs / "server.pem", certs / "server.key")) as server:
        yield server


def run(engine_path: Path, url: str, www: Path, clients: int = 4) -> subprocess.CompletedProcess:
    spec = {
        "schema": "peakbench.trial-spec/2",
        "target": {"kind": "http", "url": url, "timeout_s": 5.0},
        "load": {"clients": clients, "runtime_s": 1.0, "warmup_s": 0.0},
        "replay": {"log": str(www.parent / "replay.log"), "format": "common"},
    }
    return subprocess.run(
        [str(engine_path), "run", "-"], input=json.dumps(spec), capture_output=True, text=True, timeout=60
    )


def served(server) -> int:
    return sum(
        1 for method, target, status, _ in server.access_log_entries() if (method, target, status) == ("GET", FILE, 200)
    )


def test_a_trial_over_https_verified_by_its_ca_is_counted_as_nginx_served_it(engine_path, https_server, certs, www):
    before = served(https_server)
    proc = run(engine_path, f"{https_server.url}?ca={certs / 'ca.pem'}", www)
    assert proc.returncode == 0, proc.stderr
    read = json.loads(proc.stdout)["ops"]["read"]
    assert read["errors"] == {} and read["timeouts"] == 0, read
    assert read["count"] > 50
    # Every request the engine counts nginx logged as served over TLS (and none more).
    assert served(https_server) - before == read["count"]
    assert read["bytes"] == 4096 * read["count"]
    assert "warning" not in proc.stderr


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_server_certificate_from_another_ca_is_a_one_line_error(engine_path, https_server, certs, www):
    line = one_line_error(run(engine_path, f"{https_server.url}?ca={certs / 'other.pem'}", www))
    assert "tls_bad_certificate_unknown_issuer" in line and https_server.url in line


def test_a_server_speaking_plain_http_is_a_one_line_error(engine_path, www, certs):
    with Nginx(www) as plain:
        https_url = plain.url.replace("http://", "https://")
        line = one_line_error(run(engine_path, f"{https_url}?ca={certs / 'ca.pem'}", www))
    assert "tls_not_tls" in line


def test_insecure_skips_verification_and_says_so(engine_path, https_server, www, capsys):
    proc = run(engine_path, f"{https_server.url}?insecure=1", www, clients=1)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ops"]["read"]["errors"] == {}
    assert "insecure=1, the server's certificate is not verified" in proc.stderr
    target = parse_http(f"{https_server.url}?insecure=1")
    assert target["url"] == f"{https_server.url}?insecure=1"
    assert "not verified" in capsys.readouterr().err


def test_an_https_url_needs_a_ca_or_insecure(engine_path, https_server, www):
    line = one_line_error(run(engine_path, https_server.url, www))
    assert "needs ca=FILE" in line
