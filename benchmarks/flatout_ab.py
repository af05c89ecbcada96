"""Flat-out A/B of two engine binaries: ops per engine CPU-second, against `null` and POSIX on /dev/shm.

    python3 benchmarks/flatout_ab.py NEW_ENGINE OLD_ENGINE ROUNDS OUT.json

Each round runs, pinned to one CPU:
- null: both engines offered 20,000,000 ops/s (far beyond either's ceiling), getattr-only and the
  SPEC example mix, 1 s warm-up + 3 s. Ops per CPU-second = every completed request (`issued`) /
  the engine's own CPU time, so a neighbour taking the CPU lowers both numerator and denominator:
  the ratio between the engines holds on a busy machine where the floor's p99-lag criterion
  (benchmarks/bench/floor.py) measures the neighbours instead.
- posix: getattr and 4 KiB random reads on a 4096-file set in /dev/shm (bench_posix's set), each
  engine in closed loop with one client, 1 s warm-up + 3 s (one thread making back-to-back system
  calls, as fio's psync job and the raw loop do), then fio 3.33 at full speed and the raw system-call
  loop (benchmarks/rawloop.c), 3 s each. fio runs in the file-set root and reads it as `--opendir=.`, so
  its filestat job stats "./d4/d33/f2122", a path as long as the one the engines and the raw loop pass to
  fstatat on the root's descriptor; its getattr also runs once more as the rows before 2026-11-28 did,
  `--opendir=ROOT` from elsewhere (tool "fio abs"), which stats the absolute path, five components longer.
  The engines' order alternates between rounds. An engine's
  row counts every request over its whole process's CPU time (`engine_cpu_s`), like fio's; a
  "window" row (engines that report `window_cpu_s`) counts the window's requests over the CPU time
  the window took, like the raw loop, which opens its descriptors before its timed loop and
  counts only the loop: the warm-up opens the engine's descriptors (its read cache) and start-up,
  drain, restore and the result stay out, so both sides measure the same work.
Then, if valgrind is installed, user-space instructions and simulated L1 data-cache misses per op of
each engine, posix workload and the raw loop: callgrind (--cache-sim, its 32 KiB L1 and a 1 MiB last level)
of a 6 s and a 2 s trial, the engines' after a 2 s warm-up that opens every file, their difference over the
difference in ops (start-up, the warm-up, the result's encoding cancel out). Counts repeat on a busy machine;
the simulation sees user space only, so the kernel's evictions between two ops are not in the misses.
"""

import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (trial_spec, fileset, EXAMPLE_MIX, fio, build_rawloop, list_files)

POSIX = {
    "getattr": {"mix": {"getattr": 1.0}, "fio": ["--ioengine=filestat", "--bs=65536"], "raw": "stat"},
    "read4k": {"mix": {"read": 1.0}, "fio": ["--ioengine=psync", "--rw=randread", "--bs=4k"], "raw": "read-fd"},
}
PEER_S = 3.0
# Long enough for one client to read each of the 4096 files at least once (about 20,000 reads)
# at a third of a CPU.
WARMUP_S = 1.0


def closed_spec(target: dict, mix: dict, runtime_s: float, warmup_s: float = 0.0) -> dict:
    spec = common.trial_spec(target, 1, mix, common.fileset(4096), runtime_s=runtime_s)
    spec["schema"] = common.SPEC_SCHEMA_V2
    spec["load"] = {"clients": 1, "warmup_s": warmup_s, "runtime_s": runtime_s}
    return spec


def null_rows(rnd: int, engines: list[tuple[str, str]], cpu: int) -> list[dict]:
    rows = []
    for label, mix in [("getattr", {"getattr": 1.0}), ("example-mix", common.EXAMPLE_MIX)]:
        for name, engine in engines:
            spec = common.trial_spec(
                {"kind": "null"}, 20_000_000, mix, common.fileset(1000), warmup_s=1.0, runtime_s=3.0
            )
            r = json.loads(common.run([engine, "run", "-"], input=json.dumps(spec), timeout=120, cpus={cpu}).stdout)
            rows.append(
                {
                    "round": rnd,
                    "target": "null",
                    "workload": label,
                    "tool": name,
                    "ops_per_cpu_s": r["issued"] / r["engine_cpu_s"],
                    "achieved": r["achieved_rate"],
                    "loadavg": open("/proc/loadavg").read().split()[:3],
                }
            )
    return rows


