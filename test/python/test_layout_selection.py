"""tk-layout-selection: swizzle choice, mma operand layouts (retype or one
swap_layout), the numbers the fixed IR computes, and bank-conflict warnings."""
from __future__ import annotations

import numpy as np
import pytest

from tkc.diagnostics import TkcError, where
from tkc.dialect.types import ST
from tkc.pass_pipeline import run_pipeline
from tkc.passes.layout_selection import choose_swizzle

PRELUDE = '''
!g = !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!o = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
!st = !tk.st<bf16, 16 : i64, 16 : i64, "auto">
!b = !tk.rt<bf16, 16 : i64, 16 : i64, "row">
!f = !tk.rt<f32, 16 : i64, 16 : i64, "row">
'''

# Every mma flavour with operands in the row layout as the author wrote them:
# illegal for mma_ab's b, mma_atb's a and b, mma_atbt's a (a is wanted in
# both layouts). x comes through
# shared memory, y from global, p is an mma result converted to bf16 (pinned
# to row: it needs a swap), c is loop-carried (pinned: swap inside the body).
KERNEL = PRELUDE + '''
func.func @k(%x: !g, %y: !g, %out: !o) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %s = "tk.alloc"() : () -> !st
  "tk.group_load"(%s, %x, %c0, %c0, %c0, %c0) {warps = 1 : i64} : (!st, !g, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %a = "tk.load"(%s, %c0, %c0) : (!st, index, index) -> !b loc("k.py":7:5)
  %bb = "tk.load"(%y, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !b
  %z = "tk.zero"() : () -> !f
  %d1 = "tk.mma_ab"(%a, %bb, %z) : (!b, !b, !f) -> !f
  %d2 = "tk.mma_atb"(%a, %bb, %d1) : (!b, !b, !f) -> !f
  %d3 = "tk.mma_atbt"(%a, %a, %d2) : (!b, !b, !f) -> !f
  %p = "tk.copy"(%d1) : (!f) -> !b loc("k.py":12:5)
  %d4 = "tk.mma_ab"(%a, %p, %d3) : (!b, !b, !f) -> !f
  %r:2 = scf.for %i = %c0 to %c2 step %c1 iter_args(%c = %a, %acc = %d4) -> (!b, !f) {
    %e = "tk.mma_ab"(%a, %c, %acc) : (!b, !b, !f) -> !f
    scf.yield %c, %e : !b, !f
  } loc("k.py":14:5)
  "tk.store"(%out, %r#1, %c0, %c0, %c0, %c0) : (!o, !f, index, index, index, index) -> ()
  return
}
'''


def _module(text):
    from mlir import ir

    import tkc.dialect as d
    return ir.Module.parse(text, d.context())


def _ops(module, name):
    found = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    if child.operation.name == name:
                        found.append(child.operation)
                    walk(child.operation)
    walk(module.operation)
    return found


def _reference(x, y):
    d1 = x @ y
    d2 = x.T @ y + d1
    d3 = x.T @ x.T + d2
    d4 = x @ d1 + d3  # p = bf16(d1): exact for these small integers
    return d4 + 2 * (x @ x)


def _inputs():
    rng = np.random.default_rng(7)
    x = rng.integers(-2, 3, (16, 16)).astype(np.float32)
    y = rng.integers(-2, 3, (16, 16)).astype(np.float32)
    return x, y


def test_fixed_kernel_computes_the_reference():
    from tkc.interpreter import run
    m = _module(KERNEL)
    run_pipeline(m, "tk-layout-selection,tk-verify")
    x, y = _inputs()
    out = np.zeros((16, 16), np.float32)
    run(m, [x.copy(), y.copy(), out])
    np.testing.assert_array_equal(out, _reference(x, y))


def test_unfixed_kernel_is_rejected():
    """The same IR without the pass: tk-verify and the interpreter refuse it,
    so the test above passes because of the pass."""
    with pytest.raises(TkcError, match="must be a col-layout rt"):
        run_pipeline(_module(KERNEL), "tk-verify")


def test_swaps_only_where_pinned():
    m = _module(KERNEL)
    run_pipeline(m, "tk-layout-selection")
    swaps = _ops(m, "tk.swap_layout")
    # a (wanted both ways), the pinned p and the loop-carried c: one each,
    # located at the definition (an iter_arg's own location).
    carried = _ops(m, "scf.for")[0].regions[0].blocks[0].arguments[1]
    assert sorted(where(s) for s in swaps) == sorted(["k.py:7:5", "k.py:12:5", where(carried)])
    loads = _ops(m, "tk.load")
    # y was wanted col by every use: retyped, no swap.
    assert [str(ld.results[0].type).split(", ")[-1] for ld in loads] == ['"row">', '"col">']
    body_first = _ops(m, "scf.for")[0].regions[0].blocks[0].operations[0].operation
    assert body_first.name == "tk.swap_layout"


def test_one_swap_shared_by_all_uses():
    m = _module(KERNEL)
    run_pipeline(m, "tk-layout-selection")
    (swap_a,) = [s for s in _ops(m, "tk.swap_layout") if where(s) == "k.py:7:5"]
    users = {u.owner.operation.name for u in swap_a.results[0].uses}
    # a's uses wanting col: mma_atb's a, mma_atbt's a; its row uses keep a
    assert users == {"tk.mma_atb", "tk.mma_atbt"}
    assert len(list(swap_a.results[0].uses)) == 2


