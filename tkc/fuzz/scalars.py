"""Statements of scalars (docs/dsl.md, "Scalars"): F32 values from element
loads, their arithmetic, min/max of scalars, comparisons as the condition of
a scalar where (and of tkc.if_, core.Gen.branch), conversions between F32 and
Index (`.to`, tkc.f32, tkc.i32), and the updates of scalars a tkc.range loop
carries (core.Gen.loop). Comparisons read bit-exact values only (values.py:
a flipped condition would move a result by a whole operand).
"""
from __future__ import annotations

from dataclasses import replace

from . import values as V
from .values import Val


def element(g) -> Val:
    """One element of a float gl: an F32, exact."""
    r = g.rng
    fill = r.choice((0.0, 0.5, -2.0))
    v = Val(g.fresh(), "f32", "f32", (), "", min(-1.0, fill), max(1.0, fill))
    g.emit(f"{v.name} = load(f32, {r.choice(g.inputs)}, at=(0, 0, {g.tile_row_expr()}, "
           f"{g.tile_col_expr()} * 8 + {r.randrange(8)}), fill={fill})", "load_f32_element")
    return v


def scalars(g, exact: bool = False) -> list[Val]:
    return [v for v in g.values() if v.kind in ("f32", "index") and (v.exact or not exact)]


def condition(g) -> str | None:
    """A comparison of two exact scalars (an index and an F32 compare as f32),
    or of one and a number; maybe combined with another."""
    r = g.rng
    xs = scalars(g, exact=True)
    if not xs:
        return None
    a = r.choice(xs)
    b = r.choice(xs + [None])
    op = r.choice(("<", "<=", ">", ">=", "==", "!="))
    text = f"{a.name} {op} {b.name if b else r.choice((0, 1, -2)) if a.kind == 'index' else r.choice((0.0, 0.5, -0.25))}"
    if r.random() < 0.2:
        text = f"({text}) {r.choice(('&', '|'))} ~({a.name} > {r.choice((0, 3))})"
    return text


def arith(g) -> Val | None:
    """a op b of scalars (an F32 with an F32 or a number; an Index with an
    Index or an int), min/max of scalars, or a scalar where."""
    r = g.rng
    xs = scalars(g)
    if not xs:
        return None
    a = r.choice(xs)
    same = [x for x in xs if x.kind == a.kind]
    b = r.choice(same)
    how = r.random()
    if how < 0.3:
        op = r.choice(("max", "min"))
        v = V.binary(op, a, b, g.fresh())
        text = f"{op}({a.name}, {b.name})" if r.random() < 0.5 else f"{a.name}.{op}({b.name})"
        feature = f"scalar_{op}"
    elif how < 0.5:
        cond = condition(g)
        if cond is None:
            return None
        v = V.union(g.fresh(), a, b)
        text, feature = f"where({cond}, {a.name}, {b.name})", "scalar_where"
    else:
        op = r.choice(("add", "sub", "mul"))
        c = b if r.random() < 0.5 else float(r.choice((3, -2, 1)) if a.kind == "index" else r.choice((0.5, 2.0, -1.5)))
        v = V.binary(op, a, c, g.fresh())
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        text, feature = f"{a.name} {sym} {c.name if isinstance(c, Val) else (int(c) if a.kind == 'index' else c)}", \
            f"scalar_{op}"
    if v is None or not v.sane() or (v.kind == "index" and v.bound > 2.0 ** 30):
        return None
    g.emit(f"{v.name} = {text}", feature)
    return v


def convert(g) -> Val | None:
    """An Index to F32 (exact below 2^24) or an exact F32 to an Index (truncated)."""
    r = g.rng
    xs = [x for x in scalars(g) if x.kind == "f32" and x.exact or x.kind == "index" and x.bound < 2.0 ** 24]
    if not xs:
        return None
    x = r.choice(xs)
    if x.kind == "index":
        v = replace(x, name=g.fresh(), kind="f32", dtype="f32")
        g.emit(f"{v.name} = " + (f"{x.name}.to(f32)" if r.random() < 0.5 else f"tkc.f32({x.name})"), "scalar_to_f32")
    else:
        v = replace(x, name=g.fresh(), kind="index", dtype="i32", lo=float(int(x.lo)), hi=float(int(x.hi)))
        g.emit(f"{v.name} = " + (f"{x.name}.to(i32)" if r.random() < 0.5 else f"tkc.i32({x.name})"), "scalar_to_i32")
    return v if v.sane() else None


def carry_start(g) -> Val:
    """A traced scalar to carry through a loop: tkc.f32(c) or tkc.i32(n)."""
    r = g.rng
    if r.random() < 0.5:
        c = r.choice((0.0, -1.0, 0.5))
        v = Val(g.fresh(), "f32", "f32", (), "", c, c)
        g.emit(f"{v.name} = tkc.f32({c})", "carry_scalar")
    else:
        c = r.choice((0, -1, 3))
        v = Val(g.fresh(), "index", "i32", (), "", float(c), float(c))
        g.emit(f"{v.name} = tkc.i32({c})", "carry_scalar")
    g.define(v)
    return v


def carry_step(g, acc: Val, n: int) -> Val:
    """acc updated at the end of a loop body (n iterations): a running sum or
    max of elements, the loop variable where a comparison holds (an argmax),
    a count under tkc.if_."""
    r = g.rng
    i = g.loop_vars[-1]
    if acc.kind == "f32":
        e = element(g)
        op = r.choice(("add", "max", "min"))
        g.emit(f"{acc.name} = " + (f"{acc.name} + {e.name}" if op == "add" else f"{op}({acc.name}, {e.name})"),
               f"carry_scalar_{op}")
        return V.accumulated(acc, e, n) if op == "add" else V.union(acc.name, acc, e)
    how = r.random()
    if how < 0.5:
        e = element(g)
        g.emit(f"with tkc.if_({e.name} > {r.choice((0.0, 0.5))}):", "if_scalar")
        g.emit(f"    {acc.name} = {acc.name} + {r.choice((1, 2))}", "carry_scalar_count")
        return replace(acc, hi=acc.hi + 2 * n)
    e = element(g)
    g.emit(f"{acc.name} = where({e.name} > {r.choice((0.0, 0.25))}, {i}, {acc.name})", "carry_scalar_where")
    return replace(acc, lo=min(acc.lo, 0.0), hi=max(acc.hi, 3.0 * n))
