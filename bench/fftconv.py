"""The FFT long convolution on the GPU next to torch.fft (cuFFT: rfft, the
pointwise product with the filter's precomputed transform, irfft; f32 inside,
bf16 in and out as tkc), interleaved in rounds (each round times both once),
the median of the per-round ratios (METHOD.md; BENCHMARKS.md has the results):

    python bench/fftconv.py [--out FILE.json] [--quick]

Rows: B 16, D 1024 (the issue's peer shape); circular (N = L) at L 1k, 2k,
4k, causal (N = 2L) at L 512, 1k, 2k. Each filter's transform is made once
outside the timing, for both. Outputs are checked against each other first.
"""
from __future__ import annotations

import sys

from tkc.bench import peer as bench


def configs(quick: bool):
    rows = [(16, 1024, 1024, 1024), (16, 1024, 4096, 4096), (16, 1024, 2048, 2048),
            (16, 1024, 512, 1024), (16, 1024, 1024, 2048), (16, 1024, 2048, 4096)]
    return rows[:1] if quick else rows


def main() -> int:
    args = bench.arguments("fftconv")
    if args is None:
        return 0
    import torch

    import tkc
    rows = []
    print(bench.heading(f"{'B':>3} {'D':>5} {'L':>5} {'N':>5} {'tkc ms':>8} {'fft ms':>8} {'fft/tkc':>8} {'GB/s':>6}"))
    for B, D, L, N in configs(args.quick):
        torch.manual_seed(0)
        u = torch.randn(B, D, L, device="cuda").bfloat16()
        taps = N if L == N else N - L + 1
        k = torch.randn(D, taps, device="cuda") * torch.exp(-torch.arange(taps, device="cuda") / (taps / 4))
        kf = tkc.fftconv_filter(k, N)
        kr = torch.fft.rfft(k, n=N)

        def peer():
            return torch.fft.irfft(torch.fft.rfft(u.float(), n=N) * kr, n=N)[..., :L].bfloat16()

        def mine():
            return tkc.fftconv(u, kf)

        ours, theirs = mine().float(), peer().float()
        err = float((ours - theirs).norm() / theirs.norm())
        r = bench.timed(f"L{L} N{N}", mine, peer, err, "torch.fft")
        if r is None:
            continue
        gbs = 2 * u.numel() * 2 / r.tkc / 1e6
        print(f"{B:3} {D:5} {L:5} {N:5} {r.tkc:8.3f} {r.peer:8.3f} {r.ratio:8.2f} {gbs:6.0f}")
        rows.append(dict(B=B, D=D, L=L, N=N, tkc_ms=r.tkc_ms, fft_ms=r.peer_ms, ratio=r.ratio, rel_err=err))
    bench.save(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
