"""Ill-typed programs: a well-typed program (core.py) with one broken
statement added at the end of its body, which the frontend or tk-verify must
refuse with a TkcError located at that statement's line (checks.check_refusal).

Each entry of BREAKS writes the broken statement (maybe after a well-typed
line it needs) from values in scope, and returns what it breaks, or None when
nothing in scope fits (another is tried).
"""
from __future__ import annotations

from .core import HEADER, Gen, Program, rng_of
from . import ragged as R
from . import statements as S


def _bad(g: Gen, line: str) -> None:
    """Write the broken line (the one the error must name)."""
    g.emit(line)
    g.bad_index = len(g.lines) - 1


def _tile(g: Gen, **want):
    return g.pick(kinds=("rt",), **want) or S.load(g, **{k: v for k, v in want.items() if k in ("dtype", "shape", "layout")})


def mma_k_mismatch(g):
    a, b = S.load(g, "bf16", (16, 16), "row"), S.load(g, "bf16", (32, 16), "col")
    _bad(g, f"bad = mma_AB({a.name}, {b.name}, zero(rt(f32, 16, 16)))")
    return "mma_AB whose operands disagree on K"


def mma_bf16_accumulator(g):
    a, b = S.load(g, "bf16", (16, 16), "row"), S.load(g, "bf16", (16, 16), "col")
    _bad(g, f"bad = mma_AB({a.name}, {b.name}, zero(rt(bf16, 16, 16)))")
    return "mma with a bf16 accumulator"


def mma_f32_operands(g):
    a = S.load(g, "f32", (16, 16), "row")
    _bad(g, f"bad = {g.rng.choice(list(S.MMA_SHAPES))}({a.name}, {a.name}, zero(rt(f32, 16, 16)))")
    return "mma of f32 operands"


def add_shapes(g):
    a = _tile(g)
    rows, cols = a.shape
    _bad(g, f"bad = {a.name} + zero(rt({a.dtype}, {rows}, {cols + 16}, {a.layout!r}))")
    return "add of tiles of two shapes"


def add_dtypes(g):
    a = _tile(g)
    other = "f32" if a.dtype == "bf16" else "bf16"
    _bad(g, f"bad = {g.rng.choice(('add', 'mul', 'max'))}({a.name}, {a.name}.to({other}))")
    return "binary op of two dtypes"


def reduce_col_layout(g):
    a = _tile(g, layout="col")
    _bad(g, f"bad = {g.rng.choice(('row_sum', 'row_max', 'col_sum', 'col_max'))}({a.name})")
    return "reduction of a col-layout tile"


def broadcast_length(g):
    a = _tile(g, layout="row")
    n = a.shape[0] + 16
    _bad(g, f"bad = add_row({a.name}, zero(rv({a.dtype}, {n}, 'col')))")
    return "add_row with a vector of the wrong length"


def where_shapes(g):
    a = _tile(g)
    rows, cols = a.shape
    _bad(g, f"bad = where({a.name} < 0.0, {a.name}, zero(rt({a.dtype}, {rows + 16}, {cols}, {a.layout!r})))")
    return "where of two shapes"


def gl_coordinates(g):
    _bad(g, f"bad = load(rt(f32, 16, 16), {g.rng.choice(g.inputs)}, (0, tr, bx), fill=0.0)")
    return "a gl load with 3 coordinates"


def fill_on_shared(g):
    s = g.alloc("st(f32, 16, 16)")
    _bad(g, f"bad = load(rt(f32, 16, 16), {s}, (0, 0), fill=0.0)")
    return "fill= on a shared-memory load"


def vector_from_st(g):
    s = g.alloc("st(f32, 32, 32)")
    _bad(g, f"bad = load(rv(f32, 32), {s}, (0, 0))")
    return "a vector loaded from an st"


def copy_shape(g):
    a = _tile(g)
    _bad(g, f"bad = copy(rt(f32, {a.shape[0] + 16}, {a.shape[1]}, {a.layout!r}), {a.name})")
    return "copy between shapes"


def tile_extent(g):
    rows, cols = g.rng.choice(((24, 16), (40, 16), (16, 8), (8, 24)))
    _bad(g, f"bad = zero(rt(f32, {rows}, {cols}))")
    return "a tile extent that is not a multiple of 16 (nor 8 rows)"


