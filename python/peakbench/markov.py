"""Markov workload models: an op stream from a chain over handle states (SPECsfs2008's CIFS
workload, whose operations must come in valid sequences: a file is opened before it is read,
written, queried, set, locked or flushed, and closed afterwards).

    name = "specsfs2008-cifs"
    source = "where the numbers come from"
    start = "none"                 # a client starts holding no handle

    [states.none]
    handles = 0                    # open handles in this state
    next = [                       # one line each: op emitted, relative weight, next state
      {op = "open", weight = 12.1, to = "one"},
      {op = "getattr", weight = 58.7, to = "none"},
    ]

`open` must lead to a state with one handle more, `close` to one with one fewer, every other
op to a state with as many; the ops on a handle (read, write, commit, lock, fgetattr, fsetattr,
getsecurity, close) only leave states that hold one. The engine opens a file that is not open
yet, uses one of the open handles for each op on a handle, and closes the oldest. A workload
names its model with `[mix] markov = "FILE"`; its mix is then the chain's long-run mix.
"""

from __future__ import annotations

import math
from pathlib import Path

from . import tomlfile
from .errors import InputError
from .mix import OPS

TOP_KEYS = ("name", "description", "source", "start", "states")
STATE_KEYS = ("handles", "next")
TRANSITION_KEYS = ("op", "weight", "to")
ON_HANDLE = ("read", "write", "commit", "lock", "fgetattr", "fsetattr", "getsecurity", "close")
# Ops that would take a file from under its open handles (the engine refuses them too).
UNDER_HANDLES = ("remove", "rename")
MAX_HANDLES = 1024  # the engine's limit (spec.rs)


def load_model(path: Path) -> tuple[dict, dict[str, float]]:
    """The engine's `markov` object and the chain's long-run op mix (shares summing to 1)."""
    return tomlfile.load(Path(path), _parse, "Markov model")


def _parse(document: dict) -> tuple[dict, dict[str, float]]:
    tomlfile.check_keys(document, TOP_KEYS, "")
    states = document.get("states")
    if not isinstance(states, dict) or not states:
        raise InputError("the model needs [states.NAME] tables", field="states")
    names = list(states)
    for name, state in states.items():
        if not isinstance(state, dict):
            raise InputError("must be a table", field=f"states.{name}")
        tomlfile.check_keys(state, STATE_KEYS, f"states.{name}.")
        handles = state.get("handles")
        if isinstance(handles, bool) or not isinstance(handles, int) or not 0 <= handles <= MAX_HANDLES:
            raise InputError(
                f"must be a whole number from 0 to {MAX_HANDLES} (got {handles!r})", field=f"states.{name}.handles"
            )
    start = document.get("start")
    if start not in states:
        raise InputError(f"must name a state ({', '.join(names)}); got {start!r}", field="start")
    if states[start]["handles"] != 0:
        raise InputError(f"state {start!r} holds handles; a client starts with none", field="start")
    engine_states = [
        {"name": name, "handles": state["handles"], "next": _transitions(name, state, states, names)}
        for name, state in states.items()
    ]
    _check_reachable(engine_states, names.index(start))
    return {"start": names.index(start), "states": engine_states}, long_run_mix(engine_states, names.index(start))


def _transitions(name: str, state: dict, states: dict, names: list[str]) -> list[dict]:
    written = state.get("next")
    field = f"states.{name}.next"
    if not isinstance(written, list) or not written:
        raise InputError("must be a list of {op, weight, to} tables", field=field)
    out = []
    for i, t in enumerate(written):
        at = f"{field}[{i}]"
        if not isinstance(t, dict):
            raise InputError("must be a table {op = ..., weight = ..., to = ...}", field=at)
        tomlfile.check_keys(t, TRANSITION_KEYS, f"{at}.")
        op, weight, to = t.get("op"), t.get("weight"), t.get("to")
        if op not in OPS:
            raise InputError(f"unknown op {op!r}", field=f"{at}.op")
        if op in UNDER_HANDLES:
            raise InputError(f"{op} would take a file from under its open handles", field=f"{at}.op")
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not (math.isfinite(weight) and weight >= 0)
        ):
            raise InputError(f"must be a number >= 0 (got {weight!r})", field=f"{at}.weight")
        if to not in states:
            raise InputError(f"must name a state ({', '.join(names)}); got {to!r}", field=f"{at}.to")
        have = state["handles"]
        if op in ON_HANDLE and have == 0:
            raise InputError(f"{op} needs an open handle, and state {name!r} holds none", field=f"{at}.op")
        want = have + 1 if op == "open" else have - 1 if op == "close" else have
        if states[to]["handles"] != want:
            raise InputError(
                f"{op} from {name!r} ({have} handles) leaves {want}, but {to!r} holds {states[to]['handles']}",
                field=f"{at}.to",
            )
        out.append({"op": op, "weight": float(weight), "to": names.index(to)})
    if not any(t["weight"] > 0 for t in out):
        raise InputError(f"state {name!r} has no transition with a weight above 0", field=field)
    return out


def _check_reachable(states: list[dict], start: int) -> None:
    """A state the chain can never enter is a typo in a `to`, not a model."""
    seen, todo = {start}, [start]
    while todo:
        for t in states[todo.pop()]["next"]:
            if t["weight"] > 0 and t["to"] not in seen:
                seen.add(t["to"])
                todo.append(t["to"])
    unreached = [s["name"] for i, s in enumerate(states) if i not in seen]
    if unreached:
        raise InputError(f"no transition from the start reaches state {unreached[0]!r}", field=f"states.{unreached[0]}")


def long_run_mix(states: list[dict], start: int, rounds: int = 20_000) -> dict[str, float]:
    """The share of each op over a long run: the chain's state distribution, found by iterating
    its lazy version (half a step stays put, so a periodic chain settles too) from the start,
    times each state's transition probabilities."""
    step = [[(t["weight"] / math.fsum(u["weight"] for u in s["next"]), t["to"]) for t in s["next"]] for s in states]
    share = [0.0] * len(states)
    share[start] = 1.0
    for _ in range(rounds):
        moved = [p / 2 for p in share]
        for i, p in enumerate(share):
            for prob, to in step[i]:
                moved[to] += p / 2 * prob
        if max(abs(a - b) for a, b in zip(moved, share)) < 1e-15:
            share = moved
            break
        share = moved
    mix: dict[str, float] = {}
    for i, p in enumerate(share):
        for t, (prob, _) in zip(states[i]["next"], step[i]):
            if prob > 0:
                mix[t["op"]] = mix.get(t["op"], 0.0) + p * prob
    total = math.fsum(mix.values())
    return {op: share / total for op, share in mix.items()}
