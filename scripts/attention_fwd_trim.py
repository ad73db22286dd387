"""The long (ping-pong + intra-warpgroup overlap) forwards with their edge
wgmmas guarded off (attention_hopper's trim) against the same forwards
without, and against tkc.attention's forward for the row (the short one below
LONG_KEYS), bhld, B * L = 16k tokens, 16 heads: whether trim makes the long
forward the faster one at 1k (its loop's n + 1 iterations did n + 1 tiles'
work, an eighth more than needed at L 1k). At D 64 below LONG_KEYS also the
short forward with skip_idle ("idle": the last 192-row block of a 1024-row
head has two warpgroups with no row, which then issue no wgmma). Each variant is checked against
SDPA's cuDNN output, then timed interleaved with SDPA's cuDNN forward (5
rounds, boost clocks), or at locked clocks under ncu:

    python3 scripts/attention_fwd_trim.py [L ...]                 (tkc build it first)
    ncu --profile-from-start off -k regex:attn_fwd --metrics gpu__time_duration.sum \\
        --csv --page raw --print-units base --log-file ncu.csv \\
        python3 scripts/attention_fwd_trim.py --ncu [L ...] > launches.txt
    python3 scripts/attention_fwd_trim.py --parse ncu.csv launches.txt"""
from tkc.kernels.attention_bwd import LONG_KEYS, PERSISTENT, ZIGZAG_CAUSAL_KEYS, ZIGZAG_LONG, forward_kernel
from tkc.kernels.attention_hopper import attention_hopper

LENGTHS = (1024, 2048, 4096, 16384)
ROWS = ((64, False), (128, False), (128, True), (256, False))
BASE = {64: dict(stages=2, consumers=3), 128: dict(stages="auto", consumers=2),
        256: dict(stages=2, consumers=2, KV=64, o_via_q=True)}


def long_forward(D: int, causal: bool, L: int, trim: bool):
    """tkc.attention's long forward for the row (causal D 128 below
    ZIGZAG_CAUSAL_KEYS: the long zigzag one), with or without trim."""
    if causal and L < ZIGZAG_CAUSAL_KEYS.get(D, 0):
        return attention_hopper(D, True, "bhld", **BASE[D], **ZIGZAG_LONG, persistent="zigzag", trim=trim)
    return attention_hopper(D, causal, "bhld", **BASE[D], overlap=True, pingpong=True,
                            persistent=PERSISTENT[D][1] and not causal, trim=trim)


def variants(D: int, causal: bool, L: int) -> dict:
    """{name: kernel}: tkc.attention's ("lib"), the long one where that is
    another ("long"), and the long one trimmed ("trim")."""
    lib, long = forward_kernel(D, causal, "bhld", L), long_forward(D, causal, L, False)
    idle = D == 64 and not causal and L < LONG_KEYS[D]
    return {"lib": lib, **({"long": long} if long.name != lib.name else {}),
            "trim": long_forward(D, causal, L, True),
            **({"idle": attention_hopper(D, False, "bhld", **BASE[D], persistent=PERSISTENT[D][0],
                                         skip_idle=True)} if idle else {})}


VARIANTS = {(D, c, L): variants(D, c, L) for D, c in ROWS for L in LENGTHS}
KERNELS = list({k.name: k for v in VARIANTS.values() for k in v.values()}.values())


if __name__ == "__main__":
    from attention_fwd_variants import cli
    cli(lambda D, causal, L: VARIANTS[D, causal, L], ROWS, LENGTHS)
