"""Commands a plan runs around its measurements: argv lists, never a shell, each with a timeout.

A command that fails, hangs past its timeout or cannot be started raises
HookError with one line that says which command and why (its last line of
output), so a surface or plan records the failure and goes on.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence

from .errors import RunError

READY_RETRY_S = 0.5  # pause between readiness probes


class HookError(RunError):
    pass


def run_command(argv: Sequence[str], timeout_s: float) -> str:
    """Run `argv`; its output (stdout and stderr together) if it exits 0, else HookError."""
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise HookError(f"{_shown(argv)} did not finish within {timeout_s:g} s and was stopped") from None
    except OSError as error:
        raise HookError(f"{_shown(argv)} could not start: {error.strerror}") from None
    if done.returncode != 0:
        last = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
        raise HookError(f"{_shown(argv)} failed with exit status {done.returncode}: {last[0]}")
    return done.stdout


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
