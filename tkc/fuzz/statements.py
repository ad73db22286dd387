"""The statements the generator writes, one tile operation each: each takes the
generator (core.Gen), picks operands among the values in scope, writes a
line of DSL source and returns the value it made (None when nothing
well-typed and well-defined fits, and the generator tries another).

Every statement keeps the program well-typed by construction (the DSL's rules
of docs/dsl.md: reductions of row-layout tiles, mma shapes that agree on K,
vectors of the kind and length a broadcast wants) and well-defined through
the intervals of values.py.
"""
from __future__ import annotations

from dataclasses import replace

from . import values as V
from .values import Val

UNARY_OPS = list(V.UNARY)
CONSTANTS = (0.5, 2.0, -1.5, 0.25, 3.0, -0.75, 1.0)
FILLS = (0.0, 1.0, -0.5)
INT_CONSTANTS = (3, -2, 7, 1, 0, -5, 1000)
INT_FILLS = (0, 1, -7)


def const_for(g, x: Val):
    return g.rng.choice(INT_CONSTANTS if x.integer else CONSTANTS)


def load(g, dtype=None, shape=None, layout=None) -> Val:
    """A ragged load of a tile from an input gl: at tile coordinates near this
    warp's (the loop variable's, in a loop), or at an element (at=)."""
    r = g.rng
    dtype = dtype or r.choice(("f32", "bf16", "i32") if g.int_inputs else ("f32", "bf16"))
    layout = layout or ("row" if shape and shape[0] == 8 else r.choice(("row", "row", "col")))
    shape = shape or (tile_rows(r, layout), r.choice((16, 32, 64)))
    x, fill, lo, hi = input_of(g, dtype)
    v = Val(g.fresh(), "rt", dtype, shape, layout, lo, hi)
    if r.random() < 0.2:
        row, col = g.tile_row_expr() + f" * {shape[0]} + {r.randrange(-5, 6)}", f"{g.tile_col_expr()} * {shape[1]} + {8 * r.randrange(0, 3)}"
        g.emit(f"{v.name} = load({v.type_text()}, {x}, at=(0, 0, {row}, {col}), fill={fill})", "load_at")
    else:
        g.emit(f"{v.name} = load({v.type_text()}, {x}, (0, 0, {g.tile_row_expr()}, {g.tile_col_expr()}), "
               f"fill={fill})", "load_ragged")
    return v


def tile_rows(r, layout: str) -> int:
    """Rows of a new tile: 16 or 32, or 8 (an 8-row tile) in the row layout."""
    return r.choice((8, 16, 32) if layout == "row" else (16, 32))


def input_of(g, dtype: str) -> tuple:
    """(a gl to load a `dtype` tile from, a fill, the loaded values' interval):
    an integer tile loads from an i32 gl with an int fill."""
    r = g.rng
    if dtype == "i32":
        x = r.choice(g.int_inputs)
        fill = r.choice(INT_FILLS)
        lo, hi = next(a.ints for a in g.args if a.name == x)
        return x, fill, float(min(lo, fill)), float(max(hi, fill))
    fill = r.choice(FILLS)
    return r.choice(g.inputs), fill, min(-1.0, fill), max(1.0, fill)


def load_vector(g) -> Val:
    r = g.rng
    n = r.choice((16, 32, 64))
    x, fill, lo, hi = input_of(g, r.choice(("f32", "bf16", "i32") if g.int_inputs else ("f32", "bf16")))
    dtype = "i32" if x in g.int_inputs else r.choice(("f32", "bf16"))
    v = Val(g.fresh(), "rv", dtype, (n,), "row", lo, hi)
    g.emit(f"{v.name} = load({v.type_text()}, {x}, (0, 0, {g.tile_row_expr()}, "
           f"{g.tile_col_expr()}), fill={fill})", "load_vector")
    return v


