"""Safe arithmetic: the expression is parsed with ``ast`` and only numbers, arithmetic operators
and a few math functions are evaluated — never ``eval``.

Every operation is bounded before it runs, not only its result: big-integer arithmetic holds the
GIL, so a timeout cannot stop ``round(2, -10**7)`` (ten million digits of ten) once it started."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "min": min,
    "max": max,
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_EXPONENT = 10_000
_MAX_LENGTH = 500
_MAX_BITS = 100_000
"""Integers beyond this many bits are refused: big-int arithmetic holds the GIL (no timeout can
interrupt it) and a result past 4300 digits cannot even be printed as JSON."""
_MAX_ROUND_DIGITS = 1000
"""``round(x, n)`` computes 10**|n|: n is bounded like an exponent."""


class CalculationError(ValueError):
    pass


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression such as ``2 * (3 + 4) ** 2`` or ``sqrt(2) / 3``."""
    if len(expression) > _MAX_LENGTH:
        raise CalculationError(f"the expression is longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise CalculationError(f"{expression!r} is not an arithmetic expression") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise CalculationError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as error:
        raise CalculationError(f"cannot compute {expression!r}: {error}") from None


def _checked(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise CalculationError("the result is too large")
    return value


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > _MAX_EXPONENT:
                raise CalculationError(f"the exponent {right} is too large")
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and left.bit_length() * abs(right) > _MAX_BITS
            ):
                raise CalculationError("the result would be too large")
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords:
            raise CalculationError("functions take positional arguments only")
        name, args = node.func.id, [_eval(a) for a in node.args]
        rounding = name == "round" and len(args) == 2 and isinstance(args[1], int)
        if rounding and abs(args[1]) > _MAX_ROUND_DIGITS:
            raise CalculationError(f"round() to {args[1]} digits is out of range")
        return _checked(_FUNCTIONS[name](*args))
    raise CalculationError(
        f"{ast.unparse(node)!r} is not allowed (numbers, + - * / // % ** and math functions)"
    )
