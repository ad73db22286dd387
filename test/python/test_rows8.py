"""8-row tiles (fragments.HALF): the fragment contract, each lowered op on
the 32-lane simulation of its IR (mma.sync from the PTX ISA's tables, not
from fragments.py), the kernels of test/gpu/test_rows8_gpu.py in the
interpreter (against numpy) and the lane simulator, the PTX forms
(mma with zero rows, ldmatrix/stmatrix .x2), and the refusals."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, rv, st, sv, warpgroup
from tkc.diagnostics import TkcError
from tkc.dialect import ops
from tkc.dialect.types import RT, RV
from tkc.frontend.kernel import kernels_in_file
from tkc.hopper import fragments
from tkc.ops import load, mma_AtB, row_sum, store, swap_layout, zero

from lanesim import bf16 as round_bf16, build, run_kernel, run_traced, to_ptx

pytest.importorskip("mlir")

GPU_FILE = Path(__file__).parents[1] / "gpu" / "test_rows8_gpu.py"
KERNELS = {k.name: k for k in kernels_in_file(GPU_FILE)}
gqa_reference = KERNELS["gqa_decode"].fn.__globals__["gqa_reference"]


def rand(shape, dtype="f32", seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return round_bf16(x) if dtype == "bf16" else x


# ---------------------------------------------------------------- the fragment contract

def test_an_8_row_tile_is_the_top_half_of_each_base_tile():
    """Each lane holds row lane // 4 of the 8, columns 2t, 2t + 1, 2t + 8, 2t + 9
    of each 16: every element once, half a 16-row tile's registers."""
    held = [fragments.tile_coord(8, 48, "row", i, lane)
            for lane in range(32) for i in range(fragments.tile_elems(8, 48))]
    assert sorted(held) == [(r, c) for r in range(8) for c in range(48)]
    assert fragments.tile_elems(8, 48) * 2 == fragments.tile_elems(16, 48)
    assert [fragments.tile_coord(8, 16, "row", i, 5) for i in range(4)] == [(1, 2), (1, 3), (1, 10), (1, 11)]
    assert [fragments.vec_coord(8, "col", 0, lane) for lane in range(32)] == [lane // 4 for lane in range(32)]


# ---------------------------------------------------------------- each op, lane by lane

V8 = RT("f32", 8, 48, "row")


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("name", ["row_max", "row_sum", "col_max", "col_sum"])
def test_reductions(name):
    rows = name.startswith("row")
    vec = V8.col_vec("f32") if rows else V8.row_vec("f32")
    x, init = rand(V8.shape), rand(vec.shape, seed=1)
    op = np.max if name.endswith("max") else np.sum
    want = op(x.astype(np.float64), axis=1 if rows else 0)
    want = np.maximum(want, init) if name.endswith("max") else want + init
    out, = run_kernel([V8, vec], [vec], lambda t, i: [ops.reduce(name, t, init=i)], [x, init])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("name", ["add_row", "div_row", "sub_col", "mul_col"])
def test_broadcasts(name):
    rows = name.endswith("_row")
    vec = V8.col_vec() if rows else V8.row_vec()
    x, v = rand(V8.shape), rand(vec.shape, seed=1) + 4
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[name[:3]]
    out, = run_kernel([V8, vec], [V8], lambda t, u: [ops.broadcast(name, t, u)], [x, v])
    np.testing.assert_allclose(out, ref(x, v[:, None] if rows else v[None, :]), rtol=1e-6)


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("dynamic", [False, True])
def test_picks(dynamic):
    from mlir import ir
    from mlir.dialects import arith
    x = rand(V8.shape)
    for name, k in [("row_pick", 0), ("row_pick", 9), ("row_pick", 47), ("col_pick", 0), ("col_pick", 7)]:
        rows = name == "row_pick"

        def body(t, k=k, name=name):
            at = arith.constant(ir.IndexType.get(), k)
            return [ops.pick(name, t, arith.addi(ops.worker_id("warpid"), at) if dynamic else at)]
        out, = run_kernel([V8], [V8.col_vec() if rows else V8.row_vec()], body, [x])
        np.testing.assert_array_equal(out, x[:, k] if rows else x[k, :])


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("axis", [0, 1])
def test_roll(axis):
    x = rand(V8.shape)
    for shift in (1, 3, 7, 9, -5):
        out, = run_kernel([V8], [V8], lambda t, s=shift: [ops.roll(t, s % V8.shape[axis], axis)], [x])
        np.testing.assert_array_equal(out, np.roll(x, shift, axis=axis), err_msg=f"shift {shift}")


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("half", [0, 1])
def test_subtile_of_a_16_row_tile(half):
    """An 8-row part of a 16-row tile is the top (k = 0, 1, 4, 5) or bottom
    (k = 2, 3, 6, 7) half of its base tiles: no data moves."""
    whole = RT("bf16", 32, 32, "row")
    part = RT("bf16", 8, 16, "row")
    x = rand(whole.shape, "bf16")
    for i, j in [(half, 0), (2 + half, 1)]:
        out, = run_kernel([whole], [part], lambda t, i=i, j=j: [ops.subtile(part.mlir(), t, *[
            ops_index(n) for n in (i, j)])], [x])
        np.testing.assert_array_equal(out, x[8 * i:8 * i + 8, 16 * j:16 * j + 16])


def ops_index(n):
    from mlir import ir
    from mlir.dialects import arith
    return arith.constant(ir.IndexType.get(), n)


@pytest.mark.usefixtures("lane_major_io")
@pytest.mark.parametrize("name,b_shape,n", [("mma_ab", (32, 48), 48), ("mma_abt", (48, 32), 48)])
def test_mma_with_8_row_a_and_c(name, b_shape, n):
    """m16n8k16 with rows 8-15 zero in (a1, a3, c2, c3) and dropped out."""
    av, cv = RT("bf16", 8, 32, "row"), RT("f32", 8, n, "row")
    bv = RT("bf16", *b_shape, "col" if name == "mma_ab" else "row")
    a, b, c = rand(av.shape, "bf16"), rand(bv.shape, "bf16", 1), rand(cv.shape, seed=2)
    out, = run_kernel([av, bv, cv], [cv], lambda x, y, z: [ops.mma(name, x, y, z)], [a, b, c])
    bm = b if name == "mma_ab" else b.T
    np.testing.assert_allclose(out, a.astype(np.float64) @ bm + c, rtol=1e-4, atol=1e-4)


def test_mma_runs_m16n8k16_with_zero_rows():
    av, bv, cv = RT("bf16", 8, 16, "row"), RT("bf16", 16, 16, "col"), RT("f32", 8, 16, "row")
    ptx = to_ptx(build([av, bv, cv], [cv], lambda x, y, z: [ops.mma("mma_ab", x, y, z)]))
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 2, ptx


# ---------------------------------------------------------------- the kernels of the GPU tests

def _gqa_inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (round_bf16(rng.standard_normal(s)).astype(np.float32) for s in
               ((2, 3, 8, 64), (2, 3, n, 64), (2, 3, n, 64)))
    return q, k, v


@pytest.mark.parametrize("n", [64, 100, 7])
def test_gqa_decode_interpreted_against_numpy(n):
    """The motivating example: 8 query heads of a KV head as one 8-row tile,
    through TMA and shared memory, N ragged (zeros past it, masked)."""
    q, k, v = _gqa_inputs(n)
    o = np.full((2, 3, 8, 64), np.nan, np.float32)
    KERNELS["gqa_decode"].interpret(q, k, v, o, 0.125)
    np.testing.assert_allclose(o, gqa_reference(q, k, v, 0.125), atol=2e-2, rtol=2e-2)  # P and O in bf16


@pytest.mark.parametrize("n", [100, 7])
def test_gqa_decode_in_registers_interpreted_and_simulated(n):
    q, k, v = _gqa_inputs(n, seed=1)
    want = gqa_reference(q, k, v, 0.125)
    o = np.full((2, 3, 8, 64), np.nan, np.float32)
    KERNELS["gqa_decode_regs"].interpret(q, k, v, o, 0.125)
    np.testing.assert_allclose(o, want, atol=1e-2, rtol=1e-2)   # P in bf16
    sim = np.full_like(o, np.nan)
    run_traced(KERNELS["gqa_decode_regs"], [q, k, v, sim], blocks=(3, 2), scalars=(0.125,))
    np.testing.assert_allclose(sim, o, atol=1e-5, rtol=1e-5)


def _ops_inputs(r=21, c=100):
    x = rand((r, c), seed=3)
    w = rand((64, 32), "bf16", seed=4)
    return x, w, np.zeros((8, r, c), np.float32), np.zeros((3, -(-c // 64) * 8 + 8, c), np.float32)


def test_rows8_ops_interpreted_and_simulated():
    """Every op of rows8_ops on ragged 21 x 100 inputs: the interpreter against
    numpy where it is plain, and the lowered kernel (simulated) against the
    interpreter everywhere."""
    x, w, out, vec = _ops_inputs()
    KERNELS["rows8_ops"].interpret(x, w, out, vec)
    pad = np.full((24, 128), 0.5, np.float32)
    pad[:21, :100] = x
    t = pad.reshape(3, 8, 2, 64)                       # (row block, row, col block, col)
    np.testing.assert_allclose(out[0], (np.exp(pad) * 0.5 - pad)[:21, :100], rtol=2e-6, atol=1e-6)
    rs = t.sum(3).transpose(2, 0, 1).reshape(2, 24)   # tile (by, bx)'s row sums at row bx, cols 8 by..
    np.testing.assert_allclose(vec[0, :2, :24], rs, rtol=1e-5)
    np.testing.assert_allclose(vec[1, :3, :100], t.max(1).reshape(3, 128)[:, :100])
    sim_out, sim_vec = np.zeros_like(out), np.zeros_like(vec)
    run_traced(KERNELS["rows8_ops"], [x, w, sim_out, sim_vec], blocks=(2, 3))
    np.testing.assert_allclose(sim_out, out, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sim_vec, vec, rtol=1e-5, atol=1e-5)


def test_rows8_shared_interpreted():
    a = rand((48, 64), "bf16", seed=5)
    o, f = np.zeros((48, 64), np.float32), np.zeros((2, 24, 64), np.float32)
    KERNELS["rows8_shared"].interpret(a, o, f)
    np.testing.assert_array_equal(o, round_bf16(a * 2))
    rows = a.reshape(3, 2, 8, 64)[:, 1].reshape(24, 64)   # each block's rows 8..15
    np.testing.assert_array_equal(f[0], rows + 1)
    np.testing.assert_array_equal(f[1], (rows + 1) * 3)


def test_shared_moves_are_x2_and_tma_boxes_8_rows(tmp_path):
    """ldmatrix/stmatrix of an 8-row bf16 tile are the .x2 forms; the TMA
    boxes of the 8-row sts are 8 rows."""
    from tkc.compiler import compile_to
    module = KERNELS["rows8_shared"].trace()
    with module.context:
        ptx = compile_to(module, "ptx")
    assert "ldmatrix.sync.aligned.m8n8.x2.shared.b16" in ptx
    assert "stmatrix.sync.aligned.m8n8.x2.shared.b16" in ptx
    assert "m8n8.x4" not in ptx


@tkc.kernel(warps=2)
def _halves_of_one_sv(x: gl(f32, 1, 1, 16, 16), y: gl(f32, 1, 1, 1, 16)):
    """Each warp's row sums of its 8 rows into its half of one sv of 16 (the
    race check's cells are 8 long: the halves are disjoint), then the other's."""
    s = sv(f32, 16)
    w = tkc.warpid()
    store(s, row_sum(load(rt(f32, 8, 16), x, (0, 0, w, 0))), (w,))
    tkc.sync()
    store(y, load(rv(f32, 8), s, ((w + 1) % 2,)) * 2.0, (0, 0, 0, (w + 1) % 2))


def test_two_warps_8_long_vectors_share_an_sv_without_a_race():
    """(tkc fuzz --seed 5 found the race check's 16-long sv cells calling this a race.)"""
    x = rand((16, 16), seed=6)
    y = np.zeros((1, 16), np.float32)
    _halves_of_one_sv.interpret(x, y)
    np.testing.assert_allclose(y[0], x.sum(1) * 2, rtol=1e-6)


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("make,text", [
    (lambda: rt(bf16, 8, 64, "col"), "an 8-row rt is row layout only"),
    (lambda: rt(f32, 24, 64), "rt rows must be 8 or a positive multiple of 16"),
    (lambda: rt(f32, 8, 8), "rt cols must be a positive multiple of 16"),
    (lambda: rv(f32, 8, "row"), "rv length must be a positive multiple of 16"),
])
def test_shapes_refused_at_the_authors_line(make, text):
    with pytest.raises(TkcError, match=text):
        make()


@tkc.kernel(warps=1)
def _swap8(x: gl(bf16, 1, 1, 8, 64), y: gl(bf16, 1, 1, 8, 64)):
    store(y, swap_layout(load(rt(bf16, 8, 64), x, (0, 0, 0, 0))), (0, 0, 0, 0))


@tkc.kernel(warps=1)
def _mma_k8(a: gl(bf16, 1, 1, 8, 16), c: gl(f32, 1, 1, 16, 16)):
    t = load(rt(bf16, 8, 16), a, (0, 0, 0, 0))
    acc = zero(rt(f32, 16, 16))
    mma_AtB(acc, t, t, acc)      # K = 8: a K x M col-layout tile of 8 rows
    store(c, acc, (0, 0, 0, 0))


@tkc.kernel(warps=4)
def _wgmma8(a: gl(bf16, 1, 1, 64, 64), c: gl(f32, 1, 1, 32, 64)):
    a_s = st(bf16, 64, 64)
    acc = zero(rt(f32, 8, 64))
    warpgroup.mma_ABt(acc, a_s, a_s)
    warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, tkc.warpid(), 0))


@pytest.mark.parametrize("kernel,text", [
    (_swap8, "8-row rt is row layout only"),
    (_mma_k8, r"mma_atb: a must be a col-layout rt, got rt<bf16, 8, 16, row>, and an 8-row rt is row layout "
              r"only \(K = 8"),
    (_wgmma8, "8-row tiles are warp-level only"),
])
def test_what_the_hardware_cannot_do_is_a_located_error(kernel, text):
    from tkc.compiler import compile_to
    with pytest.raises(TkcError, match=text) as info:
        module = kernel.trace()
        with module.context:
            compile_to(module, "tile")
    assert "test_rows8.py" in str(info.value)
