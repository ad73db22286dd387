"""The frontend traces ThunderKittens-style Python into the tile IR of docs/tile-ir.md."""
import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st
from tkc.diagnostics import where
from tkc.frontend.ops import (add, copy, div_row, exp2, group_load, load, mma_AB, mma_ABt, mul,
                              mul_row, neg_infty, row_max, row_sum, store, sub_row, zero)
from helpers import marker_line, nested_ops  # noqa: E402

pytest.importorskip("mlir")

D = 64


def _func(module):
    return next(o for o in nested_ops(module.operation) if o.name == "func.func")


def _named(module, name):
    return [o for o in nested_ops(module.operation) if o.name == name]


def _line_of(marker: str) -> int:
    return marker_line(__file__, marker)


def _verify(module):
    from tkc.pass_pipeline import run_pipeline
    run_pipeline(module, "tk-verify")


# ---------------------------------------------------------------- attention

@tkc.kernel(warps=4, grid=lambda q, k, v, o: (q.r // 64, q.d, q.b))
def attend(q: gl(bf16, None, None, None, D), k: gl(bf16, None, None, None, D),
           v: gl(bf16, None, None, None, D), o: gl(bf16, None, None, None, D), scale: tkc.f32):
    b, h, qb = tkc.block_idx.z, tkc.block_idx.y, tkc.block_idx.x
    w = tkc.warpid()
    k_s = st(bf16, 64, D)
    v_s = st(bf16, 64, D)
    q_r = load(rt(bf16, 16, D), q, (b, h, qb * 4 + w, 0))
    o_r = zero(rt(f32, 16, D))
    m = neg_infty(rv(f32, 16))
    l_ = zero(rv(f32, 16))
    for j in tkc.range(k.r // 64):  # @for
        group_load(k_s, k, (b, h, j, 0), warps=4)
        group_load(v_s, v, (b, h, j, 0), warps=4)
        tkc.sync()
        k_r = load(rt(bf16, 64, D), k_s, (0, 0))
        att = zero(rt(f32, 16, 64))
        mma_ABt(att, q_r, k_r, att)  # @mma
        att = att * scale
        m_old = m
        m = row_max(att, init=m_old)
        att = sub_row(att, m)
        exp2(att, att)
        corr = exp2(m_old - m)
        l_ = mul(l_, corr)
        row_sum(l_, att, l_)
        o_r = mul_row(o_r, corr)
        v_r = load(rt(bf16, 64, D, "col"), v_s, (0, 0))
        mma_AB(o_r, att.to(bf16), v_r, o_r)
        tkc.sync()
    o_r = div_row(o_r, l_)
    store(o, o_r.to(bf16), (b, h, qb * 4 + w, 0))


def test_kernel_function_form():
    m = attend.trace()
    f = _func(m)
    assert str(f.attributes["sym_name"]) == '"attend"'
    assert "tk.kernel" in f.attributes
    assert f.attributes["tk.warps"].value == 4
    assert [str(s).strip('"') for s in f.attributes["tk.arg_names"]] == ["q", "k", "v", "o", "scale"]
    assert [str(s).strip('"') for s in f.attributes["tk.grid"]] == ["q.r // 64", "q.d", "q.b"]
    args = f.regions[0].blocks[0].arguments
    assert str(args[0].type) == "!tk.gl<bf16, -1 : i64, -1 : i64, -1 : i64, 64 : i64>"
    assert str(args[4].type) == "f32"
    # shared tiles are allocated in the entry block, before the loop
    entry = list(f.regions[0].blocks[0].operations)
    assert [o.name for o in entry].count("tk.alloc") == 2
    _verify(m)


def test_loop_carries_exactly_the_changed_tiles():
    m = attend.trace()
    (loop,) = _named(m, "scf.for")
    # o_r, m, l_ change in the body (in-place or by rebinding the name); q_r does not.
    assert [str(r.type) for r in loop.results] == [
        '!tk.rt<f32, 16 : i64, 64 : i64, "row">',
        '!tk.rv<f32, 16 : i64, "col">', '!tk.rv<f32, 16 : i64, "col">']
    body = loop.regions[0].blocks[0]
    assert len(body.arguments) == 4  # induction variable + 3 iter_args
    (yield_,) = [o for o in body.operations if o.name == "scf.yield"]
    assert [o.owner.name for o in yield_.operands] == ["tk.mma_ab", "tk.row_max", "tk.row_sum"]
    # after the loop, the results are what the epilogue reads
    (div,) = _named(m, "tk.div_row")
    assert div.operands[0].owner.name == "scf.for" and div.operands[1].owner.name == "scf.for"
    # the loop bound is tk.dim(k, r) // 64
    ub = loop.operands[1].owner
    assert ub.name == "arith.floordivsi" and ub.operands[0].owner.name == "tk.dim"


def test_loop_names_a_reused_name_and_list_elements():
    """A name reused inside a loop for an unrelated tile of the same type is
    not an update of the tile it held before when that tile changes in place
    (it is carried with its own value), and a list of tiles rebound element by
    element (`acc = [x * 2 for x in acc]`) carries every element."""
    @tkc.kernel(warps=1, grid=lambda o: (1,))
    def k(o: gl(f32, 1, 1, 16, 64)):
        acc = [zero(rt(f32, 16, 16)), zero(rt(f32, 16, 16))]
        fun = [zero(rt(f32, 16, 16)), zero(rt(f32, 16, 16))]
        for s in acc:                       # s names acc[1] when the loop starts
            store(o, s, (0, 0, 0, 0))
        for i in tkc.range(3):
            s = zero(rt(f32, 16, 16)) + 1.0      # an unrelated tile
            for x in acc:
                add(x, x, s)                      # in place
            fun = [x * 2.0 + s for x in fun]      # functionally, element by element
        for j, x in enumerate(acc + fun):
            store(o, x, (0, 0, 0, j))

    (loop,) = _named(k.trace(), "scf.for")
    assert len(loop.results) == 4           # every element, not the reused name
    out = np.zeros((1, 1, 16, 64), np.float32)
    k.interpret(out)
    assert (out[..., :32] == 3.0).all() and (out[..., 32:] == 7.0).all()


def test_locations_point_at_the_author_lines():
    m = attend.trace()
    (mma,) = _named(m, "tk.mma_abt")
    (loop,) = _named(m, "scf.for")
    assert where(mma) == f"{__file__}:{_line_of('mma')}:9"
    assert where(loop).startswith(f"{__file__}:{_line_of('for')}:")
    assert all(where(o).startswith(__file__ + ":") for o in nested_ops(m.operation)
               if o.name.startswith(("tk.", "arith.", "scf.")))


def _bf16(x):
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def test_attention_runs_in_the_interpreter():
    rng = np.random.default_rng(0)
    q, k, v = (_bf16(rng.standard_normal((1, 2, 64, D))) for _ in range(3))
    o = np.zeros_like(q)
    scale = 0.125 * 1.4426950408889634
    attend.interpret(q, k, v, o, scale)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    p = np.exp2(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    assert np.abs(o - ref).max() < 2e-2


# ---------------------------------------------------------------- in-place vs functional

def _body(module) -> str:
    text = str(module)
    return text[text.index("{", text.index("func.func")):]


@tkc.kernel
def inplace(a: gl(f32, 1, 1, 16, 32), s: tkc.f32):
    x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
    y = rt(f32, 16, 32)
    exp2(y, x)
    add(y, y, s)
    mx = row_max(rv(f32, 16), y)
    sub_row(y, y, mx)
    mma_ABt(y, copy(rt(bf16, 16, 32), y), copy(rt(bf16, 32, 32), zero(rt(f32, 32, 32))), y)
    store(a, y, (0, 0, 0, 0))


@tkc.kernel
def functional(a: gl(f32, 1, 1, 16, 32), s: tkc.f32):
    x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
    y = exp2(x)
    y = y + s
    mx = row_max(y)
    y = sub_row(y, mx)
    y = mma_ABt(y.to(bf16), zero(rt(f32, 32, 32)).to(bf16), y)
    store(a, y, (0, 0, 0, 0))


def test_inplace_and_functional_forms_give_the_same_ir():
    a, b = inplace.trace(), functional.trace()
    assert _body(a) == _body(b)
    names = [o.name for o in nested_ops(a.operation)]
    assert names.count("tk.copy") == 2 and "tk.mma_abt" in names and "tk.add" in names
    _verify(a)


# ---------------------------------------------------------------- if / else

@tkc.kernel(warps=2)
def branches(a: gl(f32, 1, 1, 16, 16)):
    w = tkc.warpid()
    x = load(rt(f32, 16, 16), a, (0, 0, 0, 0))
    y = zero(rt(f32, 16, 16))
    keep = zero(rt(f32, 16, 16))
    with tkc.if_(w == 0):  # @if
        x = x * 2.0               # functional: rebinds the name
        tmp = exp2(x)
    with tkc.else_():
        zero(y)                   # in-place
    with tkc.if_(w > 0):
        add(x, x, 1.0)            # then-only change, no else
    store(a, x + y + keep, (0, 0, 0, 0))
    del tmp


def test_if_else_yields_changed_handles():
    m = branches.trace()
    first, second = _named(m, "scf.if")
    assert [str(r.type) for r in first.results] == ['!tk.rt<f32, 16 : i64, 16 : i64, "row">'] * 2
    then_y = [o for o in first.regions[0].blocks[0].operations][-1]
    else_y = [o for o in first.regions[1].blocks[0].operations][-1]
    assert then_y.name == else_y.name == "scf.yield"
    assert [o.owner.name for o in then_y.operands] == ["tk.mul", "tk.zero"]
    assert [o.owner.name for o in else_y.operands] == ["tk.load", "tk.zero"]
    # y is unchanged in the then-branch (the zero before the if), new in the else-branch
    assert then_y.operands[1].owner.parent.name == "func.func"
    assert else_y.operands[1].owner.parent.name == "scf.if"
    # the second if changes only x, and gets an else that yields the old x
    assert len(second.results) == 1
    assert second.operands[0].owner.name == "arith.cmpi"
    assert where(first).startswith(f"{__file__}:{_line_of('if')}:")
    _verify(m)


def test_if_without_changes_has_no_results():
    @tkc.kernel
    def k(a: gl(f32, 1, 1, 16, 16)):
        x = load(rt(f32, 16, 16), a, (0, 0, 0, 0))
        with tkc.if_(tkc.laneid() == 0):
            store(a, exp2(x), (0, 0, 0, 0))
        store(a, x, (0, 0, 0, 0))
    m = k.trace()
    (op,) = _named(m, "scf.if")
    assert len(op.results) == 0 and len(op.regions[1].blocks) == 0
    (_, outer) = _named(m, "tk.store")
    assert outer.operands[1].owner.name == "tk.load"


# ---------------------------------------------------------------- nesting, index math

def test_nested_loops_and_an_if_carry_through():
    @tkc.kernel(grid=lambda a: (tkc.cdiv(a.r, 16),))
    def k(a: gl(f32, 1, 1, None, 64), n: tkc.i32):
        acc = zero(rt(f32, 16, 16))
        for i in tkc.range(n):
            for j in tkc.range(1, a.c // 16, step=2):
                t = load(rt(f32, 16, 16), a, (0, 0, i, j))
                with tkc.if_(j < 3):
                    acc = acc + t
        store(a, acc, (0, 0, 0, 0))
    m = k.trace()
    outer, inner = _named(m, "scf.for")
    assert len(outer.results) == len(inner.results) == 1
    # static dim: a.c // 16 folds to a constant bound
    assert inner.operands[1].owner.name == "arith.constant"
    assert str(inner.operands[1].owner.attributes["value"]) == "4 : index"
    assert outer.operands[1].owner.name == "arith.index_cast"
    (iff,) = _named(m, "scf.if")
    assert len(iff.results) == 1
    assert [str(g).strip('"') for g in _func(m).attributes["tk.grid"]] == ["cdiv(a.r, 16)", "1", "1"]
    _verify(m)


def test_index_arithmetic_folds_python_ints():
    @tkc.kernel(warps=4)
    def k(a: gl(f32, 2, 4, 64, 64)):
        w = tkc.warpid()
        r = (a.r // 16) * 0 + w % 4 * 1 + 0 - 0
        store(a, zero(rt(f32, 16, 16)), (a.b - 1, a.d // 2, r, 0))
    m = k.trace()
    names = [o.name for o in nested_ops(m.operation)]
    assert "tk.dim" not in names  # all dims static
    assert names.count("arith.remsi") == 1
    assert not {"arith.muli", "arith.addi", "arith.subi"} & set(names)
    (s,) = _named(m, "tk.store")
    consts = [str(v.owner.attributes["value"]) for v in list(s.operands)[2:4]]
    assert consts == ["1 : index", "2 : index"]


# ---------------------------------------------------------------- operators and the rest of the vocabulary

def test_operators_scalars_and_layoutnested_ops():
    from tkc.frontend.ops import col_sum, group_store, max, swap_layout, transpose

    @tkc.kernel(warps=2)
    def k(a: gl(f32, 1, 1, 32, 64), b: gl(bf16, 1, 1, 64, 32), s: tkc.f32):
        x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
        t = s * 2.0 + 1.0                   # f32 scalar math
        y = -(1.0 - x) / t                  # tile op scalar, scalar op tile
        y = 2.0 / y
        y = max(y, x)
        v = col_sum(y)                      # a "row" vector of length 32
        assert (v.kind, v.length) == ("row", 32)
        c = swap_layout(y.to(bf16))
        assert c.layout == "col"
        tt = transpose(rt(f32, 32, 16), y)
        assert tt.shape == (32, 16)
        sb = st(bf16, 64, 32)
        group_load(sb, b, (0, 0, 0, 0))
        tkc.sync()  # every warp's part loaded before warp 0 stores the tile
        group_store(b, sb, (0, 0, 0, 0), warps=1)
        store(a, y, (0, 0, 0, 0))
    m = k.trace()
    names = [o.name for o in nested_ops(m.operation)]
    assert names.count("arith.mulf") == 1 and names.count("arith.addf") == 1
    for op in ("tk.neg", "tk.add", "tk.div", "tk.fill", "tk.max", "tk.col_sum", "tk.swap_layout",
               "tk.transpose", "tk.group_load", "tk.group_store"):
        assert op in names, op
    (gl_op,) = _named(m, "tk.group_load")
    assert gl_op.attributes["warps"].value == 2   # defaults to the kernel's warps
    (gs_op,) = _named(m, "tk.group_store")
    assert gs_op.attributes["warps"].value == 1
    (fill,) = _named(m, "tk.fill")
    assert fill.operands[0].owner.name == "arith.constant"
    _verify(m)


def test_vectors_through_shared_memory():
    from tkc import sv

    @tkc.kernel
    def k(a: gl(f32, 1, 1, 16, 32)):
        vs = sv(f32, 32)
        x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
        v = row_max(x)
        w = load(rv(f32, 32, "row"), a, (0, 0, 0, 0))
        store(vs, w)
        store(a, x, (0, 0, 0, 0))
        store(a, load(rv(f32, 32, "row"), vs), (0, 0, 1, 0))
        del v
    m = k.trace()
    loads = _named(m, "tk.load")
    assert [len(list(o.operands)) for o in loads] == [5, 5, 1]
    _verify(m)


def test_loop_with_if_else_computes_the_right_numbers():
    @tkc.kernel(warps=2)
    def k(a: gl(f32, 1, 1, None, 16), out: gl(f32, 1, 1, 32, 16), n: tkc.i32):
        w = tkc.warpid()
        acc = zero(rt(f32, 16, 16))
        for i in tkc.range(n):
            t = load(rt(f32, 16, 16), a, (0, 0, i, 0))
            with tkc.if_(i % 2 == w):
                acc = acc + t
            with tkc.else_():
                acc = acc - t * 0.5
        store(out, acc, (0, 0, w, 0))

    rng = np.random.default_rng(1)
    a = rng.standard_normal((5 * 16, 16)).astype(np.float32)
    out = np.zeros((32, 16), np.float32)
    k.interpret(a, out, 5)
    tiles = a.reshape(5, 16, 16)
    for w in range(2):
        ref = sum(t if i % 2 == w else -0.5 * t for i, t in enumerate(tiles))
        np.testing.assert_allclose(out[16 * w:16 * (w + 1)], ref, rtol=1e-5, atol=1e-5)


@tkc.kernel
def named_dims(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, None, 1, "K", 32), s: tkc.f32):
    pass


def test_dim_names_attribute():
    """A string dim of gl(...) is a runtime dim with a name; tk.dim_names lists
    every argument's (4 for a gl, "" when unnamed; none for a scalar)."""
    m = named_dims.trace()
    f = _func(m)
    assert [[s.value for s in entry] for entry in f.attributes["tk.dim_names"]] == \
        [["", "", "M", "K"], ["", "", "K", ""], []]
    args = f.regions[0].blocks[0].arguments
    assert str(args[1].type) == "!tk.gl<bf16, -1 : i64, 1 : i64, -1 : i64, 32 : i64>"
    # a kernel that names nothing keeps its IR short: no attribute
    m2 = attend.trace()
    assert "tk.dim_names" not in _func(m2).attributes


def test_sum_of_tiles_adds_them_without_a_zero():
    """sum([a, b, c]) of tiles is a + b + c: Python's sum would start from 0
    and add 0.0 to every element (LLVM keeps the add: -0.0 + 0.0 is +0.0)."""
    from tkc.frontend.ops import sum as tk_sum

    @tkc.kernel(warps=1)
    def k(a: gl(f32, 1, 1, 16, 16), s: tkc.f32):
        x = load(rt(f32, 16, 16), a, (0, 0, 0, 0))
        y = tk_sum([x, x * 2.0, x * s])     # tiles
        t = tk_sum(u * s for u in (1.0, 2.0))  # f32 scalars, from a generator
        store(a, y * t, (0, 0, 0, 0))
    m = k.trace()
    names = [o.name for o in nested_ops(m.operation)]
    assert names.count("tk.add") == 2
    assert names.count("arith.addf") == 1
    assert "tk.fill" not in names
    assert tk_sum([1, 2, 3]) == 6 and tk_sum([], 5) == 5 and tk_sum([]) == 0
    _verify(m)


def test_exp2_fma_share_is_an_attribute_and_zero_is_none():
    """exp2(x, fma=s) carries s as the op's `fma` attribute; s = 0 (no value
    off the MUFU) traces the plain op, so a kernel can pass its share as is."""
    G = gl(f32, 1, 1, 16, 16)
    for share, attr in ((0.25, 0.25), (0, None), (0.0, None)):
        @tkc.kernel
        def k(a: G):
            store(a, exp2(load(rt(f32, 16, 16), a, (0, 0, 0, 0)), fma=share), (0, 0, 0, 0))
        op, = _named(k.trace(), "tk.exp2")
        got = op.attributes["fma"].value if "fma" in op.attributes else None
        assert got == attr, (share, got)
