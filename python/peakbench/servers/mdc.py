"""An HTTP/1.1 server with a known response-time curve: c workers, a deterministic service time D.

    from peakbench.servers.mdc import MDCServer
    with MDCServer(workers=1, service_ms=5.0, docroot=www) as server:
        server.url                       # "http://127.0.0.1:PORT/"
        server.mean_response_ms(150.0)   # the truth under Poisson arrivals at 150 req/s
        server.peak_rate(50.0)           # the load whose mean response is Rsat = 50 ms
        server.peak_region(50.0, 0.10)   # the loads whose mean response is Rsat(1 ± s)
    server.stats                         # the server's own timing of its replies (after stop)

Every request (GET, HEAD, OPTIONS; anything else is answered 405) is served first come,
first served by one of `workers` workers and takes exactly `service_ms` of that worker's
time; the reply is sent when its service ends. Under Poisson arrivals that is an M/D/c
queue, whose mean response W(λ) this module computes (`mean_response_ms`): for c = 1 the
Pollaczek-Khinchine formula W = D + ρD/(2(1−ρ)), ρ = λD; for any c the exact stationary
distribution of the number in system N sampled every D, which obeys
N' = max(N − c, 0) + Poisson(λD) (everyone in service finishes within D, and nobody who
starts later does), with W = E[N]/λ by Little's law. The chain is solved numerically
(truncated where the tail holds less than 1e-9 of the probability) and agrees with the closed form for c = 1
to 1e-9 (tests/test_known_curve.py).

How the queue is kept: the workers are the queue's bookkeeping, not threads. The I/O
thread timestamps each request as epoll reports it (the arrival time a), and the request
starts when the earliest-free worker is free: start = max(a, free), end = start + D. A
timer thread sends each reply at its `end`, sleeping until 150 µs before it (timer slack
set to 1 µs) and spinning the rest. So the service process is exact by construction;
what is not exact is when a reply leaves and how late an arrival is stamped. The server
records the first (`stats`: lateness of each send past its `end`), and both show in the
client's view. The server runs under SCHED_FIFO when it may (root; `realtime`), because
on a busy machine an ordinary process is woken late by milliseconds. Measured on the
shared 2-vCPU machine at load average 13, one client sending HEAD requests one at a time,
n = 2,000 requests, D = 5 ms (`python3 -m peakbench.servers.mdc --precision [--realtime]`):

                          server's send lateness        client's response − D
                          mean     p99      max          median   mean    p99
    real-time             0.009    0.11     3.2 ms       0.28     1.26    5.1 ms
    ordinary              1.07     7.3      179 ms       0.26     2.13    11.5 ms

The client's figures include its own (ordinary, Python) wake-ups on the busy machine;
the server's show that a real-time server keeps D to about 0.1 ms in 99% of replies.

The docroot, when given, is served read-only: HEAD and GET of a file give its size and
content, of a directory a plain list of its names; a path outside it or missing is 404.
Without a docroot every GET and HEAD is an empty 200. One thread sends every reply, so
a large body delays the replies due after it: keep the files small (1 KB in the example). The engine's HTTP target builds its
file set in that directory (`--docroot`), so the server needs no WebDAV. The example
workload `known-curve.toml` beside this file makes every op a getattr (HEAD), Poisson
arrivals, so each op costs the same D.

The server runs as its own process (`python3 -m peakbench.servers.mdc`): its threads then
share no interpreter lock with the caller's, and it is stopped by its PID (SIGTERM, then
SIGKILL after a deadline), like nginx.py's.
"""

from __future__ import annotations

import argparse
import ctypes
import heapq
import json
import math
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from functools import lru_cache
from pathlib import Path
from typing import Self

from .nginx import free_port

EXAMPLE_WORKLOAD = Path(__file__).with_name("known-curve.toml")
SPIN_NS = 150_000  # the last stretch before a reply's end is spun, not slept
PR_SET_TIMERSLACK = 29
REALTIME_PRIORITY = 10  # SCHED_FIFO, low among real-time threads (the kernel's own run at 50)


# --------------------------------------------------------------------------- the truth


