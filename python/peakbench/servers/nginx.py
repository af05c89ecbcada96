"""nginx (Debian's package) on 127.0.0.1 with a generated configuration.

    from peakbench.servers.nginx import Nginx
    with Nginx(docroot, webdav=True, access_log=tmp / "access.log") as server:
        server.url            # "http://127.0.0.1:PORT/" ("https://" with tls=(cert, key))
        server.access_log_entries()   # [(method, target, status, bytes), ...]

The server runs in the foreground of its own process group (`daemon off`), is
stopped by its PID (SIGQUIT, then SIGKILL after a deadline), and writes
nothing outside its working directory except the access log you name. The
access log uses a fixed format (FORMAT, the Combined Log Format) so tests can
read back what nginx served: method, path, status and body bytes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

NGINX = "nginx"
DAV_EXT = Path("/usr/lib/nginx/modules/ngx_http_dav_ext_module.so")
# The Combined Log Format: peakbench's replay reads it back with its default format.
FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"'
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_certificates(directory: Path) -> Path:
    """For tls=(directory / "server.pem", directory / "server.key"): a server certificate for
    127.0.0.1 signed by the CA ca.pem, and other.pem, a CA that signed nothing (openssl CLI, EC P-256)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other"):
        _openssl(
            "req",
            "-x509",
            *ec,
            "-days",
            "2",
            "-keyout",
            f"{ca}.key",
            "-out",
            f"{ca}.pem",
            "-subj",
            f"/CN=peakbench {ca}",
            cwd=directory,
        )
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=directory)
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
             "-extfile", "ext.cnf", "-out", "server.pem", cwd=directory)  # fmt: skip
    return directory


def available() -> bool:
    return shutil.which(NGINX) is not None or Path("/usr/sbin/nginx").exists()


def binary() -> str:
    return shutil.which(NGINX) or "/usr/sbin/nginx"


def config(
    docroot: Path,
    port: int,
    workdir: Path,
    *,
    workers: int = 1,
    access_log: Path | None = None,
    webdav: bool = False,
    autoindex: bool = True,
    keepalive_requests: int = 100000,
    host: str = "127.0.0.1",
    shed_above: tuple[int, int] | None = None,
    tls: tuple[Path, Path] | None = None,
) -> str:
    """The whole nginx.conf text. WebDAV adds PUT DELETE MKCOL COPY MOVE (and, with the
    dav-ext module, PROPFIND OPTIONS). shed_above = (requests per second, status): a server
    that sheds load (limit_req, no burst) and answers the requests over the limit with that
    status (503 or 429): a leaky bucket that holds 20 requests beyond the rate. tls = (certificate,
    key) PEM files: the server speaks HTTPS only."""
    dav_ext = webdav and DAV_EXT.exists()
    lines = [
        f"load_module {DAV_EXT};" if dav_ext else "",
        # As root, workers would drop to `nobody` and could not write the (root-owned) docroot.
        "user root root;" if os.geteuid() == 0 else "",
        f"worker_processes {workers};",
        f"pid {workdir}/nginx.pid;",
        f"error_log {workdir}/error.log warn;",
        "daemon off;",
        "events { worker_connections 4096; }",
        "http {",
        "  types { text/html html; text/plain txt; application/octet-stream bin; }",
        "  default_type application/octet-stream;",
        "  sendfile on; tcp_nopush on; tcp_nodelay on;",
        f"  keepalive_requests {keepalive_requests}; keepalive_timeout 65;",
        f"  client_body_temp_path {workdir}/body;",
        f"  proxy_temp_path {workdir}/proxy; fastcgi_temp_path {workdir}/fastcgi;",
        f"  uwsgi_temp_path {workdir}/uwsgi; scgi_temp_path {workdir}/scgi;",
        "  client_max_body_size 0;",
        f"  log_format peakbench '{FORMAT}';",
        f"  access_log {access_log} peakbench;" if access_log else "  access_log off;",
        f"  limit_req_zone $binary_remote_addr zone=shed:1m rate={shed_above[0]}r/s;" if shed_above else "",
        "  server {",
        f"    listen {host}:{port}{' ssl' if tls else ''};",
        f"    ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};" if tls else "",
        f"    root {docroot};",
        "    location / {",
        "      autoindex on;" if autoindex else "",
        "      dav_methods PUT DELETE MKCOL COPY MOVE; create_full_put_path on; dav_access user:rw group:r all:r;"
        if webdav
        else "",
        "      dav_ext_methods PROPFIND OPTIONS;" if dav_ext else "",
        # A burst of 20 lets a Poisson schedule's bunched arrivals through below the rate.
        f"      limit_req zone=shed burst=20 nodelay; limit_req_status {shed_above[1]}; limit_req_log_level info;"
        if shed_above
        else "",
        "    }",
        "  }",
        "}",
    ]
    return "\n".join(line for line in lines if line) + "\n"


