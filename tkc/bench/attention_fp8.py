"""Rows of `python -m tkc.bench --only attention`: tkc.attention_fp8 against
the bf16 tkc.attention on the same GPU in the same run (issue 45's bar: 1.3x
at L >= 4k, D 128).

Per shape (B 4, H 16, D 128, L 4k, 8k, 16k, causal and not) two rows, each
interleaved with bf16 tkc.attention of the same values over a few rounds:
"attention_fp8" is the op as a user calls it (V laid out by fp8_v_layout
inside the call), "attention_fp8 kernel" the kernel alone (V laid out once,
attention_fp8_vt). TFLOP/s count 4 B H L^2 D (halved when causal) for each.
The error is against float32 attention of the dequantised inputs, on the
first two heads (a full float reference at 16k would not fit); unit-normal
inputs give a flat softmax, where P's e4m3 rounding leaves about 2.5e-2
(docs/attention.md, "FP8 forward"): such a row is wrong above 5e-2.
"""
from __future__ import annotations

import statistics

from .timing import interleaved, median_ratio, tflops

SHAPES = [(4, 16, 4096, 128), (4, 16, 8192, 128), (4, 16, 16384, 128)]
QUICK = [(1, 16, 4096, 128)]


def _row(name, shape, err, ms, flops, rounds):
    ratios = [p / t for p, t in zip(ms["peer"], ms["tkc"])]
    return dict(kernel=name, shape=shape, rel_err=err, tkc_tflops=tflops(flops, statistics.median(ms["tkc"])),
                peer="tkc bf16", peer_tflops=tflops(flops, statistics.median(ms["peer"])),
                ratio=median_ratio(ms["peer"], ms["tkc"]), ratio_min=min(ratios), ratio_max=max(ratios),
                rounds=rounds, tol=5e-2)


def rows(quick: bool, rounds: int = 3):
    import torch
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    f8 = torch.float8_e4m3fn
    for B, H, L, D in (QUICK if quick else SHAPES):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(B, H, L, D, device="cuda", generator=g) for _ in range(3))
            scales = [t.abs().amax((2, 3)) / 448 for t in (q, k, v)]    # per-head: the max to e4m3's
            q8, k8, v8 = ((t / s[..., None, None]).to(f8) for t, s in zip((q, k, v), scales))
            qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
            o = tkc.attention_fp8(q8, k8, v8, *scales, causal=causal)
            deq = [(t[:1, :2].float() * s[:1, :2, None, None]) for t, s in zip((q8, k8, v8), scales)]
            ref = sdpa(*deq, is_causal=causal).double()          # Lq = Lk: top-left is bottom-right
            err = float((o[:1, :2].double() - ref).norm() / ref.norm())
            vt = tkc.fp8_v_layout(v8)
            flops = 4.0 * B * H * L * L * D / (2 if causal else 1)
            timing = dict(reps=10, inner=2)
            bf16 = lambda: tkc.attention(qb, kb, vb, causal=causal)  # noqa: E731
            shape = f"B{B} H{H} L{L} D{D}{' causal' if causal else ''}"
            ms = interleaved({"tkc": lambda: tkc.attention_fp8(q8, k8, v8, *scales, causal=causal),
                              "peer": bf16}, rounds, **timing)
            yield _row("attention_fp8", shape, err, ms, flops, rounds)
            ms = interleaved({"tkc": lambda: tkc.attention_fp8_vt(q8, k8, vt, *scales, causal=causal),
                              "peer": bf16}, rounds, **timing)
            yield _row("attention_fp8 kernel", shape, err, ms, flops, rounds)
