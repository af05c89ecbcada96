#!/usr/bin/env python3
"""Coverage of R̄ at the claimed peak now that a claim on its pilot is confirmed by fresh trials: each cell's loads
measured and stated as `peakbench simulate --response-coverage --seed S` does (sim.response_coverage, the search's
own careful_claim_at and peak_response), on seeds the §7 table and its more-seeds run did not use.

    nice -n 19 python3 benchmarks/confirmation_coverage.py --seeds 60-107 --cells quick:0.875,runlength-20:0.875 \
        --out benchmarks/results/NAME.json

Per cell: the peak claims pooled (n, holds, share, binomial standard error at c), those on the pilot (stated from
their confirmation) and after it apart, every load's statements, and each seed's figures. Seeds run in --jobs
processes; a finished seed is kept in --records so a killed run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from peakbench.sim import RESPONSE_REPEATS, response_coverage  # noqa: E402
from response_claims_seeds import pooled  # noqa: E402


def seed_range(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def one(cell: tuple[str, float], seed: int, records: Path) -> dict:
    """One seed of one cell, kept in `records` once done."""
    preset, utilisation = cell
    path = records / f"{preset}-{utilisation}-{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    figures = {"seed": seed, **dataclasses.asdict(response_coverage(utilisation, preset, RESPONSE_REPEATS, seed))}
    path.with_suffix(".tmp").write_text(json.dumps(figures))
    os.replace(path.with_suffix(".tmp"), path)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_range, required=True, help="FIRST-LAST")
    parser.add_argument("--cells", required=True, help="PRESET:RHO,... (presets: quick and sim.RESPONSE_PRESETS)")
    parser.add_argument("--records", type=Path, default=Path("/tmp/confirmation-coverage"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cells = [(preset, float(rho)) for preset, rho in (c.split(":") for c in args.cells.split(","))]
    args.records.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = {(cell, seed): pool.submit(one, cell, seed, args.records) for cell in cells for seed in args.seeds}
        rows = {}
        for (cell, seed), future in futures.items():
            rows.setdefault(cell, []).append(future.result())
            print(f"{cell[0]} {cell[1]} seed {seed}: {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    summary = {}
    for (preset, utilisation), cell_rows in rows.items():
        c = cell_rows[0]["confidence"]
        later = [{**r, "later": r["claims"] - r["pilot_claims"]} for r in cell_rows]
        for r in later:
            pilot_held = r["pilot_claims"] * (r["pilot_claim_coverage"] or 0)
            r["later_coverage"] = (
                (r["claims"] * (r["claim_coverage"] or 0) - pilot_held) / r["later"] if r["later"] else 0.0
            )
        summary[f"{preset} {utilisation}"] = {
            "confidence": c,
            "peak_claims": pooled(cell_rows, "claims", "claim_coverage", c),
            "pilot_claims_confirmed": pooled(cell_rows, "pilot_claims", "pilot_claim_coverage", c),
            "later_claims": pooled(later, "later", "later_coverage", c),
            "statements_hold_per_seed": [round(r["statements_hold"], 4) for r in cell_rows],
            "seeds_outside_c_pm_2": sum(abs(r["statements_hold"] - c) > 0.02 for r in cell_rows),
        }
    common.save(
        args.out.stem,
        {
            "what": "R̄ at one load of a simulated M/M/1 queue (sim.response_coverage: 200 ops/s, 5 ms, from empty "
            "each trial, Rsat at the true mean, 1,000 loads per cell and seed), stated as the search states it: "
            "a claim on its pilot from STEIN_PILOT fresh trials run after it (search.peak_response)",
            "command": " ".join(sys.argv),
            "seeds": [args.seeds.start, args.seeds.stop - 1],
            "machine": common.machine_info(engine=False),
            "seconds": round(time.time() - started),
            "cells": summary,
            "rows": {f"{p} {u}": r for (p, u), r in rows.items()},
        },
    )
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
