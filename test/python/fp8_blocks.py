"""Block-scaled FP8 operands for the tests of tkc.scaled_mm's block scales,
shared by the interpreter's (test_scaled_mm_blockwise.py) and the GPU's
(test/gpu/test_fp8_gpu.py): imports torch only. The scales are made in
torch here, independently of tkc.quantize_fp8 (which the tests check
separately), in the layouts torch._scaled_mm takes: scale_a [M, K/128] of
1x128 blocks with strides (1, M), scale_b [K/128, ceil(N/128)] of 128x128
blocks with strides (1, K/128)."""
from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn


def data(M, N, K, seed=0, spread=4, device="cpu"):
    """x [M, K] and w [N, K] float32 whose rows and 128-column blocks differ in size by
    factors up to 2^spread each (what block scales are for)."""
    g = torch.Generator(device=device).manual_seed(seed)
    size = lambda r, c: torch.exp2(torch.randint(-spread, spread + 1, (r, c), generator=g,  # noqa: E731
                                                 device=device).float())
    x = torch.randn(M, K, generator=g, device=device) * size(M, 1) * size(1, K // 128).repeat_interleave(128, 1)
    w = torch.randn(N, K, generator=g, device=device) * size(N, 1)
    return x, w


def blocks(t: torch.Tensor, rows: int):
    """t [R, K] in e4m3 with one scale per `rows` rows x 128 columns: (q, scales [ceil(R/rows), K/128])."""
    R, K = t.shape
    pad = t.new_zeros(-(-R // rows) * rows, K)
    pad[:R] = t
    amax = pad.abs().view(-1, rows, K // 128, 128).amax(dim=(1, 3)).clamp(min=2.0 ** -100)
    s = amax / 448
    q = (pad / s.repeat_interleave(rows, 0).repeat_interleave(128, 1)).to(E4M3)[:R]
    return q, s


def quantised(x, w):
    """a, b, scale_a, scale_b of x @ w.T in tkc.scaled_mm's (torch._scaled_mm's) block layouts."""
    qa, sa = blocks(x, 1)
    qb, sb = blocks(w, 128)
    return qa, qb.t(), sa.t().contiguous().t(), sb.t()


def dequantised_product(a, b, sa, sb, dtype=torch.float64):
    """The product of the dequantised operands (float64 on the CPU, float32 on a GPU)."""
    A = a.to(dtype) * sa.to(dtype).repeat_interleave(128, 1)
    B = b.t().to(dtype) * sb.t().to(dtype).repeat_interleave(128, 0)[:b.shape[1]].repeat_interleave(128, 1)
    return A @ B.t()


def experts(E, N, K, seed=0, device="cpu"):
    """b [E, K, N] (column-major per expert) and scale_b [E, K/128, ceil(N/128)] (each expert's
    stored transposed): tkc.grouped_scaled_mm's weights."""
    w = data(E * N, N, K, seed=seed, device=device)[0].view(E, N, K)
    qs = [blocks(w[e], 128) for e in range(E)]
    b = torch.stack([q for q, _ in qs]).transpose(1, 2)
    sb = torch.stack([s for _, s in qs]).transpose(1, 2)
    return b, sb


def contiguous_rows(counts, K, seed=1, device="cpu", padding_blocks=0):
    """a [M, K], scale_a [M, K/128] (strides (1, M)) and groups [M/128] of the contiguous
    layout: expert e's counts[e] rows padded with zero rows to a multiple of 128, then
    `padding_blocks` blocks of padding only (expert -1)."""
    pads = [-(-m // 128) * 128 for m in counts]
    x = torch.zeros(sum(pads) + 128 * padding_blocks, K, device=device)
    r = 0
    for m, p in zip(counts, pads):
        x[r:r + m] = data(m, 1, K, seed=seed + r, device=device)[0]
        r += p
    a, sa = blocks(x, 1)
    groups = [e for e, p in enumerate(pads) for _ in range(p // 128)] + [-1] * padding_blocks
    return a, sa.t().contiguous().t(), torch.tensor(groups, dtype=torch.int32, device=device)


def counts_rows(counts, K, seed=1, device="cpu", extra=0):
    """a [sum(counts) + extra, K] and scale_a [M, K/128] (strides (1, M)) of the contiguous
    layout by counts (experts' rows back to back, `extra` rows after them), and counts [E]."""
    x = data(sum(counts) + extra, 1, K, seed=seed, device=device)[0]
    a, sa = blocks(x, 1)
    return a, sa.t().contiguous().t(), torch.tensor(counts, dtype=torch.int32, device=device)


def masked_rows(counts, max_m, K, seed=1, device="cpu"):
    """a [E, max_m, K], scale_a [E, max_m, K/128] (each expert's transposed) and groups = counts
    [E] of the masked layout (rows past a count hold data too: they must not matter)."""
    E = len(counts)
    x = data(E * max_m, 1, K, seed=seed, device=device)[0].view(E, max_m, K)
    qs = [blocks(x[e], 1) for e in range(E)]
    a = torch.stack([q for q, _ in qs])
    sa = torch.stack([s.t() for _, s in qs]).transpose(1, 2)
    return a, sa, torch.tensor(counts, dtype=torch.int32, device=device)
