"""The norm kernels' calls (tkc.layer_norm and tkc.rms_norm: norms.py):
their plans, forward and backward, per argument signature.

Both norms' kernels take their arguments in one order (tkc/kernels/layernorm.py),
each part present or not: forward x, [residual], w, [b] -> y, [h], [mean],
rstd, then philox (i32 [1, 2]), p, eps; backward dy, [dh_next], h (x without a
residual), w, [mean], rstd -> dx, [dres: with a residual and dropout], dw
partials, [db partials], then philox, p. The partial sums are one
[parts, blocks, D] f32 buffer (as many blocks as the SMs hold), reduced at once afterwards
into the [parts, D] output by one more launch (tkc/kernels/norm_grads.py;
an op's outputs may not alias each other); a backward whose dw and db
nobody wants writes them to scratch memory and reduces nothing.
"""
from __future__ import annotations

import operator

import torch
from torch import Tensor

from ..kernels.layernorm import layernorm_bwd, layernorm_fwd
from ..kernels.norm_grads import norm_grads
from ..kernels.rmsnorm import rmsnorm_bwd, rmsnorm_fwd
from ..tune.space import picks_memo
from .norm_tuned import WARPS, lane_split
from .plans import At, PlanCache, resident, scratch, signature, sms

__all__ = ["fwd_plans", "kernels", "no_dropout", "norm_bwd", "norm_fwd", "picked_kernels", "plan_key"]


def picked_kernels(rms: bool, D: int, dropout: bool, residual: bool):
    """(forward, backward), each splitting its rows over warps as its D
    bucket's tuned pick says (norm_tuned.py)."""
    fwd, bwd = (rmsnorm_fwd, rmsnorm_bwd) if rms else (layernorm_fwd, layernorm_bwd)
    return (fwd(D, dropout, WARPS, residual, **lane_split(rms, "fwd", D, dropout, residual)),
            bwd(D, dropout, WARPS, residual, **lane_split(rms, "bwd", D, dropout, residual)))


@picks_memo
def ln_kernels(D: int, dropout: bool, residual: bool = True):
    return picked_kernels(False, D, dropout, residual)


@picks_memo
def rms_kernels(D: int, dropout: bool, residual: bool):
    return picked_kernels(True, D, dropout, residual)


def kernels(rms: bool, D: int, dropout: bool, residual: bool):
    return (rms_kernels if rms else ln_kernels)(D, dropout, residual)


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
        return lambda x, res, w, b, eps, p, philox, stats=True: outputs(x)
    row = lambda t: t.view(1, -1)  # noqa: E731  (w, b, mean, rstd as one-row gls)
    # the kernel's tensors of (x, res, w, b, y, h, mean, rstd)
    parts = operator.itemgetter(*(i for i, on in enumerate(
        (True, res is not None, True, not rms, True, res is not None, not rms, True)) if on))
    y, h, mean, rstd = outputs(x)
    launch = kernels(rms, D, p > 0, res is not None)[0].prepare(
        *parts((x, res, row(w), None if rms else row(b), y, h, None if rms else row(mean),
                row(rstd))), no_dropout(dev), p, 1e-5)

    def run(x, res, w, b, eps, p, philox, stats=True):
        """x (and res) may be any contiguous tensor of these rows: y and h take its shape."""
        y, h, mean, rstd = out = outputs(x, stats)
        launch(*parts((x, res, w, b, y, h, mean, rstd)), philox, p, eps)
        return out
    return run