def fio_jobs(wl: str, root: Path, runtime_s: float = PEER_S) -> list[tuple[str, list[str], Path | None]]:
    """fio's jobs for a posix workload: (tool, arguments, working directory). "fio" runs in the file-set root and
    names it `.`, so its filestat job stats a path relative to the root, as the engines and the raw loop do;
    "fio abs" (getattr only) names the root by its absolute path, as the rows before 2026-11-28 did."""
    runs = [("fio", ".", root)] + ([("fio abs", str(root), None)] if wl == "getattr" else [])
    common_args = ["--file_service_type=random", "--time_based=1", f"--runtime={runtime_s:g}"] + POSIX[wl]["fio"]
    return [(tool, [f"--name={wl}", f"--opendir={opendir}"] + common_args, cwd) for tool, opendir, cwd in runs]


def posix_rows(
    rnd: int, engines: list[tuple[str, str]], cpu: int, root: Path, target: Path, rel_list: Path, rawloop: Path
) -> list[dict]:
    rows = []
    for wl, w in POSIX.items():
        row = {"round": rnd, "target": "posix", "workload": wl, "loadavg": open("/proc/loadavg").read().split()[:3]}
        for name, engine in engines:
            spec = closed_spec({"kind": "posix", "path": str(target)}, w["mix"], PEER_S, WARMUP_S)
            r = json.loads(common.run([engine, "run", "-"], input=json.dumps(spec), timeout=120, cpus={cpu}).stdout)
            ops = sum(o["count"] for o in r["ops"].values())  # the window's
            rows.append({**row, "tool": name, "ops_per_cpu_s": r["issued"] / r["engine_cpu_s"], "ops": r["issued"]})
            if r.get("window_cpu_s"):
                rows.append({**row, "tool": f"{name} window", "ops_per_cpu_s": ops / r["window_cpu_s"], "ops": ops})
        for tool, fio_args, cwd in fio_jobs(wl, root):
            j, proc = common.fio(fio_args, timeout=120, cpus={cpu}, cwd=cwd)
            job = j["jobs"][0]["read"]
            n = job["clat_ns"]["N"] if wl == "getattr" else job["total_ios"]  # filestat: one clat sample per stat()
            rows.append({**row, "tool": tool, "ops_per_cpu_s": n / proc.cpu_s, "ops": n})
        raw = json.loads(common.run([rawloop, w["raw"], root, rel_list, PEER_S], timeout=120, cpus={cpu}).stdout)
        rows.append({**row, "tool": f"raw {w['raw']}", "ops_per_cpu_s": raw["ops"] / raw["cpu_s"], "ops": raw["ops"]})
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


CALLGRIND_EVENTS = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]


def events_per_op(command, spec_of, work: Path) -> dict:
    """Callgrind's events per op: (events of a 6 s run - those of a 2 s run) / (ops difference).
    `command(runtime_s)` is the command line (with the spec from `spec_of(runtime_s)` on its stdin, if
    any); its output is an engine result or a raw-loop line. Under valgrind the rate follows the
    machine's load, so a pair whose longer run made fewer than 1.5 times the shorter one's ops
    (a neighbour took the CPU) is measured again, up to three times."""
    for _ in range(3):
        got = events_pair(command, spec_of, work)
        if got["ops"][1] >= 1.5 * got["ops"][0]:
            break
    return got


def events_pair(command, spec_of, work: Path) -> dict:
    counts = {}
    for runtime_s in (2.0, 6.0):
        out = work / f"cg-{runtime_s:g}.out"
        spec = spec_of(runtime_s)
        p = common.run(
            ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--LL=1048576,16,64", f"--callgrind-out-file={out}"]
            + command(runtime_s),
            input=json.dumps(spec) if spec else None,
            timeout=600,
        )
        events = [int(n) for n in re.search(r"Collected : ([\d ]+)", p.stderr).group(1).split()]
        result = json.loads(p.stdout)
        counts[runtime_s] = (events, result.get("issued", result.get("ops")))
    (e1, n1), (e2, n2) = counts[2.0], counts[6.0]
    per_op = {name: (b - a) / (n2 - n1) for name, a, b in zip(CALLGRIND_EVENTS, e1, e2)}
    return {
        "ir_per_op": per_op["Ir"],
        "d1_misses_per_op": per_op["D1mr"] + per_op["D1mw"],
        "per_op": per_op,
        "ops": [n1, n2],
    }


