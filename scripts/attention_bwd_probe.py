"""Probe attention backward variants on the GPU: gradients against SDPA's
(float32 reference), then time interleaved with SDPA's cuDNN backward.
`tkc build scripts/attention_bwd_probe.py` first (the variants are KERNELS)."""
import math
import statistics

from tkc.kernels.attention_bwd import attention_bwd, attention_prep, stats_columns

VARIANTS = [dict(D=D, causal=c, BQ=bq) for D, bqs in ((64, (64, 128)), (128, (64,)))
            for c in (False, True) for bq in bqs]
KERNELS = [attention_bwd(**v) for v in VARIANTS] + [attention_prep(64), attention_prep(128)]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import interleaved
    torch.manual_seed(0)

    def run(v, kern, q, k, v_, o, lse, do, stats, dq, dk, dv, scale):
        prep = KERNELS[-2 if v["D"] == 64 else -1]
        prep(o, do, lse, stats, dq)   # zeroes dq
        kern(q, k, v_, do, stats, dq, dk, dv, scale)

    for B, H, N in ((2, 4, 1000), (16, 16, 1024), (4, 16, 4096), (1, 16, 16384)):
        for v, kern in zip(VARIANTS, KERNELS):
            D, causal = v["D"], v["causal"]
            scale = 1 / math.sqrt(D)
            q, k, v_, do = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v_))
            q2, k2, v2 = (t.clone().requires_grad_() for t in (q, k, v_))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                o = sdpa(q, k, v_, is_causal=causal, scale=scale)
            lse = torch.empty(B, H, 1, N, device="cuda")
            # the forward's lse from float32 logits
            s = (q.float() @ k.float().transpose(-1, -2)) * scale if N <= 4096 else None
            if s is None:
                import tkc
                _, lse3 = tkc.attention(q, k, v_, causal=causal, return_lse=True)
                lse.copy_(lse3.unsqueeze(2))
            else:
                if causal:
                    s.masked_fill_(torch.ones(N, N, device="cuda", dtype=torch.bool).triu(1), -math.inf)
                lse.copy_(torch.logsumexp(s, -1).unsqueeze(2))
                del s
            stats = torch.empty(B, H, 2, stats_columns(N), device="cuda")
            dq = torch.empty(B, H, N, D, device="cuda")   # prep zeroes it
            dk, dv = torch.empty_like(k), torch.empty_like(v_)
            args = (v, kern, q, k, v_, o, lse, do, stats, dq, dk, dv, scale)
            run(*args)
            if N <= 1024:
                of = sdpa(qf, kf, vf, is_causal=causal, scale=scale)
                of.backward(do.float())
                errs = [((x.float() - r.grad).norm() / r.grad.norm()).item()
                        for x, r in ((dq, qf), (dk, kf), (dv, vf))]
                print(f"B{B} H{H} L{N} {kern.name:34} rel err dq dk dv " +
                      " ".join(f"{e:.2e}" for e in errs), flush=True)
                continue

            def both():  # a backward alone replays outside the capture: (fwd + bwd) - fwd
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.autograd.grad(sdpa(q2, k2, v2, is_causal=causal, scale=scale), (q2, k2, v2), do)

            def fwd():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                    sdpa(q2, k2, v2, is_causal=causal, scale=scale)
            times = interleaved({"tkc": lambda: run(*args), "both": both, "fwd": fwd}, rounds=5)
            t = statistics.median(times["tkc"])
            c = statistics.median([b - a for a, b in zip(times["fwd"], times["both"])])
            f = 10.0 * B * H * N * N * D / (2 if causal else 1) / 1e9
            print(f"B{B} H{H} L{N} {kern.name:34} tkc {t:.3f} ms {f / t:.0f} TFLOP/s  "
                  f"cudnn {c:.3f} ms {f / c:.0f}  ratio {c / t:.3f}", flush=True)


if __name__ == "__main__":
    main()
