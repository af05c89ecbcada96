"""The one template syntax of plans and surfaces: {name} is a variable, {{ and }} are literal braces."""

from __future__ import annotations

import re

_TEMPLATE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{|\}")


def render(template: str, values: dict, keep: tuple[str, ...] = (), final: bool = True) -> str:
    """Fill {name}s from `values`. Names in `keep` are left as they are (for a later pass);
    with final=False, {{ and }} are left too. An unknown name raises KeyError(name)."""

    def replace(match: re.Match) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0] if final else token
        name = match.group(1)
        if name is None:
            raise ValueError(f"unmatched {token!r} in {template!r} (write {token * 2} for a literal brace)")
        if name in values:
            value = values[name]
            return _scalar_text(value)
        if name in keep:
            return token
        raise KeyError(name)

    return _TEMPLATE.sub(replace, template)


def _scalar_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def names_in(template: str) -> set[str]:
    return {m.group(1) for m in _TEMPLATE.finditer(template) if m.group(1)}
