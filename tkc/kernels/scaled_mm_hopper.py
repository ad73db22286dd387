"""The FP8 GEMM on Hopper with scales: C = (A B^T) * scale_a * scale_b,
torch._scaled_mm's product (tkc/torchops/scaled_mm.py).

A is M x K, B is N x K (both K-major: FP8 wgmma has no transpose), e4m3; the
product accumulates in f32, is scaled in f32 and rounded once to C's dtype
(bf16 or f32). Scales: per tensor (one f32 each, read from memory: the
caller's tensors stay on the GPU) or row-wise (scale_a one per row of C,
scale_b one per column). Built as the bf16 library GEMM (gemm_hopper.py): a
plain pipelined loop that tk-pipeline-staging turns into a producer
warpgroup feeding a TMA ring, and tk-grid-ordering into a persistent grid;
two or three consumer warpgroups, each 64 rows of the BM x BN tile (BM 128
or 192: three warpgroups share each B tile, which the promoted kernel's
128-wide tile needs to keep the tensor cores fed: at 8192^3 on the H200,
192 x 128 reads 1152-1159 TFLOP/s where 128 x 128 reads 1056-1070). A K step is 128
elements: one 128-byte swizzle row, four k32 wgmmas. TMA zero-fills past
the edges, so M, N and K need only 16-byte rows (K a multiple of 16, N of
8 for bf16 C).

FP8 wgmma adds its products into the accumulator with fewer bits than f32
(about 14: DeepSeek-V3's report), which loses accuracy as K grows. Unless
fast_accum, each K step's four wgmmas go into a zeroed partial tile, added
to the f32 accumulator after them (promotion, as DeepGEMM and cuBLAS
without use_fast_accum): the error stays at one K step's, for a second
accumulator's registers and a wait each step.

Row scales for a warp's 16 rows are loaded before the loop (two registers
a lane); a column chunk's scales in the finish, per chunk, so the 256
columns' worth is never live beside the accumulator (a "row" vector of 256
takes 64 registers a lane).
"""

import tkc.dsl as tkc
from tkc.dsl import bf16, f8e4m3, f32, gl, rt, rv, st, tma, warpgroup
from tkc.ops import load, mul_col, mul_row, subtile, zero

BM, BK = 128, 128      # the default tile height; a K step
EPILOGUE_BYTES = 16384  # one finish tile: 128 x 64 bf16 or 128 x 32 f32
PROMOTED_BN = 128       # the promoted kernel's widest tile: 192 and 256 spill (356 and 1328 bytes: ptxas -v)
# what tkc.scaled_mm tunes over (tkc/torchops/scaled.py; the library builds each), the default first:
HEIGHTS = (128, 192)    # the promoted tiles' BM (block scales' too)
FAST_WIDTHS = (256, 128)   # use_fast_accum's BN (at BM 128)


def scaled_mm_hopper(out_dtype: str = bf16, rowwise: bool = False, BN: int = PROMOTED_BN, stages="auto",
                     persistent: bool = True, fast_accum: bool = False, BM: int = 128):
    """The kernel for one specialisation; its arguments, in order:

        a        gl(f8e4m3, 1, 1, M, K)
        b        gl(f8e4m3, 1, 1, N, K)     B^T as stored (torch's column-major b)
        scale_a  gl(f32, 1, 1, 1, M) rowwise, else gl(f32, 1, 1, 1, 1)
        scale_b  gl(f32, 1, 1, 1, N) rowwise, else gl(f32, 1, 1, 1, 1)
        c        gl(out_dtype, 1, 1, M, N)
    """
    if BM not in (128, 192):
        raise ValueError(f"scaled_mm_hopper: BM is 128 or 192 (two or three consumer warpgroups of 64 rows), got {BM}")
    epi = 1 << ((EPILOGUE_BYTES // (BM * (2 if out_dtype == bf16 else 4))).bit_length() - 1)
    if not (0 < BN <= 256 and BN % epi == 0):
        raise ValueError(f"scaled_mm_hopper: BN must be a multiple of {epi} up to 256, got {BN}")
    if not fast_accum and BN > PROMOTED_BN:
        raise ValueError(f"scaled_mm_hopper: the promoted kernel holds two accumulators of 16 x BN "
                         f"f32 a warp: BN up to {PROMOTED_BN} fits the registers, got {BN} (or fast_accum=True)")
    name = "_".join(x for x in (f"scaled_mm_hopper_{out_dtype}_{'rowwise' if rowwise else 'tensor'}",
                                f"{BM}x{BN}x{BK}", "" if stages == "auto" else f"s{stages}",
                                "" if persistent else "np", "fast" if fast_accum else "") if x)
    SA = gl(f32, 1, 1, 1, "M") if rowwise else gl(f32, 1, 1, 1, 1)
    SB = gl(f32, 1, 1, 1, "N") if rowwise else gl(f32, 1, 1, 1, 1)

    def scaled_mm(a: gl(f8e4m3, 1, 1, "M", "K"), b: gl(f8e4m3, 1, 1, "N", "K"), scale_a: SA,
                  scale_b: SB, c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm, wg, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid(), tkc.warpid() % 4
        a_s, b_s = st(f8e4m3, BM, BK), st(f8e4m3, BN, BK)
        c_s = [st(out_dtype, BM, epi) for _ in range(2)]
        if rowwise:   # this warp's 16 rows of C; rows past M read 0 (not stored anyway)
            rows = load(rv(f32, 16, "col"), scale_a, (0, 0, 0, bm * (BM // 16) + wg * 4 + w), fill=0.0)
        acc = zero(rt(f32, 16, BN))
        for k in tkc.range(tkc.cdiv(a.c, BK), stages=stages):
            tma.load(a_s, a, (0, 0, bm, k))
            tma.load(b_s, b, (0, 0, bn, k))
            if fast_accum:
                warpgroup.mma_ABt(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
                warpgroup.mma_async_wait(acc)
            else:   # promotion: this step's products in f32 apart, then added
                part = zero(rt(f32, 16, BN))
                warpgroup.mma_ABt(part, subtile(a_s, 64, BK, (wg, 0)), b_s)
                warpgroup.mma_async_wait(part)
                acc = acc + part
        if not rowwise:   # read after the loop: a value live across it costs 3 consumer warpgroups spills
            s = load(f32, scale_a, at=(0, 0, 0, 0), fill=0.0) * load(f32, scale_b, at=(0, 0, 0, 0), fill=0.0)
        for j in range(BN // epi):
            x = subtile(acc, 16, epi, (0, j))
            if rowwise:
                cols = load(rv(f32, epi, "row"), scale_b, (0, 0, 0, bn * (BN // epi) + j), fill=0.0)
                y = mul_col(mul_row(x, rows), cols)
            else:
                y = x * s
            out = c_s[j % 2]
            warpgroup.store(out, y.to(out_dtype), (wg, 0))
            tma.store(c, out, (0, 0, bm, bn * (BN // epi) + j))

    return tkc.kernel(name=name, warps=BM // 16, persistent=persistent, order="auto",
                      grid=lambda c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM)))(scaled_mm)