def init(g) -> Val:
    r = g.rng
    layout = r.choice(("row", "col"))
    t = Val(g.fresh(), "rt", r.choice(("f32", "bf16")), (tile_rows(r, layout), r.choice((16, 32, 64))),
            layout, 0.0, 0.0)
    which = r.choice(("zero", "ones", "fill", "iota"))
    if which == "iota":  # f32: whole numbers, exact on both sides
        t = replace(t, dtype="f32")
        axis = g.rng.randrange(2)
        n = t.shape[axis]
        g.emit(f"{t.name} = iota({t.type_text()}, {axis}, start={g.tile_row_expr()} * {n})", "iota")
        return replace(t, lo=0.0, hi=float(n * (g.warps * g.grid[1] + 4)))
    if which == "fill":
        c = g.rng.choice(CONSTANTS)
        g.emit(f"{t.name} = fill({t.type_text()}, {c})", "fill")
        return replace(t, lo=c, hi=c)
    g.emit(f"{t.name} = {which}({t.type_text()})", which)
    c = 1.0 if which == "ones" else 0.0
    return replace(t, lo=c, hi=c)


def unary(g) -> Val | None:
    x = g.pick(kinds=("rt", "rv"))
    if x is None:
        return None
    op = g.rng.choice(("abs", "relu", "neg") if x.integer else UNARY_OPS)
    v = V.unary(op, x, g.fresh())
    if v is None or not v.sane():
        return None
    if op in ("exp", "exp2") and x.kind == "rt":
        side = g.side("fma", v.name)
        if side.random() < 0.3:   # a share on the FMA pipe (a polynomial within 1e-4: inside EPS's bound)
            g.emit(f"{v.name} = {op}({x.name}, fma={side.choice((0.125, 0.25, 0.375, 0.5, 1))})", f"{op}_fma")
            return v
    g.emit(f"{v.name} = {op}({x.name})", op)
    return v


BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def binary(g) -> Val | None:
    r = g.rng
    a = g.pick(kinds=("rt", "rv"))
    if a is None:
        return None
    op = r.choice(("add", "sub", "mul", "max", "min") if a.integer else ("add", "sub", "mul", "div", "max", "min"))
    how = r.random()
    if how < 0.5:
        b = g.pick(like=a, exclude=())
        if b is None:
            return None
        v = V.binary(op, a, b, g.fresh())
        text = f"{a.name} {BINOP[op]} {b.name}" if op in BINOP and r.random() < 0.7 else f"{op}({a.name}, {b.name})"
    elif how < 0.8 or op in ("max", "min"):
        c = const_for(g, a)
        if a.integer and op == "mul" and r.random() < 0.2:
            c = 65537  # wraps modulo 2^32: the GPU's integer arithmetic, and the interpreter's
        if op == "div" and c < 0.5:
            return None
        v = V.binary(op, a, float(c), g.fresh())
        text = f"{a.name} {BINOP[op]} {c}" if op in BINOP else f"{op}({a.name}, {c})"
    else:
        s = g.pick(kinds=("index",) if a.integer else ("f32",))
        if s is None:
            return None
        v = V.binary(op, a, s, g.fresh())
        text = f"{a.name} {BINOP[op]} {s.name}"
    if v is None or not v.sane():
        return None
    g.emit(f"{v.name} = {text}", f"binary_{op}" + ("_i32" if a.integer else ""))
    return v


def fma(g) -> Val | None:
    x = g.pick(kinds=("rt",))
    if x is None or x.integer:
        return None
    y, z = g.pick(like=x), g.pick(like=x)
    if y is None or z is None:
        return None
    lo, hi = V.product((x.lo, x.hi), (y.lo, y.hi))
    v = x.derive(g.fresh(), lo + z.lo, hi + z.hi, x.err * y.bound + y.err * x.bound + z.err)
    if not v.sane():
        return None
    g.emit(f"{v.name} = fma({x.name}, {y.name}, {z.name})", "fma")
    return v


def where(g) -> Val | None:
    """where(mask, x, y) with a mask of bit-exact values (values.py)."""
    r = g.rng
    x = g.pick(kinds=("rt",))
    if x is None:
        return None
    y = g.pick(like=x)
    a = g.pick(kinds=("rt",), shape=x.shape, layout=x.layout, exact=True)
    if y is None or a is None:
        return None
    cmp = r.choice(("<", ">", "<=", ">=", "!="))
    mask = f"{a.name} {cmp} {const_for(g, a)}"
    b = g.pick(kinds=("rt",), shape=x.shape, layout=x.layout, exact=True, dtype=a.dtype)
    if b is not None and r.random() < 0.4:
        mask = f"({mask}) {r.choice(('&', '|'))} ~({b.name} < {a.name})"
    v = V.union(g.fresh(), x, y)
    g.emit(f"{v.name} = where({mask}, {x.name}, {y.name})", "where_mixed" if (a.dtype == "i32") != (x.dtype == "i32") else "where")
    return v


