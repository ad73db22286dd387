"""FP8 operands for the benchmarks (kernel time and eager): e4m3 a and b with
per-tensor, row-wise or block scales, in torch._scaled_mm's conventions (b
column-major, block scales stored transposed)."""
from __future__ import annotations


def block_operands(m, n, k):
    """a, b, scale_a, scale_b with block scales: a and its 1x128 scales from tkc.quantize_fp8
    of bf16 activations, b's 128x128 scales in torch (n a multiple of 128)."""
    import torch

    import tkc
    a, sa = tkc.quantize_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16))
    w = torch.randn(n, k, device="cuda")
    sb = w.view(n // 128, 128, k // 128, 128).abs().amax(dim=(1, 3)) / 448        # [N/128, K/128]
    b = (w / sb.repeat_interleave(128, 0).repeat_interleave(128, 1)).to(torch.float8_e4m3fn)
    return a, b.t(), sa, sb.t()


def tensor_operands(m, n, k, rowwise: bool):
    """a [m, k], b [k, n] column-major, e4m3, with per-tensor scales (0-d f32) or row-wise
    ones (scale_a [m, 1], scale_b [1, n])."""
    import torch
    f8 = torch.float8_e4m3fn
    a = torch.randn(m, k, device="cuda").to(f8)
    b = torch.randn(n, k, device="cuda").to(f8).t()
    if rowwise:
        return a, b, torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    return a, b, torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
