#!/usr/bin/env python3
"""The two tables of BENCHMARKS.md §7's R̄ intervals near saturation, this checkout's stated intervals beside
main's on the same loads: every load's statement per cell and seed, and the peak claims' R̄ interval per cell; and a
refit of the transient multiples (statistics.TRANSIENT_BIAS_LOW and _HIGH) on unclaimed loads alone.

    nice -n 15 python3 benchmarks/response_claims.py --records DIR --out benchmarks/results/NAME.json

Each load is measured once as `peakbench simulate --response-coverage --seed S` measures it (sim.response_coverage:
search.careful_at at ρ·200 ops/s of a simulated M/M/1 queue from empty, Rsat at the true mean, 1,000 loads per
preset, load factor and seed) and kept in DIR (one pickle per cell and seed, so a rerun states without simulating);
the command's own code (sim.response_summary) states it, then again with MAIN's constants, which are all this
comparison changes. Seeds as in response-coverage-claims.json: 0-5 for every cell but the default preset at ρ 0.95
(0-4), and 6-11 besides for the quick and 20 s presets at ρ 0.95, where claims are rare. The refit chooses on seeds
FIT_SEEDS and reports the held-out seeds 3-5 apart (`refit`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from peakbench.controller import statistics  # noqa: E402
from peakbench.controller.history import PEAK  # noqa: E402
from peakbench.controller.search import claimed_on_pilot, stated_response  # noqa: E402
from peakbench.sim import (  # noqa: E402
    RESPONSE_PRESETS,
    RESPONSE_REPEATS,
    RESPONSE_UTILISATIONS,
    response_records,
    response_summary,
)

# main's stated-interval constants (d51263d); the comparison states the same loads with these
MAIN = {"TRANSIENT_BIAS_LOW": 0.8, "TRANSIENT_BIAS_HIGH": 3.0, "CLAIM_HALVES_WEIGHT": 0.85}
CAPACITY, SERVICE_MS = 200.0, 5.0  # sim.response_coverage's defaults


def cells() -> list[tuple[str, float, int]]:
    every = [
        (preset, u, seed)
        for seed in range(6)
        for preset in ("quick", *RESPONSE_PRESETS)
        for u in RESPONSE_UTILISATIONS
        if not (preset == "default" and u == 0.95 and seed == 5)
    ]
    return every + [(preset, 0.95, seed) for seed in range(6, 12) for preset in ("quick", "runlength-20")]


def measured(records_dir: Path, preset: str, utilisation: float, seed: int) -> dict:
    """The cell's loads as sim.response_coverage measures them, simulated once and kept in `records_dir`."""
    path = records_dir / f"{preset}-{utilisation}-{seed}.pkl"
    if path.exists():
        with path.open("rb") as file:
            return pickle.load(file)
    settings, truth, records = response_records(utilisation, preset, RESPONSE_REPEATS, seed, CAPACITY, SERVICE_MS)
    cell = {"preset": preset, "utilisation": utilisation, "seed": seed, "truth": truth, "settings": settings}
    cell["records"] = records
    with open(f"{path}.tmp", "wb") as file:
        pickle.dump(cell, file)
    os.replace(f"{path}.tmp", path)
    return cell


