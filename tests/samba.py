"""A real SMB2/3 server for tests and benchmarks: Samba's smbd on 127.0.0.1.

smbd runs as root in the foreground with a private configuration: its own private,
lock, state, cache and pid directories in a temporary work directory, `smb ports`
set to a free port of its own (so no system service is needed and nothing on 445 is
touched), and one user (`root`, whose Unix account exists everywhere) given an SMB
password with `smbpasswd -c CONF -s -a`. Profiling counters are on (`smbd profiling
level = count`), so a test can read what the server saw with `smbstatus --profile`.
smbd is stopped by PID (its process group: smbd forks a child per client).

    with Samba() as server:              # shares server.share_dir as "share"
        url = server.url("sub")          # smb://root:PASSWORD@127.0.0.1:PORT/share/sub
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from debian import apt_install
from ports import free_port

USER = "root"
PASSWORD = "peakbench-Samba-1"
SHARE = "share"
PACKAGES = ("samba", "smbclient")

CONFIG = """\
[global]
    server role = standalone server
    smb ports = {port}
    interfaces = 127.0.0.1
    bind interfaces only = yes
    disable netbios = yes
    private dir = {work}/private
    lock directory = {work}/lock
    state directory = {work}/state
    cache directory = {work}/cache
    pid directory = {work}/pid
    ncalrpc dir = {work}/ncalrpc
    binddns dir = {work}/binddns
    log file = {work}/log.%m
    max log size = 1000
    passdb backend = tdbsam:{work}/private/passdb.tdb
    map to guest = never
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
    server min protocol = SMB2_10
    server max protocol = {max_protocol}
    smbd profiling level = count
{extra}
[{share}]
    path = {share_dir}
    read only = no
    browseable = yes
"""


class ServerUnavailable(Exception):
    """smbd cannot be had here (not installed and not installable, not root)."""


def ensure_installed() -> None:
    if all(map(shutil.which, ("smbd", "smbpasswd", "smbstatus"))):
        return
    failed = apt_install(PACKAGES)
    if failed or not shutil.which("smbd"):
        raise ServerUnavailable(failed or "smbd is missing after apt-get install")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop_group(pid: int, timeout_s: float = 5.0) -> None:
    """SIGTERM smbd's process group (smbd and its per-client children), SIGKILL after `timeout_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.02)


class Samba:
    """smbd sharing a fresh temporary directory as `share` on 127.0.0.1 at a free port."""

    def __init__(
        self,
        extra_config: str = "",
        max_protocol: str = "SMB3_11",
        port: int | None = None,
        workdir: Path | None = None,
    ):
        self.extra_config = extra_config
        self.max_protocol = max_protocol
        # A free port by default, so two test runs (or two engineers) each get their own smbd.
        self.port = port or free_port()
        # A given work directory (and its share) is kept after stop, so a benchmark's file sets
        # outlive a restart; by default it is a temporary one, removed.
        self.kept_workdir = workdir
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None

    @property
    def config(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "smb.conf"

    def url(self, sub: str = "", options: str = "", password: str = PASSWORD, share: str = SHARE) -> str:
        """smb://root:PASSWORD@127.0.0.1:PORT/share[/sub][?options]; a named subdirectory is made first."""
        path = f"/{share}"
        if sub:
            (self.share_dir / sub).mkdir(parents=True, exist_ok=True)
            path += "/" + sub
        return f"smb://{USER}:{password}@127.0.0.1:{self.port}{path}" + (f"?{options}" if options else "")

    def start(self) -> Samba:
        ensure_installed()
        if _listening(self.port):
            raise ServerUnavailable(f"port {self.port} is already taken")
        self.workdir = self.kept_workdir or Path(tempfile.mkdtemp(prefix="peakbench-samba-"))
        self.share_dir = self.workdir / "share"
        for sub in ("private", "lock", "state", "cache", "pid", "ncalrpc", "binddns", "share"):
            (self.workdir / sub).mkdir(mode=0o755, exist_ok=self.kept_workdir is not None)
        self.config.write_text(
            CONFIG.format(
                port=self.port,
                work=self.workdir,
                share=SHARE,
                share_dir=self.share_dir,
                max_protocol=self.max_protocol,
                extra=self.extra_config,
            )
        )
        added = subprocess.run(
            ["smbpasswd", "-c", str(self.config), "-s", "-a", USER],
            input=f"{PASSWORD}\n{PASSWORD}\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        if added.returncode != 0:
            self.stop()
            raise ServerUnavailable(f"smbpasswd -a {USER} failed: {added.stderr.strip()[-300:]}")
        self.process = subprocess.Popen(
            ["smbd", "--foreground", "--no-process-group", "-s", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self._log_tail()
                self.stop()
                raise ServerUnavailable(f"smbd did not start: {tail}")
            time.sleep(0.02)
        return self

    def _log_tail(self) -> str:
        log = self.workdir / "log.smbd" if self.workdir else None
        return log.read_text(errors="replace")[-800:] if log and log.exists() else ""

    def profile(self) -> dict[str, int]:
        """Samba's profiling counters (`smbstatus --profile`): name -> value, e.g.
        smb2_read_count, smb2_create_count (cumulative since smbd started)."""
        done = subprocess.run(
            ["smbstatus", "-s", str(self.config), "--profile"], capture_output=True, text=True, timeout=30
        )
        if done.returncode != 0:
            raise RuntimeError(f"smbstatus --profile: {done.stderr.strip()}")
        return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+):\s+(\d+)$", done.stdout, re.M)}

    def smb2_counts(self) -> dict[str, int]:
        """Requests of each SMB2 command the server has handled: {"read": n, "create": n, ...}."""
        return {
            name[len("smb2_") : -len("_count")]: value
            for name, value in self.profile().items()
            if name.startswith("smb2_") and name.endswith("_count")
        }

    def kill(self) -> None:
        """Kill smbd and its children at once (a crash)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def _helpers(self) -> list[int]:
        """samba-dcerpcd and its rpcd_* helpers, which smbd starts on demand in sessions of their
        own: found by this server's configuration file on their command lines."""
        mark = f"--configfile={self.config}".encode()
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if mark in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    found.append(int(pid))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        if self.process is not None:
            _stop_group(self.process.pid)
            if self.process.poll() is None:
                self.process.wait(timeout=10)
            self.process = None
        if self.workdir is not None:
            for pid in self._helpers():
                _stop_group(pid)
        if self.workdir is not None and self.kept_workdir is None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None

    def serve_module(self) -> Iterator[Samba]:
        """For a module fixture (`yield from Samba(...).serve_module()`): started, yielded,
        stopped; a server that cannot start fails the test."""
        import pytest

        try:
            self.start()
        except ServerUnavailable as error:
            pytest.fail(f"smbd could not be started: {error}")
        yield self
        self.stop()

    def __enter__(self) -> Samba:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