def _bwd_plan(rms: bool, dy: Tensor, dhn: Tensor | None, h: Tensor, w: Tensor, mean: Tensor,
              rstd: Tensor, p: float):
    N, D = dy.shape
    dev, residual = dy.device, dhn is not None
    dres_too = residual and p > 0
    k = 1 if rms else 2  # dw (and db) partial sums

    def outputs():  # dres only where it differs from dx (None: not made)
        return torch.empty_like(dy), torch.empty_like(dy) if dres_too else None

    if N == 0:
        return lambda *args: (*outputs(), w.new_zeros(k, D) if args[-1] else None)
    kernel = kernels(rms, D, p > 0, residual)[1]
    # as many blocks as the SMs hold at once: the rows loop over the blocks, and a second
    # wave of blocks would only wait (H200, N 16384 x D 2048 fwd+bwd: 271 µs at two an SM,
    # 151 at the six to eight that fit)
    blocks = sms(dev) * resident(kernel, dev)
    row = lambda t: t.view(1, -1)  # noqa: E731
    part = torch.empty(k, blocks, D, device=dev, dtype=torch.float32)
    # the partial sums of a backward whose dw and db nobody wants: scratch memory
    unread = scratch(dev, k * blocks * D, "norm partials")
    unread = unread, None if rms else unread[blocks * D:]
    db_at = blocks * D * 4  # the db partials' plane: bytes into part (passed by address)
    # the kernel's tensors of (dy, dhn, h, w, mean, rstd, dx, dres, dw part, db part);
    # dw's partials are part's first plane, so part itself is passed for them
    parts = operator.itemgetter(*(i for i, on in enumerate(
        (True, residual, True, True, not rms, True, True, dres_too, True, not rms)) if on))
    dx, dres = outputs()
    launch = kernel.prepare(
        *parts((dy, dhn, h, row(w), None if rms else row(mean), row(rstd), dx, dres, part[0],
                None if rms else part[1])), no_dropout(dev), p)
    grads = norm_grads(k).prepare(part, torch.empty(k, D, device=dev, dtype=w.dtype))

    def run(dy, dhn, h, w, mean, rstd, p, philox, params):
        dx, dres = outputs()
        if not params:
            launch(*parts((dy, dhn, h, w, mean, rstd, dx, dres, *unread)), philox, p)
            return dx, dres, None
        part = torch.empty(k, blocks, D, device=dev, dtype=torch.float32)
        launch(*parts((dy, dhn, h, w, mean, rstd, dx, dres, part, None if rms else At(part, db_at))),
               philox, p)
        dwb = torch.empty(k, D, device=dev, dtype=w.dtype)
        grads(part, dwb)
        return dx, dres, dwb
    return run


def no_dropout(dev) -> Tensor:
    """The philox argument (i32 [1, 2]: the dropout's seed and offset) of a
    call without dropout, whose kernels read none: a zero pair kept per
    device (launches are prepared with it too)."""
    none = _NO_DROPOUT.get(dev)
    if none is None:
        none = _NO_DROPOUT[dev] = torch.zeros(1, 2, device=dev, dtype=torch.int32)
    return none


_NO_DROPOUT: dict = {}   # device -> its zero pair


def plan_key(rms: bool, p: float, *ts) -> tuple:
    return rms, p > 0, signature(*ts)


fwd_plans = PlanCache(_fwd_plan)
bwd_plans = PlanCache(_bwd_plan)


def norm_fwd(rms, x, res, w, b, eps, p, philox, stats=True):
    """(y, h, mean, rstd): h None without a residual, mean None for RMSNorm;
    stats=False: mean and rstd in scratch memory (for no backward)."""
    plan = fwd_plans(plan_key(rms, p, x, res, w, b), rms, x, res, w, b, p)
    return plan(x, res, w, b, eps, p, philox, stats)


def norm_bwd(rms, dy, dhn, h, w, mean, rstd, p, philox, params, later=None):
    """(dx, dres, [dw; db] or [dw]): dres None unless a residual and dropout;
    the weight (and bias) gradients None unless params. The key: what the
    backward's arguments may vary in. dy, dh_next and h are contiguous (the
    autograd formulas and the forward make them so: their strides are still
    keyed, as a compiled graph may hand others), w is bf16 [D] and the
    statistics f32 [N] as the forward made them. later: the kept forward
    run's plans.Later (without a residual: dy is the one gradient), which
    skips the key."""
    plan = None if later is None else later.get(dy)
    if plan is None:
        key = (rms, p > 0, dhn is None, dy.shape, dy.stride(), h.stride(), dy.device, dy.dtype,
               (dy.data_ptr() | h.data_ptr() | (0 if dhn is None else dhn.data_ptr())) & 15,
               None if dhn is None else dhn.stride())
        plan = bwd_plans(key, rms, dy, dhn, h, w, mean, rstd, p)
        if later is not None:
            later.keep(dy, plan)
    return plan(dy, dhn, h, w, mean, rstd, p, philox, params)
