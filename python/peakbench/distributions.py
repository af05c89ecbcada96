"""Distributions in workload files, turned into the engine's DIST/POP JSON (SPEC.md).

A distribution is written as
- a plain number, or a size string such as "8KiB" for sizes: a constant;
- an inline table with a `kind`:
    {kind = "constant", value = "4KiB"}
    {kind = "uniform", low = 1, high = 10}
    {kind = "exponential", mean = "3.7MB"}
    {kind = "pareto", alpha = 1.5, scale = "1.6KB"}       # scale is the minimum
    {kind = "lognormal", mean = "10.5KB", median = "1.3KB"}  # mean >= median
    {kind = "bimodal", first = "5KB", second = "45KB", p_first = 0.5}
    {kind = "histogram", file = "sizes.dist"}   # Fstress `value:weight` lines
    {kind = "histogram", points = [["1KB", 33], ["2KB", 21]]}
    {kind = "zipf", alpha = 0.8}                # popularity only: rank r gets r^-alpha
  Every kind takes optional `min` and `max`, which clamp samples.

What a distribution measures decides what its numbers may carry:
sizes take units, counts and popularity weights are plain numbers.

The analytic mean (`mean`) is what self-scaling by bytes divides by, so it
honours the min/max clamping exactly rather than ignoring the tails.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from .errors import InputError
from .units import format_size, parse_size

Quantity = Literal["size", "count", "popularity"]

# Fields of each kind; "min"/"max" are allowed everywhere, "file"/"points" are
# histogram alternatives and handled on their own.
KINDS = {
    "constant": ("value",),
    "uniform": ("low", "high"),
    "exponential": ("mean",),
    "pareto": ("alpha", "scale"),
    "lognormal": ("mean", "median"),
    "bimodal": ("first", "second", "p_first"),
    "histogram": (),
    "zipf": ("alpha",),
}
# Fields measured in the distribution's own unit (bytes for sizes); the rest are plain numbers.
# Files, subdirectories or symlinks in one directory: far past any real workload, and the engine
# builds a directory's entries at once, so a typo here must not reach it.
MAX_COUNT = 1_000_000
IN_UNITS = {"value", "low", "high", "mean", "median", "scale", "min", "max"}


def parse_distribution(value: object, *, field: str, quantity: Quantity, base_dir: Path) -> dict:
    """The engine JSON for a distribution written in a workload file.

    `field` names it in errors (e.g. "fileset.file_sizes"); `base_dir` is where
    histogram file names are looked up (the workload file's directory).
    """
    if not isinstance(value, dict):
        return {"kind": "constant", "value": _amount(value, field, quantity)}
    kind = value.get("kind")
    if kind not in KINDS:
        allowed = [k for k in KINDS if k != "zipf" or quantity == "popularity"]
        raise InputError(f"kind must be one of {', '.join(allowed)} (got {kind!r})", field=f"{field}.kind")
    if kind == "zipf" and quantity != "popularity":
        raise InputError("zipf describes popularity ranks, not values", field=f"{field}.kind")

    allowed = set(KINDS[kind]) | {"kind", "min", "max"} | ({"file", "points"} if kind == "histogram" else set())
    for key in value:
        if key not in allowed:
            raise InputError(
                f"unknown key {key!r} for kind {kind} (takes: {', '.join(sorted(allowed - {'kind'}))})",
                field=f"{field}.{key}",
            )
    for key in KINDS[kind]:
        if key not in value:
            raise InputError(f"kind {kind} needs {key!r}", field=field)

    dist: dict = {"kind": kind}
    for key in KINDS[kind]:
        if key in ("first", "second"):
            dist[key] = parse_distribution(value[key], field=f"{field}.{key}", quantity=quantity, base_dir=base_dir)
        elif key in IN_UNITS:
            dist[key] = _amount(value[key], f"{field}.{key}", quantity)
        else:
            dist[key] = _number(value[key], f"{field}.{key}")
    if kind == "histogram":
        dist["points"] = _histogram_points(value, field, quantity, base_dir)
    for bound in ("min", "max"):
        if bound in value:
            dist[bound] = _amount(value[bound], f"{field}.{bound}", quantity)
    _check_shape(dist, field)
    return dist


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{value!r} is not a finite number", field=field)
    return float(value)


def _amount(value: object, field: str, quantity: Quantity) -> float:
    """A value in the distribution's unit: bytes for sizes, a plain number otherwise."""
    if quantity == "size":
        return parse_size(value, field)
    number = _number(value, field)
    if number < 0:
        raise InputError(f"{value!r} is negative", field=field)
    if quantity == "count" and number > MAX_COUNT:
        raise InputError(f"{number:g} is more than {MAX_COUNT:,} entries in one directory", field=field)
    return number


def _histogram_points(value: dict, field: str, quantity: Quantity, base_dir: Path) -> list[list[float]]:
    if ("file" in value) == ("points" in value):
        raise InputError('a histogram needs either file = "NAME" or points = [[value, weight], ...]', field=field)
    if "points" in value:
        points = value["points"]
        if not isinstance(points, list) or not points:
            raise InputError("points must be a non-empty list of [value, weight] pairs", field=f"{field}.points")
        parsed = []
        for index, pair in enumerate(points):
            where = f"{field}.points[{index}]"
            if not isinstance(pair, list) or len(pair) != 2:
                raise InputError(f"{pair!r} is not a [value, weight] pair", field=where)
            parsed.append(_point(pair[0], pair[1], where, quantity))
        return _nonzero_total(parsed, field)
    if not isinstance(value["file"], str):
        raise InputError("file must be a file name", field=f"{field}.file")
    return read_histogram_file(base_dir / value["file"], field=field, quantity=quantity)


def read_histogram_file(path: Path, *, field: str, quantity: Quantity) -> list[list[float]]:
    """[value, weight] pairs from an Fstress histogram file.

    One `value:weight` pair per line; `#` starts a comment (whole line or the
    rest of one); blank lines are ignored. Errors name this file and its line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read histogram file: {error}", file=path, field=field) from None
    points = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        value, colon, weight = content.partition(":")
        if not colon:
            raise InputError(f"expected 'value:weight', got {content!r}", file=path, line=number, field=field)
        try:
            weight_number = float(weight)
        except ValueError:
            message = f"weight {weight.strip()!r} is not a number"
            raise InputError(message, file=path, line=number, field=field) from None
        try:
            points.append(_point(value.strip(), weight_number, field, quantity))
        except InputError as error:
            raise error.located(path, number) from None
    if not points:
        raise InputError("the histogram has no value:weight lines", file=path, field=field)
    try:
        return _nonzero_total(points, field)
    except InputError as error:
        raise error.located(path, None) from None


def _point(value: object, weight: object, field: str, quantity: Quantity) -> list[float]:
    if quantity != "size" and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(f"value {value!r} is not a number", field=field) from None
    amount = _amount(value, field, quantity)
    weight = _number(weight, field)
    if weight < 0:
        raise InputError(f"weight {weight:g} is negative", field=field)
    return [amount, weight]


def _nonzero_total(points: list[list[float]], field: str) -> list[list[float]]:
    if sum(weight for _, weight in points) <= 0:
        raise InputError("the histogram's weights sum to zero", field=field)
    return points


def _check_shape(dist: dict, field: str) -> None:
    """Parameter combinations the kind cannot have; caught here so the error has a line."""
    kind = dist["kind"]
    problem = None
    if kind == "uniform" and dist["low"] > dist["high"]:
        problem = "low is above high"
    elif kind == "exponential" and dist["mean"] <= 0:
        problem = "mean must be > 0"
    elif kind == "pareto" and (dist["alpha"] <= 0 or dist["scale"] <= 0):
        problem = "alpha and scale must be > 0"
    elif kind == "lognormal" and not 0 < dist["median"] <= dist["mean"]:
        problem = "needs 0 < median <= mean"
    elif kind == "bimodal" and not 0 <= dist["p_first"] <= 1:
        problem = "p_first must be between 0 and 1"
    elif kind == "zipf" and dist["alpha"] < 0:
        problem = "alpha must be >= 0"
    elif dist.get("min", -math.inf) > dist.get("max", math.inf):
        problem = "min is above max"
    if problem:
        raise InputError(problem, field=field)


def mean(dist: dict) -> float:
    """The mean of samples of an engine DIST, clamping included (math.inf if unbounded)."""
    return _clamped_mean(dist, None, None)


def scaled(dist: dict, factor: float) -> dict:
    """The distribution of factor·X: every parameter in the values' unit (IN_UNITS, histogram
    values, bimodal parts) times `factor`, so the shape is kept and the mean is `factor` times."""
    out = {}
    for key, value in dist.items():
        if key in ("first", "second"):
            out[key] = scaled(value, factor)
        elif key == "points":
            out[key] = [[point * factor, weight] for point, weight in value]
        elif key in IN_UNITS:
            out[key] = value * factor
        else:
            out[key] = value
    return out


def _clamped_mean(dist: dict, outer_lo: float | None, outer_hi: float | None) -> float:
    lo, hi = _compose_bounds(dist.get("min"), dist.get("max"), outer_lo, outer_hi)
    kind = dist["kind"]
    if kind == "constant":
        return _clamp(dist["value"], lo, hi)
    if kind == "histogram":
        total = math.fsum(weight for _, weight in dist["points"])
        return math.fsum(_clamp(value, lo, hi) * weight for value, weight in dist["points"]) / total
    if kind == "bimodal":
        p = dist["p_first"]
        return p * _clamped_mean(dist["first"], lo, hi) + (1 - p) * _clamped_mean(dist["second"], lo, hi)
    if kind == "zipf":
        raise ValueError("a zipf popularity has no mean value")
    cdf, partial = _continuous(dist)
    # E[clamp(X)] = lo·P(X <= lo) + E[X; lo < X <= hi] + hi·P(X > hi)
    below = lo * cdf(lo) if lo is not None else 0.0
    above = hi * (1.0 - cdf(hi)) if hi is not None else 0.0
    middle = partial(-math.inf if lo is None else lo, math.inf if hi is None else hi)
    return below + middle + above


def _compose_bounds(lo, hi, outer_lo, outer_hi):
    """Bounds equal to clamping to [lo, hi] and then to [outer_lo, outer_hi] (None: open)."""
    if outer_hi is not None and lo is not None and lo > outer_hi:
        return outer_hi, outer_hi
    if outer_lo is not None and hi is not None and hi < outer_lo:
        return outer_lo, outer_lo
    new_lo = lo if outer_lo is None else outer_lo if lo is None else max(lo, outer_lo)
    new_hi = hi if outer_hi is None else outer_hi if hi is None else min(hi, outer_hi)
    return new_lo, new_hi


def _clamp(value: float, lo: float | None, hi: float | None) -> float:
    if lo is not None:
        value = max(value, lo)
    if hi is not None:
        value = min(value, hi)
    return value


def _continuous(dist: dict):
    """(cdf(x), partial(a, b) = E[X; a < X <= b]) of a continuous kind."""
    kind = dist["kind"]
    if kind == "uniform":
        low, high = dist["low"], dist["high"]
        if low == high:
            return (lambda x: 1.0 if x >= low else 0.0), (lambda a, b: low if a < low <= b else 0.0)

        def partial(a, b):
            a, b = max(a, low), min(b, high)
            return (b * b - a * a) / (2 * (high - low)) if b > a else 0.0

        return (lambda x: min(max((x - low) / (high - low), 0.0), 1.0)), partial
    if kind == "exponential":
        m = dist["mean"]

        def tail(x):  # E[X; X > x] for x >= 0
            return 0.0 if x == math.inf else (x + m) * math.exp(-x / m)

        def partial(a, b):
            return tail(max(a, 0.0)) - tail(max(b, 0.0))

        return (lambda x: 1.0 - math.exp(-x / m) if x > 0 else 0.0), partial
    if kind == "pareto":
        alpha, scale = dist["alpha"], dist["scale"]

        def antiderivative(x):  # of x·pdf(x) for x >= scale
            if x == math.inf:
                return 0.0 if alpha > 1 else math.inf
            if alpha == 1:
                return scale * math.log(x)
            return alpha * scale**alpha * x ** (1 - alpha) / (1 - alpha)

        def partial(a, b):
            a = max(a, scale)
            return antiderivative(b) - antiderivative(a) if b > a else 0.0

        return (lambda x: 1.0 - (scale / x) ** alpha if x > scale else 0.0), partial
    if kind == "lognormal":
        m, median = dist["mean"], dist["median"]
        mu, sigma = math.log(median), math.sqrt(2 * math.log(m / median))
        if sigma == 0:
            return (lambda x: 1.0 if x >= median else 0.0), (lambda a, b: median if a < median <= b else 0.0)

        def phi(z):  # the standard normal CDF
            return 0.5 * (1 + math.erf(z / math.sqrt(2)))

        def z(x, shift=0.0):  # standardised log of x; shift = sigma² gives E[X; X <= x] / mean
            if x <= 0:
                return -math.inf
            return math.inf if x == math.inf else (math.log(x) - mu - shift) / sigma

        def partial(a, b):
            return m * (phi(z(b, sigma**2)) - phi(z(a, sigma**2))) if b > a else 0.0

        return (lambda x: phi(z(x))), partial
    raise ValueError(f"no continuous form for {kind}")


def describe(dist: dict, quantity: Quantity) -> str:
    """A one-line, human reading of an engine DIST, e.g. "lognormal mean 10.3 KiB, median 1.3 KiB"."""

    def show(key, number):
        return format_size(number) if quantity == "size" and key in IN_UNITS else f"{number:g}"

    kind = dist["kind"]
    if kind == "constant":
        text = show("value", dist["value"])
    elif kind == "histogram":
        text = f"histogram of {len(dist['points'])} values, mean {show('mean', mean(dist))}"
    elif kind == "bimodal":
        text = (
            f"bimodal {dist['p_first']:g} × ({describe(dist['first'], quantity)})"
            f" or ({describe(dist['second'], quantity)})"
        )
    else:
        text = kind + " " + ", ".join(f"{key} {show(key, dist[key])}" for key in KINDS[kind])
    bounds = [f"{key} {show(key, dist[key])}" for key in ("min", "max") if key in dist]
    return text + (f" ({', '.join(bounds)})" if bounds else "")
