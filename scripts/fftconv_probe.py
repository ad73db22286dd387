"""Probe FFT-convolution variants on the GPU (consumer warpgroups, ring
stages): correctness against torch.fft, then time interleaved with the
library's kernel and torch.fft. `tkc build scripts/fftconv_probe.py` first
(the variants are KERNELS)."""

from tkc.kernels.fftconv import fftconv

VARIANTS = [dict(N=1024, consumers=2), dict(N=1024, stages=2), dict(N=2048, stages=2),
            dict(N=4096, stages=2)]
KERNELS = [fftconv(**v) for v in VARIANTS]


def main():
    import torch

    from tkc.bench.timing import medians
    from tkc.torchops import long_conv as fftconv_ops
    B, D = 16, 1024
    for v, kern in zip(VARIANTS, KERNELS):
        N = v["N"]
        N1, N2 = fftconv_ops.SPLITS[N]
        u = torch.randn(B, D, N, device="cuda").bfloat16()
        k = torch.randn(D, N, device="cuda") * torch.exp(-torch.arange(N, device="cuda") / 256)
        kf = fftconv_ops.fftconv_filter(k, N)
        kr = torch.fft.rfft(k, n=N)
        y = torch.empty_like(u)
        rows = lambda x: x.view(B, 1, D * N // N2, N2)  # noqa: E731
        args = (rows(u), kf[0].view(1, 1, D * N1, N2), kf[1].view(1, 1, D * N1, N2),
                *fftconv_ops._operands(N, N, str(u.device)), rows(y))
        kern(*args)
        ref = torch.fft.irfft(torch.fft.rfft(u.float(), n=N) * kr, n=N)
        err = ((y.float() - ref).norm() / ref.norm()).item()
        med = medians({"probe": lambda: kern(*args), "lib": lambda: fftconv_ops.fftconv(u, kf),
                       "fft": lambda: torch.fft.irfft(torch.fft.rfft(u.float(), n=N) * kr, n=N).bfloat16()},
                      reps=10, inner=5)
        print(f"{kern.name:24} err {err:.2e}  probe {med['probe']:.3f} ms  lib {med['lib']:.3f}  "
              f"fft {med['fft']:.3f}  fft/probe {med['fft'] / med['probe']:.2f}", flush=True)


if __name__ == "__main__":
    main()
