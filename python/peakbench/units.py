"""Sizes and durations written by people: "8KiB", "1.5MB", "120MB", "30s", "2m".

Sizes: a plain number is bytes; B, KB, MB, GB, TB are powers of 1000 and
KiB, MiB, GiB, TiB powers of 1024 (case does not matter: "kb" = "KB").
A bare "k", "m" or "g" is refused: "8k" means 8000 bytes to some tools and
8192 to others (fio, dd), and a benchmark must not guess which one you meant.

Durations: a plain number is seconds; us, ms, s, m (minutes), h are accepted,
up to MAX_DURATION_S (longer is a typo, and past the platform's timers).
"""

from __future__ import annotations

import math
import re

from .errors import InputError

# "" is the plain number written as a string, e.g. "4096".
SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
DURATION_UNITS = {"": 1.0, "us": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_DURATION_S = 30 * 86400.0
# Offered load: the engine refuses more (SPEC.md); a single engine is far below this anyway.
MAX_RATE = 50_000_000

_SIZE_HELP = 'write e.g. 4096, "8KiB", "1.5MB"'
_NUMBER_WITH_UNIT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*")


def _split(text: str) -> tuple[float, str] | None:
    match = _NUMBER_WITH_UNIT.fullmatch(text)
    if match is None:
        return None
    return float(match.group(1)), match.group(2).lower()


def parse_size(value: object, field: str | None = None) -> float:
    """Bytes from a number or a string with a size unit; never negative."""
    if isinstance(value, bool):  # TOML true/false are ints to Python; not a size
        raise InputError(f"{value!r} is not a size", field=field)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        number, unit = _split(value) or (0.0, "?")
        if unit in ("k", "m", "g", "t"):
            raise InputError(
                f"{value!r} is ambiguous: write {number:g}{unit.upper()}B (powers of 1000)"
                f" or {number:g}{unit.upper()}iB (powers of 1024)",
                field=field,
            )
        if unit not in SIZE_UNITS:
            raise InputError(f"{value!r} is not a size; {_SIZE_HELP}", field=field)
        number *= SIZE_UNITS[unit]
    else:
        raise InputError(f"{value!r} is not a size; {_SIZE_HELP}", field=field)
    if not math.isfinite(number) or number < 0:
        raise InputError(f"size {value!r} must be a finite number >= 0", field=field)
    return number


RATE_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6}


def parse_rate(value: object, field: str | None = None) -> float:
    """Operations per second from a number or a string with a k or M suffix ("2k", "1.5M"):
    finite, above 0 and at most MAX_RATE."""
    try:  # a plain number first, so "nan", "inf" and "-5" are judged by value, not by form
        number, suffix = float(value), ""
    except (TypeError, ValueError):
        number, suffix = _split(str(value)) or (0.0, "?")
    if isinstance(value, bool) or suffix not in RATE_SUFFIXES:
        raise InputError(f"{value!r} is not a number of ops/s; write e.g. 500, 2k or 1.5M", field=field)
    rate = number * RATE_SUFFIXES[suffix]
    if not (math.isfinite(rate) and rate > 0):
        raise InputError(f"{value!r}: must be a finite number of ops/s above 0", field=field)
    if rate > MAX_RATE:
        raise InputError(f"{value!r}: above {MAX_RATE:,} ops/s, more than one engine can schedule", field=field)
    return rate


def parse_duration(value: object, field: str | None = None) -> float:
    """Seconds from a number or a string such as "500ms", "30s", "2m"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        number, unit = _split(value) or (0.0, "?")
        if unit not in DURATION_UNITS:
            raise InputError(f'{value!r} is not a duration; write e.g. 30, "30s", "2m"', field=field)
        seconds = number * DURATION_UNITS[unit]
    else:
        raise InputError(f'{value!r} is not a duration; write e.g. 30, "30s", "2m"', field=field)
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"duration {value!r} must be a finite number >= 0", field=field)
    if seconds > MAX_DURATION_S:
        raise InputError(f"duration {value!r} is longer than {MAX_DURATION_S / 86400:g} days", field=field)
    return seconds


def format_size(size: float) -> str:
    """A size for people: exact in the units it was probably written in, else 1024-based.

    "8 KiB", "10.5 KB", "138 MB" come back as written; an arbitrary total such
    as a file-set size prints like `ls -h`: "28.6 MiB".
    """
    for base, units in ((1024, ("KiB", "MiB", "GiB", "TiB")), (1000, ("KB", "MB", "GB", "TB"))):
        for power in (4, 3, 2, 1):
            scaled = size / base**power
            fits = 1 <= scaled < base or (power == 4 and scaled >= 1)
            if fits and math.isclose(round(scaled, 1) * base**power, size, rel_tol=1e-12):
                return f"{round(scaled, 1):g} {units[power - 1]}"
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    step = 0
    while abs(size) >= 1024 and step < len(units) - 1:
        size /= 1024
        step += 1
    return f"{size:.0f} B" if step == 0 else f"{size:.1f} {units[step]}"
