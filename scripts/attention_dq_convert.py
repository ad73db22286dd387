"""attention_bwd's dq_convert (the last block of each KV head converts dQ to
bf16; tkc.attention does not use it) against tkc.attention's backward, whose
dQ torch converts after the kernel, on the GPU: the backward's launches alone
(statistics, kernel, conversion) as CUDA-graph replays, interleaved in rounds
(bhld, B * L = 16k tokens, Hq 16):

    python3 scripts/attention_dq_convert.py [--gqa] [L ...]     (tkc build it first)

Three ways a row: "plain" (tkc.attention's kernels, then dq.to(bf16)),
"convert" (dq_convert's kernel converting) and "count" (the same kernel with
convert = 0, then dq.to(bf16): what counting the blocks costs alone). Prints
the median milliseconds and plain's time over each."""
import statistics
import sys

import torch

from tkc.bench.timing import interleaved, median_ratio
from tkc.kernels.attention_bwd import (DKV_REGISTERS, attention_bwd, backward_kernels, backward_options,
                                       stats_columns)

ROUNDS = 5
CONVERT = {(D, c, short): attention_bwd(D, c, "bhld", **dict(backward_options(D, c, "bhld"), dq_convert=True,
                                                              **({"dkv_tma": True} if short else {})))
           for D in (64, 128) for c in (False, True) for short in (False, True)}
KERNELS = list(CONVERT.values())


def row(L, D, causal, gqa: bool):
    B, H = 16384 // L, 16
    Hkv = 2 if gqa else H
    q, do, o = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    k, v = (torch.randn(B, Hkv, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lse = torch.randn(B, H, 1, L, device="cuda").abs() + 5
    prep, plain = backward_kernels(D, causal, "bhld", L)
    convert = CONVERT[D, causal, L < DKV_REGISTERS.get((D, causal), 0)]
    stats = torch.empty(B, H, 2, stats_columns(L), device="cuda")
    dq = torch.empty(B, H, L, D, device="cuda")
    dk, dv, dq16 = torch.empty_like(k), torch.empty_like(v), torch.empty_like(q)
    count = torch.zeros(B, Hkv, device="cuda", dtype=torch.int32)

    def run(way):
        prep(o, do, lse, stats, dq)
        if way == "plain":
            plain(q, k, v, do, stats, dq, dk, dv, 0.1)
        else:
            count.zero_()
            convert(q, k, v, do, stats, dq, dk, dv, dq16, count, int(way == "convert"), 0.1)
        return dq16 if way == "convert" else dq.to(torch.bfloat16)

    out = {w: run(w).float() for w in ("plain", "convert", "count")}
    for w in ("convert", "count"):   # dQ's adds land in any order: bf16 apart
        assert float((out[w] - out["plain"]).norm() / out["plain"].norm()) < 5e-3
    times = interleaved({w: (lambda w=w: run(w)) for w in out}, rounds=ROUNDS, reps=10, inner=5)
    ms = "  ".join(f"{w} {statistics.median(t):.3f}" for w, t in times.items())
    print(f"D{D} {'causal' if causal else 'full  '} L{L:<6} Hkv{Hkv:<3} {ms} ms   "
          f"plain/convert {median_ratio(times['plain'], times['convert']):.3f}   "
          f"plain/count {median_ratio(times['plain'], times['count']):.3f}", flush=True)


def main(argv):
    gqa = "--gqa" in argv
    lengths = [int(a) for a in argv if a != "--gqa"] or [1024, 2048, 4096, 16384]
    for D in (64, 128):
        for causal in (False, True):
            for L in lengths:
                row(L, D, causal, gqa)


if __name__ == "__main__":
    main(sys.argv[1:])
