"""A TCP proxy in front of a real server that changes what the server replies, on its way back to the
client: faults a working NFS or SMB server cannot be made to produce. It forwards both directions
unchanged, except that every occurrence of one byte string in the server's replies is replaced by
another of the same length: one byte of file data flipped (`flipped_content`), or an NFS mode
(`nfs_mode`)."""

from __future__ import annotations

import json
import re
import select
import socket
import struct
import subprocess
import threading
from pathlib import Path


def content(offset: int, length: int) -> bytes:
    """engine/src/content.rs `fill`: byte i is the top byte of (offset + i) * 0x9e3779b97f4a7c15 mod 2^64."""
    return bytes((((offset + i) * 0x9E3779B97F4A7C15) & (2**64 - 1)) >> 56 for i in range(length))


def flipped_content(at: int) -> tuple[bytes, bytes]:
    """The 1,024 bytes of content at offset `at`, and the same with its first byte changed. The content
    repeats over shorter stretches; 1,024 bytes from offset 16384 occur nowhere else in the first 204,096."""
    marker = content(at, 1024)
    return marker, bytes([marker[0] ^ 1]) + marker[1:]


def nfs_mode(mode: int, reported: int) -> tuple[bytes, bytes]:
    """An NFSv3 fattr3's start for a regular file of one link with `mode` (type, mode, nlink), and the same
    reporting `reported` instead."""
    return struct.pack(">3I", 1, mode, 1), struct.pack(">3I", 1, reported, 1)


class CorruptingProxy:
    def __init__(self, upstream: tuple[str, int], replace: tuple[bytes, bytes]) -> None:
        self.upstream = upstream
        self.marker, self.changed = replace
        assert len(self.marker) == len(self.changed)
        self.flipped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closing = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream, timeout=10)
            server.settimeout(None)
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        held = b""  # a reply's tail that may be the start of the marker, sent once the rest arrives (or 50 ms pass)
        try:
            while True:
                ready, _, _ = select.select([source], [], [], 0.05)
                if not ready:
                    if held:
                        sink.sendall(held)
                        held = b""
                    if self.closing:
                        return
                    continue
                data = source.recv(1 << 16)
                if not data:
                    sink.sendall(held)
                    return
                if not replies:
                    sink.sendall(data)
                    continue
                data = held + data
                if self.marker in data:
                    self.flipped += data.count(self.marker)
                    data = data.replace(self.marker, self.changed)
                keep = next((k for k in range(len(self.marker) - 1, 0, -1) if data.endswith(self.marker[:k])), 0)
                held = data[len(data) - keep :] if keep else b""
                sink.sendall(data[: len(data) - keep])
        except OSError:
            return
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closing = True
        self.listener.close()
        for s in self.sockets:
            s.close()


def assert_caught(done: subprocess.CompletedProcess, out: Path, proxy: CorruptingProxy, op: str, detail: str) -> None:
    """The change fails exactly the check of `op`, with a one-line detail (a regular expression) naming the op and
    the path; every other check passes and the scratch directory is removed."""
    assert proxy.flipped >= 1, "the proxy never saw what it was to change"
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(out.read_text())
    failed = [c for c in result["checks"] if c["status"] == "fail"]
    assert [c["op"] for c in failed] == [op], failed
    assert re.fullmatch(detail, failed[0]["detail"]), failed[0]["detail"]
    assert result["cleaned_up"] and "VALIDATION FAILED" in done.stdout


READ_CAUGHT = r"READ \.peakbench-validate-\d+/file: byte 16384 differs from the content written there"
