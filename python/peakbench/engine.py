"""Running the `peakbench-engine` binary: spec in on stdin, result out on stdout.

The engine's contract is engine/SPEC.md: progress arrives as JSON lines on
stderr and any other stderr line is an error message; exit status 2 means the
spec was refused, 1 that the trial could not run. Every wait here has a
deadline, so a hung engine cannot hang peakbench.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path

from . import distributions
from .contract import Outcomes, TrialResult
from .errors import InputError, RunError, TrialInterrupted

ENV_VAR = "PEAKBENCH_ENGINE"
BINARY = "peakbench-engine"
# python/peakbench/engine.py -> the repository, for `cargo build --release` in a checkout.
DEV_BUILD = Path(__file__).resolve().parents[2] / "engine" / "target" / "release" / BINARY

Progress = Callable[[dict], None]
SETTLE_TIMEOUT_S = 600.0


def find_engine() -> Path:
    """The engine binary: $PEAKBENCH_ENGINE, the installed one, or a checkout's release build."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise RunError(f"{ENV_VAR}={chosen} is not an executable file")
        return Path(chosen)
    # pip installs the binary next to the interpreter's scripts (a venv's bin/).
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / BINARY
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(BINARY)
    if on_path:
        return Path(on_path)
    if DEV_BUILD.is_file():
        return DEV_BUILD
    raise RunError(
        f"{BINARY} not found: install peakbench with `pip install .`, build it with"
        f" `cargo build --release` in engine/, or set {ENV_VAR}"
    )


