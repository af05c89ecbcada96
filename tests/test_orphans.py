"""kill -9 of the controller leaves no engine behind, however the engine was started: a search's
trial, a plan's trial, a file-set build, and the engines of Dask cluster workers (issue 16)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PYTHON = str(Path(__file__).resolve().parents[1] / "python")


def _processes() -> dict[int, tuple[int, list[str]]]:
    """Every live process: pid -> (parent pid, argv)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            if state != "Z":
                found[int(entry)] = (int(parent), argv)
    return found


def _descendants(root: int) -> dict[int, list[str]]:
    processes = _processes()

    def descends(pid: int) -> bool:
        for _ in range(64):
            if pid == root:
                return True
            if pid not in processes:
                return False
            pid = processes[pid][0]
        return False

    return {pid: argv for pid, (_, argv) in processes.items() if pid != root and descends(pid)}


def _engines(processes: dict[int, list[str]], command: str) -> list[int]:
    return [pid for pid, argv in processes.items() if argv[0].endswith("peakbench-engine") and argv[1:2] == [command]]


def _plan(tmp_path: Path) -> Path:
    target = tmp_path / "target"
    plan = tmp_path / "p.toml"
    plan.write_text(f'[[test]]\nname = "t"\nworkload = "mail"\ntarget = "{target}"\nrate = 50\nruntime = 60\n')
    return plan


# (the command after `peakbench`, the engine command to catch running)
CASES = {
    "search": (lambda d: ["search", "mail", "--target", "null://", "--db", str(d / "p.db")], "run"),
    "plan": (lambda d: ["plan", "run", str(_plan(d)), "--db", str(d / "p.db"), "--workdir", str(d / "w")], "run"),
    "prepare": (lambda d: ["prepare", "mail", "--target", str(d / "target"), "--rate", "4000"], "prepare"),
    "cluster": (
        lambda d: (
            ["run", "mail", "--target", "null://", "--rate", "200", "--runtime", "60", "--clients", "2"]
            + ["--db", str(d / "p.db")]
        ),
        "run",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_engine_outlives_a_killed_controller(engine_path, tmp_path, case):
    argv, engine_command = CASES[case]
    (tmp_path / "target").mkdir()
    controller = subprocess.Popen(
        [sys.executable, "-m", "peakbench.cli", *argv(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": PYTHON},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        engines: list[int] = []
        while not engines and time.monotonic() < deadline and controller.poll() is None:
            processes = _descendants(controller.pid)
            engines = _engines(processes, engine_command)
            time.sleep(0.05)
        assert engines, f"no engine {engine_command} seen under the controller"
        everything = _descendants(controller.pid)
        controller.send_signal(signal.SIGKILL)
        controller.wait()
        killed = time.monotonic()
        # The engine polls its parent every 100 ms; 3 s leaves room for a loaded machine.
        while time.monotonic() - killed < 3 and any(pid in _processes() for pid in everything):
            time.sleep(0.05)
        left = {pid: argv for pid, argv in everything.items() if pid in _processes()}
        assert not _engines(left, engine_command), f"engines alive 3 s after the controller died: {left}"
        assert not left, f"processes the controller started are alive 3 s after it died: {left}"
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
