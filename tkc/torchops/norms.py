"""Fused dropout + residual + LayerNorm and RMSNorm as PyTorch ops
(tkc.layer_norm, tkc.rms_norm).

    y = tkc.layer_norm(x, w, b)                             # x [..., D] bf16
    y, h = tkc.layer_norm(x, w, b, residual=r, dropout_p=0.1, prenorm=True)

Differentiable in x, residual, weight and bias. The kernels:
tkc/kernels/layernorm.py (and rmsnorm.py). Importing this module needs torch, not MLIR (with
TKC_OFFLINE=1 the kernels come from the artifact cache).
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..runtime.callsite import caller
from . import checks
from .checks import autocast, check_device, check_flags, check_tensor, dense, finite, is_dense
from .eager import Op, grad_key, public, readable, tracing, wants_grad
from .norm_plans import fwd_plans, no_dropout, norm_bwd, norm_fwd, plan_key
from .plans import Later, PlanCache

__all__ = ["layer_norm", "rms_norm"]
MAX_D = 16384  # the longest row the kernels serve


def _bf16(t: Tensor) -> Tensor:
    return dense(t.to(torch.bfloat16))


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
                 philox: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    x, residual, weight, bias = _dense(x, residual, weight, bias)
    return norm_fwd(False, x, residual, weight, bias, eps, p, philox)


def _dense(*ts):
    """The custom ops' tensors as the kernels read them (checks.dense; None
    stays): a compiled graph hands them as they are, views off a 16-byte
    boundary included."""
    return tuple(None if t is None else dense(t) for t in ts)


def _ln_fwd_fake(x, residual, weight, bias, eps, p, philox):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), torch.empty_like(x), stat, torch.empty_like(stat)


def _ln_bwd_impl(dy: Tensor, dh_next: Tensor, h: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor,
                 p: float, philox: Tensor, params: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dres, [dw; db]); dres is empty without dropout (it is dx), [dw; db]
    empty unless params (the weight's or the bias's gradient is wanted)."""
    dy, dh_next, h, weight = _dense(dy, dh_next, h, weight)
    dx, dres, dwb = norm_bwd(False, dy, dh_next, h, weight, mean, rstd, p, philox, params)
    return dx, dy.new_empty(0) if dres is None else dres, _given(dwb, weight)


def _ln_bwd_fake(dy, dh_next, h, weight, mean, rstd, p, philox, params):
    dres = torch.empty_like(dy) if p > 0 else dy.new_empty(0)
    return torch.empty_like(dy), dres, weight.new_empty(2 if params else 0, dy.shape[1])


def _given(t: Tensor | None, like: Tensor) -> Tensor:
    """An op output that may be absent: empty then (an op returns tensors)."""
    return like.new_empty(0, like.shape[0]) if t is None else t


def _present(dx: Tensor, *rest: Tensor) -> tuple:
    """A backward op's outputs, None for each absent (empty) one but dx.

    The autograd formulas call the backward ops only while tracing (the graph
    must see tkc::*_bwd); an eager backward calls norm_bwd, which makes no
    placeholder tensor for what is absent."""
    return dx, *(t if t.numel() else None for t in rest)


def _later(ctx):
    """The kept forward run's plans.Later (Op.fast: ctx.run), or None."""
    return getattr(getattr(ctx, "run", None), "later", None)


def _params_grads(ctx, dwb: Tensor | None, i: int) -> list:
    """LayerNorm's weight and bias gradients, the rows of dwb, for inputs i
    and i + 1: each None unless wanted."""
    if dwb is None:
        return [None, None]
    return [row if ctx.needs_input_grad[i + n] else None for n, row in enumerate(dwb.unbind(0))]


def _ln_setup(ctx, inputs, output):
    _, _, weight, _, _, p, philox = inputs
    _, h, mean, rstd = output
    ctx.save_for_backward(h, weight, mean, rstd, philox)
    ctx.p = p


