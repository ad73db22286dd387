"""Mistakes in kernels are TkcErrors at the author's file:line, found while tracing."""
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st
from tkc.diagnostics import TkcError
from tkc.frontend.ops import exp, load, mma_AB, mma_ABt, row_max, store, sub_row, zero
from helpers import marker_line, refused_at  # noqa: E402

pytest.importorskip("mlir")

G = gl(f32, 1, 1, 32, 32)


def _line_of(marker: str) -> int:
    return marker_line(__file__, marker)


def _fails(kernel, marker: str, *words):
    return refused_at(kernel.trace, __file__, marker, *words)


def test_mma_with_wrong_dtype():
    @tkc.kernel
    def k(a: G):
        x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
        acc = zero(rt(f32, 16, 16))
        mma_ABt(acc, x, x, acc)  # @mma-dtype
    _fails(k, "mma-dtype", "mma_ABt", "bf16")


def test_mma_operand_layouts_are_left_to_layout_selection():
    """An author need not pick operand layouts: tracing accepts a row-layout b
    for mma_AB, and the tile pipeline makes it legal (the load becomes col)."""
    import numpy as np
    from tkc.compiler import TILE_PIPELINE
    from tkc.pass_pipeline import run_pipeline

    @tkc.kernel
    def k(a: gl(bf16, 1, 1, 16, 16), b: gl(bf16, 1, 1, 16, 16), c: gl(f32, 1, 1, 16, 16)):
        x = load(rt(bf16, 16, 16), a, (0, 0, 0, 0))
        y = load(rt(bf16, 16, 16), b, (0, 0, 0, 0))
        store(c, mma_AB(x, y, zero(rt(f32, 16, 16))), (0, 0, 0, 0))
    m = k.trace()
    run_pipeline(m, TILE_PIPELINE)
    assert '"tk.load"' in str(m) and 'bf16, 16 : i64, 16 : i64, "col">' in str(m)
    rng = np.random.default_rng(0)
    av, bv = (rng.integers(-4, 4, (16, 16)).astype(np.float32) for _ in range(2))
    cv = np.zeros((16, 16), np.float32)
    k.interpret(av, bv, cv)
    np.testing.assert_array_equal(cv, av @ bv)


def test_mma_with_wrong_shapes():
    @tkc.kernel
    def k2(a: gl(bf16, 1, 1, 32, 32)):
        x = load(rt(bf16, 16, 32), a, (0, 0, 0, 0))
        mma_ABt(x, x, zero(rt(f32, 16, 32)))  # @mma-shape
    _fails(k2, "mma-shape", "N")


def test_python_if_on_a_traced_value():
    @tkc.kernel(warps=2)
    def k(a: G):
        if tkc.warpid() == 0:  # @pyif
            store(a, zero(rt(f32, 16, 16)), (0, 0, 0, 0))
    _fails(k, "pyif", "tkc.if_")


