"""dQ accumulation in the attention backward: atomic adds from registers
(red.global.add.v2.f32, a column pair each) against TMA reduce-adds of a
shared tile, the same kernel otherwise (tkc.attention's BQ), timed
interleaved (B4 H16 L4096). `tkc build scripts/attention_dq.py` builds the
dq="atomic" variants (KERNELS)."""
import statistics

from tkc.kernels.attention_bwd import BWD_QUERIES, attention_bwd, attention_kernels, stats_columns

CONFIGS = [(D, causal) for D in (64, 128) for causal in (False, True)]
KERNELS = [attention_bwd(D, causal, "bhld", dq="atomic", BQ=BWD_QUERIES[D]) for D, causal in CONFIGS]
B, H, L = 4, 16, 4096

def main():
    import torch

    from tkc.bench.timing import interleaved, tflops
    for (D, causal), atomic in zip(CONFIGS, KERNELS):
        q, k, v, do = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        ks = attention_kernels(D, causal, "bhld")
        fwd, prep, tma = ks.short, ks.prep, ks.bwd
        o, lse = torch.empty_like(q), torch.empty(B, H, 1, L, device="cuda")
        fwd(q, k, v, o, lse, 0.1)
        stats = torch.empty(B, H, 2, stats_columns(L), device="cuda")
        prep(o, do, lse, stats)
        dq = torch.zeros(q.shape, device="cuda")
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        times = interleaved({n: (lambda kern=kern: kern(q, k, v, do, stats, dq, dk, dv, 0.1))
                             for n, kern in (("atomic", atomic), ("tma", tma))}, rounds=3, reps=10, inner=5)
        f = 2.5 * 4.0 * B * H * L * L * D / (2 if causal else 1)
        a, t = statistics.median(times["atomic"]), statistics.median(times["tma"])
        print(f"D{D} causal={causal}: atomic {a:.3f} ms ({tflops(f, a):.0f} TF/s), tma {t:.3f} ms "
              f"({tflops(f, t):.0f} TF/s): tma / atomic time {t / a:.2f}", flush=True)


if __name__ == "__main__":
    main()
