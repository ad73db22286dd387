"""Forward variants of attention_hopper on the GPU, each checked against SDPA,
then interleaved with cuDNN across L (tkc / cuDNN as the median of the
per-round ratios). `tkc build scripts/attention_forward_probe.py` first (the
variants are KERNELS), then `python3 scripts/attention_forward_probe.py X`:

    causal      at D 64 with the mask: three consumer warpgroups (192 query
                rows a block), the same with ping-pong and the intra-warpgroup
                overlap (the long forward), one consumer warpgroup at two
                blocks an SM (the paired forward): attention_bwd.PAIRED_CAUSAL_KEYS
    persistent  at D 64 and 128 without it: a block per item against
                persistent (Q in two slots), short and long: attention_bwd.PERSISTENT
    zigzag      at D 64 and 128 with the mask: the paired forward against the
                short and long ones persistent with the items dealt in zigzag
    zigzag64    at D 64 with the mask: the paired forward against zigzag
                ones of two and three consumer warpgroups
    paired64    at D 64 with the mask: the paired forward with a share of its
                exponentials on the FMA pipe, a 3-stage ring, the intra-
                warpgroup overlap; the zigzag one (two warpgroups) with shares
    zigzag64fma at D 64 with the mask: the zigzag forward (two warpgroups)
                with shares 1/8 to 1/2 on the FMA pipe against the paired
                and the long forwards
    causal64    the paired forward against the zigzag one with shares 1/8
                and 1/4 (for --ncu)
    causal64c3  at D 64 with the mask: the paired forward, the zigzag one
                (two warpgroups, a quarter share: tkc.attention's below 4096
                keys) and zigzag ones of three warpgroups with an eighth and
                a quarter
    short       without the mask, persistent: at D 64 three consumer
                warpgroups (tkc.attention's; 192 rows a block leave the
                last block of a 1024-row head two thirds empty) against two
                with 2 to 4 stages; at D 128 128- against 64-key tiles
    zigzag3     at D 64 with the mask: the paired forward, the zigzag one
                (tkc.attention's below 4096 keys) and that with a 3-stage ring
"""
import math
import sys

from tkc.kernels.attention_hopper import attention_hopper

