"""A train.py value as Python would give it, read with ast and never run: a literal, or arithmetic of literals."""

from __future__ import annotations

from typing import Any

from advisor.core.files import Unresolved

ARITHMETIC_LIMIT = 1 << 62
"""The largest number a CONFIG value's arithmetic may reach: `2 * 8` is a micro-batch, `10 ** 30` no value here."""


def literal_value(node) -> Any:
    """A CONFIG value as Python would give it: a literal, or integer/float arithmetic of literals (`2 * 8`, `1 << 10`,
    `-(1)`) within ARITHMETIC_LIMIT; anything else Unresolved(its source text)."""
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Mod: operator.mod, ast.LShift: operator.lshift}

    def number(n):
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = number(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            a, b = number(n.left), number(n.right)
            if isinstance(n.op, ast.LShift) and not (isinstance(b, int) and 0 <= b <= 62):
                raise ValueError("shift")
            v = ops[type(n.op)](a, b)
            if abs(v) > ARITHMETIC_LIMIT:
                raise ValueError("too large")
            return v
        raise ValueError("not arithmetic")

    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        pass
    try:
        return number(node)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
        return Unresolved(ast.unparse(node)[:80])