def _ln_backward(ctx, dy, dh, dmean, drstd):
    h, weight, mean, rstd, philox = ctx.saved_tensors
    dy = torch.zeros_like(h) if dy is None else dense(dy)
    dh = torch.zeros_like(h) if dh is None else dense(dh)
    args = (dy, dh, h, weight, mean, rstd, ctx.p, philox,
            ctx.needs_input_grad[2] or ctx.needs_input_grad[3])
    dx, dres, dwb = _present(*_ln_bwd(*args)) if tracing(args) else norm_bwd(False, *args)
    return dx, (dres if ctx.p > 0 else dx), *_params_grads(ctx, dwb, 2), None, None, None


_ln_bwd = Op("tkc::layer_norm_bwd", _ln_bwd_impl, _ln_bwd_fake)
_ln_fwd = Op("tkc::layer_norm_fwd", _ln_fwd_impl, _ln_fwd_fake, _ln_setup, _ln_backward)


def _ln_fwd_nores_impl(x: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float,
                       philox: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    x, weight, bias = _dense(x, weight, bias)
    y, _, mean, rstd = norm_fwd(False, x, None, weight, bias, eps, p, philox)
    return y, mean, rstd


def _ln_fwd_nores_fake(x, weight, bias, eps, p, philox):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), stat, torch.empty_like(stat)


def _ln_bwd_nores_impl(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor, p: float,
                       philox: Tensor, params: bool) -> tuple[Tensor, Tensor]:
    """(dx, [dw; db]) ([dw; db] empty unless params)."""
    dy, x, weight = _dense(dy, x, weight)
    dx, _, dwb = norm_bwd(False, dy, None, x, weight, mean, rstd, p, philox, params)
    return dx, _given(dwb, weight)


def _ln_bwd_nores_fake(dy, x, weight, mean, rstd, p, philox, params):
    return torch.empty_like(dy), weight.new_empty(2 if params else 0, dy.shape[1])


def _ln_nores_setup(ctx, inputs, output):
    x, weight, _, _, p, philox = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd, philox)
    ctx.p = p


def _ln_nores_backward(ctx, dy, dmean, drstd):
    x, weight, mean, rstd, philox = ctx.saved_tensors
    dy = torch.zeros_like(x) if dy is None else dense(dy)
    args = (dy, x, weight, mean, rstd, ctx.p, philox,
            ctx.needs_input_grad[1] or ctx.needs_input_grad[2])
    if tracing(args):
        dx, dwb = _present(*_ln_bwd_nores(*args))
    else:
        dx, _, dwb = norm_bwd(False, dy, None, *args[1:], _later(ctx))
    return dx, *_params_grads(ctx, dwb, 1), None, None, None


_ln_bwd_nores = Op("tkc::layer_norm_bwd_nores", _ln_bwd_nores_impl, _ln_bwd_nores_fake)
_ln_fwd_nores = Op("tkc::layer_norm_fwd_nores", _ln_fwd_nores_impl, _ln_fwd_nores_fake,
                   _ln_nores_setup, _ln_nores_backward,
                   lambda x, w, b, eps, p, philox:
                   norm_fwd(False, x, None, w, b, eps, p, philox, False)[0])


def _philox(x: Tensor, p: float) -> Tensor:
    """The dropout's Philox seed and offset, i32 [1, 2] on x's device (a
    one-row gl), which the kernels read there (the backward again, to redraw
    the mask): drawn by torch's generator on the device, so a captured CUDA
    graph's replays and a compiled graph's calls each draw new ones. Without
    dropout the kernels read none: norm_plans.no_dropout's pair (made in the
    graph while tracing)."""
    if p:
        return torch.randint(0, 2 ** 31 - 1, (1, 2), device=x.device, dtype=torch.int32)
    if tracing((x,)):
        return torch.zeros(1, 2, device=x.device, dtype=torch.int32)
    return no_dropout(x.device)


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
    plan = fwd_plans(plan_key(rms, 0.0, x2, r2, w, b), rms, x2, r2, w, b, 0.0)
    none = _philox(x2, 0.0)   # (no dropout: the kernels read no seed)
    if wants_grad(x, residual, weight, bias):
        run = _grad_run(rms, eps, prenorm, plan, residual is not None, none)
        same = x2 is x and r2 is residual  # (the formulas want rows: [N, D])
    else:
        def run(x, w, b, r):  # y, and h (x itself without a residual) for prenorm
            out = plan(x, r, w, b, eps, 0.0, none, False)
            return (out[0], x if r is None else out[1]) if prenorm else out[0]
        same = is_dense(x) and (residual is None or r2.data_ptr() == residual.data_ptr())
    if not (same and w is weight and b is bias):
        run = _converting(run, prenorm)
    _plain.keep(key, run)


