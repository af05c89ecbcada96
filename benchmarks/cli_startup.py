#!/usr/bin/env python3
"""How long `peakbench` takes to answer before it does any work: a refused command line (`run --rate fast`) and
`--help`, this checkout beside another (A/B, interleaved round by round) and beside a bare `python3 -c pass`.

    python3 benchmarks/cli_startup.py OTHER_CHECKOUT [ROUNDS] --json OUT.json

Each checkout runs from its own python/ directory, as the tests run it. The environment is kept, so where
PYTHONDONTWRITEBYTECODE is set, a checkout runs compiled only if its modules were compiled beforehand (the suite's
conftest compiles them); the result records the setting and whether each checkout held compiled modules.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "benchmarks"))

import common  # noqa: E402

COMMANDS = {
    "refused": ["run", "mail", "--target", "x", "--rate", "fast"],
    "help": ["--help"],
}


def wall_s(argv: list[str], env: dict) -> float:
    started = time.monotonic()
    subprocess.run(argv, env=env, capture_output=True, timeout=120)
    return time.monotonic() - started


def compiled(checkout: Path) -> bool:
    return (checkout / "python" / "peakbench" / "__pycache__").is_dir()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="another checkout of peakbench (for example main's)")
    parser.add_argument("rounds", type=int, nargs="?", default=10)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    checkouts = {"this": HERE, "other": args.other.resolve()}
    times: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        times.setdefault("python -c pass", []).append(wall_s([sys.executable, "-c", "pass"], dict(os.environ)))
        for name, checkout in checkouts.items():
            env = {**os.environ, "PYTHONPATH": str(checkout / "python")}
            for command, words in COMMANDS.items():
                argv = [sys.executable, "-m", "peakbench.cli", *words]
                times.setdefault(f"{name} {command}", []).append(wall_s(argv, env))
    rows = {
        key: {"n": len(v), "median_s": statistics.median(v), "min_s": min(v), "max_s": max(v)}
        for key, v in times.items()
    }
    for command in COMMANDS:
        this, other = times[f"this {command}"], times[f"other {command}"]
        ratios = [a / b for a, b in zip(this, other, strict=True)]
        rows[f"this ÷ other, {command}"] = {
            "n": len(ratios),
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        }
    for key, row in rows.items():
        print(key, json.dumps(row))

    def commit(checkout: Path) -> str:
        done = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        return done.stdout.strip()

    result = {
        "benchmark": "cli_startup",
        "command": " ".join(sys.argv),
        "machine": {**common.machine_info(engine=False), "load_average": os.getloadavg()},
        "other_commit": commit(checkouts["other"]),
        "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        "compiled": {name: compiled(c) for name, c in checkouts.items()},
        "rows": rows,
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
