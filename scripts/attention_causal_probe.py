"""The causal forward at D 64, three ways, interleaved with cuDNN across L:
three consumer warpgroups (192 query rows a block), the same with ping-pong
and the intra-warpgroup overlap (the long forward), and one consumer
warpgroup a block at two blocks an SM (the paired forward). Each is checked
against SDPA first. It set attention_bwd.PAIRED_CAUSAL_KEYS.
`tkc build scripts/attention_causal_probe.py` first (the variants are KERNELS)."""
import math
import sys

from tkc.kernels.attention_hopper import attention_hopper

VARIANTS = [dict(stages=2, consumers=3), dict(stages=2, consumers=3, overlap=True, pingpong=True),
            dict(stages=2, consumers=1, blocks_per_sm=2)]
KERNELS = [attention_hopper(64, True, **v) for v in VARIANTS]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import interleaved, tflops_lines
    for B, H, N in ((16, 16, 1024), (8, 16, 2048), (8, 32, 2048), (4, 16, 4096), (4, 32, 4096),
                    (2, 16, 8192), (1, 32, 8192), (1, 16, 16384)):
        D = 64
        q, kk, vv = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(B, H, 1, N, device="cuda")
        ref = sdpa(q, kk, vv, is_causal=True)
        fns = {}
        for k in KERNELS:
            o.fill_(float("nan"))
            k(q, kk, vv, o, lse, 1 / math.sqrt(D))
            err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
            assert err < 1e-2, (k.name, err)
            fns[k.name] = (lambda k=k: k(q, kk, vv, o, lse, 1 / math.sqrt(D)))

        def peer():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                sdpa(q, kk, vv, is_causal=True)
        fns["cudnn"] = peer
        times = interleaved(fns, rounds=5)
        lines = tflops_lines(times, "cudnn", 4.0 * B * H * N * N * D / 2)
        print(f"B{B} H{H} N{N} D{D} causal: " + "\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
