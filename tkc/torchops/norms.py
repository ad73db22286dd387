"""Fused dropout + residual + LayerNorm and RMSNorm as PyTorch ops
(tkc.layer_norm, tkc.rms_norm).

    y = tkc.layer_norm(x, w, b)                             # x [..., D] bf16
    y, h = tkc.layer_norm(x, w, b, residual=r, dropout_p=0.1, prenorm=True)

Differentiable in x, residual, weight and bias. The kernels:
tkc/kernels/layernorm.py (and rmsnorm.py). Importing this module needs torch, not MLIR (with
TKC_OFFLINE=1 the kernels come from the artifact cache).
"""
from __future__ import annotations

import functools
import operator

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.layernorm import layernorm_bwd, layernorm_fwd
from ..kernels.rmsnorm import rmsnorm_bwd, rmsnorm_fwd
from ..runtime.callsite import caller
from . import checks
from .checks import check_device, check_tensor
from .eager import Op, grad_key, public, wants_grad
from .plans import PlanCache, scratch, signature, sms

__all__ = ["layer_norm", "rms_norm"]
WARPS = 4
MAX_D = 16384  # the longest row the kernels serve


@functools.lru_cache(maxsize=None)
def _ln_kernels(D: int, dropout: bool, residual: bool = True):
    return (layernorm_fwd(D, dropout, WARPS, residual), layernorm_bwd(D, dropout, WARPS, residual))


def _bf16(t: Tensor) -> Tensor:
    return t if t.dtype == torch.bfloat16 and t.is_contiguous() else t.to(torch.bfloat16).contiguous()


# ---------------------------------------------------------------- the kernels' calls
#
# Both norms' kernels take their arguments in one order (tkc/kernels/layernorm.py),
# each part present or not: forward x, [residual], w, [b] -> y, [h], [mean],
# rstd, then p, eps, seed, offset; backward dy, [dh_next], h (x without a
# residual), w, [mean], rstd -> dx, [dres: with a residual and dropout], dw
# partials, [db partials], then p, seed, offset. The partial sums are one
# [parts, blocks, D] f32 buffer (2 blocks an SM), reduced at once afterwards
# into the [parts, D] output (an op's outputs may not alias each other).

def _kernels(rms: bool, D: int, dropout: bool, residual: bool):
    return (_rms_kernels if rms else _ln_kernels)(D, dropout, residual)


def _fwd_plan(rms: bool, x: Tensor, res: Tensor | None, w: Tensor, b: Tensor | None, p: float):
    N, D = x.shape
    dev = x.device
    # mean and rstd of calls without a backward: scratch memory, kept with the plan
    unread = None if rms else scratch(dev, N, "norm mean"), scratch(dev, N, "norm rstd")

    def outputs(x, stats: bool = True):  # h only with a residual, mean only for LayerNorm (None:
        y = torch.empty_like(x)            # not made); stats=False: mean and rstd unread
        h = torch.empty_like(x) if res is not None else None
        if not stats:
            return y, h, *unread
        mean = None if rms else torch.empty(N, device=dev, dtype=torch.float32)
        return y, h, mean, torch.empty(N, device=dev, dtype=torch.float32)

    if N == 0:
        return lambda x, res, w, b, eps, p, seed, offset, stats=True: outputs(x)
    row = lambda t: t.view(1, -1)  # noqa: E731  (w, b, mean, rstd as one-row gls)
    # the kernel's tensors of (x, res, w, b, y, h, mean, rstd)
    parts = operator.itemgetter(*(i for i, on in enumerate(
        (True, res is not None, True, not rms, True, res is not None, not rms, True)) if on))
    y, h, mean, rstd = outputs(x)
    launch = _kernels(rms, D, p > 0, res is not None)[0].prepare(
        *parts((x, res, row(w), None if rms else row(b), y, h, None if rms else row(mean),
                row(rstd))), p, 1e-5, 0, 0)

    def run(x, res, w, b, eps, p, seed, offset, stats=True):
        """x (and res) may be any contiguous tensor of these rows: y and h take its shape."""
        y, h, mean, rstd = out = outputs(x, stats)
        launch(*parts((x, res, w, b, y, h, mean, rstd)), p, eps, seed, offset)
        return out
    return run


