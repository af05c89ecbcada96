"""A misbehaving NFSv3 server for fault tests: MOUNT and NFS on one local port.

MNT, NULL, FSINFO and LOOKUP (of a file set's root) answer correctly, so the
engine connects and starts a trial; every other
call is answered according to `mode`:
  ok-status N    a well-formed reply with nfsstat3 N (e.g. 10004 NOTSUPP)
  garbage        random bytes in a well-formed record
  truncated      a reply header and half a result
  wrong-xid      a correct-looking reply with another XID
  oversized      a record marker announcing 100 MB
  silent         no reply at all
"""

from __future__ import annotations

import os
import struct

from fake_server import FakeServer


def _u32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}I", *values)


def _reply_header(xid: int) -> bytes:
    return _u32(xid, 1, 0, 0, 0, 0)  # REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS


def _record(payload: bytes) -> bytes:
    return _u32(0x80000000 | len(payload)) + payload


FSINFO_OK = (
    _u32(0, 0) + _u32(65536, 65536, 4096, 65536, 65536, 4096, 8192) + struct.pack(">Q", 2**40) + _u32(0, 1, 0x1B)
)


class FakeNfs(FakeServer):
    def __init__(self, mode: str, status: int = 10004):
        self.mode = mode
        self.status = status
        self.calls = 0
        super().__init__()

    def url(self, options: str = "") -> str:
        extra = f"&{options}" if options else ""
        return f"nfs://127.0.0.1:{self.port}/export?mountport={self.port}{extra}"

    def _answer(self, call: bytes, state: dict) -> bytes:
        xid, _, _, prog, _, proc = struct.unpack(">6I", call[:24])
        self.calls += 1
        if prog == 100005:  # MOUNT: MNT gives a handle, the rest nothing
            body = _u32(0, 8) + b"rootfh00" + _u32(1, 1) if proc == 1 else b""
            return _record(_reply_header(xid) + body)
        if proc == 0:
            return _record(_reply_header(xid))
        if proc == 19:
            return _record(_reply_header(xid) + FSINFO_OK)
        if proc == 3:  # LOOKUP: a file set's root exists, nothing else (no manifest)
            at = 24
            for _ in range(2):  # credential and verifier: flavor, length, body
                at += 8 + (struct.unpack(">I", call[at + 4 : at + 8])[0] + 3) // 4 * 4
            fh_len = struct.unpack(">I", call[at : at + 4])[0]
            at += 4 + (fh_len + 3) // 4 * 4
            name_len = struct.unpack(">I", call[at : at + 4])[0]
            name = call[at + 4 : at + 4 + name_len]
            if name.startswith(b"fs-"):
                return _record(_reply_header(xid) + _u32(0, 8) + b"fsroot00" + _u32(0, 0))
            return _record(_reply_header(xid) + _u32(2, 0))
        mode = self.mode
        if mode == "ok-status":
            # Every result union starts with the status; failures carry (empty) post-op data.
            return _record(_reply_header(xid) + _u32(self.status) + _u32(0) * 4)
        if mode == "garbage":
            return _record(_reply_header(xid) + os.urandom(37))
        if mode == "truncated":
            return _record(_reply_header(xid) + _u32(0, 1, 0o644))
        if mode == "wrong-xid":
            return _record(_reply_header(xid ^ 0x5A5A5A5A) + _u32(0) * 30)
        if mode == "oversized":
            return _u32(0x80000000 | 100_000_000) + b"x" * 64
        return b""  # silent
