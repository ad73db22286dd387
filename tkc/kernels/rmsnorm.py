"""Fused dropout + residual + RMSNorm, forward and backward: LayerNorm's
kernels (tkc/kernels/layernorm.py, which holds the code of both and says how
rows map to warps) without the mean and b.

Forward, per row: h = dropout(x) + residual, rstd = rsqrt(mean(h^2) + eps),
y = h * rstd * w. Backward: xhat = h * rstd, g = w * dy,
dh = rstd * (g - xhat * mean(g * xhat)) + dh_next, dresidual = dh,
dx = dropout's mask * dh / (1 - p); dw summed per block into a [blocks, D]
partial-sum buffer that the caller reduces.
"""
from __future__ import annotations

from .layernorm import norm_bwd, norm_fwd


def rmsnorm_fwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True,
                split_at: int | None = None, lane_values: int | None = None):
    """x, residual [N, D] bf16, w [D] bf16 -> y, h [N, D] bf16, rstd [N] f32;
    philox (i32 [2]: the dropout's seed, offset), scalars p, eps: (x, res, w, y, h, rstd, philox,
    p, eps).
    residual=False: (x, w, y, rstd, philox, p, eps). Grid and block as
    layernorm_fwd's: cdiv(N, warps) blocks of `warps` (one warp a row, D <=
    split_at), else N blocks of S warps (a row split over S warps)."""
    return norm_fwd(D, dropout, warps, residual, True, split_at, lane_values)


def rmsnorm_bwd(D: int, dropout: bool = False, warps: int = 4, residual: bool = True,
                split_at: int | None = None, lane_values: int | None = None):
    """(dy, dh_next, h, w, rstd, dx, [dres with dropout], dw_part, philox, p);
    residual=False: (dy, x, w, rstd, dx, dw_part, philox, p). dy, dh_next,
    h, x, dx, dres [N, D] bf16; w [D] bf16; rstd [N] f32; dw_part [blocks, D]
    f32 (the caller sums its rows). Grid (blocks, 1) as layernorm_bwd's;
    shared memory 4 * D + 256 * S bytes for a split row."""
    return norm_bwd(D, dropout, warps, residual, True, split_at, lane_values)
