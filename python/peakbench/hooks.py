"""Commands a plan runs around its measurements: argv lists, never a shell, each with a timeout.

A command that fails, hangs past its timeout or cannot be started raises
HookError with one line that says which command and why (its last line of
output), so a surface or plan records the failure and goes on.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import RunError
from .harness.process import run_together

READY_RETRY_S = 0.5  # pause between readiness probes


class HookError(RunError):
    pass


def run_command(argv: Sequence[str], timeout_s: float) -> str:
    """Run `argv` as a plan runs its hooks (harness/process.py: its own process group, killed whole at
    the timeout, dying with peakbench); its output (stdout, then stderr) if it exits 0, else HookError."""
    with tempfile.TemporaryDirectory(prefix="peakbench-hook-") as directory:
        try:
            done = run_together(
                [list(argv)],
                shell=False,
                envs=[dict(os.environ)],
                timeout_s=timeout_s,
                output_dir=Path(directory),
                label="hook",
            )[0]
        except OSError as error:
            raise HookError(f"{_shown(argv)} could not start: {error.strerror}") from None
    if done.timed_out:
        raise HookError(f"{_shown(argv)} did not finish within {timeout_s:g} s and was stopped")
    if done.error:
        raise HookError(f"{_shown(argv)} could not start: {done.error}")
    if done.exit_status != 0:
        output = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["(no output)"]
        status = f"exit status {done.exit_status}" if done.signal is None else f"signal {done.signal}"
        raise HookError(f"{_shown(argv)} failed with {status}: {output[0]}")
    return done.stdout + done.stderr


def configure(step, fill: Callable[[str], str]) -> None:
    """Run a configure step (command, timeout_s, ready, ready_timeout_s) with its words filled in,
    then probe `ready` until it succeeds or ready_timeout_s passes."""
    run_command([fill(word) for word in step.command], step.timeout_s)
    if step.ready is None:
        return
    probe = [fill(word) for word in step.ready]
    deadline = time.monotonic() + step.ready_timeout_s
    while True:
        remaining = deadline - time.monotonic()
        try:
            run_command(probe, max(remaining, 0.1))
            return
        except HookError as error:
            if time.monotonic() + READY_RETRY_S >= deadline:
                raise HookError(
                    f"the server never became ready within {step.ready_timeout_s:g} s (last probe: {error})"
                ) from None
        time.sleep(READY_RETRY_S)


def _shown(argv: Sequence[str]) -> str:
    return " ".join(argv)
