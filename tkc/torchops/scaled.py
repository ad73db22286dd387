"""The FP8 GEMM as a PyTorch op: tkc.scaled_mm, torch._scaled_mm's product.

    c = tkc.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)

a [M, K] float8_e4m3fn row-major, b [K, N] float8_e4m3fn column-major (b.t()
contiguous: K-major, what FP8 wgmma reads; torch._scaled_mm takes it so);
scale_a and scale_b f32, either one element each (per tensor) or scale_a
[M, 1] and scale_b [1, N] (row-wise); c = (a @ b) * scale_a * scale_b in f32,
rounded once to out_dtype (bf16 or f32); use_fast_accum as torch's. K must be a multiple of 16 (rows of
16 bytes, for TMA), N of 8 (C's rows); M is free. Forward only (as
torch._scaled_mm). The kernel: tkc/kernels/scaled_mm_hopper.py, its tile
width BN tuned per shape with use_fast_accum (tkc.scaled_mm.fast_tile).
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.scaled_mm_hopper import PROMOTED_BN, scaled_mm_hopper
from ..runtime.callsite import caller
from ..tune import autotune, bucket
from .checks import check_device, check_tensor
from .eager import Op, public
from .plans import PlanCache, signature

__all__ = ["scaled_mm"]
E4M3, F32 = torch.float8_e4m3fn, torch.float32
OUT = {torch.bfloat16: "bf16", torch.float32: "f32"}


@functools.lru_cache(maxsize=None)
def _kernel(out: str, rowwise: bool, BN: int = 256, fast: bool = False):
    return scaled_mm_hopper(out, rowwise, BN=BN, fast_accum=fast)


def _key(a, b, sa, sb, c) -> tuple:
    """What the tile width depends on: C's rows and columns (_mn_key)."""
    return _mn_key(c.shape[-2], c.shape[-1])


def _mn_key(M: int, N: int) -> tuple:
    return bucket(M), bucket(N)


def _examples() -> list:
    def make(m, n, k):
        return lambda: [torch.randn(m, k, device="cuda").to(E4M3).view(1, 1, m, k),
                        torch.randn(n, k, device="cuda").to(E4M3).view(1, 1, n, k),
                        torch.ones(1, 1, 1, 1, device="cuda"), torch.ones(1, 1, 1, 1, device="cuda"),
                        torch.empty(1, 1, m, n, device="cuda", dtype=torch.bfloat16)]
    return [make(m, n, 4096) for m in (1024, 2048, 4096, 8192) for n in (1024, 4096, 8192)]


# use_fast_accum's tile width, tuned per GPU (tkc/tune/tables), as
# tkc.matmul's. The promoted kernel is 128 wide: its second accumulator
# leaves no registers for wider tiles (scaled_mm_hopper).
FAST_TILE = autotune(space={"BN": [256, 128, 192]}, key=_key, name="tkc.scaled_mm.fast_tile",
                     examples=_examples)(lambda BN: _kernel("bf16", False, BN, True))


def _plan(a: Tensor, b: Tensor, sa: Tensor, sb: Tensor, out_dtype, fast: bool):
    M, N = a.shape[0], b.shape[1]
    rowwise = sa.numel() != 1 or sb.numel() != 1
    if a.numel() == 0 or b.numel() == 0:
        return lambda a, b, sa, sb: torch.zeros(M, N, device=a.device, dtype=out_dtype)
    bn = FAST_TILE.choose(_mn_key(M, N))["BN"] if fast else PROMOTED_BN
    c = torch.empty(M, N, device=a.device, dtype=out_dtype)
    views = lambda a, b, sa, sb: (a.view(1, 1, M, -1), b.t().view(1, 1, N, -1),  # noqa: E731
                                  sa.reshape(1, 1, 1, -1), sb.reshape(1, 1, 1, -1))
    launch = _kernel(OUT[out_dtype], rowwise, bn, fast).prepare(*views(a, b, sa, sb), c.view(1, 1, M, N))

    def run(a, b, sa, sb):
        c = torch.empty(M, N, device=a.device, dtype=out_dtype)
        launch(*views(a, b, sa, sb), c.view(1, 1, M, N))
        return c
    return run


_plans = PlanCache(_plan)


def _impl(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype,
          use_fast_accum: bool) -> Tensor:
    return _plans((signature(a, b, scale_a, scale_b), out_dtype, use_fast_accum), a, b, scale_a, scale_b,
                  out_dtype, use_fast_accum)(a, b, scale_a, scale_b)


def _fake(a, b, scale_a, scale_b, out_dtype, use_fast_accum):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


_scaled_mm = Op("tkc::scaled_mm", _impl, _fake)


@public
def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor,
              out_dtype: torch.dtype = torch.bfloat16, use_fast_accum: bool = False) -> Tensor:
    """(a @ b) * scale_a * scale_b for a [M, K] e4m3 row-major and b [K, N] e4m3
    column-major (b.t() contiguous), f32 scales per tensor (one element each)
    or row-wise (scale_a [M, 1], scale_b [1, N]), out_dtype bf16 or f32: the
    semantics of torch._scaled_mm. K a multiple of 16, N of 8.
    use_fast_accum=True (as torch's): the wgmmas accumulate into the result
    directly, in their reduced precision, faster; False (the default):
    promoted into f32 every 128 of K, the accuracy of torch's default."""
    fn = "scaled_mm"
    check_tensor(fn, "a", a, 2, "[M, K]", (E4M3,))
    check_tensor(fn, "b", b, 2, "[K, N]", (E4M3,))
    check_tensor(fn, "scale_a", scale_a, None, "", (F32,))
    check_tensor(fn, "scale_b", scale_b, None, "", (F32,))
    (M, K), N = a.shape, b.shape[1]
    if b.shape[0] != K:
        raise TkcError(f"{fn}: b must be [K, N] with a's K = {K}, got shape {tuple(b.shape)}", caller())
    if out_dtype not in OUT:
        raise TkcError(f"{fn}: out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}",
                       caller())
    if K % 16 or N % 8:
        raise TkcError(f"{fn}: K = {K} must be a multiple of 16 and N = {N} of 8 (TMA moves rows of "
                       f"16 bytes: 16 e4m3 of a and b, 8 bf16 of the result)", caller())
    if a.stride() != (K, 1):
        raise TkcError(f"{fn}: a must be row-major (contiguous [M, K]), got strides {a.stride()}",
                       caller())
    if b.stride() != (1, K):
        raise TkcError(f"{fn}: b must be column-major, b.t() a contiguous [N, K] (FP8 wgmma reads "
                       f"both operands K-major), got strides {b.stride()}: pass b.t().contiguous().t()",
                       caller())
    per_tensor = scale_a.numel() == 1 and scale_b.numel() == 1
    rowwise = tuple(scale_a.shape) == (M, 1) and tuple(scale_b.shape) == (1, N)
    if not (per_tensor or rowwise):
        raise TkcError(f"{fn}: scales must be one element each (per tensor) or scale_a [M, 1] = "
                       f"[{M}, 1] and scale_b [1, N] = [1, {N}] (row-wise), got "
                       f"{tuple(scale_a.shape)} and {tuple(scale_b.shape)}", caller())
    if not (scale_a.is_contiguous() and scale_b.is_contiguous()):
        raise TkcError(f"{fn}: scales must be contiguous", caller())
    check_device(fn, ("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b))
    return _scaled_mm(a, b, scale_a, scale_b, out_dtype, bool(use_fast_accum))