@lru_cache(maxsize=4096)
def mean_response_ms(rate: float, workers: int = 1, service_ms: float = 5.0) -> float:
    """Mean response time (waiting + service) of a FIFO M/D/c queue at `rate` req/s; inf at or
    past capacity (c/D)."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0 (got {rate})")
    load = rate * service_ms / 1000.0  # offered work per D: the Poisson mean of arrivals per D
    if load >= workers:
        return math.inf
    if workers == 1:
        return service_ms + load * service_ms / (2 * (1 - load))
    return _mean_in_system(load, workers) / rate * 1000.0


def _mean_in_system(load: float, workers: int) -> float:
    """E[N] of N' = max(N − c, 0) + Poisson(load): the stationary chain, solved sparse."""
    import numpy as np
    from scipy import sparse, stats
    from scipy.sparse.linalg import spsolve

    # The tail decays geometrically, by about 1 + 2(1−ρ)/(1+ρ) per state (ρ = load/c): 40 of
    # those e-foldings reach the solver's rounding floor (about 1e-14 per state) well before
    # the truncation; the check below refuses a chain whose last tenth still holds 1e-9.
    utilisation = load / workers
    size = workers + int(20 * (1 + utilisation) / (1 - utilisation)) + int(load + 12 * math.sqrt(load)) + 64
    arrivals = stats.poisson.pmf(np.arange(size), load)
    support = int(load) + 1 + int(np.argmax(arrivals[int(load) + 1 :] < 1e-18))
    arrivals = arrivals[:support]
    # π(P − I) = 0 with π_0 = 1, then normalised: the balance equations of states 1.. in the
    # unknowns π_1.. (state 0's equation is redundant). The transposed matrix is banded (from
    # state i the chain moves to max(i − c, 0) .. + support), so the sparse solve is fast; rows
    # past the truncation are dropped.
    base = np.maximum(np.arange(size) - workers, 0)
    rows = base[:, None] + np.arange(support)[None, :]
    cols = np.broadcast_to(np.arange(size)[:, None], rows.shape)
    values = np.broadcast_to(arrivals[None, :], rows.shape)
    keep = rows < size
    transposed = sparse.csc_matrix((values[keep], (rows[keep], cols[keep])), shape=(size, size))
    system = (transposed - sparse.identity(size, format="csc")).tocsc()
    rest = spsolve(system[1:, 1:], -system[1:, 0].toarray().ravel())
    pi = np.concatenate([[1.0], rest])
    pi /= pi.sum()
    if pi[-max(size // 10, 1) :].sum() > 1e-9:
        raise ArithmeticError(f"M/D/{workers} at load {load:.6f}: the truncated chain ({size} states) is too short")
    return float(np.arange(size) @ pi)


def peak_rate(rsat_ms: float, workers: int = 1, service_ms: float = 5.0) -> float:
    """The load λ* (req/s) whose mean response is `rsat_ms` (bisection; W rises with the load)."""
    if rsat_ms <= service_ms:
        raise ValueError(f"Rsat {rsat_ms} ms is not above the service time {service_ms} ms")
    low, high = 0.0, workers * 1000.0 / service_ms
    for _ in range(60):
        middle = (low + high) / 2
        if middle > 0 and mean_response_ms(round(middle, 9), workers, service_ms) < rsat_ms:
            low = middle
        else:
            high = middle
        if high - low < 1e-7 * high:
            break
    return (low + high) / 2


def peak_region(rsat_ms: float, width: float, workers: int = 1, service_ms: float = 5.0) -> tuple[float, float]:
    """The loads whose mean response is Rsat(1−s) and Rsat(1+s): the peak region on the load axis."""
    return (
        peak_rate(rsat_ms * (1 - width), workers, service_ms),
        peak_rate(rsat_ms * (1 + width), workers, service_ms),
    )


# --------------------------------------------------------------------------- the server process


class _Connection:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""
        self.closing = False  # the client closed (or asked to): close once nothing is pending


class _Server:
    """The I/O thread (`serve`) and the timer thread (`send_loop`)."""

    def __init__(self, listener: socket.socket, workers: int, service_ms: float, docroot: Path | None):
        self.listener = listener
        self.service_ns = round(service_ms * 1e6)
        self.free_at = [0] * workers  # a heap: when each worker is next free (monotonic ns)
        self.docroot = docroot.resolve() if docroot else None
        self.replies: list = []  # heap of (end_ns, sequence, connection, bytes or None to close)
        self.sequence = 0
        self.lock = threading.Condition()
        self.lateness_ns: list[int] = []
        self.stopping = False

    # ---- the I/O thread
    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        self.listener.setblocking(False)
        selector.register(self.listener, selectors.EVENT_READ)
        while not self.stopping:
            events = selector.select(timeout=0.2)
            arrived = time.monotonic_ns()  # one stamp per wake-up: before any parsing
            for key, _ in events:
                if key.fileobj is self.listener:
                    try:
                        sock, _ = self.listener.accept()
                    except BlockingIOError:
                        continue
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    selector.register(sock, selectors.EVENT_READ, _Connection(sock))
                    continue
                connection: _Connection = key.data
                try:
                    data = connection.sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(connection.sock)
                    self._schedule(connection, None, arrived, close=True)
                    continue
                connection.buffer += data
                while (request := self._take_request(connection)) is not None:
                    self._schedule(connection, self._respond(*request), arrived)
                    if connection.closing:
                        selector.unregister(connection.sock)
                        self._schedule(connection, None, arrived, close=True)
                        break

    def _take_request(self, connection: _Connection) -> tuple[str, str, dict] | None:
        end = connection.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = connection.buffer[:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        try:
            body = int(headers.get("content-length", "0") or 0)
        except ValueError:  # no telling where the next request starts: answer this one, then close
            body, connection.closing = 0, True
        if len(connection.buffer) < end + 4 + body:
            return None
        connection.buffer = connection.buffer[end + 4 + body :]
        parts = head[0].split()
        method, target, version = (parts + ["", "", ""])[:3]
        if headers.get("connection", "").lower() == "close" or version == "HTTP/1.0":
            connection.closing = True
        return method, target, headers

    def _respond(self, method: str, target: str, headers: dict) -> bytes:
        if method == "OPTIONS":
            return _reply(200, b"", {"Allow": "GET, HEAD, OPTIONS"})
        if method not in ("GET", "HEAD"):
            return _reply(405, b"", {"Allow": "GET, HEAD, OPTIONS"})
        status, body = 200, b""
        if self.docroot is not None:
            path = urllib.parse.unquote(urllib.parse.urlsplit(target).path)
            local = (self.docroot / path.lstrip("/")).resolve()
            if local != self.docroot and self.docroot not in local.parents:
                status = 404
            elif local.is_dir():
                body = "".join(f"{p.name}{'/' if p.is_dir() else ''}\n" for p in sorted(local.iterdir())).encode()
            elif local.is_file() and method == "HEAD":
                return _reply(200, b"", {"Content-Length": str(local.stat().st_size)}, head=True)
            elif local.is_file():
                body = local.read_bytes()
            else:
                status = 404
        return _reply(status, body, {}, head=method == "HEAD")  # a HEAD states the length a GET would send

    def _schedule(self, connection: _Connection, reply: bytes | None, arrived_ns: int, close: bool = False) -> None:
        with self.lock:
            if close:
                # After every reply already scheduled on this connection (they all end by then).
                end = max([arrived_ns, *(e for e, _, c, _ in self.replies if c is connection)])
            else:
                start = max(arrived_ns, self.free_at[0])
                end = start + self.service_ns
                heapq.heapreplace(self.free_at, end)
            self.sequence += 1
            heapq.heappush(self.replies, (end, self.sequence, connection, reply))
            self.lock.notify()

    # ---- the timer thread
    def send_loop(self) -> None:
        while True:
            with self.lock:
                while not self.replies and not self.stopping:
                    self.lock.wait()
                if self.stopping and not self.replies:
                    return
                end, _, connection, reply = self.replies[0]
                wait_ns = end - time.monotonic_ns() - SPIN_NS
                if wait_ns > 0:
                    self.lock.wait(wait_ns / 1e9)  # a new, earlier reply wakes us too
                    continue
                heapq.heappop(self.replies)
            while time.monotonic_ns() < end:
                pass
            sent = time.monotonic_ns()
            if reply is None:
                connection.sock.close()
                continue
            try:
                connection.sock.sendall(reply)
            except OSError:
                pass  # the client went away; its reply has nowhere to go
            self.lateness_ns.append(sent - end)

    def stats(self) -> dict:
        late = sorted(self.lateness_ns)
        if not late:
            return {"replies": 0}
        return {
            "replies": len(late),
            "lateness_mean_ms": sum(late) / len(late) / 1e6,
            "lateness_p99_ms": late[min(len(late) - 1, int(0.99 * len(late)))] / 1e6,
            "lateness_max_ms": late[-1] / 1e6,
        }


def _reply(status: int, body: bytes, headers: dict, head: bool = False) -> bytes:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[status]
    lines = [f"HTTP/1.1 {status} {reason}", "Server: peakbench-mdc"]
    if "Content-Length" not in headers:
        headers = {**headers, "Content-Length": str(len(body))}
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head else body)


def serve(
    port: int,
    workers: int,
    service_ms: float,
    docroot: Path | None,
    stats_path: Path | None,
    host: str = "127.0.0.1",
    realtime: bool = False,
) -> None:
    """Run the server until SIGTERM; then write the reply-timing stats to `stats_path`."""
    try:  # 1 µs timer slack: the timer thread's sleeps end when asked, not up to 50 µs later
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if realtime:  # ahead of ordinary work on a busy machine; it uses a few % of a CPU
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    sys.setswitchinterval(0.0002)  # a woken timer thread waits at most this long for the interpreter
    listener = socket.create_server((host, port), backlog=4096, reuse_port=False)
    server = _Server(listener, workers, service_ms, docroot)
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "stopping", True))
    sender = threading.Thread(target=server.send_loop, daemon=True)
    sender.start()
    server.serve()
    with server.lock:
        server.lock.notify()
    sender.join(timeout=5)
    if stats_path is not None:
        stats_path.write_text(json.dumps(server.stats()))