def test_python_range_over_a_traced_value():
    @tkc.kernel
    def k(a: gl(f32, 1, 1, None, 32)):
        for _ in range(a.r // 16):  # @pyrange
            pass
    _fails(k, "pyrange", "tkc.range")


def test_alloc_inside_a_loop():
    @tkc.kernel
    def k(a: G):
        for i in tkc.range(2):
            s = st(f32, 32, 32)  # @alloc
            del s
    _fails(k, "alloc", "up front")


def test_wrong_coordinate_count():
    @tkc.kernel
    def k(a: G):
        load(rt(f32, 16, 16), a, (0, 0))  # @coords
    _fails(k, "coords", "4 coordinates", "got 2")


def test_handle_assigned_in_a_loop_is_not_available_after_it():
    @tkc.kernel
    def k(a: G):
        for i in tkc.range(2):
            x = load(rt(f32, 16, 16), a, (0, 0, i, 0))
        store(a, x, (0, 0, 0, 0))  # @after-loop
    _fails(k, "after-loop", "tkc.range loop")


def test_index_from_a_branch_is_not_available_after_it():
    @tkc.kernel
    def k(a: G):
        with tkc.if_(tkc.warpid() == 0):
            r = tkc.laneid() + 1
        store(a, zero(rt(f32, 16, 16)), (0, 0, r, 0))  # @after-if
    _fails(k, "after-if", "tkc.if_ branch")


def test_use_before_assignment():
    @tkc.kernel
    def k(a: G):
        x = rt(f32, 16, 16)
        store(a, exp(x), (0, 0, 0, 0))  # @unassigned
    _fails(k, "unassigned", "before any op assigned it")


def test_break_out_of_tkc_range():
    @tkc.kernel
    def k(a: G):
        for i in tkc.range(4):
            break  # @break
        store(a, zero(rt(f32, 16, 16)), (0, 0, 0, 0))
    _fails(k, "break", "break")


def test_else_without_if():
    @tkc.kernel
    def k(a: G):
        with tkc.else_():  # @else
            pass
    _fails(k, "else", "tkc.if_")


def test_destination_of_the_wrong_type():
    @tkc.kernel
    def k(a: G):
        x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
        row_max(rv(f32, 32), x)  # @reduce
        sub_row(x, rv(f32, 16))
    _fails(k, "reduce", "length 16")


def test_bad_tile_shape_and_dtype():
    @tkc.kernel
    def k(a: G):
        zero(rt(f32, 24, 16))  # @shape
    _fails(k, "shape", "multiple of 16")

    @tkc.kernel
    def k2(a: G):
        zero(rt("f64", 16, 16))  # @dtype
    _fails(k2, "dtype", "bf16")


def test_bad_argument_annotation():
    @tkc.kernel
    def k(a: int):
        pass
    with pytest.raises(TkcError) as info:
        k.trace()
    assert "gl(dtype" in info.value.message and info.value.where.startswith(__file__)


def test_grid_uses_an_f32_scalar():
    @tkc.kernel(grid=lambda a, s: (s,))
    def k(a: G, s: tkc.f32):
        pass
    with pytest.raises(TkcError) as info:
        k.grid()
    assert "i32" in info.value.message


def test_ops_outside_a_kernel():
    with pytest.raises(TkcError) as info:
        zero(rt(f32, 16, 16))  # @outside
    assert info.value.where.startswith(f"{__file__}:{_line_of('outside')}:")


# ---- Python errors in the author's code: located, the original chained

def _helper_with_a_bug(n):
    return n + "rows"  # @helper-typeerror


def test_name_error_in_the_kernel_body():
    @tkc.kernel
    def k(a: G):
        store(a, zero(rt(f32, 16, 16)), (0, 0, undefined_row, 0))  # noqa: F821  # @nameerror
    e = _fails(k, "nameerror", "NameError", "undefined_row")
    assert isinstance(e.__cause__, NameError)


def test_type_error_in_a_helper_of_the_kernel():
    @tkc.kernel
    def k(a: G):
        _helper_with_a_bug(3)
    e = _fails(k, "helper-typeerror", "TypeError", "unsupported operand")
    assert isinstance(e.__cause__, TypeError)


def test_error_inside_tkc_stays_an_internal_error(monkeypatch):
    """An exception raised by tkc's own code is a tkc bug, not the author's: it
    keeps its type and traceback."""
    from tkc import dtypes
    from tkc.dialect import ops as tk_ops
    # tkc.sync() now calls a tkc function with the wrong arguments: a TypeError
    # raised in tkc/frontend/workers.py (a stand-in defined in this file would
    # count as the author's code).
    monkeypatch.setattr(tk_ops, "sync", dtypes.itemsize)

    @tkc.kernel
    def k(a: G):
        tkc.sync()
    with pytest.raises(TypeError, match="itemsize"):
        k.trace()


def test_wide_tiles_refuse_what_needs_the_fragment_layout():
    from tkc.ops import col_sum, swap_layout

    @tkc.kernel
    def mma(a: gl(bf16, 1, 1, 16, 16)):
        x = load(rt(bf16, 16, 16, "wide"), a, (0, 0, 0, 0))
        mma_ABt(x, x, zero(rt(f32, 16, 16)))  # @wide-mma
    _fails(mma, "wide-mma", "mma_ABt", "wide layout is for memory")

    @tkc.kernel
    def swap(a: G):
        swap_layout(load(rt(f32, 16, 32, "wide"), a, (0, 0, 0, 0)))  # @wide-swap
    _fails(swap, "wide-swap", "swap_layout", "store it to shared memory")

    @tkc.kernel
    def cols(a: G):
        col_sum(load(rt(f32, 16, 32, "wide"), a, (0, 0, 0, 0)))  # @wide-cols
    _fails(cols, "wide-cols", "col_sum", "row layout")


def test_vector_sum_needs_a_vector():
    from tkc.ops import sum

    @tkc.kernel
    def k(a: G):
        sum(load(rt(f32, 16, 32), a, (0, 0, 0, 0)))  # @sum-tile
    _fails(k, "sum-tile", "sum", "register vector (rv)")
    assert sum([1, 2, 3]) == 6  # Python's sum otherwise


def test_flat_vector_length_must_be_a_multiple_of_32():
    @tkc.kernel
    def k(a: gl(f32, 1, 1, 1, 48)):
        load(rv(f32, 48, "flat"), a, (0, 0, 0, 0))  # @flat-48
    _fails(k, "flat-48", "flat rv", "multiple of 32")


def test_roll_is_checked():
    """roll: a row-layout tile, axis 0 or 1, a constant (Python int) shift."""
    from tkc.ops import roll

    @tkc.kernel
    def layout(a: G):
        roll(load(rt(f32, 16, 32, "col"), a, (0, 0, 0, 0)), 1, 1)  # @roll-layout
    _fails(layout, "roll-layout", "roll", "row layout")

    @tkc.kernel
    def axis(a: G):
        roll(load(rt(f32, 16, 32), a, (0, 0, 0, 0)), 1, 2)  # @roll-axis
    _fails(axis, "roll-axis", "roll: axis must be 0 or 1, got 2")

    @tkc.kernel
    def shift(a: G):
        roll(load(rt(f32, 16, 32), a, (0, 0, 0, 0)), tkc.warpid(), 0)  # @roll-shift
    _fails(shift, "roll-shift", "roll: shift must be a Python int")


def test_picks_are_located():
    """x[:, j] / x[i, :] (row_pick / col_pick): a row-layout tile, a whole
    other axis, a constant index inside the tile."""
    @tkc.kernel
    def layout(a: G):
        load(rt(f32, 16, 32, "col"), a, (0, 0, 0, 0))[:, 3]  # @pick-layout
    _fails(layout, "pick-layout", "row_pick", "row layout")

    @tkc.kernel
    def sliced(a: G):
        load(rt(f32, 16, 32), a, (0, 0, 0, 0))[0:8, 3]  # @pick-slice
    _fails(sliced, "pick-slice", "x[:, j] (a column) or x[i, :] (a row)")

    @tkc.kernel
    def outside(a: G):
        load(rt(f32, 16, 32), a, (0, 0, 0, 0))[16, :]  # @pick-outside
    _fails(outside, "pick-outside", "col_pick", "row 16 is outside")


def test_exp_fma_share_must_be_a_fraction_of_a_tile():
    @tkc.kernel
    def k(a: G):
        x = load(rt(f32, 16, 32), a, (0, 0, 0, 0))
        store(a, exp(x, fma=2), (0, 0, 0, 0))  # @fma-range
    _fails(k, "fma-range", "exp", "[0, 1]", "2")

    @tkc.kernel
    def v(a: G):
        m = row_max(load(rt(f32, 16, 32), a, (0, 0, 0, 0)))
        exp(m, fma=0.5)  # @fma-vector
    _fails(v, "fma-vector", "exp", "register tile", "rv")


C = gl(tkc.i32, 1, 1, 1, 16)


def test_atomic_add_refusals():
    """tkc.ops.atomic_add: an i32 gl, an int value, gls after, at=, the top level."""
    from tkc.ops import atomic_add

    @tkc.kernel
    def into_f32(a: G):
        atomic_add(a, 1, at=(0, 0, 0, 0))  # @atomic-f32
    _fails(into_f32, "atomic-f32", "atomic_add adds into an i32 gl")

    @tkc.kernel
    def fractional(c: C):
        atomic_add(c, 0.5, at=(0, 0, 0, 0))  # @atomic-value
    _fails(fractional, "atomic-value", "value must be an int")

    @tkc.kernel
    def after_tile(c: C, a: G):
        atomic_add(c, 1, at=(0, 0, 0, 0), after=st(f32, 16, 16))  # @atomic-after
    _fails(after_tile, "atomic-after", "after= takes gls")

    @tkc.kernel
    def nowhere(c: C):
        atomic_add(c, 1)  # @atomic-at
    _fails(nowhere, "atomic-at", "at=(b, d, row, col)")

    @tkc.kernel
    def in_branch(c: C):
        with tkc.if_(tkc.warpid() == 0):
            atomic_add(c, 1, at=(0, 0, 0, 0))  # @atomic-branch
    _fails(in_branch, "atomic-branch", "top level", "the whole block takes part")


def test_store_deinterleave_refusals():
    """store(deinterleave=True) writes an f32 rt into an f32 st: not a bf16
    tile, not a gl (the layout's register order is verified after layout
    selection: test/lit/lowering/store-deinterleave-error.mlir)."""
    @tkc.kernel
    def bf16_tile(a: G):
        s = st(bf16, 16, 64)
        store(s, zero(rt(bf16, 16, 64)), (0, 0), deinterleave=True)  # @di-bf16
    _fails(bf16_tile, "di-bf16", "deinterleave=True) writes an f32 rt into an f32 st")

    @tkc.kernel
    def to_gl(a: G):
        store(a, zero(rt(f32, 16, 32)), (0, 0, 0, 0), deinterleave=True)  # @di-gl
    _fails(to_gl, "di-gl", "deinterleave=True) writes an f32 rt into an f32 st")


def test_store_packed_refusals():
    """store(packed=True) adds an f32 rt into an f32 gl: add=True is needed."""
    @tkc.kernel
    def without_add(a: G):
        store(a, zero(rt(f32, 16, 32)), (0, 0, 0, 0), packed=True)  # @pk-add
    _fails(without_add, "pk-add", "store(packed=True) adds an f32 rt into an f32 gl (add=True)")
