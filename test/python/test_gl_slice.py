"""Index gls and gl slices, the pieces of variable-length batches: one
element of an i32 gl is an index (cumulative sequence offsets), and
`x.slice("r", start, size)` is the part of a gl one sequence owns. Ragged
accesses stop at a slice's edges (lane by lane in lanesim, and in the
interpreter); TMA loads read the argument past them; what cannot stop there
is refused at the author's line."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, i32, rt, rv, st, sv, tma
from tkc.diagnostics import TkcError
from tkc.kernels.reference import round_bf16
from tkc.ops import group_load, load, store

from lanesim import run_traced

pytest.importorskip("mlir")

CU = np.array([0, 5, 30, 33], np.int32)  # three sequences: 5, 25 and 3 rows


@tkc.kernel(warps=1, grid=lambda cu, x, o: (cu.c - 1,))
def scaled(cu: gl(i32, 1, 1, 1, None), x: gl(bf16, 1, 1, "T", 64), o: gl(bf16, 1, 1, "T", 64)):
    """o = 2 x + (b + 1) over sequence b's rows, through slices of x and o."""
    b = tkc.block_idx.x
    s = load(i32, cu, at=(0, 0, 0, b), fill=0)
    e = load(i32, cu, at=(0, 0, 0, b + 1), fill=0)
    xs, os = x.slice("r", s, e - s), o.slice("r", s, e - s)
    for t in tkc.range(tkc.cdiv(xs.r, 16)):
        v = load(rt(f32, 16, 64), xs, (0, 0, t, 0), fill=-1.0)
        store(os, v * 2.0 + (b + 1).to(f32), (0, 0, t, 0), clip=True)


def _scaled_inputs():
    x = round_bf16(np.random.default_rng(0).standard_normal((33, 64)))
    ref = np.concatenate([2 * x[CU[b]:CU[b + 1]] + b + 1 for b in range(3)])
    return x, round_bf16(ref)


def test_slices_interpreted():
    x, ref = _scaled_inputs()
    o = np.full_like(x, np.nan)
    scaled.interpret(CU, x, o)
    np.testing.assert_array_equal(o, ref)


def test_slices_simulated():
    """The lowering lane by lane: the i32 loads, the slice's origin and
    bounds (every row written once, none past a sequence's end)."""
    x, ref = _scaled_inputs()
    o = np.full_like(x, np.nan)
    run_traced(scaled, [CU, x, o], blocks=3)
    np.testing.assert_array_equal(o, ref)


def test_manifest_of_slices():
    """An i32 param; the sliced rows need no whole tiles, the columns only
    the access width (rows of 16 bytes)."""
    from tkc.compiler import TILE_PIPELINE
    from tkc.lowering.requirements import params
    from tkc.pass_pipeline import run_pipeline
    module = scaled.trace()
    run_pipeline(module, TILE_PIPELINE)  # the rows become wide: 16-byte accesses
    fn = module.body.operations[0]
    p = params(fn, ["cu", "x", "o"])
    assert p[0]["dtype"] == "i32" and not p[0]["writes"]
    assert p[1]["divisible"] == [1, 1, 1, 8] and p[2]["divisible"] == [1, 1, 1, 8]
    assert p[2]["writes"] and not p[1]["writes"]


@tkc.kernel(warps=1, grid=lambda cu, x, y: (cu.c - 1,))
def heads(cu: gl(i32, 1, 1, 1, None), x: gl(bf16, 1, 1, "T", 16), y: gl(bf16, 1, "B", 16, 16)):
    """y[b] = the first 16 rows from sequence b's start, by TMA: past a short
    sequence's end the next sequence's rows, past the tensor's end zeros."""
    b = tkc.block_idx.x
    s = load(i32, cu, at=(0, 0, 0, b), fill=0)
    xs = x.slice("r", s, load(i32, cu, at=(0, 0, 0, b + 1), fill=0) - s)
    t_s = st(bf16, 16, 16)
    tma.load(t_s, xs, (0, 0, 0, 0))
    store(y, load(rt(f32, 16, 16), t_s, (0, 0)), (0, b, 0, 0))


def test_tma_reads_past_a_slice():
    x = round_bf16(np.arange(33 * 16, dtype=np.float32).reshape(33, 16) / 64)
    y = np.full((3, 16, 16), np.nan, np.float32)
    heads.interpret(CU, x, y)
    for b in range(3):
        n = min(16, 33 - CU[b])
        np.testing.assert_array_equal(y[b, :n], x[CU[b]:CU[b] + n])
        assert (y[b, n:] == 0).all()


def test_index_loads_fill_outside():
    @tkc.kernel(warps=1, grid=lambda cu, o: (4,))
    def k(cu: gl(i32, 1, 1, 1, None), o: gl(f32, 1, 1, 1, None)):
        b = tkc.block_idx.x
        store(o, load(i32, cu, at=(0, 0, 0, b + 1), fill=-7).to(f32), at=(0, 0, 0, b), clip=True)
    o = np.zeros(16, np.float32)
    k.interpret(CU, o)
    assert o[:4].tolist() == [5, 30, 33, -7]


def _refused(kernel, args, match):
    with pytest.raises(TkcError, match=match):
        kernel.interpret(*args)


