"""Running commands as Auto-pilot's EXEC does: N processes released together
behind a barrier, each timed (elapsed wall time; user and system CPU from
wait4's rusage) and its output kept.

The barrier: every process is forked first and blocks reading a pipe before
it execs; when all are forked, the pipe is closed and all of them exec at
once, so none starts its work before the last is ready. Each child is told
its index (PEAKBENCH_THREAD and Auto-pilot's APTHREAD, 1-based). A child
dies with the controller (PR_SET_PDEATHSIG) and runs in its own process
group, so a timeout kills everything it started.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import threading
import time
from pathlib import Path

OUTPUT_KEEP = 256 * 1024  # bytes of each stream kept in the store; the files keep everything
_PR_SET_PDEATHSIG = 1

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no libc (not Linux)
    _libc = None


@dataclasses.dataclass
class ProcessResult:
    index: int  # 1-based thread index
    argv: list[str] | str
    exit_status: int | None  # None when it was killed at the timeout
    signal: int | None
    elapsed: float  # seconds from the barrier's release to its exit
    user: float
    system: float
    timed_out: bool
    stdout: str
    stderr: str
    error: str | None = None  # could not start (exec failed)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.exit_status == 0

    def describe_failure(self) -> str:
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.elapsed:.1f} s"
        if self.signal:
            return f"killed by signal {self.signal}"
        tail = (self.stderr.strip().splitlines() or self.stdout.strip().splitlines() or [""])[-1][:300]
        return f"exit status {self.exit_status}" + (f": {tail}" if tail else "")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _read_kept(path: Path) -> str:
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > OUTPUT_KEEP:
                head = file.read(OUTPUT_KEEP // 2)
                file.seek(size - OUTPUT_KEEP // 2)
                tail = file.read()
                return (
                    head.decode(errors="replace") + f"\n[... {size - OUTPUT_KEEP} bytes left out;"
                    f" all of it is in {path} ...]\n" + tail.decode(errors="replace")
                )
            return file.read().decode(errors="replace")
    except OSError:
        return ""


def run_together(
    commands: list[list[str] | str],
    *,
    shell: bool,
    envs: list[dict],
    timeout_s: float,
    output_dir: Path,
    label: str,
    cwd: str | None = None,
) -> list[ProcessResult]:
    """Start every command together behind a barrier and wait for all (or the timeout).

    commands[i] runs with envs[i] as its whole environment; its stdout and stderr
    go to output_dir/label.<i>.out and .err.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    gate_read, gate_write = os.pipe()
    error_pipes = []
    pids = []
    files = []
    try:
        for number, command in enumerate(commands, start=1):
            argv = ["/bin/sh", "-c", command] if shell else list(command)
            out_path = output_dir / f"{label}.{number}.out"
            err_path = output_dir / f"{label}.{number}.err"
            files.append((out_path, err_path))
            report_read, report_write = os.pipe()
            os.set_inheritable(report_write, False)
            out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            null_fd = os.open(os.devnull, os.O_RDONLY)
            env = envs[number - 1]
            pid = os.fork()
            if pid == 0:  # the child: only simple calls until exec
                try:
                    os.close(gate_write)
                    os.close(report_read)
                    if _libc is not None:
                        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                    os.setpgid(0, 0)
                    os.dup2(null_fd, 0)
                    os.dup2(out_fd, 1)
                    os.dup2(err_fd, 2)
                    if cwd:
                        os.chdir(cwd)
                    while os.read(gate_read, 1):  # the barrier: EOF when the controller releases all
                        pass
                    os.execvpe(argv[0], argv, env)
                except BaseException as error:  # noqa: BLE001 - tell the parent, then leave
                    try:
                        os.write(report_write, f"cannot start {argv[0]}: {error}".encode()[:1000])
                    finally:
                        os._exit(127)
            os.close(out_fd)
            os.close(err_fd)
            os.close(null_fd)
            os.close(report_write)
            pids.append(pid)
            error_pipes.append(report_read)
    except BaseException:
        os.close(gate_write)
        for pid in pids:
            _kill_group(pid)
            os.waitpid(pid, 0)
        raise
    finally:
        os.close(gate_read)

    results: list[dict] = [{} for _ in pids]
    released = time.monotonic()
    os.close(gate_write)  # release: every child reads EOF and execs

    def wait(slot: int, pid: int) -> None:
        _pid, status, usage = os.wait4(pid, 0)
        results[slot] = {"end": time.monotonic(), "status": status, "usage": usage}

    waiters = [threading.Thread(target=wait, args=(i, pid), daemon=True) for i, pid in enumerate(pids)]
    for waiter in waiters:
        waiter.start()
    deadline = released + timeout_s
    timed_out = set()
    for slot, waiter in enumerate(waiters):
        waiter.join(max(0.0, deadline - time.monotonic()))
        if waiter.is_alive():
            timed_out.add(slot)
    if timed_out:
        for slot in timed_out:
            _kill_group(pids[slot])
        for slot in timed_out:
            waiters[slot].join(30)
    out = []
    for slot, pid in enumerate(pids):
        with os.fdopen(error_pipes[slot], "rb") as pipe:
            start_error = pipe.read().decode(errors="replace") or None
        record = results[slot]
        status = record.get("status", 0)
        usage = record.get("usage")
        exit_status = os.waitstatus_to_exitcode(status) if record else None
        killed_by = -exit_status if exit_status is not None and exit_status < 0 else None
        out_path, err_path = files[slot]
        out.append(
            ProcessResult(
                index=slot + 1,
                argv=commands[slot],
                exit_status=None if slot in timed_out or killed_by else exit_status,
                signal=killed_by,
                elapsed=record.get("end", time.monotonic()) - released,
                user=usage.ru_utime if usage else 0.0,
                system=usage.ru_stime if usage else 0.0,
                timed_out=slot in timed_out,
                stdout=_read_kept(out_path),
                stderr=_read_kept(err_path),
                error=start_error,
            )
        )
    return out


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


def aggregate(results: list[ProcessResult]) -> dict:
    """Auto-pilot's aggregation over threads: elapsed = the longest, user and system = sums."""
    user = sum(r.user for r in results)
    system = sum(r.system for r in results)
    statuses = [r.exit_status for r in results]
    worst = next((s for s in statuses if s not in (0,)), 0)
    return {
        "elapsed": max(r.elapsed for r in results),
        "user": user,
        "system": system,
        "cpu": user + system,
        "exit_status": worst if worst is not None else -1,
    }
