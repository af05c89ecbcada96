"""The operation vocabulary and how a mix of weights becomes shares summing to 1.

Ops are NFSv3 procedure names (DESIGN.md); every target maps them onto its
own protocol. Mixes are written as percentages or any weights and are always
normalised; when the numbers were not already a clean 100% (or 1), the note
says so, because a silent rescale would hide a typo such as 101%.
"""

from __future__ import annotations

import math

OPS = (
    "null",
    "getattr",
    "setattr",
    "lookup",
    "access",
    "readlink",
    "read",
    "write",
    "create",
    "mkdir",
    "symlink",
    "remove",
    "rmdir",
    "rename",
    "link",
    "readdir",
    "readdirplus",
    "fsstat",
    "fsinfo",
    "pathconf",
    "commit",
    "lock",
    # SMB's handle ops, which only a Markov workload (markov.py) issues: open, use, close.
    "open",
    "close",
    "fgetattr",
    "fsetattr",
    "getsecurity",
)
HANDLE_OPS = ("open", "close", "fgetattr", "fsetattr", "getsecurity")


def normalise(weights: dict[str, float]) -> tuple[dict[str, float], str | None]:
    """Shares summing to 1, without zero-weight ops, and a note if the input needed rescaling.

    The caller has checked that every weight is a finite number >= 0 and that
    at least one is positive.
    """
    total = math.fsum(weights.values())
    shares = {op: weight / total for op, weight in weights.items() if weight > 0}
    note = None
    if not (math.isclose(total, 100.0, abs_tol=1e-9) or math.isclose(total, 1.0, abs_tol=1e-12)):
        note = f"mix sums to {total:g}, not 100; normalised to 100%"
    return shares, note


def format_mix(shares: dict[str, float]) -> str:
    """Like "getattr 55.0%, read 28.0%, ...", largest first."""
    ordered = sorted(shares.items(), key=lambda item: -item[1])
    return ", ".join(f"{op} {share * 100:.1f}%" for op, share in ordered)