def summarize(rows: list[dict], engines: tuple[str, ...] = ("new", "old")) -> dict:
    """Per workload: each tool's median and range of ops per CPU-second, and each engine's ratios to each peer and
    to the other engines' rows of the same kind, whole process or window (median and range over rounds, each ratio
    taken within its round)."""
    out = {}
    for key in sorted({(r["target"], r["workload"]) for r in rows}):
        mine = [r for r in rows if (r["target"], r["workload"]) == key]
        by_tool = {}
        for r in mine:
            by_tool.setdefault(r["tool"], {})[r["round"]] = r["ops_per_cpu_s"]
        entry = {
            t: {"median": statistics.median(v.values()), "min": min(v.values()), "max": max(v.values()), "n": len(v)}
            for t, v in by_tool.items()
        }
        engine_rows = {f"{name}{kind}": kind for name in engines for kind in ("", " window")}
        peers = [t for t in by_tool if t not in engine_rows]
        for engine, kind in engine_rows.items():
            same_kind = [other for other, k in engine_rows.items() if k == kind and other != engine]
            for peer in peers + same_kind:
                if engine not in by_tool or peer not in by_tool:
                    continue
                ratios = [by_tool[engine][rnd] / by_tool[peer][rnd] for rnd in by_tool[engine] if rnd in by_tool[peer]]
                entry[f"{engine}/{peer}"] = {
                    "median": statistics.median(ratios),
                    "min": min(ratios),
                    "max": max(ratios),
                    "n": len(ratios),
                }
        out[" ".join(key)] = entry
    return out


def main(new: str, old: str, rounds: int, out_path: str) -> None:
    cpu = max(os.sched_getaffinity(0))
    rows = []
    work = Path(tempfile.mkdtemp(prefix="peakbench-ab-", dir="/dev/shm"))
    try:
        target = work / "target"
        target.mkdir()
        posix = {"kind": "posix", "path": str(target)}
        common.run(
            [new, "prepare", "-"],
            input=json.dumps(closed_spec(posix, {"getattr": 1.0}, 1)),
            timeout=600,
        )
        root, files = common.list_files(target)
        rel_list = work / "files.txt"
        rel_list.write_text("\n".join(files) + "\n")
        rawloop = common.build_rawloop(work)
        for rnd in range(rounds):
            engines = [("new", new), ("old", old)] if rnd % 2 == 0 else [("old", old), ("new", new)]
            for row in null_rows(rnd, engines, cpu):
                print(json.dumps(row), flush=True)
                rows.append(row)
            rows += posix_rows(rnd, engines, cpu, root, target, rel_list, rawloop)
        callgrind = {}
        if shutil.which("valgrind"):
            for wl, w in POSIX.items():
                runs = [
                    (name, lambda _, e=engine: [e, "run", "-"], lambda rt, w=w: closed_spec(posix, w["mix"], rt, 2.0))
                    for name, engine in [("new", new), ("old", old)]
                ]
                runs.append(
                    (f"raw {w['raw']}", lambda rt, w=w: [rawloop, w["raw"], root, rel_list, rt], lambda _: None)
                )
                for name, command, spec_of in runs:
                    callgrind[f"{wl} {name}"] = events_per_op(command, spec_of, work)
                    print(wl, name, json.dumps(callgrind[f"{wl} {name}"]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(rows)
    print(json.dumps(summary, indent=1))
    with open(out_path, "w") as f:
        sha = {
            name: hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]
            for name, path in [("new", new), ("old", old)]
        }
        json.dump(
            {
                "command": sys.argv,
                "machine": common.machine_info(),
                "engine_sha256": sha,
                "summary": summary,
                "callgrind": callgrind,
                "rows": rows,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