BASE = {64: dict(stages=2, consumers=3), 128: dict(stages="auto", consumers=2)}
LONG = dict(overlap=True, pingpong=True)
PAIRED = dict(stages=2, consumers=1, blocks_per_sm=2, KV=128)     # tkc.attention's paired forward
EXPERIMENTS = {
    "causal": ([dict(D=64, causal=True, **x) for x in (BASE[64], dict(BASE[64], **LONG),
                                                       dict(stages=2, consumers=1, blocks_per_sm=2))],
               [(16, 16, 1024), (8, 16, 2048), (8, 32, 2048), (4, 16, 4096), (4, 32, 4096),
                (2, 16, 8192), (1, 32, 8192), (1, 16, 16384)]),
    "zigzag": ([dict(D=D, causal=True, **x) for D in (64, 128)
                for x in (dict(stages=2, consumers=1, blocks_per_sm=2, KV=128 if D == 64 else 64),
                          dict(BASE[D], persistent="zigzag"), dict(BASE[D], **LONG),
                          dict(BASE[D], **LONG, persistent="zigzag"))],
               [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (1, 16, 16384)]),
    "zigzag64": ([dict(D=64, causal=True, **x) for x in (
                    dict(stages=2, consumers=1, blocks_per_sm=2), dict(stages=2, consumers=2, persistent="zigzag"),
                    dict(stages=2, consumers=3, persistent="zigzag"),
                    dict(stages=2, consumers=2, **LONG, persistent="zigzag"))],
                 [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096)]),
    "paired64": ([dict(D=64, causal=True, **{**PAIRED, **x}) for x in (
                    dict(), dict(ex2_fma=0.125), dict(ex2_fma=0.25), dict(stages=3), dict(overlap=True))] +
                 [dict(D=64, causal=True, stages=2, consumers=2, persistent="zigzag", ex2_fma=s)
                  for s in (0.125, 0.25)],
                 [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (2, 16, 8192)]),
    "zigzag64fma": ([dict(D=64, causal=True, **PAIRED), dict(D=64, causal=True, **BASE[64], **LONG)] +
                    [dict(D=64, causal=True, stages=2, consumers=2, persistent="zigzag", ex2_fma=s)
                     for s in (0.125, 0.25, 0.375, 0.5)],
                 [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (2, 16, 8192)]),
    "causal64": ([dict(D=64, causal=True, **PAIRED)] +
                 [dict(D=64, causal=True, stages=2, consumers=2, persistent="zigzag", ex2_fma=s)
                  for s in (0.125, 0.25)],
                 [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (2, 16, 8192)]),
    "persistent": ([dict(D=D, causal=False, **BASE[D], **x) for D in (64, 128)
                    for x in (dict(), dict(persistent=True), LONG, dict(LONG, persistent=True))],
                   [(16, 16, 1024), (4, 16, 4096), (2, 16, 8192), (1, 16, 16384)]),
    "causal64c3": ([dict(D=64, causal=True, **PAIRED)] +
                   [dict(D=64, causal=True, stages=2, consumers=c, persistent="zigzag", ex2_fma=f)
                    for c, f in ((2, 0.25), (3, 0.125), (3, 0.25))],
                   [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096)]),
    "short": ([dict(D=64, causal=False, **x) for x in (
                  dict(BASE[64], persistent=True), dict(stages=2, consumers=2, persistent=True),
                  dict(stages=3, consumers=2, persistent=True), dict(stages=4, consumers=2, persistent=True))] +
              [dict(D=128, causal=False, **x) for x in (
                  dict(BASE[128], persistent=True), dict(BASE[128], KV=64, persistent=True),
                  dict(stages=3, consumers=2, KV=64, persistent=True))],
              [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096)]),
    "zigzag3": ([dict(D=64, causal=True, **PAIRED)] +
                [dict(D=64, causal=True, stages=s, consumers=2, persistent="zigzag", ex2_fma=0.25) for s in (2, 3)],
                [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096)]),
}
BUILT = {name: [attention_hopper(**v) for v in variants] for name, (variants, _) in EXPERIMENTS.items()}
KERNELS = [k for ks in BUILT.values() for k in ks]   # for `tkc build`


def main(which: str, ncu: bool = False):
    """ncu: each variant's kernel alone, twice, for ncu at locked clocks
    (`ncu --profile-from-start off -k regex:attn_fwd --metrics
    gpu__time_duration.sum --csv --page raw --print-units base --log-file
    F.csv python3 scripts/attention_forward_probe.py X --ncu > launches.txt`,
    then `python3 -c "from tkc.bench.timing import ncu_table;
    print(*ncu_table('F.csv', 'launches.txt', 'attn_fwd'), sep=chr(10))"`)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    from tkc.bench.timing import interleaved, profile_variants, tflops_lines
    variants, shapes = EXPERIMENTS[which]
    for B, H, N in shapes:
        for D in sorted({v["D"] for v in variants}):
            causal = variants[0]["causal"]
            q, kk, vv = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o, lse = torch.empty_like(q), torch.empty(B, H, 1, N, device="cuda")
            ref = sdpa(q, kk, vv, is_causal=causal).float()
            fns = {}
            for v, k in zip(variants, BUILT[which]):
                if v["D"] == D:
                    o.fill_(float("nan"))
                    k(q, kk, vv, o, lse, 1 / math.sqrt(D))
                    err = ((o.float() - ref).norm() / ref.norm()).item()
                    assert err < 1e-2, (k.name, err)
                    fns[k.name] = (lambda k=k: k(q, kk, vv, o, lse, 1 / math.sqrt(D)))

            if ncu:
                profile_variants(f"B{B} H{H} N{N} D{D}{' causal' if causal else ''}", fns)
                continue

            def peer():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    sdpa(q, kk, vv, is_causal=causal)
            fns["cudnn"] = peer
            lines = tflops_lines(interleaved(fns, rounds=5), "cudnn",
                                 4.0 * B * H * N * N * D / (2 if causal else 1))
            print(f"B{B} H{H} N{N} D{D}{' causal' if causal else ''}: " + "\n".join(lines), flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--ncu"]
    sys.exit(main(args[0] if args else "persistent", "--ncu" in sys.argv))
