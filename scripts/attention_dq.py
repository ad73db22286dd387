"""dQ accumulation in the attention backward: atomic adds from registers
(red.global.add.f32) against TMA reduce-adds of a shared tile, the same
kernel otherwise, timed interleaved (B4 H16 L4096). `tkc build
test/gpu/test_attention_gpu.py` builds the dq="atomic" variants."""
import statistics

import torch

from tkc.bench.timing import interleaved, tflops
from tkc.kernels.attention_bwd import attention_bwd, attention_kernels, stats_columns

B, H, L = 4, 16, 4096
for D in (64, 128):
    for causal in (False, True):
        q, k, v, do = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        fwd, _, prep, tma, _ = attention_kernels(D, causal, "bhld")
        o, lse = torch.empty_like(q), torch.empty(B, H, 1, L, device="cuda")
        fwd(q, k, v, o, lse, 0.1)
        stats = torch.empty(B, H, 2, stats_columns(L), device="cuda")
        prep(o, do, lse, stats)
        dq = torch.zeros(q.shape, device="cuda")
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        atomic = attention_bwd(D, causal, "bhld", dq="atomic")
        times = interleaved({n: (lambda kern=kern: kern(q, k, v, do, stats, dq, dk, dv, 0.1))
                             for n, kern in (("atomic", atomic), ("tma", tma))}, rounds=3, reps=10, inner=5)
        f = 2.5 * 4.0 * B * H * L * L * D / (2 if causal else 1)
        a, t = statistics.median(times["atomic"]), statistics.median(times["tma"])
        print(f"D{D} causal={causal}: atomic {a:.3f} ms ({tflops(f, a):.0f} TF/s), tma {t:.3f} ms "
              f"({tflops(f, t):.0f} TF/s): tma / atomic time {t / a:.2f}", flush=True)