def eight_row_col(g):
    """8-row tiles are row layout only: a col one, a swap or transpose of one,
    a wgmma accumulator of 8 rows."""
    a = _tile(g, shape=(8, 16), layout="row")
    _bad(g, g.rng.choice((f"bad = swap_layout({a.name})", f"bad = transpose({a.name})",
                          "bad = zero(rt(bf16, 8, 32, 'col'))")))
    return "a col-layout 8-row tile"


def shared_in_loop(g):
    g.emit("for i9 in tkc.range(2):")
    _bad(g, "    bad = st(f32, 16, 16)")
    return "a shared tile allocated inside a loop"


def used_after_loop(g):
    g.emit("for i9 in tkc.range(2):")
    g.emit(f"    t9 = load(rt(f32, 16, 16), {g.rng.choice(g.inputs)}, (0, 0, tr, i9), fill=0.0)")
    _bad(g, "bad = exp(t9)")
    return "a value of a loop used after it"


def python_truth(g):
    a = _tile(g)
    _bad(g, f"if {a.name} < 0.5:")
    g.emit("    pass")
    return "a tile comparison in a Python if"


def warpgroup_warps(g):
    if g.warps % 4 == 0:
        return None
    _bad(g, "bad = warpgroup.mma_async_wait(zero(rt(f32, 16, 64)))")
    return "a warpgroup op in a kernel of fewer than 4 warps"


def group_load_dtype(g):
    x = g.rng.choice(g.inputs)
    other = "f32" if g.input_dtype[x] == "bf16" else "bf16"
    s = g.alloc(f"st({other}, 16, 16)")
    _bad(g, f"group_load({s}, {x}, (0, 0, 0, 0))")
    return "group_load between dtypes"


def exp_fma_share(g):
    a = _tile(g)
    _bad(g, f"bad = exp({a.name}, fma={g.rng.choice((2, -1, 1.5))})")
    return "exp's fma= out of [0, 1]"


def range_stages(g):
    stages = g.rng.choice(("0", "17", '"deep"'))
    _bad(g, f"for i9 in tkc.range(2, stages={stages}):")
    g.emit("    pass")
    return "tkc.range stages out of range"


def iota_axis(g):
    _bad(g, "bad = iota(rt(f32, 16, 16), 2)")
    return "iota along axis 2"


def wide_mma(g):
    a = S.load(g, "bf16", (16, 16), "wide")
    b = S.load(g, "bf16", (16, 16), "col")
    _bad(g, f"bad = mma_AB({a.name}, {b.name}, zero(rt(f32, 16, 16)))")
    return "mma of a wide-layout tile"


def transpose_vector(g):
    v = g.pick(kinds=("rv",))
    if v is None:
        return None
    _bad(g, f"bad = transpose({v.name})")
    return "transpose of a vector"


def store_vector_to_st(g):
    v = g.pick(kinds=("rv",))
    if v is None:
        return None
    s = g.alloc("st(f32, 64, 64)")
    _bad(g, f"store({s}, {v.name}, (0, 0))")
    return "a vector stored into an st"


def _int_tile(g):
    t = g.pick(kinds=("rt",), dtype="i32")
    if t is None:
        t = g.fresh()
        g.emit(f"{t} = iota(rt(i32, 16, 16), {g.rng.randrange(2)})")
        return t
    return t.name


def mma_i32(g):
    a, b = _int_tile(g), S.load(g, "bf16", (16, 16), "col")
    _bad(g, f"bad = mma_AB({a}, {b.name}, zero(rt(f32, 16, 16)))")
    return "mma of an i32 tile"


def float_op_of_i32(g):
    a = _int_tile(g)
    _bad(g, "bad = " + g.rng.choice((f"exp({a})", f"{a} / {a}", f"fma({a}, {a}, {a})", f"sqrt({a})")))
    return "a float op (exp, /, fma, sqrt) of an i32 tile"


def i32_beside_float(g):
    a = _int_tile(g)
    _bad(g, "bad = " + g.rng.choice((f"{a} * 0.5", f"where({a} < 0.5, {a}, {a})", f"max({a}, 1.5)")))
    return "a float constant beside an i32 tile"


def i32_tile_from_float_gl(g):
    _bad(g, f"bad = load(rt(i32, 16, 16), {g.rng.choice(g.inputs)}, (0, 0, tr, 0), fill=0)")
    return "an i32 tile loaded from a float gl"


