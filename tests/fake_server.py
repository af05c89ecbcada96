"""The socket side of the fake servers (fake_nfs.py, fake_smb.py): a listener on a free local
port, a thread per connection, and 4-byte length-prefixed messages (an RPC record marker or an
SMB2 Direct TCP header: the length is the low 31 bits, big-endian). A subclass answers each
message with `_answer(message, state)`, `state` being a dict of the connection's own."""

from __future__ import annotations

import socket
import struct
import threading


def spec_without_files(target: dict, mix: dict, rate: float, runtime_s: float) -> dict:
    """A trial spec for a fake server: no file set to prepare (a fake has none), a short drain."""
    return {
        "schema": "peakbench.trial-spec/1",
        "target": target,
        "seed": 1,
        "load": {"rate": rate, "warmup_s": 0, "runtime_s": runtime_s, "drain_timeout_s": 2.0},
        "fileset": {
            "files": 0,
            "files_per_dir": {"kind": "constant", "value": 1},
            "dirs_per_dir": {"kind": "constant", "value": 0},
            "max_depth": 0,
            "file_sizes": {"kind": "constant", "value": 1},
        },
        "mix": mix,
    }


class FakeServer:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self.sock.close()

    def _answer(self, message: bytes, state: dict) -> bytes:
        raise NotImplementedError

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf, state = b"", {}
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                out = b""
                while len(buf) >= 4:
                    length = struct.unpack(">I", buf[:4])[0] & 0x7FFFFFFF
                    if len(buf) < 4 + length:
                        break
                    message, buf = buf[4 : 4 + length], buf[4 + length :]
                    out += self._answer(message, state)
                if out:
                    try:
                        conn.sendall(out)
                    except OSError:
                        return