def _converting(run, prenorm: bool):
    """run on what the full path makes of the caller's tensors (x and the
    residual as contiguous rows, the weights bf16: f32 ones under autocast),
    its outputs in x's shape."""
    def converted(x, w, b, r):
        out = run(_rows(x), _bf16(w), None if b is None else _bf16(b),
                  None if r is None else _bf16(_rows(r)))
        if not prenorm:
            return _shaped(out, x)
        return _shaped(out[0], x), x if r is None else _shaped(out[1], x)
    return converted


def _grad_run(rms: bool, eps: float, prenorm: bool, plan, residual: bool, none: Tensor):
    """The run of a call wanting a gradient: the full path's op, Op.fast with
    the plan (Op.fast_main unless the caller keeps h, an output of its own)."""
    h_out = prenorm and residual
    fast = (lambda op: op.fast) if h_out else (lambda op: op.fast_main)  # noqa: E731
    if rms:
        def fwd(x, r, w, eps, p, philox):  # _rms_fwd_impl's outputs
            y, h, _, rstd = plan(x, r, w, None, eps, p, philox)
            return y, x.new_empty(0) if h is None else h, rstd
        fwd.later = Later()  # the backward's plan (without a residual)
        op = fast(_rms_fwd)
        call = lambda x, w, b, r: op(x, r, w, eps, 0.0, none, fwd)  # noqa: E731
    elif residual:
        op = fast(_ln_fwd)
        call = lambda x, w, b, r: op(x, r, w, b, eps, 0.0, none, plan)  # noqa: E731
    else:
        def fwd(x, w, b, eps, p, philox):  # _ln_fwd_nores_impl's outputs
            y, _, mean, rstd = plan(x, None, w, b, eps, p, philox)
            return y, mean, rstd
        fwd.later = Later()  # the backward's plan
        op = fast(_ln_fwd_nores)
        call = lambda x, w, b, r: op(x, w, b, eps, 0.0, none, fwd)  # noqa: E731

    if h_out:
        def run(x, w, b, r):  # y and h
            out = call(x, w, b, r)
            return out[0], out[1]
    elif prenorm:
        def run(x, w, b, r):  # y, and h: x itself without a residual
            return call(x, w, b, r), x
    else:
        run = call
    return run