@contextlib.contextmanager
def constants(values: dict):
    """statistics' module constants set to `values` for the block (they are read at each call)."""
    before = {name: getattr(statistics, name) for name in values}
    for name, value in values.items():
        setattr(statistics, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(statistics, name, value)


def statements(cell: dict) -> dict[str, list[str]]:
    """How each stated load's statement fares, by kind (unclaimed loads, claims on the pilot, claims on a later
    stage): "holds" (as response_summary counts it), or the side it misses on, "low end above the mean" or
    "high end below the mean"."""
    settings, truth = cell["settings"], cell["truth"]
    kinds: dict[str, list[str]] = {"unclaimed": [], "pilot_claims": [], "later_claims": []}
    for record in cell["records"]:
        if record is None or record.interval is None:
            continue
        interval, rising = stated_response(record, settings)
        if interval.low > truth:
            fares = "low end above the mean"
        elif not rising and interval.high < truth:
            fares = "high end below the mean"
        else:
            fares = "holds"
        if record.classification != PEAK:
            kinds["unclaimed"].append(fares)
        else:
            kinds["pilot_claims" if claimed_on_pilot(record, settings) else "later_claims"].append(fares)
    return kinds


def share_holding(fares: list[str]) -> float | None:
    return fares.count("holds") / len(fares) if fares else None


def figures(cell: dict) -> dict:
    """response_summary's figures; the statements of unclaimed loads and of claims on a later stage apart, the
    latter's misses by side and how many hold without the low end's raise; and how low the trials read."""
    settings, truth = cell["settings"], cell["truth"]
    summary = dataclasses.asdict(
        response_summary(cell["utilisation"], cell["preset"], settings, truth, cell["records"])
    )
    kinds = statements(cell)
    for kind in ("unclaimed", "later_claims"):
        summary[kind] = len(kinds[kind])
        summary[f"{kind}_hold"] = share_holding(kinds[kind])
    summary["later_claims_missed_by_side"] = {
        side: kinds["later_claims"].count(side) for side in ("low end above the mean", "high end below the mean")
    }
    with constants({"TRANSIENT_BIAS_LOW": 0.0}):
        summary["later_claims_hold_without_low_raise"] = share_holding(statements(cell)["later_claims"])
    # What the transient multiples stand for: how low the trials read, −log(mean trial mean / truth), beside the
    # variance s² of their logs; each load's first two trials (every load runs them), not selected by a claim.
    firsts = [m / truth for r in cell["records"] if r is not None for m in r.means_ms[:2]]
    logs = [math.log(x) for x in firsts]
    summary["trials_low_read"] = -math.log(math.fsum(firsts) / len(firsts))
    summary["trials_log_variance"] = statistics.sample_deviation(logs) ** 2
    return summary


# The refit of the transient multiples on unclaimed loads: the grid, and the seeds it is chosen on (3-5 held out).
REFIT_LOW = (0.0, 0.4, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4)
REFIT_HIGH = (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0)
FIT_SEEDS = (0, 1, 2, 6, 7, 8, 9, 10, 11)


def unclaimed_coverage(measured_cells: list[dict], seeds: Sequence[int]) -> dict[str, float]:
    """Per preset and load factor, the share of unclaimed loads' statements that hold, pooled over `seeds`."""
    pooled: dict[str, list[str]] = {}
    for cell in measured_cells:
        if cell["seed"] in seeds:
            pooled.setdefault(f"{cell['preset']} {cell['utilisation']}", []).extend(statements(cell)["unclaimed"])
    return {name: share_holding(fares) for name, fares in pooled.items()}


def refit(measured_cells: list[dict]) -> dict:
    """TRANSIENT_BIAS_LOW and _HIGH chosen on unclaimed loads of FIT_SEEDS: the pair with the most cells within
    c ± 2 points, then the least excess, over the cells some pair brings there (the others hold far above c for
    every pair: loads too noisy to settle, stated with wide intervals); its figures on every seed."""
    confidence = {f"{c['preset']} {c['utilisation']}": c["settings"].confidence for c in measured_cells}
    grid = {}
    for low in REFIT_LOW:
        for high in REFIT_HIGH:
            with constants({"TRANSIENT_BIAS_LOW": low, "TRANSIENT_BIAS_HIGH": high}):
                grid[(low, high)] = unclaimed_coverage(measured_cells, FIT_SEEDS)
    within = {pair: {n for n, v in cover.items() if abs(v - confidence[n]) <= 0.02} for pair, cover in grid.items()}
    fitted = set().union(*within.values())

    def rank(pair: tuple[float, float]) -> tuple[int, float]:
        excess = sum(max(abs(grid[pair][n] - confidence[n]) - 0.02, 0.0) for n in fitted)
        return -len(within[pair] & fitted), excess

    low, high = min(grid, key=rank)
    chosen = {"TRANSIENT_BIAS_LOW": low, "TRANSIENT_BIAS_HIGH": high}
    with constants(chosen):
        held_out = unclaimed_coverage(measured_cells, [s for s in range(12) if s not in FIT_SEEDS])
        seeds: dict[str, list[dict]] = {}
        for cell in measured_cells:
            seeds.setdefault(str(cell["seed"]), []).append(figures(cell))
    return {
        "fit_seeds": FIT_SEEDS,
        "fitted_cells": sorted(fitted),
        "grid": [{"low": p[0], "high": p[1], "unclaimed_hold": cover} for p, cover in grid.items()],
        "chosen": chosen,
        "held_out_unclaimed_hold": held_out,
        "seeds": seeds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, required=True, help="folder that keeps each cell's simulated loads")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.records.mkdir(parents=True, exist_ok=True)
    here = {name: getattr(statistics, name) for name in MAIN}
    result = {
        "benchmark": "response-coverage",
        "command": f"python3 benchmarks/response_claims.py --records DIR --out {args.out}",
        "what": "R̄ statements at one load of a simulated M/M/1 queue (sim.response_coverage), stated with this "
        "checkout's constants ('seeds') and main's ('main') on the same loads; unclaimed and later_claims: the "
        "statements of loads not claimed as the peak and of claims after the pilot stage apart; trials_low_read: "
        "−log(mean of each load's first two trial means / true mean), the low read the transient multiples stand "
        "for; refit: the multiples chosen on unclaimed loads of fit_seeds, held out 3-5, and every seed's figures "
        "with the chosen pair",
        "constants": {"this": here, "main": MAIN},
        "seeds": {},
        "main": {},
    }
    started = time.time()
    measured_cells = []
    for preset, utilisation, seed in cells():
        cell = measured(args.records, preset, utilisation, seed)
        measured_cells.append(cell)
        result["seeds"].setdefault(str(seed), []).append(figures(cell))
        with constants(MAIN):
            result["main"].setdefault(str(seed), []).append(figures(cell))
        print(f"{preset} {utilisation} {seed}: {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    result["refit"] = refit(measured_cells)
    result["machine"] = {**common.machine_info(engine=False), "load_average": os.getloadavg()}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
