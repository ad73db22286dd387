"""Persistent kernels over ragged groups (tkc.kernel's ragged=, tk.ragged,
tk.ragged_item) in the interpreter: the blocks visit every live work item once
and no dead one, for each order and zigzag, with empty groups, counts not
multiples of the rows, counts past the grid's height, negative counts and no
live item at all; tk.ragged_item's results against a Python reference; the
refusals of misuse at the author's line. The GPU twin: test/gpu/test_ragged_items_gpu.py;
the masked grouped GEMM that uses it: test_grouped_scaled_mm.py."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir")

import tkc  # noqa: E402
from tkc.compiler import TILE_PIPELINE  # noqa: E402
from tkc.pass_pipeline import run_pipeline  # noqa: E402
from ragged_kernels import expected_visits, ragged_visits, ragged_visits_grouped, ragged_visits_zigzag  # noqa: E402
from tkc import gl, i32  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.interpreter import run  # noqa: E402
from tkc.interpreter.testing import kernel_module  # noqa: E402
from tkc.ops import store  # noqa: E402

COUNTS = [[5, 0, 9, 1], [0, 0, 0], [100, -4, 7], [3], [0, 13, 0, 0, 2, 6]]


@pytest.mark.parametrize("kernel", [ragged_visits, ragged_visits_grouped, ragged_visits_zigzag],
                         ids=lambda k: k.name)
@pytest.mark.parametrize("counts", COUNTS, ids=str)
@pytest.mark.parametrize("sms", [1, 4, 64])
def test_every_live_item_once_and_no_dead_one(kernel, counts, sms):
    """o counts each item's visits: 1 on live items, 0 on dead ones (y past
    ceil(count / ROWS), or past the grid's Y = 4 for a count of 100)."""
    Y, X = 4, 3
    module = kernel.trace()
    run_pipeline(module, TILE_PIPELINE)
    count = np.array(counts, np.int32).reshape(1, 1, 1, -1)
    o = np.zeros((1, len(counts), Y, X), np.int32)
    run(module, [count, o], sms=sms)
    assert o[0].tolist() == expected_visits(counts, Y, X)