@public
def layer_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, residual: Tensor | None = None,
               eps: float = 1e-5, dropout_p: float = 0.0, prenorm: bool = False):
    """LayerNorm(dropout(x) + residual) over the last dim (bf16, D a multiple of
    256), differentiable in x, residual, weight and bias. weight or bias None:
    a norm without them (nn.LayerNorm(elementwise_affine=False) or bias=False),
    ones and zeros. prenorm=True also returns h = dropout(x) + residual, the
    residual stream's next value."""
    if weight is None or bias is None:
        weight, bias = _unit(x, weight, 1.0), _unit(x, bias, 0.0)
    key = grad_key((False, eps, dropout_p, prenorm), x, weight, bias, residual)
    run = _plain.get(key)
    if run is not None:
        return run(x, weight, bias, residual)
    if (cast := autocast(x, residual)) is not None:   # AMP: a float32 residual stream in a bf16 region
        return layer_norm(cast[0], weight, bias, cast[1], eps, dropout_p, prenorm)
    _check("layer_norm", x, weight, bias, residual)
    eps, dropout_p = finite("layer_norm", "eps", eps), finite("layer_norm", "dropout_p", dropout_p)
    check_flags("layer_norm", prenorm=prenorm)
    if not 0 <= dropout_p < 1:
        raise TkcError(f"layer_norm: dropout_p must be in [0, 1), got {dropout_p}", caller())
    x2 = _rows(x)
    philox = _philox(x2, dropout_p)
    w, b = _bf16(weight), _bf16(bias)
    if residual is None and not (prenorm and dropout_p > 0):  # reads x only
        y = _shaped(_ln_fwd_nores.main_output(x2, w, b, eps, dropout_p, philox), x)
        if key is not None and not dropout_p:
            _keep_plain(key, False, eps, prenorm, x, x2, None, None, weight, w, bias, b)
        return (y, x) if prenorm else y  # h = x (without dropout)
    # with a residual, or h = dropout(x) wanted: the residual kernels (a zero residual)
    r2 = _bf16(_rows(residual)) if residual is not None else torch.zeros_like(x2)
    y, h, _, _ = _ln_fwd(x2, r2, w, b, eps, dropout_p, philox)
    if key is not None and not dropout_p:
        _keep_plain(key, False, eps, prenorm, x, x2, residual, r2, weight, w, bias, b)
    y, h = _shaped(y, x), _shaped(h, x)
    return (y, h) if prenorm else y


def _rows(x: Tensor) -> Tensor:
    """x as contiguous rows [N, D] from a 16-byte boundary (x itself when it
    is them: no view made)."""
    return dense(x if x.dim() == 2 else x.reshape(-1, x.shape[-1]))


def _shaped(y: Tensor, x: Tensor) -> Tensor:
    return y if y.dim() == x.dim() else y.view(x.shape)


def _fits(t, shape, device) -> bool:
    return isinstance(t, Tensor) and t.shape == shape and t.is_floating_point() and t.device == device


_UNITS: dict = {}   # (D, device, value) -> bf16 [D] of value: a norm's missing weight (ones) or bias (zeros)


def _unit(x, t, value: float):
    """t, or where it is None (and x a tensor of a last dim), the vector of
    x's last dim filled with value, kept per (D, device): but not one made
    while something traces or a CUDA graph is captured (made in it, not run
    yet), which each such call makes anew."""
    if t is not None or not isinstance(x, Tensor) or not x.dim():
        return t
    key = (x.shape[-1], x.device, value)
    unit = _UNITS.get(key)
    if unit is None:
        unit = torch.full((x.shape[-1],), value, dtype=torch.bfloat16, device=x.device)
        if readable(x):   # (the conditions under which a tensor made now holds its values)
            _UNITS[key] = unit
    return unit


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