def _bwd_plan(rms: bool, dy: Tensor, dhn: Tensor | None, h: Tensor, w: Tensor, mean: Tensor,
              rstd: Tensor, p: float):
    N, D = dy.shape
    dev, residual = dy.device, dhn is not None
    dres_too = residual and p > 0
    k = 1 if rms else 2  # dw (and db) partial sums
    blocks = sms(dev) * 2

    def outputs():  # dres only where it differs from dx (None: not made)
        return torch.empty_like(dy), torch.empty_like(dy) if dres_too else None

    if N == 0:
        return lambda *args: (*outputs(), w.new_zeros(k, D) if args[-1] else None)
    row = lambda t: t.view(1, -1)  # noqa: E731
    part = torch.empty(k, blocks, D, device=dev, dtype=torch.float32)
    # the partial sums of a backward whose dw and db nobody wants: scratch memory
    unread = scratch(dev, k * blocks * D, "norm partials")
    unread = unread, None if rms else unread[blocks * D:]
    # the kernel's tensors of (dy, dhn, h, w, mean, rstd, dx, dres, dw part, db part);
    # dw's partials are part's first plane, so part itself is passed for them
    parts = operator.itemgetter(*(i for i, on in enumerate(
        (True, residual, True, True, not rms, True, True, dres_too, True, not rms)) if on))
    dx, dres = outputs()
    launch = _kernels(rms, D, p > 0, residual)[1].prepare(
        *parts((dy, dhn, h, row(w), None if rms else row(mean), row(rstd), dx, dres, part[0],
                None if rms else part[1])), p, 0, 0)

    def run(dy, dhn, h, w, mean, rstd, p, seed, offset, params):
        dx, dres = outputs()
        if not params:
            launch(*parts((dy, dhn, h, w, mean, rstd, dx, dres, *unread)), p, seed, offset)
            return dx, dres, None
        part = torch.empty(k, blocks, D, device=dev, dtype=torch.float32)
        launch(*parts((dy, dhn, h, w, mean, rstd, dx, dres, part, None if rms else part[1])),
               p, seed, offset)
        return dx, dres, part.sum(1).to(w.dtype)
    return run


def _plan_key(rms: bool, p: float, *ts) -> tuple:
    return rms, p > 0, signature(*ts)


_fwd_plans = PlanCache(_fwd_plan)
_bwd_plans = PlanCache(_bwd_plan)


def _norm_fwd(rms, x, res, w, b, eps, p, seed, offset, stats=True):
    """(y, h, mean, rstd): h None without a residual, mean None for RMSNorm;
    stats=False: mean and rstd in scratch memory (for no backward)."""
    plan = _fwd_plans(_plan_key(rms, p, x, res, w, b), rms, x, res, w, b, p)
    return plan(x, res, w, b, eps, p, seed, offset, stats)


def _norm_bwd(rms, dy, dhn, h, w, mean, rstd, p, seed, offset, params):
    """(dx, dres, [dw; db] or [dw]): dres None unless a residual and dropout;
    the weight (and bias) gradients None unless params. The key: what the
    backward's arguments may vary in. dy, dh_next and h are contiguous (the
    autograd formulas and the forward make them so: their strides are still
    keyed, as a compiled graph may hand others), w is bf16 [D] and the
    statistics f32 [N] as the forward made them."""
    key = (rms, p > 0, dhn is None, dy.shape, dy.stride(), h.stride(), dy.device, dy.dtype,
           (dy.data_ptr() | h.data_ptr() | (0 if dhn is None else dhn.data_ptr())) & 15,
           None if dhn is None else dhn.stride())
    plan = _bwd_plans(key, rms, dy, dhn, h, w, mean, rstd, p)
    return plan(dy, dhn, h, w, mean, rstd, p, seed, offset, params)


# ---------------------------------------------------------------- layer norm
#
# Two op families: with a residual (tkc::layer_norm_fwd / _bwd: h = dropout(x)
# + residual is written, and read back by the backward) and without one
# (tkc::layer_norm_fwd_nores / _bwd_nores: reads x only, writes no h; the
# backward reads x and redraws the dropout mask). Without dropout the
# residual's gradient is dx itself: the backward writes dx only and returns an
# empty dres (an op's outputs may not alias), and the autograd formula hands
# dx to both. The backward ops return dw and db stacked, [2, D].

def _ln_fwd_impl(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float,
                 seed: int, offset: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _norm_fwd(False, x, residual, weight, bias, eps, p, seed, offset)


def _ln_fwd_fake(x, residual, weight, bias, eps, p, seed, offset):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), torch.empty_like(x), stat, torch.empty_like(stat)


