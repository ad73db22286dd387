"""Probe attention forward variants on the GPU: correctness against a float32
reference, then TFLOP/s interleaved with SDPA's cuDNN and flash backends.
`tkc build scripts/attention_probe.py` first (the variants are KERNELS)."""
import math
import statistics
import sys

from tkc.kernels.attention_hopper import attention_hopper

def _variants():
    """The library's short forward (attention_bwd.attention_kernels) beside
    one consumer warpgroup a block and two blocks an SM, causal and not."""
    out = []
    for D in (64, 128):
        for c in (False, True):
            base = dict(D=D, causal=c, **(dict(stages=2, consumers=3) if D == 64 else {}))
            two = dict(D=D, causal=c, consumers=1, blocks_per_sm=2, stages=2,
                       **({} if D == 64 else dict(KV=64)))
            out += [base, two]
    return out


VARIANTS = _variants()
KERNELS = [attention_hopper(**v) for v in VARIANTS]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import interleaved, tflops
    torch.manual_seed(0)
    for v, k in zip(VARIANTS, KERNELS):
        D, causal = v["D"], v["causal"]
        q, kk, vv = (torch.randn(2, 4, 1000, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.full_like(q, float("nan"))
        lse = torch.empty(2, 4, 1, 1000, device="cuda")
        k(q, kk, vv, o, lse, 1 / math.sqrt(D))
        ref = sdpa(q.float(), kk.float(), vv.float(), is_causal=causal, scale=1 / math.sqrt(D))
        err = ((o.float() - ref).norm() / ref.norm()).item()
        print(f"{k.name:34} rel err {err:.2e} nan {o.isnan().any().item()}", flush=True)
    for B, N in ((16, 1024), (4, 4096), (1, 16384)):
        for D in (64, 128):
            for causal in (False, True):
                H = 16 if D == 128 else 32
                q, kk, vv = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                o = torch.empty_like(q)
                lse = torch.empty(B, H, 1, N, device="cuda")
                fns = {}
                for v, k in zip(VARIANTS, KERNELS):
                    if v["D"] == D and v["causal"] == causal:
                        fns[k.name] = (lambda k=k: k(q, kk, vv, o, lse, 1 / math.sqrt(D)))
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                    def peer(be=be):
                        with sdpa_kernel(be):
                            sdpa(q, kk, vv, is_causal=causal)
                    fns[name] = peer
                times = interleaved(fns, rounds=3)
                f = 4.0 * B * H * N * N * D / (2 if causal else 1)
                cud = statistics.median(times["cudnn"])
                print(f"B{B} H{H} N{N} D{D} causal={causal}: cudnn {tflops(f, cud):.0f} "
                      f"flash {tflops(f, statistics.median(times['flash'])):.0f}", flush=True)
                for name, t in times.items():
                    if name not in ("cudnn", "flash"):
                        print(f"   {name:34} {tflops(f, statistics.median(t)):6.0f} TF/s "
                              f"({statistics.median(c / x for c, x in zip(times['cudnn'], t)):.2f}x cudnn)",
                              flush=True)


if __name__ == "__main__":
    sys.exit(main())
