"""Small, safe expressions for `when` conditions and stop-rule predicates.

    when  = "fs != 'btrfs' or threads <= 2"
    until = "hw_pct < 5 or elapsed > 600"
    until = "ops_per_s.hw_pct < 2 and count >= 5"

Allowed: numbers, strings, true/false, names, name.attribute, comparisons
(chained too), and/or/not, + - * / // % **, unary minus, `in` over a
[list]/(tuple), and abs/min/max/round/int/float/str/len. Nothing else:
no calls of other functions, no subscripts, no lambdas. Expressions are
parsed once, when the plan is loaded, and the names they use are checked there.
Evaluation is bounded: a power, product or conversion whose result would pass
MAX_INT_BITS bits or MAX_LENGTH characters is refused before it is computed.
"""

from __future__ import annotations

import ast
import math
import operator

FUNCTIONS = {"abs": abs, "min": min, "max": max, "round": round, "int": int, "float": float, "str": str, "len": len}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


# Far beyond any loop value or metric, far below what takes noticeable time or memory to compute.
MAX_INT_BITS = 1024
MAX_LENGTH = 100_000


class ExpressionError(ValueError):
    pass


def _bounded_binary(op: type, left, right, text: str):
    """The operation, refused before it runs when its result would be too large to be meant."""
    if (
        op is ast.Pow
        and isinstance(left, (int, float))
        and isinstance(right, (int, float))
        and abs(left) > 1
        and right > 0
        and right * math.log2(abs(left)) > MAX_INT_BITS
    ):
        raise ExpressionError(f"{left!r} ** {right!r} is too large (more than {MAX_INT_BITS} bits) in {text!r}")
    if op is ast.Mult:
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, (str, list)) and isinstance(count, int) and len(sequence) * count > MAX_LENGTH:
                raise ExpressionError(f"a repetition longer than {MAX_LENGTH:,} in {text!r}")
    if op is ast.Mod and isinstance(left, str):  # printf-style formatting can pad to any width
        raise ExpressionError(f"% formatting of a string is not allowed in {text!r}")
    if (
        op is ast.Add
        and isinstance(left, (str, list))
        and isinstance(right, (str, list))
        and len(left) + len(right) > MAX_LENGTH
    ):
        raise ExpressionError(f"a concatenation longer than {MAX_LENGTH:,} in {text!r}")
    result = _BINARY[op](left, right)
    if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
        raise ExpressionError(f"a number of more than {MAX_INT_BITS} bits in {text!r}")
    return result


class Expression:
    """`functions` names extra functions the caller supplies at evaluation (a plan's result())."""

    def __init__(self, text: str, functions: tuple[str, ...] = ()):
        if not isinstance(text, str) or not text.strip():
            raise ExpressionError("an expression must be a non-empty string")
        self.text = text
        self.functions = functions
        self.calls: list[tuple[str, list]] = []  # (function, its constant arguments) for load-time checks
        # TOML-style booleans read naturally in a plan.
        source = text.strip()
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as error:
            raise ExpressionError(f"does not parse: {error.msg} at column {error.offset} of {text!r}") from None
        self.tree = tree.body
        self.names: set[str] = set()  # bare names used
        self.dotted: set[tuple[str, str]] = set()  # name.attribute pairs used
        self._check(self.tree)

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, str, bool)) or node.value is None:
                raise ExpressionError(f"constant {node.value!r} is not allowed in {self.text!r}")
        elif isinstance(node, ast.Name):
            if node.id not in ("true", "false"):
                self.names.add(node.id)
        elif isinstance(node, ast.Attribute):
            if not isinstance(node.value, ast.Name):
                raise ExpressionError(f"only name.attribute is allowed in {self.text!r}")
            self.dotted.add((node.value.id, node.attr))
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self._check(value)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
            self._check(node.operand)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            self._check(node.left)
            for comparator in node.comparators:
                self._check(comparator)
        elif isinstance(node, (ast.List, ast.Tuple)):
            for element in node.elts:
                self._check(element)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and (node.func.id in FUNCTIONS or node.func.id in self.functions)
            and not node.keywords
        ):
            self.calls.append((node.func.id, [a.value if isinstance(a, ast.Constant) else None for a in node.args]))
            for argument in node.args:
                self._check(argument)
        else:
            raise ExpressionError(
                f"{ast.unparse(node)!r} is not allowed in {self.text!r}"
                " (use names, numbers, strings, comparisons, and/or/not, arithmetic)"
            )

    def check_names(self, known: set[str] | dict, dotted_ok: set[str] | None = None) -> None:
        """Raise ExpressionError naming the first unknown name."""
        for name in sorted(self.names):
            if name not in known:
                raise ExpressionError(f"unknown name {name!r} in {self.text!r}; known: {', '.join(sorted(known))}")
        for base, _attribute in sorted(self.dotted):
            if dotted_ok is not None and base not in dotted_ok:
                raise ExpressionError(
                    f"unknown metric {base!r} in {self.text!r}"
                    f"{'; known: ' + ', '.join(sorted(dotted_ok)) if dotted_ok else ''}"
                )

    def evaluate(self, variables: dict, functions: dict | None = None):
        return _evaluate(self.tree, variables, self.text, {**FUNCTIONS, **(functions or {})})

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def _evaluate(node: ast.AST, variables: dict, text: str, functions: dict = FUNCTIONS):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("true", "false"):
            return node.id == "true"
        if node.id not in variables:
            raise ExpressionError(f"unknown name {node.id!r} in {text!r}")
        return variables[node.id]
    if isinstance(node, ast.Attribute):
        base = variables.get(node.value.id)
        if base is None:
            raise ExpressionError(f"no metric {node.value.id!r} (yet) for {text!r}")
        value = base.get(node.attr) if isinstance(base, dict) else getattr(base, node.attr, None)
        if value is None:
            raise ExpressionError(f"{node.value.id}.{node.attr} is unknown in {text!r}")
        return value
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result = True
            for value in node.values:
                result = _evaluate(value, variables, text, functions)
                if not result:
                    return result
            return result
        result = False
        for value in node.values:
            result = _evaluate(value, variables, text, functions)
            if result:
                return result
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, variables, text, functions)
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        left, right = (
            _evaluate(node.left, variables, text, functions),
            _evaluate(node.right, variables, text, functions),
        )
        try:
            return _bounded_binary(type(node.op), left, right, text)
        except ZeroDivisionError:
            return math.nan
        except OverflowError:
            raise ExpressionError(f"a number out of range in {text!r}") from None
        except TypeError as error:
            raise ExpressionError(f"{error} in {text!r}") from None
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, variables, text, functions)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator, variables, text, functions)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError as error:
                raise ExpressionError(f"{error} in {text!r}") from None
            left = right
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(element, variables, text, functions) for element in node.elts]
    if isinstance(node, ast.Call):
        arguments = [_evaluate(a, variables, text, functions) for a in node.args]
        try:
            return functions[node.func.id](*arguments)
        except (TypeError, ValueError, OverflowError) as error:  # int('x'), round(inf), str(2**5000)...
            raise ExpressionError(f"{node.func.id}(): {error} in {text!r}") from None
    raise ExpressionError(f"cannot evaluate {text!r}")
