"""A misbehaving SMB2 server for fault tests: faults Samba's smbd cannot be made to show on
demand (it never expires an NTLM session, never withholds credits, never garbles a frame).

NEGOTIATE (SMB 2.1), SESSION_SETUP (any NTLM answer is accepted) and TREE_CONNECT answer
correctly, and so does CREATE + QUERY_INFO + CLOSE on a file set's root (a name starting
"fs-"); every other CREATE finds nothing (there is no manifest). ECHO is answered
according to `mode`:
  ok            a well-formed reply
  garbage       a well-formed frame of random bytes (no SMB2 header)
  long-frame    a NetBIOS length 16 bytes longer than the message (it swallows the next)
  short-frame   a NetBIOS length of 40, shorter than an SMB2 header
  silent        no reply at all
  stall         a well-formed reply to the first STALL_AFTER echoes, then none (a server that
                stops mid-pipeline, with requests of one write answered and others not)
  no-credits    a well-formed reply that grants no credit; only the handshake grants any
  expire        STATUS_NETWORK_SESSION_EXPIRED once a session is `session_life_s` old
and `mute` answers nothing, not even NEGOTIATE.
"""

from __future__ import annotations

import os
import struct
import threading
import time

from fake_server import FakeServer

NEGOTIATE, SESSION_SETUP, LOGOFF, TREE_CONNECT, CREATE, CLOSE, ECHO, QUERY_INFO = 0, 1, 2, 3, 5, 6, 13, 16
MORE_PROCESSING_REQUIRED = 0xC0000016
OBJECT_NAME_NOT_FOUND = 0xC0000034
NETWORK_SESSION_EXPIRED = 0xC000035C
NOT_SUPPORTED = 0xC00000BB
#: Credits the handshake grants in no-credits mode: what the client may spend before it runs out.
HANDSHAKE_CREDITS = 12
#: Echoes the stall mode answers before it goes silent.
STALL_AFTER = 30


def _header(command: int, status: int, mid: int, session: int, credits: int, tree: int = 1) -> bytes:
    return b"\xfeSMB" + struct.pack(
        "<HHIHHIIQIIQ16s", 64, 0, status, command, credits, 1, 0, mid, 0, tree, session, b""
    )


def _frame(message: bytes, extra: int = 0) -> bytes:
    return struct.pack(">I", len(message) + extra) + message


def _challenge() -> bytes:
    """An NTLMSSP CHALLENGE with empty target name and an end-of-list target information."""
    flags = 0x00000001 | 0x00000200 | 0x00080000 | 0x00800000 | 0x20000000
    return b"NTLMSSP\0" + struct.pack("<IHHIIQQHHI", 2, 0, 0, 48, flags, 0x0123456789ABCDEF, 0, 4, 4, 48) + b"\0\0\0\0"


class FakeSmb(FakeServer):
    def __init__(self, mode: str, session_life_s: float = 0.6):
        self.mode = mode
        self.session_life_s = session_life_s
        self.lock = threading.Lock()
        self.echoes = 0
        self.sessions = 0
        self.expired_replies = 0
        super().__init__()

    def url(self, options: str = "") -> str:
        return f"smb://u:p@127.0.0.1:{self.port}/share" + (f"?{options}" if options else "")

    def _answer(self, frame: bytes, state: dict) -> bytes:
        """Each message of a compound is answered in a frame of its own; `mute` answers nothing."""
        out = b""
        while frame and self.mode != "mute":
            nxt = struct.unpack_from("<I", frame, 20)[0]
            one, frame = (frame[:nxt], frame[nxt:]) if nxt else (frame, b"")
            out += self._answer_one(one, state)
        return out

    def _answer_one(self, msg: bytes, state: dict) -> bytes:
        command = struct.unpack_from("<H", msg, 12)[0]
        mid = struct.unpack_from("<Q", msg, 24)[0]
        session = state.get("session", 0)
        if command == NEGOTIATE:
            body = struct.pack(
                "<HHHH16sIIIIQQHHI", 65, 1, 0x0210, 0, b"fake-smb-server!", 0, 65536, 65536, 65536, 0, 0, 128, 0, 0
            )
            return _frame(_header(command, 0, mid, 0, 1) + body + b"\0")
        if command == SESSION_SETUP:
            if struct.unpack_from("<Q", msg, 40)[0] == 0:  # first leg: a new session
                with self.lock:
                    self.sessions += 1
                    state["session"] = session = 0x1000 + self.sessions
                token = _challenge()
                body = struct.pack("<HHHH", 9, 0, 72, len(token)) + token
                return _frame(_header(command, MORE_PROCESSING_REQUIRED, mid, session, 1) + body)
            state["since"] = time.monotonic()
            return _frame(_header(command, 0, mid, session, 1) + struct.pack("<HHHH", 9, 0, 72, 0) + b"\0")
        if command == TREE_CONNECT:
            # The client spends 3 credits on the handshake: what is left is HANDSHAKE_CREDITS.
            credits = HANDSHAKE_CREDITS if self.mode == "no-credits" else 512
            return _frame(_header(command, 0, mid, session, credits) + struct.pack("<HBBIII", 16, 1, 0, 0, 0, 0x1F01FF))
        grant = 0 if self.mode == "no-credits" else 1
        if command == CREATE:
            offset, length = struct.unpack_from("<HH", msg, 64 + 44)
            name = msg[offset : offset + length].decode("utf-16-le")
            if not name.startswith("fs-"):
                return _frame(
                    _header(command, OBJECT_NAME_NOT_FOUND, mid, session, grant)
                    + struct.pack("<HBBI", 9, 0, 0, 0)
                    + b"\0"
                )
            body = struct.pack("<HBBIQQQQQQII16sII", 89, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10, 0, b"F" * 16, 0, 0)
            return _frame(_header(command, 0, mid, session, grant) + body)
        if command == QUERY_INFO:  # FileStandardInformation of a directory
            info = struct.pack("<QQIBBH", 0, 0, 1, 0, 1, 0)
            return _frame(_header(command, 0, mid, session, grant) + struct.pack("<HHI", 9, 72, len(info)) + info)
        if command == CLOSE:
            return _frame(_header(command, 0, mid, session, grant) + struct.pack("<HHI", 60, 0, 0) + b"\0" * 52)
        if command == LOGOFF:
            return _frame(_header(command, 0, mid, session, grant) + struct.pack("<HH", 4, 0))
        if command != ECHO:
            return _frame(
                _header(command, NOT_SUPPORTED, mid, session, grant) + struct.pack("<HBBI", 9, 0, 0, 0) + b"\0"
            )
        with self.lock:
            self.echoes += 1
            echoes = self.echoes
        echo = _header(command, 0, mid, session, grant) + struct.pack("<HH", 4, 0)
        mode = self.mode
        if mode in ("ok", "no-credits") or (mode == "stall" and echoes <= STALL_AFTER):
            return _frame(echo)
        if mode == "garbage":
            return _frame(os.urandom(101))
        if mode == "long-frame":
            return _frame(echo, extra=16)
        if mode == "short-frame":
            return struct.pack(">I", 40) + echo
        if mode == "expire":
            if time.monotonic() - state.get("since", 0.0) < self.session_life_s:
                return _frame(echo)
            with self.lock:
                self.expired_replies += 1
            return _frame(
                _header(command, NETWORK_SESSION_EXPIRED, mid, session, grant)
                + struct.pack("<HBBI", 9, 0, 0, 0)
                + b"\0"
            )
        return b""  # silent, or stalled
