"""The 8-bit float test kernels, shared by the interpreter tests
(test_fp8.py) and the GPU's (test/gpu/test_fp8_gpu.py): imports tkc only, so
a GPU machine without MLIR imports it too."""
from __future__ import annotations

import tkc
from tkc import bf16, f8e4m3, f8e5m2, f32, gl, rt, st, tma, warpgroup
from tkc.ops import load, store, zero


@tkc.kernel(warps=2, grid=lambda x, q4, q5, back: (x.r // 32,))
def convert(x: gl(f32, 1, 1, "N", 64), q4: gl(f8e4m3, 1, 1, "N", 64), q5: gl(f8e5m2, 1, 1, "N", 64),
            back: gl(bf16, 1, 2, "N", 64)):
    i = tkc.block_idx.x * 2 + tkc.warpid()
    t = load(rt(f32, 16, 64), x, (0, 0, i, 0))
    store(q4, t.to(f8e4m3), (0, 0, i, 0))
    store(q5, t.to(bf16).to(f8e5m2), (0, 0, i, 0))           # bf16 -> e5m2: one more rounding
    store(back, load(rt(f8e4m3, 16, 64), q4, (0, 0, i, 0)).to(bf16), (0, 0, i, 0))
    store(back, load(rt(f8e5m2, 16, 64), q5, (0, 0, i, 0)).to(f32).to(bf16), (0, 1, i, 0))


@tkc.kernel(warps=1, grid=lambda a, o: (tkc.cdiv(a.c, 256), tkc.cdiv(a.r, 64)))
def tma_roundtrip(a: gl(f8e5m2, 1, 1, "M", "N"), o: gl(f8e5m2, 1, 1, "M", "N")):
    x, y = tkc.block_idx.x, tkc.block_idx.y
    s = st(f8e5m2, 64, 256)                 # two 128-byte swizzle panels: two TMA boxes of 64 x 128
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, a, (0, 0, y, x), bar)
    tkc.wait(bar, 0)
    tma.store_async(o, s, (0, 0, y, x))
    tma.store_async_wait()


@tkc.kernel(warps=4, grid=lambda a, b, c: (tkc.cdiv(c.c, 64), tkc.cdiv(c.r, 64)))
def mma_f8(a: gl(f8e4m3, 1, 1, "M", "K"), b: gl(f8e5m2, 1, 1, "N", "K"), c: gl(f32, 1, 1, "M", "N")):
    """C = A B^T, B given N x K (K-major, as FP8 wgmma needs); K tiles of 128."""
    x, y, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
    a_s, b_s = st(f8e4m3, 64, 128), st(f8e5m2, 64, 128)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(tkc.cdiv(a.c, 128), stages=2):
        tma.load(a_s, a, (0, 0, y, k))
        tma.load(b_s, b, (0, 0, x, k))
        warpgroup.mma_ABt(acc, a_s, b_s)
        warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, y * 4 + w, x), clip=True)


@tkc.kernel(warps=1, grid=lambda x, q: (tkc.cdiv(q.c, 64), tkc.cdiv(q.r, 16)))
def store_ragged(x: gl(f32, 1, 1, "M", "N"), q: gl(f8e4m3, 1, 1, "M", "N")):
    """A wide 8-bit tile stored clipped at ragged rows and columns (16-byte
    pieces: N a multiple of 16, the launch requirement)."""
    j, i = tkc.block_idx.x, tkc.block_idx.y
    t = load(rt(f32, 16, 64, "wide"), x, (0, 0, i, j), fill=0.0)
    store(q, t.to(f8e4m3), (0, 0, i, j), clip=True)


@tkc.kernel(warps=4, grid=lambda a, b, c: (tkc.cdiv(c.c, 64), a.r // 64))
def mma_f8_lanes(a: gl(f32, 1, 1, "M", 64), b: gl(f8e4m3, 1, 1, "N", 64), c: gl(f32, 1, 1, "M", "N")):
    """C = A8 B^T with A rounded to e4m3 in registers (as attention's P) and
    fed to wgmma as it lies, k_order="lanes": per 32 columns, A's column
    fp8_lane_order()[p] meets B's column p (M a multiple of 64)."""
    x, y, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
    b_s = st(f8e4m3, 64, 64)
    tma.load(b_s, b, (0, 0, x, 0))
    a8 = load(rt(f32, 16, 64), a, (0, 0, y * 4 + w, 0)).to(f8e4m3)
    acc = zero(rt(f32, 16, 64))
    warpgroup.mma_ABt(acc, a8, b_s, k_order="lanes")
    warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, y * 4 + w, x), clip=True)


def shared_load(W: int):
    """An 8-bit tile through shared memory: in by TMA (a W-byte row: W's
    swizzle), each warp's 16 rows into registers (byte pairs by ld.shared),
    out to a gl whole, clipped at M's ragged edge."""
    @tkc.kernel(name=f"fp8_shared_load_{W}", warps=4, grid=lambda a, o: (tkc.cdiv(a.r, 64),))
    def fp8_shared_load(a: gl(f8e4m3, 1, 1, "M", W), o: gl(f8e4m3, 1, 1, "M", W)):
        s = st(f8e4m3, 64, W)
        tma.load(s, a, (0, 0, tkc.block_idx.x, 0))
        w = tkc.warpid()
        store(o, load(rt(f8e4m3, 16, W), s, (w, 0)), (0, 0, tkc.block_idx.x * 4 + w, 0), clip=True)
    return fp8_shared_load


SHARED_LOADS = {W: shared_load(W) for W in (32, 64, 128, 256)}


@tkc.kernel(warps=1, grid=lambda a, o16, o8: (1,))
def shared_load_at(a: gl(f8e4m3, 1, 1, 32, 64), o16: gl(f8e4m3, 1, 1, 16, 32), o8: gl(f8e4m3, 1, 1, 8, 32)):
    """Subtiles of an 8-bit st at a column offset (inside a 64-byte swizzle
    row) and an 8-row one, into registers and out: a[16:, 32:] and a[24:, 32:]."""
    s = st(f8e4m3, 32, 64)
    tma.load(s, a, (0, 0, 0, 0))
    store(o16, load(rt(f8e4m3, 16, 32), s, (1, 1)), (0, 0, 0, 0))
    store(o8, load(rt(f8e4m3, 8, 32), s, (3, 1)), (0, 0, 0, 0))
