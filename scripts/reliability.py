"""Recount RELIABILITY.md's table from the tests that hold each figure: bad inputs refused cleanly,
kill -9 points, server faults with a verdict in time, writes outside the target.

    python3 scripts/reliability.py          # count the cases (pytest --collect-only)
    python3 scripts/reliability.py --run    # and run them: each row then says how many passed

Each row is a pytest selection; a parametrized test counts once per case.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HARDENING_REFUSALS = (
    "refused or range_checked or counted or one_query or called_one or plans_line or checked_before or same_kind"
    " or bad_path"
)

# (what, pytest arguments)
ROWS = [
    ("bad inputs refused: exit 2, one line naming file and line, nothing written", ["tests/test_bad_inputs.py"]),
    (
        "bad inputs refused (or, for a bad log path, skipped and counted) before they exhaust time, memory or disk",
        ["tests/test_hardening.py", "-k", HARDENING_REFUSALS],
    ),
    (
        "kill -9 of the controller: no engine or worker survives",
        ["tests/test_orphans.py", "tests/test_hardening.py::test_the_engine_dies_with_its_controller"],
    ),
    (
        "server faults reach a verdict in time (HTTP: truncated, slow, hang-up, garbage, random bytes, huge status;"
        " NFS: stopped, killed, paused, unreachable)",
        ["tests/test_http.py", "tests/test_nfs.py", "-k", "faults or bad_reply or stopped or paused or unreachable"],
    ),
    (
        "server faults reach a verdict in time (SMB: killed, silent, never answering, garbage, wrong NetBIOS"
        " lengths, no credits, expired session)",
        ["tests/test_smb_faults.py", "tests/test_smb.py", "-k", "faulty or never_answers or killed"],
    ),
    ("planted symlinks: no write outside the target", ["tests/test_hardening.py", "-k", "planted"]),
]


def pytest(args: list[str], run: bool) -> tuple[int, str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    if not run:
        command.append("--collect-only")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if not run:
        return sum(1 for line in done.stdout.splitlines() if "::" in line), ""
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
    return int(re.search(r"(\d+) passed", summary).group(1)) if "passed" in summary else 0, summary


def kill_points() -> str:
    """The resume tests kill at random points in a loop; their floors are constants in the files."""
    kills = int(re.search(r"^KILLS = (\d+)", (ROOT / "tests/test_resume.py").read_text(), re.M).group(1))
    return f"at least {kills} kill points each for a search and an sfs run (tests/test_resume.py), up to 12 for a plan"


def main() -> int:
    run = "--run" in sys.argv[1:]
    print("| what | cases | " + ("passed | " if run else "") + "command |")
    print("|---|---|" + ("---|" if run else "") + "---|")
    for what, args in ROWS:
        cases, _ = pytest(args, run=False)
        passed = f" {pytest(args, run=True)[0]} |" if run else ""
        command = "pytest " + " ".join(f"'{a}'" if " " in a else a for a in args)
        print(f"| {what} | {cases} |{passed} `{command}` |")
    print(f"\nkill -9 and resume: {kill_points()} (tests/test_harness_resume.py); every stored trial used once.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