class Nginx:
    """One nginx serving `docroot` on 127.0.0.1:`port` (a free one by default), or on `host`
    inside the network namespace `netns` (a test's own host)."""

    def __init__(
        self,
        docroot: Path,
        *,
        port: int | None = None,
        workers: int = 1,
        access_log: Path | None = None,
        webdav: bool = False,
        autoindex: bool = True,
        cpus: set[int] | None = None,
        start_timeout_s: float = 10.0,
        host: str = "127.0.0.1",
        netns: str | None = None,
        shed_above: tuple[int, int] | None = None,
        tls: tuple[Path, Path] | None = None,
    ):
        self.docroot = Path(docroot).absolute()
        self.host = host
        self.netns = netns
        self.port = port or free_port()
        self.workers = workers
        self.access_log = Path(access_log).absolute() if access_log else None
        self.webdav = webdav
        self.autoindex = autoindex
        self.cpus = cpus  # pin the master and its workers (benchmarks keep server and client apart)
        self.start_timeout_s = start_timeout_s
        self.shed_above = shed_above  # (requests per second, status): see config
        self.tls = tls  # (certificate, key): see config
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}/"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> Nginx:
        if not available():
            raise RuntimeError("nginx is not installed (apt-get install nginx-light or nginx)")
        self.workdir = Path(tempfile.mkdtemp(prefix="peakbench-nginx-"))
        conf = self.workdir / "nginx.conf"
        conf.write_text(
            config(
                self.docroot,
                self.port,
                self.workdir,
                workers=self.workers,
                access_log=self.access_log,
                webdav=self.webdav,
                autoindex=self.autoindex,
                host=self.host,
                shed_above=self.shed_above,
                tls=self.tls,
            )
        )
        inside = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.process = subprocess.Popen(
            [*inside, binary(), "-c", str(conf), "-p", str(self.workdir), "-e", str(self.workdir / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None,
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                message = self.process.stderr.read().decode(errors="replace").strip()
                log = self.workdir / "error.log"
                if log.exists():
                    message += " " + log.read_text(errors="replace").strip()
                self._cleanup()
                raise RuntimeError(f"nginx exited at start (status {self.process.returncode}): {message}")
            if self._listening():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"nginx did not listen on {self.host}:{self.port} within {self.start_timeout_s} s")

    def _listening(self) -> bool:
        if self.netns:  # unreachable from here: nginx writes its pid file once its sockets are bound
            return (self.workdir / "nginx.pid").exists()
        try:
            with socket.create_connection((self.host, self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """Graceful stop by PID (SIGQUIT lets workers finish and flush the access log), then SIGKILL."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            try:
                os.kill(process.pid, signal.SIGQUIT)
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # its own session: the master and its workers
                process.wait(timeout=timeout_s)
            except ProcessLookupError:
                pass
        self._cleanup()
        self.process = None

    def _cleanup(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()

    def access_log_lines(self) -> list[str]:
        """The access log so far. nginx writes each line when the request completes, unbuffered."""
        if self.access_log is None or not self.access_log.exists():
            return []
        return self.access_log.read_text(errors="replace").splitlines()

    def access_log_entries(self) -> list[tuple[str, str, int, int]]:
        """(method, request target, status, body bytes) of every request logged so far."""
        entries = []
        for line in self.access_log_lines():
            quoted = line.split('"')  # FORMAT: ... "$request" $status $body_bytes_sent "..." "..."
            method, target = quoted[1].split()[:2]
            status, size = quoted[2].split()
            entries.append((method, target, int(status), int(size)))
        return entries

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
