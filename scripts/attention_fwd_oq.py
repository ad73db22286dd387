"""tkc.attention's D 256 forwards (short below LONG_KEYS, long from there)
with O stored by TMA through Q's shared tile (attention_hopper's o_via_q)
against the same kernels storing O from registers (what tkc.attention ran
until then), causal and not, bhld, B * L = 16k tokens, 16 heads. Timed
interleaved with SDPA's cuDNN forward (5 rounds, boost clocks), or at
locked clocks under ncu:

    python3 scripts/attention_fwd_oq.py [L ...]                 (tkc build it first)
    ncu --profile-from-start off -k regex:attn_fwd --metrics gpu__time_duration.sum \\
        --csv --page raw --print-units base --log-file ncu.csv \\
        python3 scripts/attention_fwd_oq.py --ncu [L ...] > launches.txt
    python3 scripts/attention_fwd_oq.py --parse ncu.csv launches.txt"""
import statistics
import sys

from tkc.kernels.attention_bwd import LONG_KEYS
from tkc.kernels.attention_hopper import attention_hopper

LENGTHS = (1024, 4096, 16384)
D = 256


def variant(causal: bool, L: int, oq: bool):
    """tkc.attention's D 256 forward for L keys, O through Q's tile or from registers."""
    long = dict(overlap=True, pingpong=True) if L >= LONG_KEYS[D] else {}
    return attention_hopper(D, causal, "bhld", stages=2, consumers=2, KV=64, **long, o_via_q=oq)


VARIANTS = {(c, L, oq): variant(c, L, oq) for c in (False, True) for L in LENGTHS for oq in (False, True)}
KERNELS = list(dict.fromkeys(VARIANTS.values()))


def main(lengths, ncu=False):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from tkc.bench.timing import interleaved, profile_variants
    torch.manual_seed(0)
    for L in lengths:
        B, H = 16384 // L, 16
        for causal in (False, True):
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            scale = D ** -0.5
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ref = sdpa(q, k, v, is_causal=causal).float()
            fns = {}
            for oq in (False, True):
                o, lse = torch.empty_like(q), torch.empty(B, H, 1, L, device="cuda")
                kern = VARIANTS[causal, L, oq]
                fns["oq" if oq else "reg"] = fn = (lambda kern=kern, o=o, lse=lse: kern(q, k, v, o, lse, scale))
                fn()
                err = ((o.float() - ref).norm() / ref.norm()).item()
                assert err < 1e-2, (causal, L, oq, err)
            config = f"B{B} H{H} L{L} D{D} {'causal' if causal else 'full'}"
            if ncu:
                profile_variants(config, fns)
                continue

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                    sdpa(q, k, v, is_causal=causal)
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
