"""The library GEMM on Hopper: C = A @ B (or A @ B^T, nn.Linear's layout).

A (M x K) and B (K x N, or N x K) bf16, f32 accumulation, C bf16 or f32.
Written as a plain pipelined loop (docs/pipelining.md): tk-pipeline-staging
makes the producer warpgroup, the TMA ring and its mbarriers, and keeps each
wgmma in flight into the next iteration; tk-grid-ordering makes it persistent
(one block per SM) in L2-friendly super-rows. No barrier is written here.

A block computes a 128 x BN tile of C with two consumer warpgroups (each its
64 rows: a subtile of the A stage) over K steps of 64; the finish goes
through two shared tiles of 128 x EPI by TMA stores, so a work item's stores
overlap the next item's main loop. TMA zero-fills and clips, so M, N and K
need not be multiples of the tile: only rows of 16 bytes (K and N multiples
of 8 for bf16).
"""

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import subtile, zero

BM, BK = 128, 64
EPILOGUE_BYTES = 16384  # one finish tile: 128 x 64 bf16 or 128 x 32 f32


def gemm_hopper(out_dtype: str = bf16, transpose_b: bool = False, BN: int = 256,
                stages="auto", persistent: bool = True, order: str = "auto",
                epilogue: tuple | None = None):
    """epilogue=(cols, buffers): the finish tiles (default: 16 KiB ones, two of them)."""
    default = (EPILOGUE_BYTES // (BM * (2 if out_dtype == bf16 else 4)), 2)
    epi, buffers = epilogue or default
    name = "_".join(x for x in (
        f"gemm_hopper_{out_dtype}_{'abt' if transpose_b else 'ab'}_{BM}x{BN}x{BK}",
        "" if stages == "auto" else f"s{stages}", "" if persistent else "np",
        "" if order == "auto" else order.replace("(", "").replace(")", "").replace(", ", ""),
        "" if epilogue in (None, default) else f"e{epi}x{buffers}") if x)
    b_dims = ("N", "K") if transpose_b else ("K", "N")

    @tkc.kernel(name=name, warps=8, persistent=persistent, order=order,
                grid=lambda a, b, c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM)))
    def gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, *b_dims),
             c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        a_s = st(bf16, BM, BK)
        b_s = st(bf16, BN, BK) if transpose_b else st(bf16, BK, BN)
        c_s = [st(out_dtype, BM, epi) for _ in range(buffers)]
        acc = zero(rt(f32, 16, BN))
        for k in tkc.range(tkc.cdiv(a.c, BK), stages=stages):
            tma.load(a_s, a, (0, 0, bm, k))
            if transpose_b:
                tma.load(b_s, b, (0, 0, bn, k))
                warpgroup.mma_ABt(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            else:
                tma.load(b_s, b, (0, 0, k, bn))
                warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        for j in range(BN // epi):
            out = c_s[j % buffers]
            warpgroup.store(out, subtile(acc, 16, epi, (0, j)).to(out_dtype), (wg, 0))
            tma.store(c, out, (0, 0, bm, bn * (BN // epi) + j))

    return gemm
