"""tkc.attention's D 256 forwards (the short or the long one, as it picks them)
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
from tkc.kernels.attention_bwd import attention_kernels, forward_kernel
from tkc.kernels.attention_hopper import attention_hopper

LENGTHS = (1024, 4096, 16384)
D = 256


def variant(causal: bool, L: int, oq: bool):
    """tkc.attention's D 256 forward for L keys, O through Q's tile or from registers."""
    picked_long = forward_kernel(D, causal, "bhld", L) is attention_kernels(D, causal, "bhld").long
    long = dict(overlap=True, pingpong=True) if picked_long else {}
    return attention_hopper(D, causal, "bhld", stages=2, consumers=2, KV=64, **long, o_via_q=oq)


VARIANTS = {(c, L, oq): variant(c, L, oq) for c in (False, True) for L in LENGTHS for oq in (False, True)}
KERNELS = list(dict.fromkeys(VARIANTS.values()))


def variants(D: int, causal: bool, L: int) -> dict:
    """{"reg": O from registers, "oq": O through Q's tile}."""
    return {"oq" if oq else "reg": VARIANTS[causal, L, oq] for oq in (False, True)}


if __name__ == "__main__":
    from attention_fwd_variants import cli
    cli(variants, [(D, False), (D, True)], LENGTHS)