def _rms_fwd_impl(x: Tensor, residual: Tensor | None, weight: Tensor, eps: float, p: float,
                  philox: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(y, h, rstd); h is empty without a residual (it is x, or redrawn)."""
    x, residual, weight = _dense(x, residual, weight)
    y, h, _, rstd = norm_fwd(True, x, residual, weight, None, eps, p, philox)
    return y, x.new_empty(0) if h is None else h, rstd


def _rms_fwd_fake(x, residual, weight, eps, p, philox):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), torch.empty_like(x) if residual is not None else x.new_empty(0), stat


def _rms_bwd_impl(dy: Tensor, dh_next: Tensor | None, h: Tensor, weight: Tensor, rstd: Tensor,
                  p: float, philox: Tensor, params: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dres, dw [1, D]); h is x without a residual (dh_next None); dres is
    empty unless a residual and dropout (otherwise it is dx, or absent); dw
    empty unless params."""
    dy, dh_next, h, weight = _dense(dy, dh_next, h, weight)
    dx, dres, dw = norm_bwd(True, dy, dh_next, h, weight, None, rstd, p, philox, params)
    return dx, dy.new_empty(0) if dres is None else dres, _given(dw, weight)


def _rms_bwd_fake(dy, dh_next, h, weight, rstd, p, philox, params):
    dres = torch.empty_like(dy) if dh_next is not None and p > 0 else dy.new_empty(0)
    return torch.empty_like(dy), dres, weight.new_empty(1 if params else 0, dy.shape[1])


def _rms_setup(ctx, inputs, output):
    x, residual, weight, _, p, philox = inputs
    _, h, rstd = output
    ctx.residual = residual is not None
    ctx.save_for_backward(h if ctx.residual else x, weight, rstd, philox)
    ctx.p = p


def _rms_backward(ctx, dy, dh, drstd):
    h, weight, rstd, philox = ctx.saved_tensors
    dy = torch.zeros_like(h) if dy is None else dense(dy)
    dhn = None
    if ctx.residual:
        dhn = torch.zeros_like(h) if dh is None else dense(dh)
    args = (dy, dhn, h, weight, rstd, ctx.p, philox, ctx.needs_input_grad[2])
    if tracing(args):
        dx, dres, dw = _present(*_rms_bwd(*args))
    else:
        dx, dres, dw = norm_bwd(True, dy, dhn, h, weight, None, *args[4:],
                                None if ctx.residual else _later(ctx))
    dr = (dx if dres is None else dres) if ctx.residual else None
    return dx, dr, None if dw is None else dw[0], None, None, None


_rms_bwd = Op("tkc::rms_norm_bwd", _rms_bwd_impl, _rms_bwd_fake)
_rms_fwd = Op("tkc::rms_norm_fwd", _rms_fwd_impl, _rms_fwd_fake, _rms_setup, _rms_backward,
              lambda x, res, w, eps, p, philox:
              norm_fwd(True, x, res, w, None, eps, p, philox, False)[0])


@public
def rms_norm(x: Tensor, weight: Tensor | None, residual: Tensor | None = None, eps: float = 1e-6,
             dropout_p: float = 0.0, prenorm: bool = False):
    """RMSNorm(dropout(x) + residual) = h * rsqrt(mean(h^2) + eps) * weight over
    the last dim (x bf16, D a multiple of 256 up to 16384), differentiable in x,
    residual and weight (None: ones, nn.RMSNorm(elementwise_affine=False)).
    prenorm=True also returns h, the residual stream's next value (without a
    residual, h = dropout(x): the residual kernels run with a zero residual to
    write it)."""
    weight = _unit(x, weight, 1.0)
    key = grad_key((True, eps, dropout_p, prenorm), x, weight, residual)
    run = _plain.get(key)
    if run is not None:
        return run(x, weight, None, residual)
    if (cast := autocast(x, residual)) is not None:
        return rms_norm(cast[0], weight, cast[1], eps, dropout_p, prenorm)
    _check("rms_norm", x, weight, None, residual)
    eps, dropout_p = finite("rms_norm", "eps", eps), finite("rms_norm", "dropout_p", dropout_p)
    check_flags("rms_norm", prenorm=prenorm)
    if not 0 <= dropout_p < 1:
        raise TkcError(f"rms_norm: dropout_p must be in [0, 1), got {dropout_p}", caller())
    x2 = _rows(x)
    philox = _philox(x2, dropout_p)
    if residual is None and prenorm and dropout_p > 0:
        residual = torch.zeros_like(x)
    r2 = _bf16(_rows(residual)) if residual is not None else None
    w = _bf16(weight)
    if key is not None and not dropout_p:
        _keep_plain(key, True, eps, prenorm, x, x2, residual, r2, weight, w, None, None)
    if not prenorm:
        return _shaped(_rms_fwd.main_output(x2, r2, w, eps, dropout_p, philox), x)
    y, h, _ = _rms_fwd(x2, r2, w, eps, dropout_p, philox)
    return _shaped(y, x), (_shaped(h, x) if r2 is not None else x)