def convert(g) -> Val | None:
    x = g.pick(kinds=("rt", "rv"))
    if x is None:
        return None
    to = "bf16" if x.dtype == "f32" else "f32"
    if x.exact and x.dtype != "i32" and g.rng.random() < 0.3:
        to = "i32"  # truncates toward zero (only bit-exact values: a flipped truncation is 1 off)
        lo, hi = float(int(x.lo)), float(int(x.hi))
    elif x.dtype == "i32" and x.bound > V.BOUND:
        return None  # a wrapped integer is no float the generator keeps
    else:
        lo, hi = x.lo, x.hi
    v = x.derive(g.fresh(), lo, hi, x.err, exact_op=to == "f32", dtype=to)
    g.emit(f"{v.name} = {x.name}.to({to})", "convert" if "i32" not in (to, x.dtype) else "convert_i32")
    return v


def round_f8(g) -> Val | None:
    """x.to(f8e4m3 or f8e5m2).to(x's dtype) of a bit-exact f32 or bf16 tile:
    both sides round the same values (to nearest even, saturating at the
    format's finite max), so the result is exact too; its interval grows by
    an ulp of the format (2^-3 or 2^-2 of its ends) and stops at the max."""
    x = g.pick(kinds=("rt",))
    if x is None or x.dtype not in ("f32", "bf16") or x.err != 0.0:
        return None
    t8, top, ulp = ("f8e4m3", 448.0, 2.0 ** -3) if g.rng.random() < 0.5 else ("f8e5m2", 57344.0, 2.0 ** -2)
    lo = min(max(x.lo - abs(x.lo) * ulp, -top), top)
    hi = max(min(x.hi + abs(x.hi) * ulp, top), -top)
    v = x.derive(g.fresh(), lo, hi, 0.0, exact_op=True)
    g.emit(f"{v.name} = {x.name}.to({t8}).to({x.dtype})", "round_f8")
    return v


def relayout(g) -> Val | None:
    x = g.pick(kinds=("rt",))
    if x is None or x.shape[0] == 8:   # an 8-row tile is row layout only (refusals.eight_row_col)
        return None
    if g.rng.random() < 0.5:
        v = replace(x, name=g.fresh(), layout="col" if x.layout == "row" else "row")
        g.emit(f"{v.name} = swap_layout({x.name})", "swap_layout")
    else:
        v = replace(x, name=g.fresh(), shape=x.shape[::-1])
        g.emit(f"{v.name} = transpose({x.name})", "transpose")
    return v


def as_row(g, x: Val) -> Val:
    """x, or its swap_layout when x is in col layout."""
    if x.layout == "row":
        return x
    v = replace(x, name=g.fresh(), layout="row")
    g.emit(f"{v.name} = swap_layout({x.name})", "swap_layout")
    return v


def reduce(g, x: Val | None = None, init: Val | None = None, op: str | None = None) -> Val | None:
    """row_sum/row_max (a "col" vector) or col_sum/col_max (a "row" vector),
    optionally onto an init vector."""
    r = g.rng
    x = x or g.pick(kinds=("rt",))
    if x is None:
        return None
    op = op or r.choice(("row_sum", "row_max", "col_sum", "col_max"))
    axis_len, kind = (x.shape[1], "col") if op.startswith("row") else (x.shape[0], "row")
    n = x.shape[0] if kind == "col" else x.shape[1]
    if init is None and r.random() < 0.3:
        init = g.pick(kinds=("rv",), shape=(n,), layout=kind, dtype=x.dtype)
    x = as_row(g, x)
    if op.endswith("sum"):
        lo, hi, err = axis_len * x.lo, axis_len * x.hi, axis_len * x.err
        if init is not None:
            lo, hi, err = lo + init.lo, hi + init.hi, err + init.err
        v = Val(g.fresh(), "rv", x.dtype, (n,), kind, 0, 0).derive(g.fresh(), lo, hi, err + V.EPS["f32"] * axis_len * x.bound)
    else:
        lo, hi, err = x.lo, x.hi, x.err
        if init is not None:
            lo, hi, err = max(lo, init.lo), max(hi, init.hi), max(err, init.err)
        v = Val(g.fresh(), "rv", x.dtype, (n,), kind, lo, hi, err)
    if not v.sane():
        return None
    g.emit(f"{v.name} = {op}({x.name}" + (f", init={init.name})" if init is not None else ")"),
           op + ("_i32" if x.integer else ""))
    return v


