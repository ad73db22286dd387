"""Hopper GEMM with producer/consumer pipelining, the paper's LCSF shape
written out by hand with tkc's primitives (tk-pipeline-staging will derive it).

C = A @ B, A (M x K), B (K x N) bf16, f32 accumulation. A block has three
warpgroups: warpgroup 0 produces (one warp issues TMA loads into a ring of
STAGES shared buffers), warpgroups 1 and 2 consume (each multiplies its 64
rows of the 128 x BN block tile with wgmma). Two mbarriers per stage connect
them: `full[s]` completes when stage s's bytes have landed, `empty[s]` when
all 8 consumer warps are done reading it. The producer gives registers away
(setmaxnreg) so each consumer thread can hold its 16 x BN accumulator.
The K loop is unrolled by STAGES at trace time: it walks a.c // (BK * STAGES)
rounds, which makes K a multiple of BK * STAGES at launch (tk.divisible).
"""
from __future__ import annotations

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import zero


def gemm_pipelined(out_dtype: str = bf16, BN: int = 256, BK: int = 64, STAGES: int = 4):
    BM = 128  # two consumer warpgroups of 64 rows

    @tkc.kernel(name=f"gemm_pipelined_{out_dtype}_{BM}x{BN}x{BK}_s{STAGES}", warps=12,
                grid=lambda a, b, c: (c.c // BN, c.r // BM))
    def gemm_pipelined_kernel(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"),
                              c: gl(out_dtype, 1, 1, "M", "N")):
        bn, bm = tkc.block_idx.x, tkc.block_idx.y
        wg, w = tkc.warpgroupid(), tkc.warpid()
        a_s = [[st(bf16, 64, BK) for _ in range(2)] for _ in range(STAGES)]
        b_s = [st(bf16, BK, BN) for _ in range(STAGES)]
        full = [tkc.barrier(count=1) for _ in range(STAGES)]
        empty = [tkc.barrier(count=8) for _ in range(STAGES)]
        rounds = a.c // (BK * STAGES)
        with tkc.if_(wg == 0):  # producer
            warpgroup.decrease_registers(40)
            with tkc.if_(w == 0):
                for r in tkc.range(rounds):
                    for s in range(STAGES):
                        k = r * STAGES + s
                        tkc.wait(empty[s], (r + 1) % 2)  # round 0: passes at once
                        tma.expect(full[s], a_s[s][0], a_s[s][1], b_s[s])
                        tma.load_async(a_s[s][0], a, (0, 0, bm * 2, k), full[s])
                        tma.load_async(a_s[s][1], a, (0, 0, bm * 2 + 1, k), full[s])
                        tma.load_async(b_s[s], b, (0, 0, k, bn), full[s])
        with tkc.else_():  # consumers
            warpgroup.increase_registers(232)
            acc = zero(rt(f32, 16, BN))
            for r in tkc.range(rounds):
                for s in range(STAGES):
                    tkc.wait(full[s], r % 2)
                    # each consumer its own A rows; wait inside the branch, so no
                    # in-flight accumulator crosses the if
                    with tkc.if_(wg == 1):
                        warpgroup.mma_AB(acc, a_s[s][0], b_s[s])
                        warpgroup.mma_async_wait(acc)
                    with tkc.else_():
                        warpgroup.mma_AB(acc, a_s[s][1], b_s[s])
                        warpgroup.mma_async_wait(acc)
                    tkc.arrive(empty[s])
            warpgroup.store(c, acc.to(out_dtype), (0, 0, bm * 2 + wg - 1, bn))

    return gemm_pipelined_kernel
