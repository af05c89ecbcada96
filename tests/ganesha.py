"""A real NFSv3 server for tests and benchmarks: nfs-ganesha (VFS FSAL) on 127.0.0.1.

rpcbind must run first (ganesha registers MOUNT and NFS with it); ganesha
listens on the fixed NFS port 2049 and rpcbind on 111, so only one such server
can run per machine. A ganesha left over from an earlier run (found by its pid
file, or as the ganesha.nfsd process holding port 2049) is stopped first; an
rpcbind that is already running is reused and left alone. Both are stopped by
PID afterwards, only if this module started them.

    with Ganesha() as server:          # exports server.export_dir as /export
        url = server.url("sub")        # nfs://127.0.0.1/export/sub (made fresh)
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from debian import apt_install

NFS_PORT = 2049
RPCBIND_PORT = 111
STATE_DIR = Path(tempfile.gettempdir()) / "peakbench-ganesha"
PIDFILE = STATE_DIR / "ganesha.pid"
# The private D-Bus daemon's pid: it belongs to the server, so a leftover is stopped with it.
BUS_PIDFILE = STATE_DIR / "dbus-daemon.pid"
# dbus-daemon and gdbus: ganesha's statistics (see `Ganesha.dbus`).
PACKAGES = ("nfs-ganesha", "nfs-ganesha-vfs", "rpcbind", "dbus-daemon", "libglib2.0-bin")

CONFIG = """\
NFS_CORE_PARAM {{
    Protocols = 3;
    NFS_Port = {nfs_port};
    Bind_Addr = 127.0.0.1;
    mount_path_pseudo = true;
    Enable_NLM = false;
    Enable_RQUOTA = false;
{core}}}
NFSV4 {{ Graceless = true; }}
NFS_KRB5 {{ Active_krb5 = false; }}
{extra}
EXPORT {{
    Export_Id = 1;
    Path = {export_dir};
    Pseudo = /export;
    Protocols = 3;
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
"""


# A private system-type bus for ganesha's statistics (ganesha serves them only over D-Bus,
# and no system bus runs here): root may own ganesha's name and call it.
BUS_CONFIG = """\
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy user="root">
    <allow own="org.ganesha.nfsd"/>
    <allow send_destination="org.ganesha.nfsd"/>
    <allow send_destination="org.freedesktop.DBus"/>
    <allow receive_sender="*"/>
    <allow send_requested_reply="true"/>
    <allow receive_requested_reply="true"/>
  </policy>
</busconfig>
"""


def _gvariant(text: str):
    """gdbus's text form of a reply (tuples, arrays, strings, numbers with type prefixes such as
    `uint64 5`) as Python values; a reply whose status (its first field) is false is an error."""
    untyped = re.sub(r"@[a-z(){}]+ |\b(?:u?int(?:16|32|64)|byte|double) ", "", text.strip())  # @a(st) []: empty
    value = ast.literal_eval(re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", untyped)))
    if not value[0]:
        raise RuntimeError(f"ganesha answered: {text.strip()[:300]}")
    return value


class ServerUnavailable(Exception):
    """ganesha or rpcbind cannot be had here (not installed and not installable, not root)."""


def ensure_installed() -> None:
    if all(map(shutil.which, ("ganesha.nfsd", "dbus-daemon", "gdbus"))) and _rpcbind_binary():
        return
    failed = apt_install(PACKAGES)
    if failed or not shutil.which("ganesha.nfsd"):
        raise ServerUnavailable(failed or "ganesha.nfsd is missing after apt-get install")


def _rpcbind_binary() -> str | None:
    return shutil.which("rpcbind") or next(
        (p for p in ("/usr/sbin/rpcbind", "/sbin/rpcbind") if os.access(p, os.X_OK)), None
    )


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _port_owner(port: int) -> int | None:
    """The PID of the process listening on a local TCP port, from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _stop(pid: int, timeout_s: float = 5.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        _reap(pid)
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_leftover() -> None:
    """Stop a ganesha that an earlier run left behind (by its pid file, or by port 2049), and
    its D-Bus daemon (by its pid file)."""
    try:
        bus = int(BUS_PIDFILE.read_text().strip())
        if _comm(bus).startswith("dbus-daemon"):
            _stop(bus)
    except (OSError, ValueError):
        pass
    BUS_PIDFILE.unlink(missing_ok=True)
    candidates = []
    try:
        candidates.append(int(PIDFILE.read_text().strip()))
    except (OSError, ValueError):
        pass
    owner = _port_owner(NFS_PORT)
    if owner is not None:
        candidates.append(owner)
    for pid in candidates:
        if _comm(pid).startswith("ganesha"):
            _stop(pid)
    deadline = time.monotonic() + 5
    while _listening(NFS_PORT) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _listening(NFS_PORT):
        raise ServerUnavailable(f"port {NFS_PORT} is held by pid {_port_owner(NFS_PORT)}, which is not a ganesha")


def _registered(prog: int, vers: int) -> bool:
    """Ask the portmapper (GETPORT over TCP) whether a program is registered."""
    import struct

    call = struct.pack(">IIIIIIIIIIIIII", 0x70626231, 0, 2, 100000, 2, 3, 0, 0, 0, 0, prog, vers, 6, 0)
    try:
        with socket.create_connection(("127.0.0.1", RPCBIND_PORT), timeout=1) as s:
            s.sendall(struct.pack(">I", 0x80000000 | len(call)) + call)
            data = b""
            while len(data) < 4 + 28:
                chunk = s.recv(4096)
                if not chunk:
                    return False
                data += chunk
        return struct.unpack(">I", data[-4:])[0] != 0
    except OSError:
        return False


class Ganesha:
    """nfs-ganesha exporting a fresh temporary directory as /export on 127.0.0.1."""

    def __init__(self, extra_config: str = "", workdir: Path | None = None, core_params: str = ""):
        """`core_params`: more settings for the config's NFS_CORE_PARAM block."""
        self.extra_config = extra_config
        self.core_params = core_params
        self.workdir = Path(workdir) if workdir else None
        self.process: subprocess.Popen | None = None
        self.rpcbind: subprocess.Popen | None = None
        self.bus: subprocess.Popen | None = None
        self._own_workdir = workdir is None

    def url(self, sub: str = "", options: str = "") -> str:
        """nfs://127.0.0.1/export[/sub][?options]; a named subdirectory is made first."""
        path = "/export"
        if sub:
            (self.export_dir / sub).mkdir(parents=True, exist_ok=True)
            path += "/" + sub
        return f"nfs://127.0.0.1{path}" + (f"?{options}" if options else "")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> Ganesha:
        ensure_installed()
        stop_leftover()
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="peakbench-ganesha-"))
        self.export_dir = self.workdir / "export"
        self.export_dir.mkdir(parents=True, exist_ok=True)
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        if not _listening(RPCBIND_PORT):
            Path("/run/rpcbind").mkdir(parents=True, exist_ok=True)
            self.rpcbind = subprocess.Popen(
                [_rpcbind_binary(), "-f", "-w"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            deadline = time.monotonic() + 10
            while not _listening(RPCBIND_PORT):
                if self.rpcbind.poll() is not None or time.monotonic() > deadline:
                    raise ServerUnavailable("rpcbind did not start")
                time.sleep(0.01)
        else:
            # A reused rpcbind may still hold a dead ganesha's registrations (a MOUNT port
            # nobody listens on): drop them, so readiness below means this ganesha's.
            rpcinfo = shutil.which("rpcinfo") or "/usr/sbin/rpcinfo"
            if os.access(rpcinfo, os.X_OK):
                for prog, vers in ((100003, 3), (100005, 1), (100005, 3), (100003, 4)):
                    subprocess.run([rpcinfo, "-d", str(prog), str(vers)], capture_output=True, timeout=10, check=False)
        self._start_bus()
        self._full_v3_stats = False  # a new ganesha counts per procedure only once told to
        config = self.workdir / "ganesha.conf"
        config.write_text(
            CONFIG.format(nfs_port=NFS_PORT, export_dir=self.export_dir, extra=self.extra_config, core=self.core_params)
        )
        self.log = self.workdir / "ganesha.log"
        PIDFILE.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            ["ganesha.nfsd", "-F", "-f", str(config), "-L", str(self.log), "-p", str(PIDFILE), "-N", "NIV_EVENT"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": self.bus_address},
        )
        deadline = time.monotonic() + 20
        while not (_listening(NFS_PORT) and _registered(100005, 3) and _registered(100003, 3)):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text()[-800:] if self.log.exists() else ""
                self.stop()
                raise ServerUnavailable(f"ganesha did not start: {tail}")
            time.sleep(0.01)
        return self

    def _start_bus(self) -> None:
        """A private dbus-daemon in the work directory, for ganesha's statistics."""
        socket_path = self.workdir / "bus"
        socket_path.unlink(missing_ok=True)
        config = self.workdir / "bus.conf"
        config.write_text(BUS_CONFIG.format(socket=socket_path))
        self.bus_address = f"unix:path={socket_path}"
        self.bus = subprocess.Popen(
            ["dbus-daemon", f"--config-file={config}", "--nofork"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        BUS_PIDFILE.write_text(str(self.bus.pid))
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            if self.bus.poll() is not None or time.monotonic() > deadline:
                raise ServerUnavailable(f"dbus-daemon did not start (config {config})")
            time.sleep(0.01)

    def dbus(self, path: str, method: str, *args: str) -> str:
        """Call one of ganesha's D-Bus methods (`interface.Method`) on its private bus: gdbus's
        reply, a GVariant in text form."""
        done = subprocess.run(
            [
                "gdbus",
                "call",
                "--system",
                "--dest",
                "org.ganesha.nfsd",
                "--object-path",
                path,
                "--method",
                method,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": self.bus_address},
        )
        if done.returncode != 0:
            raise RuntimeError(f"gdbus call {path} {method}: {done.stderr.strip()}")
        return done.stdout

    def nfs3_stats(self) -> dict:
        """ganesha's NFSv3 counters since it started: calls per procedure (GETATTR, READ, ...; a
        procedure never called is absent) and the bytes READ and WRITE moved. Per-procedure
        counting ("v3_full") is off in ganesha by default; the first call turns it on, so
        compare two readings, never one reading with zero."""
        stats = "/org/ganesha/nfsd/ExportMgr", "org.ganesha.nfsd.exportstats."
        if not self._full_v3_stats:
            _gvariant(self.dbus(stats[0], stats[1] + "EnableStats", "v3_full"))
            self._full_v3_stats = True
        # (ok, message, time, [(procedure, total, errors, dups, mean, min, max latency)], message)
        full = _gvariant(self.dbus(stats[0], stats[1] + "GetFULLV3Stats"))
        # (ok, message, time, read, write), each (requested, transferred, ops, errors, latency, queued)
        io = _gvariant(self.dbus(stats[0], stats[1] + "GetNFSv3IO", "uint16 1"))
        return {"calls": {name: total for name, total, *_ in full[3]}, "read_bytes": io[3][1], "write_bytes": io[4][1]}

    def cpu_seconds(self) -> float:
        """User + system CPU time of the ganesha process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        """Kill the server at once (a crash), leaving rpcbind running."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process.pid)
            self.process.wait(timeout=10) if self.process.poll() is None else None
            self.process = None
        PIDFILE.unlink(missing_ok=True)
        if self.bus is not None:
            _stop(self.bus.pid)
            self.bus.wait(timeout=10) if self.bus.poll() is None else None
            self.bus = None
            BUS_PIDFILE.unlink(missing_ok=True)
        if self.rpcbind is not None:
            _stop(self.rpcbind.pid)
            self.rpcbind.wait(timeout=10) if self.rpcbind.poll() is None else None
            self.rpcbind = None
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Ganesha:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