def _ln_bwd_impl(dy: Tensor, dh_next: Tensor, h: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor,
                 p: float, seed: int, offset: int, params: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dres, [dw; db]); dres is empty without dropout (it is dx), [dw; db]
    empty unless params (the weight's or the bias's gradient is wanted)."""
    dx, dres, dwb = _norm_bwd(False, dy, dh_next, h, weight, mean, rstd, p, seed, offset, params)
    return dx, dy.new_empty(0) if dres is None else dres, _given(dwb, weight)


def _ln_bwd_fake(dy, dh_next, h, weight, mean, rstd, p, seed, offset, params):
    dres = torch.empty_like(dy) if p > 0 else dy.new_empty(0)
    return torch.empty_like(dy), dres, weight.new_empty(2 if params else 0, dy.shape[1])


def _given(t: Tensor | None, like: Tensor) -> Tensor:
    """An op output that may be absent: empty then (an op returns tensors)."""
    return like.new_empty(0, like.shape[0]) if t is None else t


def _params_grads(ctx, dwb: Tensor, i: int) -> list:
    """LayerNorm's weight and bias gradients, the rows of dwb, for inputs i
    and i + 1: each None unless wanted."""
    if not dwb.numel():
        return [None, None]
    return [row if ctx.needs_input_grad[i + n] else None for n, row in enumerate(dwb.unbind(0))]


def _ln_setup(ctx, inputs, output):
    _, _, weight, _, _, p, seed, offset = inputs
    _, h, mean, rstd = output
    ctx.save_for_backward(h, weight, mean, rstd)
    ctx.p, ctx.seed, ctx.offset = p, seed, offset


def _ln_backward(ctx, dy, dh, dmean, drstd):
    h, weight, mean, rstd = ctx.saved_tensors
    dy = torch.zeros_like(h) if dy is None else dy.contiguous()
    dh = torch.zeros_like(h) if dh is None else dh.contiguous()
    dx, dres, dwb = _ln_bwd(dy, dh, h, weight, mean, rstd, ctx.p, ctx.seed, ctx.offset,
                            ctx.needs_input_grad[2] or ctx.needs_input_grad[3])
    return dx, (dres if ctx.p > 0 else dx), *_params_grads(ctx, dwb, 2), None, None, None, None


_ln_bwd = Op("tkc::layer_norm_bwd", _ln_bwd_impl, _ln_bwd_fake)
_ln_fwd = Op("tkc::layer_norm_fwd", _ln_fwd_impl, _ln_fwd_fake, _ln_setup, _ln_backward)


def _ln_fwd_nores_impl(x: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float, seed: int,
                       offset: int) -> tuple[Tensor, Tensor, Tensor]:
    y, _, mean, rstd = _norm_fwd(False, x, None, weight, bias, eps, p, seed, offset)
    return y, mean, rstd


def _ln_fwd_nores_fake(x, weight, bias, eps, p, seed, offset):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), stat, torch.empty_like(stat)


def _ln_bwd_nores_impl(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor, p: float,
                       seed: int, offset: int, params: bool) -> tuple[Tensor, Tensor]:
    """(dx, [dw; db]) ([dw; db] empty unless params)."""
    dx, _, dwb = _norm_bwd(False, dy, None, x, weight, mean, rstd, p, seed, offset, params)
    return dx, _given(dwb, weight)


def _ln_bwd_nores_fake(dy, x, weight, mean, rstd, p, seed, offset, params):
    return torch.empty_like(dy), weight.new_empty(2 if params else 0, dy.shape[1])


def _ln_nores_setup(ctx, inputs, output):
    x, weight, _, _, p, seed, offset = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.p, ctx.seed, ctx.offset = p, seed, offset


def _ln_nores_backward(ctx, dy, dmean, drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dy = torch.zeros_like(x) if dy is None else dy.contiguous()
    dx, dwb = _ln_bwd_nores(dy, x, weight, mean, rstd, ctx.p, ctx.seed, ctx.offset,
                            ctx.needs_input_grad[1] or ctx.needs_input_grad[2])
    return dx, *_params_grads(ctx, dwb, 1), None, None, None, None


_ln_bwd_nores = Op("tkc::layer_norm_bwd_nores", _ln_bwd_nores_impl, _ln_bwd_nores_fake)
_ln_fwd_nores = Op("tkc::layer_norm_fwd_nores", _ln_fwd_nores_impl, _ln_fwd_nores_fake,
                   _ln_nores_setup, _ln_nores_backward,
                   lambda x, w, b, eps, p, seed, offset:
                   _norm_fwd(False, x, None, w, b, eps, p, seed, offset, False)[0])


def _philox(x: Tensor, p: float) -> tuple[int, int]:
    """(seed, offset) from the device's default generator, advanced past the
    numbers this call draws (PyTorch's accounting: one per 4 elements)."""
    if p == 0:
        return 0, 0
    gen = torch.cuda.default_generators[x.device.index or 0]
    seed, offset = gen.initial_seed() & 0x7FFFFFFF, gen.get_offset()
    gen.set_offset(offset + (x.numel() + 3) // 4 * 4)
    return seed, offset & 0x7FFFFFFF


# ---------------------------------------------------------------- repeated eager calls
#
# An eager call (eager.grad_key: nothing tracing) without dropout, its tensors
# needing no copy, keeps a run of its forward plan, which the next call with
# its key goes straight to (the key fixes what the checks read): the plan, or,
# with a gradient wanted (x as rows [N, D]), the op's autograd call with it.

_plain = PlanCache()  # both norms': key -> run(x, weight, bias, residual)


def _keep_plain(key, rms: bool, eps: float, prenorm: bool, x: Tensor, x2: Tensor,
                residual: Tensor | None, r2: Tensor | None, weight: Tensor, w: Tensor,
                bias: Tensor | None, b: Tensor | None) -> None:
    if not x.is_contiguous() or w is not weight or b is not bias \
            or residual is not None and r2.data_ptr() != residual.data_ptr():
        return
    plan = _fwd_plans(_plan_key(rms, 0.0, x2, r2, w, b), rms, x2, r2, w, b, 0.0)
    if wants_grad(x, residual, weight, bias):
        if x2 is not x or residual is not None and r2 is not residual:
            return
        run = _grad_run(rms, eps, prenorm, plan, residual is not None)
    else:
        def run(x, w, b, r):  # y, and h (x itself without a residual) for prenorm
            out = plan(x, r, w, b, eps, 0.0, 0, 0, False)
            return (out[0], x if r is None else out[1]) if prenorm else out[0]
    _plain.keep(key, run)


def _grad_run(rms: bool, eps: float, prenorm: bool, plan, residual: bool):
    """The run of a call wanting a gradient: the full path's op, Op.fast with the plan."""
    if rms:
        def fwd(x, r, w, eps, p, seed, offset):  # _rms_fwd_impl's outputs
            y, h, _, rstd = plan(x, r, w, None, eps, p, seed, offset)
            return y, x.new_empty(0) if h is None else h, rstd
        call = lambda x, w, b, r: _rms_fwd.fast(x, r, w, eps, 0.0, 0, 0, fwd)  # noqa: E731
    elif residual:
        call = lambda x, w, b, r: _ln_fwd.fast(x, r, w, b, eps, 0.0, 0, 0, plan)  # noqa: E731
    else:
        def fwd(x, w, b, eps, p, seed, offset):  # _ln_fwd_nores_impl's outputs
            y, _, mean, rstd = plan(x, None, w, b, eps, p, seed, offset)
            return y, mean, rstd
        call = lambda x, w, b, r: _ln_fwd_nores.fast(x, w, b, eps, 0.0, 0, 0, fwd)  # noqa: E731

    def run(x, w, b, r):  # y, and h (x itself without a residual) for prenorm
        out = call(x, w, b, r)
        return (out[0], out[1] if residual else x) if prenorm else out[0]
    return run


@public
def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None = None,
               eps: float = 1e-5, dropout_p: float = 0.0, prenorm: bool = False):
    """LayerNorm(dropout(x) + residual) over the last dim (bf16, D a multiple of
    256), differentiable in x, residual, weight and bias. prenorm=True also
    returns h = dropout(x) + residual, the residual stream's next value."""
    key = grad_key((False, eps, dropout_p, prenorm), x, weight, bias, residual)
    run = _plain.get(key)
    if run is not None:
        return run(x, weight, bias, residual)
    _check("layer_norm", x, weight, bias, residual)
    if not 0 <= dropout_p < 1:
        raise TkcError(f"layer_norm: dropout_p must be in [0, 1), got {dropout_p}", caller())
    x2 = _rows(x)
    seed, offset = _philox(x2, dropout_p)
    w, b = _bf16(weight), _bf16(bias)
    if residual is None and not (prenorm and dropout_p > 0):  # reads x only
        y = _shaped(_ln_fwd_nores.main_output(x2, w, b, eps, dropout_p, seed, offset), x)
        if key is not None and not dropout_p:
            _keep_plain(key, False, eps, prenorm, x, x2, None, None, weight, w, bias, b)
        return (y, x) if prenorm else y  # h = x (without dropout)
    # with a residual, or h = dropout(x) wanted: the residual kernels (a zero residual)
    r2 = _bf16(_rows(residual)) if residual is not None else torch.zeros_like(x2)
    y, h, _, _ = _ln_fwd(x2, r2, w, b, eps, dropout_p, seed, offset)
    if key is not None and not dropout_p:
        _keep_plain(key, False, eps, prenorm, x, x2, residual, r2, weight, w, bias, b)
    y, h = _shaped(y, x), _shaped(h, x)
    return (y, h) if prenorm else y


def _rows(x: Tensor) -> Tensor:
    """x as contiguous rows [N, D] (x itself when it is one: no view made)."""
    if x.dim() == 2 and x.is_contiguous():
        return x
    return x.reshape(-1, x.shape[-1]).contiguous()


def _shaped(y: Tensor, x: Tensor) -> Tensor:
    return y if y.dim() == x.dim() else y.view(x.shape)


def _fits(t, shape, device) -> bool:
    return isinstance(t, Tensor) and t.shape == shape and t.is_floating_point() and t.device == device


def _check(fn: str, x, weight, bias, residual) -> None:
    """x bf16 [..., D] with D served; weight and bias [D]; residual x's shape;
    all on x's CUDA device: errors at the caller's line. The common case in
    a few reads; the checks that name what is wrong only when something is."""
    if isinstance(x, Tensor) and x.dtype == torch.bfloat16 and x.dim() \
            and x.device.type == checks.DEVICE_TYPE:
        D, dev = x.shape[-1], x.device
        if not D % 256 and 256 <= D <= MAX_D and _fits(weight, (D,), dev) \
                and (bias is None and fn == "rms_norm" or _fits(bias, (D,), dev)) \
                and (residual is None or _fits(residual, x.shape, dev)):
            return
    _explain(fn, x, weight, bias, residual)


def _explain(fn: str, x, weight, bias, residual) -> None:
    """_check's errors."""
    check_tensor(fn, "x", x, None, "", (torch.bfloat16,))
    D = x.shape[-1] if x.dim() else 0
    if x.dim() == 0 or D % 256 or not 256 <= D <= MAX_D:
        raise TkcError(f"{fn}: x's last dim must be a multiple of 256 in 256..{MAX_D}, got shape "
                       f"{tuple(x.shape)}", caller())
    named = [("x", x)]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None and name == "bias" and fn == "rms_norm":
            continue
        check_tensor(fn, name, t, 1, f"[{D}]")
        if t.shape[0] != D or not t.is_floating_point():
            raise TkcError(f"{fn}: {name} must be a float tensor [{D}] (x's last dim), got "
                           f"{t.dtype} {tuple(t.shape)}", caller())
        named.append((name, t))
    if residual is not None:
        check_tensor(fn, "residual", residual)
        if residual.shape != x.shape or not residual.is_floating_point():
            raise TkcError(f"{fn}: residual must be a float tensor of x's shape {tuple(x.shape)}, "
                           f"got {residual.dtype} {tuple(residual.shape)}", caller())
        named.append(("residual", residual))
    check_device(fn, *named)


# ---------------------------------------------------------------- RMSNorm
#
# One op pair, always through the residual kernels' shape of arguments when a
# residual is given (h written for the backward), else the x-only ones. The
# backward returns dw as [1, D] (no bias).

@functools.lru_cache(maxsize=None)
def _rms_kernels(D: int, dropout: bool, residual: bool):
    return rmsnorm_fwd(D, dropout, WARPS, residual), rmsnorm_bwd(D, dropout, WARPS, residual)


def _rms_fwd_impl(x: Tensor, residual: Tensor | None, weight: Tensor, eps: float, p: float,
                  seed: int, offset: int) -> tuple[Tensor, Tensor, Tensor]:
    """(y, h, rstd); h is empty without a residual (it is x, or redrawn)."""
    y, h, _, rstd = _norm_fwd(True, x, residual, weight, None, eps, p, seed, offset)
    return y, x.new_empty(0) if h is None else h, rstd


def _rms_fwd_fake(x, residual, weight, eps, p, seed, offset):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), torch.empty_like(x) if residual is not None else x.new_empty(0), stat


