"""The grid language of tile IR (docs/tile-ir.md, "Grid language").

A kernel's grid is three expressions over its arguments' dims, e.g.
`["cdiv(c.c, 64)", "cdiv(c.r, 64)", "1"]`. They are parsed with `ast`, checked
against a small whitelist (never `eval`: a manifest is data, not code), and
turned into closures once per artifact so a launch only calls them.

Names: `a.r` (gl argument `a`, dim b|d|r|c), i32 scalar names, and `sms`:
the launching device's SM count (persistent kernels launch min(sms, items)).
"""
from __future__ import annotations

import ast
import functools
import operator
from typing import Callable

from ..diagnostics import TkcError

AXES = ("x", "y", "z")
DIMS = ("b", "d", "r", "c")
SMS = "sms"  # the device's multiprocessor count, supplied by whoever launches
# CUDA's limits on gridDim.x, .y, .z.
LIMITS = (2**31 - 1, 65535, 65535)
_LANGUAGE = "integers, names like a.r, + - * // %, unary -, cdiv/min/max/whole(x, y)"


def _cdiv(x: int, y: int) -> int:
    return -(-x // y)


def _whole(x: int, y: int) -> int:
    """x // y where y must divide x (tk-grid-ordering's clusters: a grid's x
    in whole clusters; GridExpr checks it, the launch error is the caller's)."""
    return x // y


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CALLS = {"cdiv": _cdiv, "min": min, "max": max, "whole": _whole}

Fn = Callable[[dict], int]


class GridExpr:
    """One parsed, checked grid expression: `expr(env) -> int`."""

    def __init__(self, text: str, axis: str):
        self.text, self.axis = text, axis
        self.names: set[str] = set()
        # ("a.r", 64) for each `a.r // 64`: whole blocks of a dim (the rest is
        # not launched, so the compiler requires the dim to be a multiple)
        self.whole_blocks: list[tuple[str, int]] = []
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as e:
            raise self._error(f"cannot parse it ({e.msg})") from None
        self._fn = self._build(tree.body)

    def _error(self, what: str) -> TkcError:
        return TkcError(f"grid {self.axis} '{self.text}': {what}")

    def _build(self, node: ast.AST) -> Fn:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            value = node.value
            return lambda env: value
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.attr in DIMS):
            return self._name(f"{node.value.id}.{node.attr}")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return self._binop(_BINOPS[type(node.op)], node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = self._build(node.operand)
            return lambda env: -operand(env)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise self._error(f"'{ast.unparse(node)}' is not in the grid language ({_LANGUAGE})")

    def _name(self, name: str) -> Fn:
        self.names.add(name)

        def lookup(env):
            try:
                return env[name]
            except KeyError:
                raise self._error(f"unknown name '{name}' (known: {', '.join(sorted(env))})") from None
        return lookup

    def _binop(self, op, node: ast.BinOp) -> Fn:
        lhs, rhs = self._build(node.left), self._build(node.right)
        if op is operator.floordiv and isinstance(node.left, ast.Attribute) \
                and isinstance(node.right, ast.Constant) and node.right.value > 0:
            self.whole_blocks.append((ast.unparse(node.left), node.right.value))
        if op in (operator.floordiv, operator.mod):
            return self._divide(op, lhs, rhs)
        return lambda env: op(lhs(env), rhs(env))

    def _divide(self, fn, x: Fn, y: Fn) -> Fn:
        def divide(env):
            divisor = y(env)
            if divisor == 0:
                raise self._error("division by zero")
            return fn(x(env), divisor)
        return divide

    def _call(self, node: ast.Call) -> Fn:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _CALLS or node.keywords or len(node.args) != 2:
            raise self._error(f"'{ast.unparse(node)}' is not in the grid language ({_LANGUAGE})")
        fn = _CALLS[name]
        x, y = (self._build(a) for a in node.args)
        if fn is _whole:
            return self._divide(self._exact, x, y)
        if fn is _cdiv:
            return self._divide(_cdiv, x, y)
        return lambda env: fn(x(env), y(env))

    def _exact(self, x: int, y: int) -> int:
        if x % y:
            raise self._error(f"{x} is not a multiple of {y}: a kernel in clusters of {y} along x "
                              f"needs a grid x of whole clusters")
        return _whole(x, y)

    def __call__(self, env: dict) -> int:
        return self._fn(env)


class Grid:
    """Three grid expressions, compiled once: `grid(env) -> (x, y, z)`, each >= 1."""

    def __init__(self, exprs):
        if isinstance(exprs, str) or len(exprs) != 3 or not all(isinstance(e, str) for e in exprs):
            raise TkcError(f"a grid is three expression strings (x, y, z), found {exprs!r}")
        self.exprs = tuple(exprs)
        self._axes = tuple(GridExpr(text, axis) for text, axis in zip(exprs, AXES))
        self.names = set().union(*(e.names for e in self._axes))
        self.whole_blocks = [w for e in self._axes for w in e.whole_blocks]

    def __call__(self, env: dict) -> tuple[int, int, int]:
        x, y, z = (self._check(e, e(env), limit) for e, limit in zip(self._axes, LIMITS))
        return x, y, z

    @staticmethod
    def _check(expr: GridExpr, value: int, limit: int) -> int:
        if value < 1:
            raise TkcError(f"grid {expr.axis} = {value} from '{expr.text}': empty launch")
        if value > limit:
            raise TkcError(f"grid {expr.axis} = {value} from '{expr.text}': "
                           f"exceeds CUDA's limit of {limit}")
        return value


@functools.lru_cache(maxsize=256)
def compile_grid(exprs: tuple[str, ...]) -> Grid:
    return Grid(exprs)


def evaluate(exprs, env: dict[str, int]) -> tuple[int, int, int]:
    """Evaluate a kernel's grid expressions with `env` ("a.r"-style and scalar names)."""
    if isinstance(exprs, (list, tuple)) and all(isinstance(e, str) for e in exprs):
        return compile_grid(tuple(exprs))(env)
    return Grid(exprs)(env)  # reports the malformed grid
