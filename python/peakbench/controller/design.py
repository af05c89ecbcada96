"""Factors, their levels, and which samples to measure: full factorial or D-optimal.

A sample is one setting of all factors: {factor name: level}. Levels are
numbers; a factor on a "log" scale (e.g. thread counts 1…100) is coded on
log2 of its levels. Codes span [-1, 1], the usual scale of response-surface
designs. The D-optimal subset is chosen for the quadratic model
(1, x_i, x_i², x_i·x_j) by Fedorov exchange (pyDOE3).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

from ..errors import import_extra

Sample = dict[str, float]
SCALES = ("linear", "log")


@dataclasses.dataclass(frozen=True)
class Factor:
    name: str
    levels: tuple[float, ...]
    scale: str = "linear"

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"factor {self.name}: scale must be one of {', '.join(SCALES)} (got {self.scale!r})")
        if len(set(self.levels)) < 2:
            raise ValueError(f"factor {self.name}: needs at least two distinct levels (got {list(self.levels)})")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in self.levels):
            raise ValueError(f"factor {self.name}: levels must be finite numbers (got {list(self.levels)})")
        if self.scale == "log" and min(self.levels) <= 0:
            raise ValueError(f"factor {self.name}: a log-scale factor needs positive levels (got {list(self.levels)})")

    @classmethod
    def parse(cls, name: str, text: str, scale: str = "linear") -> Factor:
        """Levels written as "1,2,4,8" (commas and/or spaces)."""
        words = [w for w in text.replace(",", " ").split() if w]
        try:
            levels = tuple(float(w) for w in words)
        except ValueError:
            raise ValueError(f"factor {name}: levels {text!r} do not parse: write numbers such as 1,2,4,8") from None
        return cls(name, levels, scale)

    def _position(self, value: float) -> float:
        return math.log2(value) if self.scale == "log" else float(value)

    def code(self, value: float) -> float:
        low = self._position(min(self.levels))
        high = self._position(max(self.levels))
        return 2 * (self._position(value) - low) / (high - low) - 1


def coded(factors: Sequence[Factor], sample: Sample) -> list[float]:
    return [f.code(sample[f.name]) for f in factors]


def quadratic_terms(factors: Sequence[Factor]) -> list[str]:
    names = [f.name for f in factors]
    return ["1"] + names + [f"{n}^2" for n in names] + [f"{a}*{b}" for a, b in itertools.combinations(names, 2)]


def quadratic_row(codes: Sequence[float]) -> list[float]:
    """The quadratic model's regressors for one coded sample, in quadratic_terms order."""
    return [1.0] + list(codes) + [x * x for x in codes] + [a * b for a, b in itertools.combinations(codes, 2)]


def full_factorial(factors: Sequence[Factor]) -> list[Sample]:
    return [dict(zip((f.name for f in factors), levels)) for levels in itertools.product(*(f.levels for f in factors))]


def d_optimal(factors: Sequence[Factor], n_samples: int, candidates: Sequence[Sample] | None = None) -> list[Sample]:
    """The n_samples of `candidates` (default: the full factorial) that are D-optimal for a quadratic."""
    candidates = list(candidates) if candidates is not None else full_factorial(factors)
    terms = len(quadratic_terms(factors))
    if not terms <= n_samples <= len(candidates):
        raise ValueError(
            f"a D-optimal design for a quadratic in {len(factors)} factors needs between "
            f"{terms} and {len(candidates)} samples (got {n_samples})"
        )
    # Imported here, not at the top: it pulls in scipy, and only surfaces need it.
    optimal_design = import_extra("pyDOE3.doe_optimal", "surfaces", "surface design").optimal_design

    codes = np.array([coded(factors, s) for s in candidates])
    design, _ = optimal_design(codes, n_samples, degree=2, criterion="D", method="fedorov")
    chosen = []
    for row in design:
        matches = np.flatnonzero(np.all(np.isclose(codes, row, atol=1e-9), axis=1))
        chosen.append(candidates[int(matches[0])])
    return chosen
