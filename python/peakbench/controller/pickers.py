"""Load pickers: given what a search has seen, the next test load to try.

Baselines from the paper: Linear (fixed step, then bisection), Binsearch
(Algorithm 3: double, then bisect) and Model (Algorithm 4: R = 1/(a − bλ)
through the newest point and the point nearest Rsat). Ours, BracketedSecant:
the same model line (a secant of 1/R, which is ~linear in λ), but each step
is kept inside the bracket known from saturated and unsaturated loads, and
falls back to bisection whenever the secant misbehaves or the bracket does
not halve every two steps, so it never does worse than Binsearch by much and
lands on the peak in one or two steps when the curve is M/M/1-like.

The first load of every search is the seed or settings.start_load (the
paper's 50 ops/s); pickers are asked only for the loads after it.
"""

from __future__ import annotations

import math
from typing import Protocol

from .history import SearchHistory
from .response_model import line_through
from .settings import SearchSettings


class LoadPicker(Protocol):
    def next_load(self, history: SearchHistory) -> float: ...


def bisection_step(history: SearchHistory, low_default: float = 0.0) -> float:
    """Double up while nothing saturated yet, halve down while everything did, else bisect."""
    low, high = history.bracket()
    if high is None:
        return low.load * 2
    low_load = low.load if low is not None else low_default
    return (low_load + high.load) / 2


class Binsearch:
    """Algorithm 3: double while unsaturated, then bisect the bracket."""

    def __init__(self, settings: SearchSettings):
        self.settings = settings

    def next_load(self, history: SearchHistory) -> float:
        return bisection_step(history)


class Linear:
    """The strawman: step up by a fixed increment until saturated, then bisect."""

    def __init__(self, settings: SearchSettings, step: float | None = None):
        self.step = step if step is not None else settings.start_load

    def next_load(self, history: SearchHistory) -> float:
        low, high = history.bracket()
        if high is None:
            return low.load + self.step
        if low is None:
            return max(high.load - self.step, high.load / 2)
        return (low.load + high.load) / 2


class ModelGuided:
    """Algorithm 4: fit R = 1/(a − bλ) through the newest point and the one nearest Rsat.

    The paper's algorithm may not converge; its guard here: when the fit is
    no server curve (1/R rising with load) or predicts no new positive load,
    take a bisection step instead. The search loop caps the number of loads.
    """

    def __init__(self, settings: SearchSettings):
        self.rsat = settings.rsat_ms

    def next_load(self, history: SearchHistory) -> float:
        newest = history.latest
        if len(history.records) == 1:
            return newest.load * 2 if newest.mean_ms < self.rsat else newest.load / 2
        nearest = min(history.records[:-1], key=lambda r: abs(r.mean_ms - self.rsat))
        line = line_through((newest.load, newest.mean_ms), (nearest.load, nearest.mean_ms))
        if line is not None:
            prediction = line.load_for(self.rsat)
            if math.isfinite(prediction) and prediction > 0 and not history.tested(prediction):
                return prediction
        return bisection_step(history)


class BracketedSecant:
    """Ours: the secant of 1/R through the two curve points nearest Rsat, kept in the bracket.

    - Not yet saturated anywhere: go to the predicted peak, but at most
      `growth` times the highest load tried (and at least 1% above it).
    - Saturated everywhere so far: likewise downwards.
    - Bracketed: go to the predicted peak if it lies well inside the bracket
      and the bracket halved over the last two steps; bisect otherwise.
    """

    growth = 4.0  # widest step while the peak is not bracketed
    min_step = 0.01  # smallest step (relative) while the peak is not bracketed
    margin = 0.05  # a secant step keeps this share of the bracket away from its ends

    def __init__(self, settings: SearchSettings):
        self.rsat = settings.rsat_ms
        self.bracket_widths: list[float] = []

    def next_load(self, history: SearchHistory) -> float:
        low, high = history.bracket()
        prediction = self.predicted_peak(history)
        if high is None:
            if prediction is None:
                return low.load * self.growth
            return min(max(prediction, low.load * (1 + self.min_step)), low.load * self.growth)
        if low is None:
            if prediction is None:
                return high.load / self.growth
            return max(min(prediction, high.load * (1 - self.min_step)), high.load / self.growth)
        width = high.load - low.load
        self.bracket_widths.append(width)
        stalled = len(self.bracket_widths) >= 3 and width > 0.5 * self.bracket_widths[-3]
        inside = (
            prediction is not None and low.load + self.margin * width <= prediction <= high.load - self.margin * width
        )
        if stalled or not inside:
            return (low.load + high.load) / 2
        return prediction

    def predicted_peak(self, history: SearchHistory) -> float | None:
        points = sorted(history.curve_points(), key=lambda p: abs(math.log(p[1] / self.rsat)))
        if len(points) < 2:
            return None
        line = line_through(points[0], points[1])
        if line is None:
            return None
        prediction = line.load_for(self.rsat)
        return prediction if math.isfinite(prediction) and prediction > 0 else None