class Engine:
    def __init__(self, path: Path | None = None, on_start: Callable[[subprocess.Popen], None] | None = None):
        self.path = path or find_engine()
        # Told each engine process as it starts (a load client's worker keeps them to stop them).
        self.on_start = on_start
        self._trials: set[subprocess.Popen] = set()  # engines running a trial, not yet told to stop
        self._trials_lock = threading.Lock()

    def interrupt(self) -> None:
        """Pass Ctrl-C on to every trial this Engine is running, once: a SIGINT sent to the controller
        alone (`kill -INT`) would otherwise leave them measuring to the end. An engine that got the
        terminal's SIGINT too takes this as the same stop (SPEC.md, an interrupted trial)."""
        with self._trials_lock:
            running, self._trials = self._trials, set()
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)

    def version(self) -> str:
        done = subprocess.run([self.path, "--version"], capture_output=True, text=True, timeout=30)
        return done.stdout.strip()

    def validate(self, spec: dict) -> None:
        """Raise InputError if the engine would refuse `spec`."""
        self._call("validate-spec", spec, timeout_s=30, on_progress=None, expect_result=False)

    def prepare(self, spec: dict, on_progress: Progress | None = None, timeout_s: float | None = None) -> dict:
        """Create or augment the file set, then write it back; returns the engine's PrepareResult.
        `timeout_s`: the longest the build may take (default: generous for the set's size)."""
        prepared = self._call("prepare", spec, timeout_s or prepare_timeout(spec), on_progress)
        settle(spec["target"])
        return prepared

    def validate_target(self, target: dict, timeout_s: float = 300) -> dict:
        """Exercise every operation on a target; returns the engine's validation result."""
        return self._call("validate-target", target, timeout_s, None)

    def run(self, spec: dict, on_progress: Progress | None = None) -> dict:
        """One trial, then write back what it left dirty; returns the engine's TrialResult."""
        result = self._call("run", spec, run_timeout(spec), on_progress)
        settle(spec["target"])
        return result

    def _call(
        self, command: str, spec: dict, timeout_s: float, on_progress: Progress | None, expect_result: bool = True
    ) -> dict:
        process = subprocess.Popen(
            [self.path, command, "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if self.on_start is not None:
            self.on_start(process)
        if command == "run":
            with self._trials_lock:
                self._trials.add(process)
        timed_out = threading.Event()

        def stop_at_deadline():
            timed_out.set()
            process.kill()

        watchdog = threading.Timer(timeout_s, stop_at_deadline)
        watchdog.start()
        stdout: list[str] = []
        reader = threading.Thread(target=lambda: stdout.append(process.stdout.read()), daemon=True)
        reader.start()
        messages = []
        try:
            try:
                process.stdin.write(json.dumps(spec))
                process.stdin.close()
            except BrokenPipeError:
                pass  # the engine exited without reading; its stderr and status say why
            for line in process.stderr:
                event = _json_object(line)
                if event is None:
                    if line.strip():
                        messages.append(line.strip())
                elif on_progress is not None:
                    on_progress(event)
            process.wait()
            reader.join()
        except KeyboardInterrupt:
            # A trial ends its window early, drains for at most 2 s, restores the file set and
            # reports what it measured (interrupt.rs).
            self.interrupt()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                raise KeyboardInterrupt from None
            reader.join(timeout=10)
            partial = _json_object("".join(stdout))
            if partial is not None and TrialResult.load(partial).interrupted:
                raise TrialInterrupted(partial) from None
            raise
        finally:
            watchdog.cancel()
            with self._trials_lock:
                self._trials.discard(process)

        error_text = "; ".join(messages) or "(no message)"
        if timed_out.is_set():
            raise RunError(f"engine {command} did not finish within {timeout_s:.3g} s and was stopped")
        if process.returncode == 2:
            # A spec's own errors, or its access log's or an smb:// server's refusal (which name their source).
            prefix = "" if error_text.startswith(("access log ", "smb://")) else "the engine refused the trial spec: "
            raise InputError(f"{prefix}{error_text}")
        if process.returncode != 0:
            how = f"exit status {process.returncode}" if process.returncode > 0 else f"signal {-process.returncode}"
            raise RunError(f"engine {command} failed ({how}): {error_text}")
        if not expect_result:
            return {}
        result = _json_object("".join(stdout))
        if result is None:
            raise RunError(f"engine {command} printed no JSON result")
        return result


# Error kinds by which a server refuses work on purpose because it is overloaded (SPEC.md:
# `shed`). Results from before the engine counted them apart hold them among the errors.
SHED_KINDS = ("http_503", "http_429", "NFS3ERR_JUKEBOX")
SHED_LABEL = "HTTP 503/429 or NFS3ERR_JUKEBOX: overloaded, on purpose"


def outcomes(result: TrialResult) -> Outcomes:
    """What became of a trial's window requests (SPEC.md `outcomes`): the engine's own count,
    or for a result stored before it had one, the same derived from its per-op counts."""
    if result.outcomes is not None:
        return result.outcomes
    succeeded = errors = shed = timeouts = cancelled = 0
    for op in result.ops.values():
        by_kind = op.errors or {}
        failed = sum(by_kind.values()) + (op.shed or 0) + (op.timeouts or 0)
        succeeded += op.successes if op.successes is not None else op.count - failed
        timeouts += op.timeouts or 0
        cancelled += op.cancellations or 0
        shed += sum(n for kind, n in by_kind.items() if kind in SHED_KINDS) + (op.shed or 0)
        errors += sum(n for kind, n in by_kind.items() if kind not in SHED_KINDS)
    return Outcomes.of(succeeded, errors, shed, timeouts, cancelled)


def offered_rate(result: dict) -> float:
    """Arrivals the schedule put in a trial's measured window, per second (SPEC.md: `sent` and
    `unsent`): the nominal rate for a metronome, give or take a few percent for Poisson."""
    typed = TrialResult.load(result)
    return (typed.sent + typed.unsent) / typed.runtime_s


def settle(target: dict, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Write back the target file system's dirty data (syncfs), outside any measurement.

    Without it, a trial pays for the write-back of the file set prepared just
    before it, or of the writes of an overloaded trial before it, and a slow
    disk makes the response curve depend on the order loads were tried in.
    """
    if target["kind"] != "posix":
        return
    try:
        done = subprocess.run(
            ["sync", "--file-system", target["path"]], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise RunError(f"{target['path']}: writing back the file system took over {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise RunError(f"{target['path']}: sync --file-system failed: {done.stderr.strip()}")


def _json_object(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def run_timeout(spec: dict) -> float:
    """Warm-up + run + drain, plus room for start-up and restoring the file set afterwards."""
    load = spec["load"]
    measured = load.get("warmup_s", 0) + load["runtime_s"]
    return measured + load.get("drain_timeout_s", 10) + 60 + 0.5 * measured


def prepare_timeout(spec: dict) -> float:
    """Generous: a slow disk writes 5 MB/s and creates 100 files/s; a hang is far beyond that."""
    if "replay" in spec:  # the files an access log names: its size bounds the work
        log_bytes = os.path.getsize(spec["replay"]["log"]) if os.path.exists(spec["replay"]["log"]) else 0
        return 600 + log_bytes / 1e6
    fileset = spec["fileset"]
    files = fileset["files"]
    return 120 + files / 100 + files * distributions.mean(fileset["file_sizes"]) / 5e6