def broadcast(g) -> Val | None:
    """add_row/sub_row/mul_row/div_row (a "col" vector along each row) or the
    _col forms (a "row" vector down each column)."""
    r = g.rng
    vec = g.pick(kinds=("rv",))
    if vec is None:
        return None
    if vec.layout == "col":
        x = g.pick(kinds=("rt",), dtype=vec.dtype, rows=vec.shape[0])
    else:
        x = g.pick(kinds=("rt",), dtype=vec.dtype, cols=vec.shape[0])
    if x is None:
        return None
    op = r.choice(("add", "sub", "mul") if vec.integer else ("add", "sub", "mul", "div"))
    v = V.binary(op, x, replace(vec, kind="f32"), g.fresh())
    if v is None or not v.sane():
        return None
    x = as_row(g, x)
    v = replace(v, layout="row")
    g.emit(f"{v.name} = {op}_{'row' if vec.layout == 'col' else 'col'}({x.name}, {vec.name})", "broadcast")
    return v


def scalar(g) -> Val | None:
    """sum/max/min of a vector: an F32."""
    vec = g.pick(kinds=("rv",))
    if vec is None:
        return None
    op = g.rng.choice(("sum", "max", "min"))
    n = vec.shape[0]
    if vec.integer:  # an Index (a sum only where it cannot wrap)
        if op == "sum" and n * vec.bound >= 2.0 ** 31:
            return None
        lo, hi = (n * vec.lo, n * vec.hi) if op == "sum" else (vec.lo, vec.hi)
        v = Val(g.fresh(), "index", "i32", (), "", lo, hi)
    elif op == "sum":
        v = Val(g.fresh(), "f32", "f32", (), "", 0, 0).derive(
            g.fresh(), n * vec.lo, n * vec.hi, n * vec.err + V.EPS["f32"] * n * vec.bound)
    else:
        v = Val(g.fresh(), "f32", "f32", (), "", vec.lo, vec.hi, vec.err)
    if not v.sane():
        return None
    g.emit(f"{v.name} = {op}({vec.name})", f"vec_{op}")
    return v


MMA_SHAPES = {  # which operands are stored transposed
    "mma_AB": (False, False), "mma_ABt": (False, True), "mma_AtB": (True, False), "mma_AtBt": (True, True)}


def operand(g, shape: tuple) -> Val:
    """A bf16 tile of `shape` for an mma: one in scope, a conversion, or a load."""
    v = g.pick(kinds=("rt",), dtype="bf16", shape=shape)
    if v is not None:
        return v
    f = g.pick(kinds=("rt",), dtype="f32", shape=shape)
    if f is not None and g.rng.random() < 0.7:
        v = f.derive(g.fresh(), f.lo, f.hi, f.err, dtype="bf16")
        g.emit(f"{v.name} = {f.name}.to(bf16)", "convert")
        return v
    return load(g, "bf16", shape)


def wanted(g, x: Val, layout: str) -> Val:
    """x in the layout the mma wants (ThunderKittens' rule), mostly; else left
    to tk-layout-selection, which makes it legal (the interpreter runs only
    legal mmas, so such a program's reference run is after that pass)."""
    if x.layout == layout:
        return x
    if g.rng.random() < 0.25:
        g.features.add("mma_relayout")
        return x
    v = replace(x, name=g.fresh(), layout=layout)
    g.emit(f"{v.name} = swap_layout({x.name})", "swap_layout")
    return v