# --------------------------------------------------------------------------- the handle tests use


class MDCServer:
    """One M/D/c server on 127.0.0.1 (a free port by default), in its own process."""

    def __init__(
        self,
        workers: int = 1,
        service_ms: float = 5.0,
        docroot: Path | None = None,
        *,
        port: int | None = None,
        start_timeout_s: float = 10.0,
        realtime: bool | None = None,
    ):
        if workers < 1 or service_ms <= 0:
            raise ValueError(f"need workers >= 1 and service_ms > 0 (got {workers}, {service_ms})")
        self.workers = workers
        self.service_ms = service_ms
        self.docroot = Path(docroot).absolute() if docroot else None
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        # Real-time scheduling keeps the replies on time on a busy machine; root may use it.
        self.realtime = os.geteuid() == 0 if realtime is None else realtime
        self.process: subprocess.Popen | None = None
        self.stats: dict | None = None
        self._workdir: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def mean_response_ms(self, rate: float) -> float:
        return mean_response_ms(rate, self.workers, self.service_ms)

    def peak_rate(self, rsat_ms: float) -> float:
        return peak_rate(rsat_ms, self.workers, self.service_ms)

    def peak_region(self, rsat_ms: float, width: float) -> tuple[float, float]:
        return peak_region(rsat_ms, width, self.workers, self.service_ms)

    def start(self) -> str:
        """Start the server process; its URL once it listens."""
        self._workdir = Path(tempfile.mkdtemp(prefix="peakbench-mdc-"))
        command = [
            sys.executable,
            "-m",
            "peakbench.servers.mdc",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--service-ms",
            repr(self.service_ms),
            "--stats",
            str(self._workdir / "stats.json"),
        ]
        if self.docroot:
            command += ["--docroot", str(self.docroot)]
        if self.realtime:
            command.append("--realtime")
        python_path = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [python_path, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=env
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                message = self.process.stderr.read().decode(errors="replace").strip()
                raise RuntimeError(f"M/D/c server exited at start (status {self.process.returncode}): {message}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self.url
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"M/D/c server did not listen on 127.0.0.1:{self.port} within {self.start_timeout_s} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM by PID (it writes its stats and exits), then SIGKILL of its session."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)
        process.stderr.close()
        stats = self._workdir / "stats.json"
        self.stats = json.loads(stats.read_text()) if stats.exists() else None
        stats.unlink(missing_ok=True)
        self._workdir.rmdir()
        self.process = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def measure_precision(requests: int = 2000, service_ms: float = 5.0, realtime: bool | None = None) -> dict:
    """One client, one request at a time (no queue): the client's response − D, and the server's
    own lateness of its sends."""
    with MDCServer(1, service_ms, realtime=realtime) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        extra = []
        for _ in range(requests):
            begin = time.monotonic_ns()
            sock.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += sock.recv(4096)
            extra.append((time.monotonic_ns() - begin) / 1e6 - service_ms)
            time.sleep(0.001)  # the worker is idle again before the next request
        sock.close()
    extra.sort()
    return {
        "requests": requests,
        "client_extra_median_ms": extra[len(extra) // 2],
        "client_extra_mean_ms": sum(extra) / len(extra),
        "client_extra_p99_ms": extra[int(0.99 * len(extra))],
        "server": server.stats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m peakbench.servers.mdc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--service-ms", type=float, default=5.0)
    parser.add_argument("--docroot", type=Path)
    parser.add_argument("--stats", type=Path, help="write the reply-timing stats here on SIGTERM")
    parser.add_argument("--realtime", action="store_true", help="run under SCHED_FIFO (needs root or CAP_SYS_NICE)")
    parser.add_argument("--precision", action="store_true", help="measure the timing precision and exit")
    args = parser.parse_args(argv)
    if args.precision:
        print(json.dumps(measure_precision(service_ms=args.service_ms, realtime=args.realtime), indent=1))
        return 0
    serve(args.port, args.workers, args.service_ms, args.docroot, args.stats, realtime=args.realtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
