"""The block-scaled FP8 GEMM on Hopper (DeepSeek-V3's recipe, DeepGEMM's
kernel): C[M, N] = sum over K blocks kb of (A_kb B_kb^T) * sa[m, kb] * sb[n // 128, kb].

A is M x K e4m3 with 1x128 scales (one a row and 128 columns: what
quantize_fp8.py writes), B is N x K e4m3 (K-major) with 128x128 scales (one
a block of 128 rows and 128 columns: weights quantised offline). K is a
multiple of 128. C is bf16 or f32.

The structure is the promoted scaled_mm_hopper's (a producer warpgroup's
TMA ring, two consumer warpgroups of 64 rows, a persistent grid), with the
scales moved into the loop: each K step's four k32 wgmmas go into a zeroed
partial tile, and the partial joins the f32 accumulator scaled,

    acc = fma(part, sa_rows * sb, acc)          (one FFMA an element)

so the block scales cost no more than promotion already did. The tile is
128 wide (BN = 128): one weight-scale block a tile, so sb is one scalar a K
step. 256 (two blocks) would need a second row of scales, but the
two-accumulator kernel already spills at 192 and 256 (scaled_mm_hopper's
PROMOTED_BN), so it is 128 only.

The scales ride the TMA ring with the operands' tiles. Row scales
(DeepGEMM's way): step kb's BM row scales of the tile are one contiguous
run of the transposed sa [K/128, M] (row kb, columns bm * BM..), a 1-D box
into an sv of the stage; each warp reads its 16 (two floats a lane) from
shared memory. The weight scale: the 16-float box of sb's row bn around
column kb (sb [N/128, K/128]: columns kb - kb % 16 ..), read as one element
(kb % 16) of its sv by every lane. Read from global memory by the
consumers instead (this kernel's first form), every step paid 64-bit
address arithmetic and bounds compares for the ragged edges: 168 SASS
instructions a consumer step against the per-tensor kernel's 125, 1.12 ms
against 0.86 at the same issue rate (ncu at 8192^3, BENCHMARKS.md);
prefetching those loads a step ahead measured no faster: the instruction
count was the cost. From shared memory there is nothing to check: TMA
zero-fills a box past the scales' ends (rows past M: A's rows there are
zeros too). TMA needs the scales' rows of 16 bytes: M and K/128
multiples of 4; the ops (tkc.torchops.scaled.tma_scales) pad a scale
tensor's rows with zeros where they are not (a copy of a few KB to MB:
so the scale gls have their own widths, MS and KBS). At BM 192 the svs
cost the ring its fifth stage (233 KB with two finish tiles): four
stages, whose slot arithmetic is a mask where five's is a division. The
consumer step is then 9 SASS instructions longer than the per-tensor
kernel's at four stages (124 against 115: three LDS, their addresses, the
two products sa * sb); at BM 128 (five stages) 138 against 118.
"""

import tkc.dsl as tkc
from tkc.dsl import f8e4m3, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.ops import fma, load, store, subtile, where, zero

from .scaled_mm_hopper import BK, BM, EPILOGUE_BYTES

BN = 128   # one 128-wide block of B's scales a tile (see above)


def scaled_mm_blockwise(out_dtype: str = "bf16", stages="auto", persistent: bool = True, BM: int = BM):
    """The kernel (BM: 128 or 192 rows, two or three consumer warpgroups, as
    scaled_mm_hopper's); its arguments, in order:

        a        gl(f8e4m3, 1, 1, M, K)
        b        gl(f8e4m3, 1, 1, N, K)       B^T as stored (torch's column-major b)
        scale_a  gl(f32, 1, 1, K/128, MS)     transposed: row kb holds every row's scale; MS >= M
                                              a multiple of 4 (TMA's 16-byte rows), zeros past M
        scale_b  gl(f32, 1, 1, ceil(N/128), KBS)   KBS >= K/128 a multiple of 4, zeros past K/128
        c        gl(out_dtype, 1, 1, M, N)
    """
    def scaled_mm(a: gl(f8e4m3, 1, 1, "M", "K"), b: gl(f8e4m3, 1, 1, "N", "K"),
                  scale_a: gl(f32, 1, 1, "KB", "MS"), scale_b: gl(f32, 1, 1, "NB", "KBS"),
                  c: gl(out_dtype, 1, 1, "M", "N")):
        tile(shared(out_dtype, BM), a, b, scale_a, scale_b, c, 0, 0, tkc.block_idx.y, tkc.block_idx.x, stages)

    if BM not in (128, 192):
        raise ValueError(f"scaled_mm_blockwise: BM is 128 or 192 (two or three consumer warpgroups), got {BM}")
    return tkc.kernel(name=_name("scaled_mm_blockwise", out_dtype, stages, persistent, BM), warps=BM // 16,
                      persistent=persistent, order="auto", divisible={"K": BK},
                      grid=lambda c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM)))(scaled_mm)