def _rms_bwd_impl(dy: Tensor, dh_next: Tensor | None, h: Tensor, weight: Tensor, rstd: Tensor,
                  p: float, seed: int, offset: int, params: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dres, dw [1, D]); h is x without a residual (dh_next None); dres is
    empty unless a residual and dropout (otherwise it is dx, or absent); dw
    empty unless params."""
    dx, dres, dw = _norm_bwd(True, dy, dh_next, h, weight, None, rstd, p, seed, offset, params)
    return dx, dy.new_empty(0) if dres is None else dres, _given(dw, weight)


def _rms_bwd_fake(dy, dh_next, h, weight, rstd, p, seed, offset, params):
    dres = torch.empty_like(dy) if dh_next is not None and p > 0 else dy.new_empty(0)
    return torch.empty_like(dy), dres, weight.new_empty(1 if params else 0, dy.shape[1])


def _rms_setup(ctx, inputs, output):
    x, residual, weight, _, p, seed, offset = inputs
    _, h, rstd = output
    ctx.residual = residual is not None
    ctx.save_for_backward(h if ctx.residual else x, weight, rstd)
    ctx.p, ctx.seed, ctx.offset = p, seed, offset


def _rms_backward(ctx, dy, dh, drstd):
    h, weight, rstd = ctx.saved_tensors
    dy = torch.zeros_like(h) if dy is None else dy.contiguous()
    dhn = None
    if ctx.residual:
        dhn = torch.zeros_like(h) if dh is None else dh.contiguous()
    dx, dres, dw = _rms_bwd(dy, dhn, h, weight, rstd, ctx.p, ctx.seed, ctx.offset,
                            ctx.needs_input_grad[2])
    dr = (dres if dres.numel() else dx) if ctx.residual else None
    return dx, dr, dw[0] if dw.numel() else None, None, None, None, None


_rms_bwd = Op("tkc::rms_norm_bwd", _rms_bwd_impl, _rms_bwd_fake)
_rms_fwd = Op("tkc::rms_norm_fwd", _rms_fwd_impl, _rms_fwd_fake, _rms_setup, _rms_backward,
              lambda x, res, w, eps, p, seed, offset:
              _norm_fwd(True, x, res, w, None, eps, p, seed, offset, False)[0])


@public
def rms_norm(x: Tensor, weight: Tensor, residual: Tensor | None = None, eps: float = 1e-6,
             dropout_p: float = 0.0, prenorm: bool = False):
    """RMSNorm(dropout(x) + residual) = h * rsqrt(mean(h^2) + eps) * weight over
    the last dim (x bf16, D a multiple of 256 up to 16384), differentiable in x,
    residual and weight. prenorm=True also returns h, the residual stream's
    next value (without a residual, h = dropout(x): the residual kernels run
    with a zero residual to write it)."""
    key = grad_key((True, eps, dropout_p, prenorm), x, weight, residual)
    run = _plain.get(key)
    if run is not None:
        return run(x, weight, None, residual)
    _check("rms_norm", x, weight, None, residual)
    if not 0 <= dropout_p < 1:
        raise TkcError(f"rms_norm: dropout_p must be in [0, 1), got {dropout_p}", caller())
    x2 = _rows(x)
    seed, offset = _philox(x2, dropout_p)
    if residual is None and prenorm and dropout_p > 0:
        residual = torch.zeros_like(x)
    r2 = _bf16(_rows(residual)) if residual is not None else None
    w = _bf16(weight)
    if key is not None and not dropout_p:
        _keep_plain(key, True, eps, prenorm, x, x2, residual, r2, weight, w, None, None)
    if not prenorm:
        return _shaped(_rms_fwd.main_output(x2, r2, w, eps, dropout_p, seed, offset), x)
    y, h, _ = _rms_fwd(x2, r2, w, eps, dropout_p, seed, offset)
    return _shaped(y, x), (_shaped(h, x) if r2 is not None else x)