def test_accesses_through_a_slice_must_stop_at_its_edges():
    x = np.zeros((32, 64), np.float32)

    @tkc.kernel(warps=1)
    def plain(cu: gl(i32, 1, 1, 1, None), x: gl(bf16, 1, 1, None, 64)):
        xs = x.slice("r", 3, 20)
        store(x, load(rt(f32, 16, 64), xs, (0, 0, 0, 0)), (0, 0, 0, 0))
    _refused(plain, [CU, x], r"gl slice must stop at its edges: give fill=")

    @tkc.kernel(warps=1)
    def tma_out(cu: gl(i32, 1, 1, 1, None), x: gl(bf16, 1, 1, None, 64)):
        t_s = tma.load(st(bf16, 16, 64), x, (0, 0, 0, 0))
        tma.store(x.slice("r", 3, 20), t_s, (0, 0, 1, 0))   # rows 19-34: past the slice's 3-22
    _refused(tma_out, [CU, x], r"writes its whole box: the box at \(0, 0, 1, 0\) \(16x64\) must lie inside "
             r"the slice \(20x64\)")

    @tkc.kernel(warps=1)
    def group(cu: gl(i32, 1, 1, 1, None), x: gl(bf16, 1, 1, None, 64)):
        group_load(st(bf16, 16, 64), x.slice("r", 3, 20), (0, 0, 0, 0))
    _refused(group, [CU, x], r"cannot stop at its edges")


@tkc.kernel(warps=1, grid=lambda r, x, o: (3,))
def tma_rows(r: gl(i32, 1, 1, 1, None), x: gl(bf16, 1, 1, None, 64), o: gl(bf16, 1, 1, None, 64)):
    """o's 16 rows from r[b] on = x's 16 rows from 16 b on, by TMA through a slice at r[b] (a
    multiple of 8: not of the box's 16 rows); a box at tile 2 of the slice lies past o's end."""
    b = tkc.block_idx.x
    t_s = tma.load(st(bf16, 16, 64), x, (0, 0, b, 0))
    os = o.slice("r", load(i32, r, at=(0, 0, 0, b), fill=0), 16)
    tma.store(os, t_s, (0, 0, 0, 0))
    tma.store(os, t_s, (0, 0, (o.r + 15) // 16 + 1, 0))


def test_tma_stores_write_whole_boxes_through_a_slice():
    x = round_bf16(np.random.default_rng(1).standard_normal((48, 64)))
    o = np.full((56, 64), 7.0, np.float32)
    tma_rows.interpret(np.array([8, 40, 24], np.int32), x, o)
    want = np.full((56, 64), 7.0, np.float32)
    want[8:24], want[40:56], want[24:40] = x[0:16], x[16:32], x[32:48]
    np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("start", [1, 4])
def test_a_tma_box_through_a_column_slice_starts_on_16_bytes(start):
    """An f32 box at column 1 of the row is an illegal instruction on the H200 (4 runs)."""
    @tkc.kernel(warps=1)
    def k(x: gl(f32, 1, 1, 1, 256), o: gl(f32, 1, 1, 1, 64)):
        t = tma.load(sv(f32, 64), x.slice("c", start, 64), (0, 0, 0, 0))
        store(o, load(rv(f32, 64, "flat"), t), (0, 0, 0, 0))
    x, o = np.arange(256, dtype=np.float32).reshape(1, 1, 1, 256), np.zeros((1, 1, 1, 64), np.float32)
    if start % 4:
        _refused(k, [x, o], r"a TMA box starts at column 1 of a column slice \(4 bytes into the row\): TMA needs its "
                 r"first column on a 16-byte boundary \(the slice's start a multiple of 4 f32 elements\)")
    else:
        k.interpret(x, o)
        np.testing.assert_array_equal(o.ravel(), x.ravel()[start:start + 64])


def test_index_gls_are_read_by_i32_tiles_or_one_element_at_a_time():
    @tkc.kernel(warps=1)
    def tile(cu: gl(i32, 1, 1, 16, 16), x: gl(f32, 1, 1, 16, 16)):
        store(x, load(rt(f32, 16, 16), cu, (0, 0, 0, 0)), (0, 0, 0, 0))
    with pytest.raises(TkcError, match="the i32 gl cu is read and written by i32 tiles or one element"):
        tile.build()
    with pytest.raises(TkcError, match=r"one element of the f32 gl x is read as tkc.f32"):
        @tkc.kernel(warps=1)
        def wrong(x: gl(f32, 1, 1, 16, 16)):
            load(i32, x, at=(0, 0, 0, 0), fill=0)
        wrong.build()
    with pytest.raises(TkcError, match="fill of i32 values must be an integer"):
        @tkc.kernel(warps=1)
        def frac(cu: gl(i32, 1, 1, 1, 16)):
            load(i32, cu, at=(0, 0, 0, 0), fill=0.5)
        frac.build()


def test_slice_errors():
    with pytest.raises(TkcError, match=r'axis must be "r" or "c"'):
        @tkc.kernel(warps=1)
        def k(x: gl(f32, 1, None, 16, 16)):
            x.slice("d", 0, 1)
        k.build()

    @tkc.kernel(warps=1)
    def outside(x: gl(f32, 1, 1, None, 16)):
        store(x.slice("r", 40, 8), load(rt(f32, 16, 16), x, (0, 0, 0, 0)), (0, 0, 0, 0), clip=True)
    with pytest.raises(TkcError, match="the slice starts at 40, outside the gl's 32 elements along r"):
        outside.interpret(np.zeros((32, 16), np.float32))
