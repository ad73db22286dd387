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
assert all(VARIANTS[D, L, 0.0].name == forward_kernel(D, False, "bhld", L).name for D in (64, 128) for L in LENGTHS)


def variants(D: int, causal: bool, L: int) -> dict:
    """{"fmaN": the kernel with N/1000 of its exponentials on the FMA pipe}."""
    return {f"fma{round(s * 1000)}": VARIANTS[D, L, s] for s in SHARES}


if __name__ == "__main__":
    from attention_fwd_variants import cli
    cli(variants, [(D, False) for D in (64, 128)], LENGTHS, reference="float32")