def _name(what: str, out_dtype: str, stages, persistent: bool, rows: int = BM) -> str:
    return "_".join(x for x in (f"{what}_{out_dtype}_{rows}x{BN}x{BK}", "" if stages == "auto" else f"s{stages}",
                                "" if persistent else "np") if x)


def shared(out_dtype: str, rows: int = BM):
    """tile's shared memory (allocated at a kernel's top level): A's and B's stage, C's two
    finish tiles (rows: the tile's, BM by default)."""
    epi = 1 << ((EPILOGUE_BYTES // (rows * (2 if out_dtype == "bf16" else 4))).bit_length() - 1)
    return (st(f8e4m3, rows, BK), st(f8e4m3, BN, BK), sv(f32, rows), sv(f32, 16),
            [st(out_dtype, rows, epi) for _ in range(2)])


def tile(smem, a, b, scale_a, scale_b, c, ga, gb, bm, bn, stages, live=None, row=None, clipped=None):
    """C's 128 x 128 tile (bm, bn) in the shared memory `smem` (shared()): a, scale_a and c
    at d = ga, b and scale_b at d = gb (the group: 0 for one GEMM; kernels/scaled_mm_grouped.py).
    Unless `live` (a condition) holds, no K steps and no stores (a pipelined loop cannot sit
    in an if: the producer warp walks it on its own; its trip count can be 0). row: C's row
    block the tile leaves by (bm unless given: a tile of a and scale_a sliced at its first row
    has bm 0 and may leave through c sliced there too). clipped=(cond, g): where cond holds,
    the tile also leaves through the gl slice g at its first row, from registers, clipped to
    g's rows (a tile whose rows end inside it)."""
    a_s, b_s, sa_s, sb_s, c_s = smem
    rows = a_s.rows   # the tile's: 128 or 192
    wg, w = tkc.warpgroupid(), tkc.warpid() % 4
    acc = zero(rt(f32, 16, BN))
    steps = a.c // BK if live is None else where(live, a.c // BK, 0)
    for k in tkc.range(steps, stages=stages):
        tma.load(a_s, a, (0, ga, bm, k))
        tma.load(b_s, b, (0, gb, bn, k))
        tma.load(sa_s, scale_a, (0, ga, k, bm))
        tma.load(sb_s, scale_b, (0, gb, bn, k // 16))
        # this warp's 16 rows of step k (TMA zero-filled past M), and the tile's weight scale
        sa = load(rv(f32, 16, "col"), sa_s, (wg * 4 + w,))
        s = load(f32, sb_s, at=(k % 16,))
        part = zero(rt(f32, 16, BN))
        warpgroup.mma_ABt(part, subtile(a_s, 64, BK, (wg, 0)), b_s)
        warpgroup.mma_async_wait(part)
        acc = fma(part, sa * s, acc)
    # a dead tile's stores go to the row block past c's end, which TMA clips whole (a
    # tma.store cannot sit in an if either: warp 0 counts every store)
    row = bm if row is None else row
    _finish(c_s, acc, c, ga, row if live is None else where(live, row, (c.r + rows - 1) // rows), bn, clipped)


def _finish(c_s, acc, c, ga, bm, bn, clipped):
    """The tile's result through two shared finish tiles to c, by TMA (row block bm), and
    (clipped = (cond, g), where cond holds) from registers to the slice g, clipped to its
    rows: in a branch, whose address arithmetic ptxas then keeps to it (unconditional, its
    four chunks' addresses were live at once: 28 bytes of spills at 192 rows)."""
    epi, wg = c_s[0].cols, tkc.warpgroupid()
    for j in range(BN // epi):
        out, chunk = c_s[j % 2], subtile(acc, 16, epi, (0, j)).to(c.dtype)
        warpgroup.store(out, chunk, (wg, 0))
        col = bn * (BN // epi) + j
        tma.store(c, out, (0, ga, bm, col))
        if clipped is not None:
            with tkc.if_(clipped[0]):   # this warp's 16 rows of the chunk
                store(clipped[1], chunk, (0, ga, wg * 4 + tkc.warpid() % 4, col), clip=True)