def _reference(counts, t, groups, height, span, rows):
    """tk.ragged_item's (group, item in it, its row blocks, total), in Python."""
    acc, found = 0, None
    for j in range(groups):
        h = min(max(-(-(counts[j] if j < len(counts) else 0) // rows), 0), height)
        if found is None and acc <= t < acc + span * h:
            found = (j, t - acc, h)
        acc += span * h
    return [*(found or (groups, t - acc, 0)), acc]


@pytest.mark.parametrize("counts", [[5, 0, 9, 1], [0, 0], [300, 1], [-1, 2]], ids=str)
@pytest.mark.parametrize("groups", [0, 2, 6])   # 6: past the count gl's end (counts read 0 there)
def test_ragged_item(counts, groups):
    """Every t from 0 to past the total: group, item, row blocks, total (rows 4, height 2, span 3)."""
    m = kernel_module([("count", "!c"), ("out", "!o"), ("t", "i32")], f"""
        %ti = arith.index_cast %t : i32 to index
        %g = arith.constant {groups} : index
        %r:4 = "tk.ragged_item"(%count, %ti, %g, %c2, %c3) {{rows = 4 : i64}} : (!c, index, index, index, index) -> (index, index, index, index)
        """ + "\n".join(f"""
        %v{i} = arith.index_cast %r#{i} : index to i32
        "tk.store"(%out, %v{i}, %c0, %c0, %c0, %c{i}) {{clip, elements}} : (!o, i32, index, index, index, index) -> ()"""
                        for i in range(4)),
        aliases={"c": "!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, -1 : i64>",
                 "o": "!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 4 : i64>"})
    count = np.array(counts, np.int32).reshape(1, 1, 1, -1)
    for t in range(0, 16):
        out = np.full((1, 1, 1, 4), -7, np.int32)
        run(m, [count, out, t])
        assert out.ravel().tolist() == _reference(counts, t, groups, 2, 3, 4), t


def _kernel(**kw):
    def k(count: gl(i32, 1, 1, 1, "E"), o: gl(i32, 1, "E", "Y", "X")):
        store(o, tkc.block_idx.x, at=(0, tkc.block_idx.z, tkc.block_idx.y, 0), clip=True)
    return tkc.kernel(k, warps=1, grid=lambda count, o: (o.c, o.r, o.d), **kw)


@pytest.mark.parametrize("kw, message", [
    (dict(ragged=("count", 4)), "ragged needs persistent=True"),
    (dict(persistent=True, ragged=("count", 0)), "ragged must be (count, rows)"),
    (dict(persistent=True, ragged="count"), "ragged must be (count, rows)"),
    (dict(persistent=True, ragged=("n", 4)), "'n' is not an argument of the kernel"),
])
def test_refusals_at_the_def(kw, message):
    with pytest.raises(TkcError) as info:
        _kernel(**kw)
    assert message in info.value.message and info.value.where.startswith(__file__)


def test_count_must_be_an_i32_gl_the_kernel_does_not_write():
    def floats(count: gl(tkc.f32, 1, 1, 1, "E"), o: gl(i32, 1, "E", "Y", "X")):
        store(o, 1, at=(0, tkc.block_idx.z, tkc.block_idx.y, 0), clip=True)
    k = tkc.kernel(floats, warps=1, persistent=True, ragged=("count", 4), grid=lambda count, o: (o.r, o.d))
    with pytest.raises(TkcError, match="count 'count' must be an i32 gl") as info:
        k.interpret(np.zeros((1, 1, 1, 2), np.float32), np.zeros((1, 2, 4, 1), np.int32))
    assert info.value.where.startswith(__file__)

    def writes(count: gl(i32, 1, 1, 1, "E"), o: gl(i32, 1, "E", "Y", "X")):
        store(count, 0, at=(0, 0, 0, tkc.block_idx.z), clip=True)
    k = tkc.kernel(writes, warps=1, persistent=True, ragged=("count", 4), grid=lambda count, o: (o.r, o.d))
    with pytest.raises(TkcError, match="the kernel writes its count gl 'count'"):
        k.interpret(np.zeros((1, 1, 1, 2), np.int32), np.zeros((1, 2, 4, 1), np.int32))


@pytest.mark.parametrize("counts", COUNTS, ids=str)
def test_the_traced_ir_runs_the_live_items_only(counts):
    """Before tk-grid-ordering writes the item loop, the interpreter runs the
    grid's blocks, and tk.ragged makes the dead ones work items no more: the
    traced IR and the compiled one visit the same items (tkc fuzz found the
    traced IR running them all, so tk-grid-ordering changed the outputs)."""
    Y, X = 4, 3
    count = np.array(counts, np.int32).reshape(1, 1, 1, -1)
    o = np.zeros((1, len(counts), Y, X), np.int32)
    run(ragged_visits.trace(), [count, o])
    assert o[0].tolist() == expected_visits(counts, Y, X)


def test_an_atomic_add_into_the_count_is_a_write():
    """atomic_add writes its gl: a ragged kernel may not add into its count
    (tkc fuzz found it accepted), and the manifest says the gl is written
    (the launch's check that a written gl overlaps no other argument)."""
    from tkc.ops import atomic_add

    def adds(count: gl(i32, 1, 1, 1, "E"), o: gl(i32, 1, "E", "Y", "X")):
        atomic_add(count, 1, at=(0, 0, 0, tkc.block_idx.z))
    k = tkc.kernel(adds, warps=1, persistent=True, ragged=("count", 4), grid=lambda count, o: (o.r, o.d))
    with pytest.raises(TkcError, match="the kernel writes its count gl 'count'"):
        k.interpret(np.zeros((1, 1, 1, 2), np.int32), np.zeros((1, 2, 4, 1), np.int32))

    from tkc.lowering.requirements import params

    def counter(c: gl(i32, 1, 1, 1, 4), x: gl(i32, 1, 1, 1, 4)):
        atomic_add(c, 1, at=(0, 0, 0, tkc.block_idx.x))
    module = tkc.kernel(counter, warps=1, grid=lambda c, x: (4,)).trace()
    fn = next(op for op in module.body.operations if "tk.grid" in op.attributes)
    assert [p["writes"] for p in params(fn, ["c", "x"])] == [True, False]
