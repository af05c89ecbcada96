"""Fuzz targets for the parsers of what a user writes, with atheris (coverage-guided).

    python3 tests/fuzz/parsers.py TARGET [libFuzzer options]

TARGET is one of workload, plan, rc, mixfile, histogram. Each input is written to a file and
read as a user's file is. An InputError is the parser refusing bad input, as it must; any other
exception, an input slower than -timeout or memory past -rss_limit_mb is a bug, which atheris
reports with the input. scripts/fuzz.sh runs every target for a bounded time.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["peakbench"]):
    from peakbench.distributions import mean, parse_distribution
    from peakbench.errors import InputError
    from peakbench.harness.plan import load_plan
    from peakbench.mixfile import read_mixfile
    from peakbench.sfs.rcfile import read_rcfile
    from peakbench.workload import load_workload

SHIPPED = Path(__file__).resolve().parents[2] / "python" / "peakbench" / "workloads"


def workload(path: Path) -> None:
    w = load_workload(path)
    # What a run computes from it next: the file set at a load and scale.
    w.files_at(100.0)
    w.bytes_at(100.0, 2.0)


def plan(path: Path) -> None:
    load_plan(path, check_programs=False)


def rc(path: Path) -> None:
    read_rcfile(path).loads(spec_rounding=True)


def mixfile(path: Path) -> None:
    read_mixfile(path)


def histogram(path: Path) -> None:
    dist = parse_distribution(
        {"kind": "histogram", "file": path.name}, field="f", quantity="size", base_dir=path.parent
    )
    mean(dist)


PLAN = """name = "demo"
[vars]
base = "/data"
[[test]]
name = "t-{fs}-{n}"
loop = {fs = ["ext4", "xfs"], n = {from = 1, to = 32, factor = 2}}
when = "not (fs == 'xfs' and n > 4)"
threads = "{n}"
command = ["echo", "{base}/{fs}", "{thread}"]
stop = {min_runs = 2, max_runs = 4, until = "hw_pct < 10"}
[[test]]
name = "step-{k}"
loop = {k = {from = 10, to = 0, step = -5}}
command = ["true"]
"""

RC = """LOAD=200
INCR_LOAD="200"
NUM_RUNS=10
CLIENTS="client1 client2"
PROCS=2
MNT_POINTS='/a /b'
RUNTIME=5m
"""

# Each target: its reader, the name its input file takes, and its seeds (shipped files and examples).
TARGETS = {
    "workload": (workload, "w.toml", [p.read_bytes() for p in sorted(SHIPPED.glob("*.toml"))]),
    "plan": (plan, "plan.toml", [PLAN.encode()]),
    "rc": (rc, "sfs_rc", [RC.encode()]),
    "mixfile": (mixfile, "w.mix", [p.read_bytes() for p in SHIPPED.glob("*.mix")]),
    "histogram": (histogram, "h.dist", [p.read_bytes() for p in SHIPPED.glob("*.dist")]),
}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in TARGETS:
        sys.exit(f"usage: parsers.py {{{','.join(TARGETS)}}} [libFuzzer options]")
    read, file_name, seeds = TARGETS[name]
    work = Path(tempfile.mkdtemp(prefix=f"peakbench-fuzz-{name}-"))
    corpus = work / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(seed)
    path = work / file_name

    def one(data: bytes) -> None:
        path.write_bytes(data)
        try:
            read(path)
        except InputError:
            pass

    atheris.Setup([sys.argv[0], *sys.argv[2:], str(corpus)], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
