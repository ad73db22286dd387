"""The forward without a mask at D 64 and 128, block per item against
persistent (Q in two slots), short and long (ping-pong + overlap), each
checked against SDPA, then interleaved with cuDNN across L. It set
attention_bwd.PERSISTENT. `tkc build scripts/attention_persistent_probe.py`
first (the variants are KERNELS)."""
import math
import sys

from tkc.kernels.attention_hopper import attention_hopper

BASE = {64: dict(stages=2, consumers=3), 128: dict(stages="auto", consumers=2)}
VARIANTS = [dict(D=D, **BASE[D], **x) for D in (64, 128)
            for x in (dict(), dict(persistent=True), dict(overlap=True, pingpong=True),
                      dict(overlap=True, pingpong=True, persistent=True))]
KERNELS = [attention_hopper(causal=False, **v) for v in VARIANTS]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import interleaved, tflops_lines
    for B, N in ((16, 1024), (4, 4096), (2, 8192), (1, 16384)):
        for D in (64, 128):
            H = 16
            q, kk, vv = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o = torch.empty_like(q)
            lse = torch.empty(B, H, 1, N, device="cuda")
            ref = sdpa(q, kk, vv)
            fns = {}
            for v, k in zip(VARIANTS, KERNELS):
                if v["D"] != D:
                    continue
                o.fill_(float("nan"))
                k(q, kk, vv, o, lse, 1 / math.sqrt(D))
                err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
                assert err < 1e-2, (k.name, err)
                fns[k.name] = (lambda k=k: k(q, kk, vv, o, lse, 1 / math.sqrt(D)))

            def peer():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    sdpa(q, kk, vv)
            fns["cudnn"] = peer
            times = interleaved(fns, rounds=5)
            lines = tflops_lines(times, "cudnn", 4.0 * B * H * N * N * D)
            print(f"B{B} H{H} N{N} D{D}: " + "\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
