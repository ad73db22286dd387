"""Time attention_hopper variants (warpgroups per block, KV tile) next to SDPA
flash on the GPU. `tkc build scripts/bench_attention_variants.py` first."""
import math
import sys

from tkc.kernels import attention_hopper

KERNELS = [attention_hopper(64, 64, 1), attention_hopper(64, 128, 1), attention_hopper(64, 64, 2),
           attention_hopper(128, 64, 1), attention_hopper(128, 128, 1), attention_hopper(128, 64, 2)]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import bench, tflops
    for B, H, N in ((16, 16, 1024), (8, 16, 4096)):
        for k in KERNELS:
            D = 64 if "_d64_" in k.name else 128
            q, kk, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o = torch.empty_like(q)
            f = 4.0 * B * H * N * N * D
            t = bench(lambda: k(q, kk, v, o, 1 / math.sqrt(D)))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                tf = bench(lambda: sdpa(q, kk, v))
            print(f"{k.name:28} B{B} H{H} N{N}: {tflops(f, t):6.1f} TF/s, flash {tflops(f, tf):6.1f}",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
