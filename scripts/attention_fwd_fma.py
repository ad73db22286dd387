"""tkc.attention's forwards without the mask with a share of the softmax's
exponentials on the FMA pipe (exp2(..., fma=s): FlashAttention-4's
emulation, 8 instructions an element since 23d0c1c), against the same
kernels with none (what tkc.attention runs), D 64 and 128, bhld, B * L = 16k
tokens, 16 heads. Timed interleaved with SDPA's cuDNN forward (5 rounds,
boost clocks), or at locked clocks under ncu:

    python3 scripts/attention_fwd_fma.py [L ...]                 (tkc build it first)
    ncu --profile-from-start off -k regex:attn_fwd --metrics gpu__time_duration.sum \\
        --csv --page raw --print-units base --log-file ncu.csv \\
        python3 scripts/attention_fwd_fma.py --ncu [L ...] > launches.txt
    python3 scripts/attention_fwd_fma.py --parse ncu.csv launches.txt"""
import statistics
import sys

from tkc.kernels.attention_bwd import LONG_KEYS, PERSISTENT, forward_kernel
from tkc.kernels.attention_hopper import attention_hopper

SHARES = (0.0, 0.125, 0.25, 0.375)
LENGTHS = (1024, 4096, 16384)
BASE = {64: dict(stages=2, consumers=3), 128: dict(stages="auto", consumers=2)}


def variant(D: int, L: int, share: float):
    """forward_kernel(D, False, "bhld", L) with `share` of its exponentials on the FMA pipe."""
    long = L >= LONG_KEYS[D]
    return attention_hopper(D, False, "bhld", **BASE[D], **(dict(overlap=True, pingpong=True) if long else {}),
                            persistent=PERSISTENT[D][long], ex2_fma=share)


VARIANTS = {(D, L, s): variant(D, L, s) for D in (64, 128) for L in LENGTHS for s in SHARES}
KERNELS = list(dict.fromkeys(VARIANTS.values()))


def main(lengths, ncu=False):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from tkc.bench.timing import interleaved, profile_variants
    torch.manual_seed(0)
    for L in lengths:
        B, H = 16384 // L, 16
        for D in (64, 128):
            assert VARIANTS[D, L, 0.0].name == forward_kernel(D, False, "bhld", L).name
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            scale = D ** -0.5
            with sdpa_kernel(SDPBackend.MATH):
                ref = sdpa(q.float(), k.float(), v.float())
            fns = {}
            for s in SHARES:
                o, lse = torch.empty_like(q), torch.empty(B, H, 1, L, device="cuda")
                kern = VARIANTS[D, L, s]
                fns[f"fma{round(s * 1000)}"] = fn = (lambda kern=kern, o=o, lse=lse: kern(q, k, v, o, lse, scale))
                fn()
                err = ((o.float() - ref).norm() / ref.norm()).item()
                assert err < 1e-2, (D, L, s, err)
            config = f"B{B} H{H} L{L} D{D}"
            if ncu:
                profile_variants(config, fns)
                continue

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                    sdpa(q, k, v)
            times = interleaved({**fns, "cudnn": cudnn}, rounds=5, reps=10, inner=5)
            line = " ".join(f"{n}: {statistics.median(times[n]):.3f} ms "
                            f"({statistics.median(c / t for c, t in zip(times['cudnn'], times[n])):.3f})"
                            for n in fns)
            print(f"{config} cudnn {statistics.median(times['cudnn']):.3f} ms | {line}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--parse"]:
        from tkc.bench.timing import ncu_table
        print("\n".join(ncu_table(*sys.argv[2:4], "attn_fwd")))
        sys.exit()
    args = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    main(args or LENGTHS, ncu="--ncu" in sys.argv)
