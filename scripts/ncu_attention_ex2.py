"""The attention forward and backward kernels with a share of the softmax's
exponentials on the FMA pipe (exp2(..., fma=s)), one launch each at B4 H16
L4096 (and L1024 for the forward), for locked-clock kernel times under ncu:
`ncu --profile-from-start off -k regex:attn_ --metrics gpu__time_duration.sum
python3 scripts/ncu_attention_ex2.py`."""
import math

from tkc.kernels.attention_bwd import attention_bwd, attention_prep, stats_columns
from tkc.kernels.attention_hopper import attention_hopper

SHARES = (0.0, 0.125)
FWD = {64: dict(stages=2, consumers=3), 128: dict(stages="auto", consumers=2)}
LONG = dict(overlap=True, pingpong=True)
FORWARDS = [attention_hopper(D, causal, **FWD[D], **x, ex2_fma=s) for D in (64, 128)
            for causal in (False, True) for x in ({}, LONG) for s in SHARES]
BACKWARDS = [attention_bwd(D, causal, BQ=128 if D == 64 else 64, **x) for D in (64, 128)
             for causal in (False, True)
             for x in (dict(), dict(ex2_fma=0.125), dict(ex2_fma=0.25))]
PREPS = {D: attention_prep(D) for D in (64, 128)}
KERNELS = FORWARDS + BACKWARDS + list(PREPS.values())


def main():
    import torch

    from tkc.bench.timing import profile_once
    torch.manual_seed(0)

    for B, N in ((16, 1024), (4, 4096)):
        for D in (64, 128):
            q, k, v, do = (torch.randn(B, 16, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            o, lse = torch.empty_like(q), torch.empty(B, 16, 1, N, device="cuda")
            for kern in FORWARDS:
                if f"d{D}_" in kern.name:
                    profile_once([lambda: kern(q, k, v, o, lse, 1 / math.sqrt(D))])
            if N != 4096:
                continue
            for causal in (False, True):
                import tkc
                o, lse3 = tkc.attention(q, k, v, causal=causal, return_lse=True)
                lse = lse3.unsqueeze(2).contiguous()
                stats = torch.empty(B, 16, 2, stats_columns(N), device="cuda")
                dq = torch.empty(B, 16, N, D, device="cuda")   # prep zeroes it
                PREPS[D](o, do, lse, stats, dq)
                dk, dv = torch.empty_like(k), torch.empty_like(v)
                ref = None
                for kern in BACKWARDS:
                    if f"d{D}_" in kern.name and ("causal" in kern.name) == causal:
                        dq.zero_()
                        kern(q, k, v, do, stats, dq, dk, dv, 1 / math.sqrt(D))
                        got = torch.cat([dq.flatten(), dk.float().flatten(), dv.float().flatten()])
                        if ref is None:
                            ref = got
                        err = ((got - ref).norm() / ref.norm()).item()
                        print(kern.name, "rel diff to the first", f"{err:.2e}", flush=True)
                        profile_once([lambda: kern(q, k, v, do, stats, dq, dk, dv, 1 / math.sqrt(D))])


if __name__ == "__main__":
    main()
