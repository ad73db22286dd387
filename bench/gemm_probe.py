"""What a work item's finish costs the library GEMM: the same kernel with and
without its finish (the stores of C), interleaved, at small and large K.

    python3 bench/gemm_probe.py          # on the GPU; `tkc build bench/gemm_probe.py` first

Without the finish the tensor cores never wait for the epilogue, so the gap
bounds what overlapping the finish with the next item (ping-pong consumers,
or the finish rotated into the next item's first k-step) could win.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tkc  # noqa: E402
from tkc import bf16, f32, gl, rt, st, tma, warpgroup  # noqa: E402
from tkc.kernels import gemm_hopper  # noqa: E402
from tkc.ops import subtile, zero  # noqa: E402

BM, BN, BK = 128, 256, 64


@tkc.kernel(name="gemm_probe_no_finish", warps=8, persistent=True, order="auto",
            grid=lambda a, b, c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM)))
def no_finish(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(bf16, 1, 1, "M", "N")):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
    acc = zero(rt(f32, 16, BN))
    for k in tkc.range(tkc.cdiv(a.c, BK), stages="auto"):
        tma.load(a_s, a, (0, 0, bm, k))
        tma.load(b_s, b, (0, 0, k, bn))
        warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    with tkc.if_(a.c == 8):  # never at the probe's sizes: keeps the wgmma alive, stores nothing
        tkc.ops.store(c, acc.to(bf16), (0, 0, bm * 8 + tkc.warpid(), bn))


KERNELS = [no_finish]


def main():
    import torch
    from tkc.bench.__main__ import gemm_inputs, rotating, timing_for
    from tkc.bench.timing import interleaved, tflops
    lib = gemm_hopper("bf16")
    print(f"{'shape':18} {'with finish':>12} {'no finish':>10} {'cuBLAS':>8}  (TFLOP/s, median of 5)")
    for m, n, k in ((8192, 8192, 512), (8192, 8192, 1024), (8192, 8192, 2048), (4096, 4096, 4096)):
        sets = gemm_inputs(m, n, k)
        flops = 2.0 * m * n * k
        ms = interleaved({"lib": rotating(lib, sets), "none": rotating(no_finish, sets),
                          "cublas": rotating(lambda a, b, c: torch.matmul(a, b, out=c), sets)},
                         5, **timing_for(flops))
        t = {key: tflops(flops, statistics.median(v)) for key, v in ms.items()}
        print(f"{m}x{n}x{k:<8} {t['lib']:12.0f} {t['none']:10.0f} {t['cublas']:8.0f}", flush=True)


if __name__ == "__main__":
    main()