def i32_float_fill(g):
    if not g.int_inputs:
        return None
    _bad(g, f"bad = load(rt(i32, 16, 16), {g.int_inputs[0]}, (0, 0, tr, 0), fill=0.5)")
    return "an i32 tile's float fill"


def block_bf16(g):
    a = g.pick(kinds=("rt", "rv"), dtype="bf16") or S.load(g, "bf16")
    op = g.rng.choice(("block_sum", "block_max", "block_min") if a.kind == "rv" else
                      ("block_sum", "block_max", "block_row_sum", "block_col_max"))
    _bad(g, f"bad = {op}({a.name})")
    return "a block reduction of a bf16 value"


def scalar_counted_in_region(g):
    """A Python number the body changes: traced once, not carried."""
    g.emit("c9 = 0")
    if g.rng.random() < 0.5:
        _bad(g, "for i9 in tkc.range(3):")
    else:
        _bad(g, "with tkc.if_(tr > 0):")
    g.emit("    c9 = c9 + 1")
    g.emit("bad = tkc.f32(c9)")
    return "a number changed inside a region (not carried)"


def scalar_used_after_loop(g):
    g.emit("for i9 in tkc.range(2):")
    g.emit(f"    s9 = load(f32, {g.rng.choice(g.inputs)}, at=(0, 0, 0, i9), fill=0.0)")
    _bad(g, "bad = s9 * 2.0")
    return "a scalar of a loop used after it"


def carried_scalar_type(g):
    g.emit("c9 = tkc.i32(0)")
    _bad(g, "for i9 in tkc.range(2):")
    g.emit(f"    c9 = c9 + load(f32, {g.rng.choice(g.inputs)}, at=(0, 0, 0, i9), fill=0.0)")
    return "a carried scalar that changes type"


def atomic_add_in_loop(g):
    if not g.int_inputs:
        return None
    g.emit("for i9 in tkc.range(2):")
    _bad(g, f"    bad = atomic_add({g.int_inputs[0]}, 1, at=(0, 0, 0, i9))")
    return "atomic_add inside a loop"


def tma_store_dtype(g):
    x = g.rng.choice(g.inputs)
    other = "f32" if g.input_dtype[x] == "bf16" else "bf16"
    s = g.alloc(f"st({other}, 16, 16)")
    _bad(g, f"tma.store({x}, {s}, (0, 0, 0, 0))")
    return "tma.store between dtypes"


def f8_math(g):
    a = _tile(g, dtype=g.rng.choice(("f32", "bf16")))
    t8 = g.rng.choice(("f8e4m3", "f8e5m2"))
    _bad(g, f"bad = {g.rng.choice(('exp', 'relu', 'neg', 'row_sum'))}({a.name}.to({t8}))")
    return "math on an 8-bit tile (a storage type)"


BREAKS = [mma_k_mismatch, mma_bf16_accumulator, mma_f32_operands, add_shapes, add_dtypes,
          reduce_col_layout, broadcast_length, where_shapes, gl_coordinates, fill_on_shared,
          vector_from_st, copy_shape, tile_extent, shared_in_loop, used_after_loop, python_truth,
          warpgroup_warps, group_load_dtype, exp_fma_share, range_stages, iota_axis, wide_mma,
          transpose_vector, store_vector_to_st, mma_i32, float_op_of_i32, i32_beside_float,
          i32_tile_from_float_gl, i32_float_fill, block_bf16, scalar_counted_in_region,
          scalar_used_after_loop, carried_scalar_type, atomic_add_in_loop, tma_store_dtype, eight_row_col,
          f8_math, R.ragged_misuse]


def refusal(seed: int, index: int) -> Program:
    """Ill-typed program `index` of seed `seed`: bad_line is where its error must be."""
    rng = rng_of(seed, index, "refusal")
    g = Gen(rng, f"refuse_{seed}_{index}")
    g.define(S.load(g))
    g.body(rng.randrange(0, 6))
    while True:
        what = rng.choice(BREAKS)(g)
        if what is not None:
            break
    g.store_output(g.values()[0])
    p = g.program(seed, index)
    # a kernel option's error (ragged=) names the decorator, the def's first line
    p.bad_line = HEADER.count("\n") + 1 if g.bad_at_def else p.body_line + g.bad_index
    p.bad_what = what
    return p
