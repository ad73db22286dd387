"""Rotary position embedding as a PyTorch op (tkc.rotary_embedding).

    y = tkc.rotary_embedding(x, cos, sin)                   # x [B, T, H, D] bf16

Differentiable in x: the backward is the kernel's inverse (rotating by
-theta) on the same cos and sin.
The kernel: tkc/kernels/rotary.py. Importing this module needs torch, not
MLIR (with TKC_OFFLINE=1 the kernels come from the artifact cache).
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.attention_hopper import HEAD_DIMS
from ..kernels.rotary import fits, rotary, splits
from ..runtime.callsite import caller
from ..tune import autotune
from ..tune.space import picks_memo
from . import checks
from .checks import autocast, check_device, check_flags, check_tensor, dense, strided_takes
from .eager import Op, grad_key, kept_run, public, wants_grad
from .plans import Later, PlanCache, signature

__all__ = ["SPACES", "rotary_embedding", "space"]

# The heads a block turns (warps x heads a warp) are tuned data per head dim (tkc/tune/tables),
# keyed by the positions: a decode step's few (B T <= FEW, a block a position tile) or many.
# H200, [1, 8192, 32, D], kernel time: the builder's 4 x 1 ran 0.72 / 0.83 / 0.89 of a copy at
# D 64 / 96 / 128, the picks (8 x 1; at 128 2 x 2) 0.90 / 0.89 / 0.92; a few positions take 2 x 1
# (7-18% faster); at D 256 eight heads' tiles do not fit four blocks an SM.
FEW = 128
EXAMPLE_POSITIONS = (16, 8192)


def _positions(n: int) -> str:
    """The table's key of a call over n positions (B T): few or many."""
    return "few" if n <= FEW else "many"


def _key(x, cos, sin, o) -> str:
    """A kernel call's key (its x a [B, 1, T, H D] gl)."""
    return _positions(x.shape[0] * x.shape[2])


def _example(D: int, T: int) -> list:
    """One call's kernel arguments: T positions of a model's heads (32 of D; 16 of 256)."""
    H = 16 if D == 256 else 32
    x = torch.randn(1, 1, T, H * D, device="cuda").to(torch.bfloat16)
    ang = torch.rand(T, D // 2, device="cuda")
    return [x, ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16), torch.empty_like(x)]


@functools.lru_cache(maxsize=None)
def space(D: int):
    """Head dim D's space (made at import for the common ones, at a call for others):
    warps a block and heads a warp (kernels/rotary.py splits), four blocks an SM; the
    default (2 x 1, which fits wherever the builder's 4 x 1 does) first; a split whose
    tiles overflow shared memory (an uncommon D's) pruned."""
    return autotune(space=[{"warps": w, "heads": h} for w, h in splits(D)], key=_key,
                    name=f"tkc.rotary_embedding.d{D}", prune=lambda c: not fits(D, c["warps"], c["heads"]),
                    examples=lambda: [functools.partial(_example, D, T) for T in EXAMPLE_POSITIONS],
                    )(lambda warps, heads: rotary(D, False, warps, heads))


SPACES = {D: space(D) for D in HEAD_DIMS}
KERNELS = list(SPACES.values())   # `tkc build` of this file: every candidate (what tuning offline needs)


def picked(D: int, interleaved: bool, inverse: bool, key: str):
    """The kernel a call of key `key` runs: its head dim's tuned pick."""
    config = space(D).choose(key)
    return rotary(D, interleaved, config["warps"], config["heads"], inverse=inverse)


@picks_memo
def _kernel(D: int, interleaved: bool, inverse: bool, key: str):
    return picked(D, interleaved, inverse, key)


def _plan(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool):
    """run(x, cos, sin, ...): the trailing arguments (the op's flags) unread."""
    B, T, H, D = x.shape
    if x.numel() == 0:
        return lambda x, cos, sin, *flags: torch.empty_like(x, memory_format=torch.contiguous_format)
    if not strided_takes(x, 2):   # a view the kernel cannot take (the key fixes that): copied
        run = _plan(dense(x), cos, sin, interleaved, inverse)
        return lambda x, cos, sin, *flags: run(dense(x), cos, sin)
    rows = lambda t: t.unflatten(2, (1, H)).flatten(3).transpose(1, 2)  # noqa: E731  ([B, 1, T, H*D], strided)
    launch = _kernel(D, interleaved, inverse, _positions(B * T)).prepare(
        rows(x), cos, sin, rows(torch.empty_like(x, memory_format=torch.contiguous_format)))

    def run(x, cos, sin, *flags):
        out = torch.empty_like(x, memory_format=torch.contiguous_format)   # whatever x's strides
        launch(x, cos, sin, out)
        return out
    return run


_plans = PlanCache(_plan)
_plain = PlanCache()  # eager calls (eager.grad_key): key -> run(x, cos, sin)


