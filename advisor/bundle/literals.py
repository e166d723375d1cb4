"""A train.py value as Python would give it, read with ast and never run: a literal, or arithmetic of literals."""

from __future__ import annotations

from typing import Any

from advisor.core.files import Unresolved

ARITHMETIC_LIMIT = 1 << 62
"""The largest number a CONFIG value's arithmetic may reach: `2 * 8` is a micro-batch, `10 ** 30` no value here."""


def literal_value(node, leaf=None) -> Any:
    """A CONFIG value as Python would give it: a literal, or integer/float arithmetic of literals (`2 * 8`, `1 << 10`,
    `-(1)`) within ARITHMETIC_LIMIT; anything else Unresolved(its source text). `leaf`, when given, reads the other
    operands (a name or `CONFIG["micro_batch"]` the reader knows, so that `CONFIG["micro_batch"] * 8` is the number
    Python computes, not the plain CONFIG value): it returns a value, and only an int or float (never a bool) counts."""
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
        if leaf is not None and not isinstance(n, (ast.Constant, ast.UnaryOp, ast.BinOp)):
            v = leaf(n)
            if type(v) in (int, float):
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


BOOL_CONSTANTS = ("BF16", "FP16", "TRUST_REMOTE_CODE")
"""train.py's module-level switches besides CONFIG: `bf16=BF16 and ...`, `if TRUST_REMOTE_CODE`."""


def python_bool(value: Any) -> Any:
    """A switch as train.py's Python reads it: the integers 0 and 1 are False and True (`if CONFIG["liger"]`,
    `packing=CONFIG["packing"]`, and TRL's arguments, which are not type-checked, take them so); anything else is
    returned as it is, for the reader to accept or refuse. Other numbers, text and None stay refused: `2`, `"no"` or
    `None` for a switch is more likely a slip than a choice."""
    if type(value) is int and value in (0, 1):
        return bool(value)
    return value


def plan_switches(config: dict) -> dict:
    """CONFIG with the values of its boolean Plan fields (liger, grad_ckpt, packing, ...) read by python_bool."""
    from dataclasses import fields

    from advisor.core.plan import Plan

    switches = {f.name for f in fields(Plan) if f.type in ("bool", bool)}
    return {key: python_bool(value) if key in switches else value for key, value in config.items()}