def mma(g, acc: Val | None = None) -> Val | None:
    """d = a @ b + c on one warp's tensor cores, with the named transposes."""
    r = g.rng
    op = r.choice(list(MMA_SHAPES))
    if acc is None:
        acc = g.pick(kinds=("rt",), dtype="f32", layout="row")
        if acc is None or r.random() < 0.3:
            acc = Val(g.fresh(), "rt", "f32", (tile_rows(r, "row"), r.choice((16, 32))), "row", 0.0, 0.0)
            g.emit(f"{acc.name} = zero({acc.type_text()})", "zero")
    m, n = acc.shape
    if m == 8:     # an 8-row a is (M, K) in rows: no transposed a (K x 8 col)
        op = r.choice([o for o, (ta, _) in MMA_SHAPES.items() if not ta])
    k = r.choice((16, 32))
    ta, tb = MMA_SHAPES[op]
    a = wanted(g, operand(g, (k, m) if ta else (m, k)), "col" if ta else "row")
    b = wanted(g, operand(g, (n, k) if tb else (k, n)), "row" if tb else "col")
    lo, hi = V.product((a.lo, a.hi), (b.lo, b.hi))
    v = acc.derive(g.fresh(), acc.lo + k * lo, acc.hi + k * hi,
                   acc.err + k * (a.err * b.bound + b.err * a.bound) + V.EPS["f32"] * k * a.bound * b.bound)
    if not v.sane():
        return None
    g.emit(f"{v.name} = {op}({a.name}, {b.name}, {acc.name})", op)
    return v


def exchange(g) -> Val | None:
    """Through shared memory to the next warp: store, sync, load (in another
    layout, maybe), sync. Every warp runs it, so not under a tkc.if_."""
    if g.in_if:
        return None
    r = g.rng
    x = g.pick(kinds=("rt", "rv"))
    if x is None or x.integer:  # shared tiles hold floats
        return None
    w = g.warps
    if x.kind == "rv" and (w * x.shape[0]) % 16:
        return None    # an sv is a multiple of 16 long (one warp's rv of 8 is not)
    if x.kind == "rt":
        s = g.alloc(f"st({x.dtype}, {w * x.shape[0]}, {x.shape[1]})")
        v = replace(x, name=g.fresh(), layout="row" if x.shape[0] == 8 else r.choice(("row", "col")))
        coords, back = "(tkc.warpid(), 0)", f"((tkc.warpid() + 1) % {w}, 0)"
    else:
        s = g.alloc(f"sv({x.dtype}, {w * x.shape[0]})")
        v = replace(x, name=g.fresh())
        coords, back = "(tkc.warpid(),)", f"((tkc.warpid() + 1) % {w},)"
    g.emit(f"store({s}, {x.name}, {coords})", "store_shared")
    g.emit("tkc.sync()", "sync")
    g.emit(f"{v.name} = load({v.type_text()}, {s}, {back})", "load_shared")
    g.emit("tkc.sync()")
    return v


def group_copy(g) -> Val | None:
    """group_load of a gl tile into shared memory by the whole block, then each
    warp's tile of it."""
    if g.in_if:
        return None
    r = g.rng
    layout = r.choice(("row", "col"))
    dtype, rows, cols = r.choice(("f32", "bf16")), tile_rows(r, layout), r.choice((16, 32, 64))
    w = g.warps
    # group_load copies whole tiles: a gl of whole tiles, every coordinate inside it
    x = g.whole_input(dtype, (w * rows * g.grid[1], cols * max(g.grid[0], 3)))
    s = g.alloc(f"st({dtype}, {w * rows}, {cols})")
    g.emit(f"group_load({s}, {x}, (0, 0, {g.block_row_expr()}, {g.tile_col_expr()}))", "group_load")
    g.emit("tkc.sync()", "sync")
    v = Val(g.fresh(), "rt", dtype, (rows, cols), layout, -1.0, 1.0)
    g.emit(f"{v.name} = load({v.type_text()}, {s}, ({r.randrange(w)}, 0))", "load_shared")
    g.emit("tkc.sync()")
    return v


# name -> (weight, statement)
STATEMENTS = {
    "load": (6, load), "load_vector": (1, load_vector), "init": (2, init), "unary": (6, unary),
    "binary": (8, binary), "fma": (2, fma), "where": (2, where), "convert": (2, convert),
    "round_f8": (1, round_f8),
    "relayout": (2, relayout), "reduce": (3, reduce), "broadcast": (3, broadcast), "scalar": (1, scalar),
    "mma": (3, mma), "exchange": (2, exchange), "group_copy": (1, group_copy),
}
