#!/usr/bin/env python3
"""More seeds of the R̄-interval cells of BENCHMARKS.md §7 whose peak claims are few or miss c ± 2 points (quick
and 20 s trials at ρ 0.875 and 0.95): each load stated as `peakbench simulate --response-coverage --seed S` states
it, seeds the §7 table does not use, so every constant of the stated interval is held out here.

    nice -n 19 python3 benchmarks/response_claims_seeds.py --records DIR --out benchmarks/results/NAME.json

Loads are simulated and kept in DIR as benchmarks/response_claims.py keeps them (the same pickles, so the two
share a folder). The claims at ρ 0.95 number 50 and 102 in the table: a pooled share of so few has a standard error
of 2-4 points, as wide as the goal, so more seeds say whether a cell misses it or only its sample does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from response_claims import figures, measured  # noqa: E402

CELLS = (("quick", 0.875), ("quick", 0.95), ("runlength-20", 0.875), ("runlength-20", 0.95))
SEEDS = range(12, 60)  # the table uses 0-11


def pooled(rows: list[dict], count: str, share: str, confidence: float) -> dict:
    """The share `share` pooled over rows by their counts `count`, with its binomial standard error at c."""
    n = sum(r[count] for r in rows)
    held = round(sum(r[count] * r[share] for r in rows if r[count]))
    return {
        "n": n,
        "holds": held,
        "share": held / n if n else None,
        "standard_error": math.sqrt(confidence * (1 - confidence) / n) if n else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, required=True, help="folder that keeps each cell's simulated loads")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.records.mkdir(parents=True, exist_ok=True)
    started = time.time()
    cells = {}
    for preset, utilisation in CELLS:
        rows = []
        for seed in SEEDS:
            rows.append({"seed": seed, **figures(measured(args.records, preset, utilisation, seed))})
            print(f"{preset} {utilisation} {seed}: {time.time() - started:.0f} s", file=sys.stderr, flush=True)
        confidence = rows[0]["confidence"]
        cells[f"{preset} {utilisation}"] = {
            "confidence": confidence,
            "peak_claims": pooled(rows, "claims", "claim_coverage", confidence),
            "pilot_claims": pooled(rows, "pilot_claims", "pilot_claim_coverage", confidence),
            "later_claims": pooled(rows, "later_claims", "later_claims_hold", confidence),
            # 1e-9: a share of exactly c ± 2 points is within, whatever its float rounding
            "statements_outside": [r["seed"] for r in rows if abs(r["statements_hold"] - confidence) > 0.02 + 1e-9],
            "seeds": rows,
        }
    result = {
        "benchmark": "response-coverage",
        "command": f"python3 benchmarks/response_claims_seeds.py --records DIR --out {args.out}",
        "what": "R̄ statements at one load of a simulated M/M/1 queue (sim.response_coverage) on seeds 12-59, which "
        "BENCHMARKS.md §7's table does not use, for the cells with few claims or claims outside c ± 2; per cell the "
        "peak claims pooled (n, holds, share, binomial standard error at c), those on the pilot and after it, the "
        "seeds whose statements lie outside c ± 2, and every seed's figures (benchmarks/response_claims.py figures)",
        "cells": cells,
        "machine": {**common.machine_info(engine=False), "load_average": os.getloadavg()},
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