def _impl(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool = False) -> Tensor:
    """x in any layout (its plan copies one the kernel cannot take: a compiled
    graph hands its tensors as they are), cos, sin bf16; inverse: rotate by
    -theta (the backward's rotation)."""
    plan = _plans((signature(x, cos, sin), interleaved, inverse), x, cos, sin, interleaved, inverse)
    return plan(x, cos, sin)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1], inputs[2])
    ctx.flags = inputs[3], not (len(inputs) > 4 and inputs[4])  # (inverse may be left out)


def _backward(ctx, grad):
    if grad is None:
        return None, None, None, None, None
    cos, sin = ctx.saved_tensors  # the inverse rotation (of the inverse: the forward's)
    grad = dense(grad)
    run = kept_run(ctx, (grad,))
    if run is not None:  # a kept eager forward's: straight to its backward plan
        plan = run.later.get(grad)
        if plan is None:
            plan = _plans((signature(grad, cos, sin), *ctx.flags), grad, cos, sin, *ctx.flags)
            run.later.keep(grad, plan)
        return plan(grad, cos, sin), None, None, None, None
    return _rotary(grad, cos, sin, *ctx.flags), None, None, None, None


_rotary = Op("tkc::rotary", _impl,
             lambda x, cos, sin, interleaved, inverse=False:
             torch.empty_like(x, memory_format=torch.contiguous_format),
             _setup, _backward)


@public
def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """RoPE of x [B, T, H, D] (bf16, on the GPU; D a multiple of 32) by cos,
    sin [T, D/2] (any float dtype: used as bf16), pairing (i, i + D/2), or
    (2i, 2i + 1) if interleaved; differentiable in x."""
    key = grad_key(interleaved, x, cos, sin)
    run = _plain.get(key)
    if run is not None:
        return run(x, cos, sin)
    if not _fits(x, cos, sin):
        if (cast := autocast(x)) is not None:   # AMP: a float32 x in a bf16 region
            return rotary_embedding(cast[0], cos, sin, interleaved)
        _explain(x, cos, sin)
    check_flags("rotary_embedding", interleaved=interleaved)
    if key is None:   # tracing: no pointer to read (_impl takes x as it is given)
        return _rotary(x, _bf16(cos), _bf16(sin), interleaved, False)
    args = _taken(x), _bf16(cos), _bf16(sin)
    plan = _plans((signature(*args), interleaved, False), *args, interleaved, False)
    if wants_grad(x, cos, sin):  # the autograd call, with this plan for the forward
        fwd = functools.partial(plan)  # (its own object: the backward's plan kept on it)
        fwd.later = Later()
        run = lambda x, cos, sin: _rotary.fast(x, cos, sin, interleaved, False, fwd)  # noqa: E731
    else:
        run = plan
    if not (args[0] is x and args[1] is cos and args[2] is sin):  # the copies, as above
        run = functools.partial(_converted, run)
    _plain.keep(key, run)
    return run(x, cos, sin)


def _converted(run, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """run on what rotary_embedding makes of its arguments (x as the kernel takes it, the tables bf16)."""
    return run(_taken(x), _bf16(cos), _bf16(sin))


def _taken(x: Tensor) -> Tensor:
    """x as it is when the kernel's strided gl takes it (each position's H*D
    elements adjacent: contiguous, or split from a packed projection; the
    other strides whole 16-byte steps), else a contiguous copy."""
    return x if strided_takes(x, 2) else dense(x)


def _fits(x, cos, sin) -> bool:
    """The common case in a few reads (_explain names what is wrong otherwise)."""
    if not (isinstance(x, Tensor) and x.dtype == torch.bfloat16 and x.dim() == 4
            and not x.shape[3] % 32 and x.device.type == checks.DEVICE_TYPE):
        return False
    half = (x.shape[1], x.shape[3] // 2)
    return all(isinstance(t, Tensor) and t.shape == half and t.is_floating_point()
               and t.device == x.device for t in (cos, sin))


def _explain(x, cos, sin) -> None:
    check_tensor("rotary_embedding", "x", x, 4, "[B, T, H, D]", (torch.bfloat16,))
    T, D = x.shape[1], x.shape[3]
    if D % 32:
        raise TkcError(f"rotary_embedding: the head dim D = {D} must be a multiple of 32", caller())
    for name, t in (("cos", cos), ("sin", sin)):
        check_tensor("rotary_embedding", name, t, 2, f"[{T}, {D // 2}]")
        if tuple(t.shape) != (T, D // 2) or not t.is_floating_point():
            raise TkcError(f"rotary_embedding: {name} must be a float tensor [{T}, {D // 2}] "
                           f"([T, D/2]), got {t.dtype} {tuple(t.shape)}", caller())
    check_device("rotary_embedding", ("x", x), ("cos", cos), ("sin", sin))


def _bf16(t: Tensor) -> Tensor:
    return dense(t.to(torch.bfloat16))
