"""Probe head-dim-256 attention forwards on the GPU: rel err against float32,
then time interleaved with SDPA's cuDNN and flash backends.
`tkc build scripts/attention256_probe.py` first (the variants are KERNELS)."""
import math
import statistics

from tkc.kernels.attention_hopper import attention_hopper

VARIANTS = [{**dict(D=256, causal=c, KV=64), **kw} for c in (False, True)
            for kw in (dict(), dict(consumers=1), dict(overlap=True, pingpong=True),
                       dict(stages=1), dict(KV=32))]
KERNELS = [attention_hopper(**v) for v in VARIANTS]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import interleaved
    torch.manual_seed(0)
    for B, H, N in ((2, 4, 1000), (16, 8, 1024), (4, 8, 4096), (1, 8, 16384)):
        for causal in (False, True):
            q, k, v = (torch.randn(B, H, N, 256, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o, lse = torch.empty_like(q), torch.empty(B, H, 1, N, device="cuda")
            fns = {}
            for var, kern in zip(VARIANTS, KERNELS):
                if var["causal"] == causal:
                    fns[kern.name] = (lambda kern=kern: kern(q, k, v, o, lse, 1 / 16))
            if N <= 1024:
                ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal, scale=1 / 16)
                for name, fn in fns.items():
                    o.fill_(float("nan"))
                    fn()
                    print(f"B{B} H{H} L{N} {name:44} rel err {((o.float() - ref).norm() / ref.norm()).item():.2e}",
                          flush=True)
                if N < 1024:
                    continue
            for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                def peer(be=be):
                    with sdpa_kernel(be):
                        sdpa(q, k, v, is_causal=causal, scale=1 / 16)
                try:
                    peer()
                    fns[name] = peer
                except RuntimeError as e:
                    print(f"# {name} unavailable: {str(e)[:120]}")
            times = interleaved(fns, rounds=3)
            f = 4.0 * B * H * N * N * 256 / (2 if causal else 1) / 1e9
            med = {n: statistics.median(t) for n, t in times.items()}
            ref_t = med.get("cudnn")
            print(f"B{B} H{H} L{N} causal={causal}: " + "  ".join(
                f"{n} {f / t:.0f}" + (f" ({ref_t / t:.2f})" if ref_t else "") for n, t in med.items()),
                flush=True)


if __name__ == "__main__":
    main()
