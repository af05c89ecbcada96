"""The open-loop response-time curve R = 1/(α − βλ) (the paper's model, Algorithm 4).

1/R falls linearly with the load λ for an M/M/1-like server, so two points
on the curve fix the line and the load where R reaches Rsat. Fits that do
not describe a server (1/R rising with load, non-finite values) give None.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ResponseLine:
    """1/R = intercept − slope·λ, with R in ms and λ in ops/s."""

    intercept: float
    slope: float

    def load_for(self, response_ms: float) -> float:
        return (self.intercept - 1 / response_ms) / self.slope


def line_through(point_a: tuple[float, float], point_b: tuple[float, float]) -> ResponseLine | None:
    """The line through two (load, mean response ms) points, or None if it is no server curve."""
    (load_a, r_a), (load_b, r_b) = point_a, point_b
    if load_a == load_b or r_a <= 0 or r_b <= 0:
        return None
    slope = (1 / r_a - 1 / r_b) / (load_b - load_a)
    if not slope > 0:
        return None
    return ResponseLine(intercept=1 / r_a + slope * load_a, slope=slope)