def test_idempotent():
    m = _module(KERNEL)
    run_pipeline(m, "tk-layout-selection")
    once = str(m)
    run_pipeline(m, "tk-layout-selection")
    assert str(m) == once


def test_legal_ir_is_unchanged():
    text = PRELUDE + '''
func.func @k(%x: !g, %out: !o) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %a = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !b
  %z = "tk.zero"() : () -> !f
  %d = "tk.mma_abt"(%a, %a, %z) : (!b, !b, !f) -> !f
  "tk.store"(%out, %d, %c0, %c0, %c0, %c0) : (!o, !f, index, index, index, index) -> ()
  return
}
'''
    m = _module(text)
    before = str(m)
    run_pipeline(m, "tk-layout-selection")
    assert str(m) == before


@pytest.mark.parametrize("dtype, cols, want", [
    ("bf16", 64, "128b"), ("bf16", 32, "64b"), ("bf16", 16, "32b"), ("f16", 48, "32b"),
    ("f16", 96, "64b"), ("f32", 16, "64b"), ("f32", 32, "128b"), ("f32", 80, "64b"),
    ("bf16", 256, "128b"),
])
def test_choose_swizzle(dtype, cols, want):
    assert choose_swizzle(ST(dtype, 16, cols, "auto")) == want


def test_register_only_tiles_take_the_swizzle_with_fewest_conflicts(capsys):
    """An f32 st moved only to and from registers (a staging tile, through a
    subtile view) gets the conflict-free 32b, not the widest 128b (2-way for
    8-byte pairs); one that a wgmma reads keeps the widest, as does one a
    group copy fills."""
    st = '!tk.st<f32, 64 : i64, 32 : i64, "auto">'
    half = '!tk.st<f32, 64 : i64, 16 : i64, "auto">'
    w = '!tk.st<bf16, 64 : i64, 64 : i64, "auto">'
    text = PRELUDE + f'''
func.func @k(%x: !g) attributes {{tk.kernel, tk.warps = 4 : i64}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = "tk.alloc"() : () -> {st}
  %v = "tk.subtile"(%s, %c0, %c1) : ({st}, index, index) -> {half}
  %z = "tk.zero"() : () -> !f
  "tk.store"(%v, %z, %c0, %c0) : ({half}, !f, index, index) -> ()
  %y = "tk.load"(%s, %c0, %c1) : ({st}, index, index) -> !f
  %g = "tk.alloc"() : () -> {st}
  "tk.group_load"(%g, %x, %c0, %c0, %c0, %c0) {{warps = 1 : i64}} : ({st}, !g, index, index, index, index) -> ()
  %a = "tk.alloc"() : () -> {w}
  %b = "tk.alloc"() : () -> {w}
  %acc = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  %d = "tk.warpgroup_mma_abt"(%a, %b, %acc) : ({w}, {w}, !tk.rt<f32, 16 : i64, 64 : i64, "row">) -> !tk.rt<f32, 16 : i64, 64 : i64, "row">
  return
}}
'''
    m = _module(text)
    run_pipeline(m, "tk-layout-selection")
    allocs = [str(op.results[0].type) for op in _ops(m, "tk.alloc")]
    assert ['"32b"' in allocs[0], '"128b"' in allocs[1], '"128b"' in allocs[2]] == [True] * 3, allocs
    assert '"32b"' in str([op.results[0].type for op in _ops(m, "tk.subtile")][0])
    assert "bank conflicts" not in capsys.readouterr().err


def test_bank_warning_is_located(capsys):
    text = PRELUDE + '''
func.func @k() attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "none">
  %t = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  %a = "tk.load"(%s, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "none">, index, index) -> !b loc("k.py":3:9)
  %b = "tk.load"(%t, %c0, %c0) : (!tk.st<bf16, 64 : i64, 64 : i64, "auto">, index, index) -> !b loc("k.py":4:9)
  return
}
'''
    run_pipeline(_module(text), "tk-layout-selection")
    err = capsys.readouterr().err
    assert err == ('k.py:3:9: warning: 8-way shared-memory bank conflicts: '
                   'ldmatrix of st<bf16, 64, 64, "none">\n')


WGMMA = '''
!g = !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
!st = !tk.st<bf16, 64 : i64, 64 : i64, "auto">
!a = !tk.rt<bf16, 16 : i64, 64 : i64, "col">
!f = !tk.rt<f32, 16 : i64, 64 : i64, "row">
func.func @k(%x: !g) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %s = "tk.alloc"() : () -> !st
  %a = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !a
  %z = "tk.zero"() : () -> !f
  %d = "tk.warpgroup_mma_abt"(%a, %s, %z) : (!a, !st, !f) -> !f
  return
}
'''


def test_warpgroup_register_a_is_made_row():
    """wgmma reads a register a in the row layout: a col-layout load is retyped."""
    from mlir import ir
    from tkc.dialect import context
    m = ir.Module.parse(WGMMA, context())
    run_pipeline(m, "tk-layout-selection,tk-verify")
    text = str(m)
    assert '"tk.load"' in text and "swap_layout" not in text
    assert '!tk.rt<bf16, 16 : i64, 64 : i64, "row">' in text
