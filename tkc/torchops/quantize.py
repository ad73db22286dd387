"""bf16 -> e4m3 with 1x128 scales as a PyTorch op: tkc.quantize_fp8.

    q, s = tkc.quantize_fp8(x)            # x [M, K] bf16, K a multiple of 128
    c = tkc.scaled_mm(q, w, s, w_scales)  # w [K, N] e4m3 column-major, w_scales [K/128, ceil(N/128)]

q [M, K] float8_e4m3fn and s [M, K/128] float32 with q * s (s repeated
over each block of 128 columns) equal to x to e4m3's precision: per row and
block, s = amax / 448 and q = satfinite(x * (448 / amax)) (amax floored at
2^-100; an infinity makes its block's scale infinite, a NaN stays NaN and is
left out of amax: tkc/kernels/quantize_fp8.py). s is stored transposed (its
strides are (1, M)): the layout tkc.scaled_mm and torch._scaled_mm take
block scales in, written so by the kernel (s.contiguous() gives row-major).
Forward only. The kernel: tkc/kernels/quantize_fp8.py.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.quantize_fp8 import quantize_fp8 as QUANTIZE
from ..runtime.callsite import caller
from .checks import check_device, check_tensor, dense
from .eager import Op, plain_key, public
from .plans import PlanCache, signature

__all__ = ["quantize_fp8"]
BLOCK = 128


def _kernel():
    return QUANTIZE


def _plan(x: Tensor):
    M, K = x.shape
    if x.numel() == 0:
        return lambda x: _outputs(x)
    launch = _kernel().prepare(x.view(1, 1, M, K), *_views(*_outputs(x)))

    def run(x):   # (a prepared launch reads the data pointers alone: no views)
        q, s = _outputs(x)
        launch(x, q, s)
        return q, s
    return run


def _outputs(x: Tensor):
    """q [M, K] and s [M, K/128] stored as [K/128, M] (strides (1, M))."""
    M, K = x.shape
    return (torch.empty(M, K, device=x.device, dtype=torch.float8_e4m3fn),
            torch.empty(K // BLOCK, M, device=x.device, dtype=torch.float32).t())


def _views(q: Tensor, s: Tensor):
    return q.view(1, 1, *q.shape), s.t().view(1, 1, *s.t().shape)


_plans = PlanCache(_plan)
_plain = PlanCache()   # an eager call's key (eager.plain_key) -> its plan's run


def _impl(x: Tensor) -> tuple[Tensor, Tensor]:
    return _plans((signature(x),), x)(x)


def _fake(x):
    return _outputs(x)


_quantize = Op("tkc::quantize_fp8", _impl, _fake)


@public
def quantize_fp8(x: Tensor) -> tuple[Tensor, Tensor]:
    """(q, s): x [M, K] bf16 (K a multiple of 128; a non-contiguous x is
    copied first) as q [M, K] float8_e4m3fn and its 1x128 scales s [M, K/128]
    float32, strides (1, M): x ~ q * s per block of 128 columns."""
    key = plain_key(None, x)
    run = _plain.get(key)
    if run is not None:   # a repeated eager call: the key fixes what the checks read
        return run(x)
    fn = "quantize_fp8"
    check_tensor(fn, "x", x, 2, "[M, K]", (torch.bfloat16,))
    if x.shape[1] % BLOCK:
        raise TkcError(f"{fn}: the scales cover blocks of 128 columns: K = {x.shape[1]} must be a "
                       f"multiple of 128", caller())
    check_device(fn, ("x", x))
    if key is not None and x.is_contiguous():   # eager, nothing to copy: the plan at once next time
        run = _plans((signature(x),), x)
        _plain.keep(key, run)
        return run(x)
    return _quantize(dense(x))


def reference(x: Tensor) -> tuple[Tensor, Tensor]:
    """tkc.quantize_fp8's rule in torch ops (DeepGEMM's per-token cast, with
    its guards), for tests and benchmarks: (q, s), s row-major [M, K/128].
    Both divisions are of two tensors: torch's `448.0 / t` is reciprocal(t) *
    448 and `t / 448.0` multiplies by 1/448 (on CUDA), neither the correctly
    rounded division the kernel does."""
    M, K = x.shape
    blocks = x.float().view(M, K // BLOCK, BLOCK)
    amax = torch.where(blocks.isnan(), 0.0, blocks.abs()).amax(-1).clamp(min=2.0 ** -100)
    top = torch.full_like(amax, 448.0)
    q = (blocks * torch.div(top, amax)[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.view(M, K), torch.div(amax, top)

