"""Search policies: a load picker, and whether each load starts with a cheap scout trial.

"guided" is ours and the default. The others are the paper's baselines,
which all measure every load the same way (Algorithm 2: at least
min_trials full-length trials).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .pickers import Binsearch, BracketedSecant, Linear, LoadPicker, ModelGuided
from .settings import SearchSettings


@dataclasses.dataclass(frozen=True)
class Policy:
    name: str
    description: str
    make_picker: Callable[[SearchSettings], LoadPicker]
    # Each load starts with one short trial; when it is clearly far from the
    # peak region it decides the load, else careful trials follow.
    scout: bool
    # Careful trials run as long as the variance seen so far needs (controller/runlength.py),
    # not always settings.runlength_s.
    adapts_runlength: bool


POLICIES = {
    policy.name: policy
    for policy in (
        Policy(
            "guided",
            "ours: scout trials far from the peak, secant steps kept inside the bracket, "
            "careful trials as long as the noise seen needs",
            BracketedSecant,
            scout=True,
            adapts_runlength=True,
        ),
        Policy("binsearch", "paper Algorithm 3: double, then bisect", Binsearch, scout=False, adapts_runlength=False),
        Policy(
            "model",
            "paper Algorithm 4: R = 1/(a − bλ) through the newest point and the nearest to Rsat",
            ModelGuided,
            scout=False,
            adapts_runlength=False,
        ),
        Policy(
            "linear", "the strawman: fixed step of start_load, then bisect", Linear, scout=False, adapts_runlength=False
        ),
    )
}
DEFAULT_POLICY = "guided"


def policy_named(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)} (got {name!r})") from None
