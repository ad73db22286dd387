"""PyTorch entry points of the memory-bound kernels, as torch.library custom
ops (FlashAttention-3's pattern: custom_op + register_fake + register_autograd),
so torch.compile and autograd see them as ops with known shapes and gradients.

    from tkc.kernels.torch_ops import layer_norm, rotary_embedding
    y = rotary_embedding(x, cos, sin)                       # x [B, T, H, D] bf16
    y, h = layer_norm(x, w, b, residual=r, dropout_p=0.1, prenorm=True)

Importing this module needs torch (not MLIR: the kernels come from the
artifact cache when TKC_OFFLINE=1).
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from .layernorm import layernorm_bwd, layernorm_fwd
from .rotary import rotary

WARPS = 4


@functools.lru_cache(maxsize=None)
def _rotary_kernel(D: int, interleaved: bool):
    return rotary(D, interleaved)


@functools.lru_cache(maxsize=None)
def _ln_kernels(D: int, dropout: bool, residual: bool = True):
    return (layernorm_fwd(D, dropout, WARPS, residual), layernorm_bwd(D, dropout, WARPS, residual))


def _ln_partials(x: Tensor, D: int) -> tuple[Tensor, Tensor, Tensor]:
    """The backward's partial sums: one [2, blocks, D] f32 buffer (dw rows, db
    rows; 2 blocks an SM) and its two halves, reduced at once afterwards into
    one [2, D] output (dw, db: an op's outputs may not alias each other)."""
    blocks = torch.cuda.get_device_properties(x.device).multi_processor_count * 2
    part = torch.empty(2, blocks, D, device=x.device, dtype=torch.float32)
    return part, part[0], part[1]


def _bf16(t: Tensor) -> Tensor:
    return t.to(torch.bfloat16).contiguous()


# ---------------------------------------------------------------- rotary

@torch.library.custom_op("tkc::rotary", mutates_args=())
def _rotary(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    B, T, H, D = x.shape
    out = torch.empty_like(x)
    _rotary_kernel(D, interleaved)(x.view(B, 1, T, H * D), cos, sin, out.view(B, 1, T, H * D))
    return out


@_rotary.register_fake
def _(x, cos, sin, interleaved):
    return torch.empty_like(x)


def _rotary_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1], inputs[2])
    ctx.interleaved = inputs[3]


def _rotary_backward(ctx, grad):
    cos, sin = ctx.saved_tensors  # the inverse rotation: by -theta
    return _rotary(grad.contiguous(), cos, -sin, ctx.interleaved), None, None, None


_rotary.register_autograd(_rotary_backward, setup_context=_rotary_setup)


def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """RoPE of x [B, T, H, D] (bf16) by cos, sin [T, D/2] (pairs (i, i + D/2),
    or (2i, 2i + 1) if interleaved); differentiable in x."""
    if x.dim() != 4 or x.dtype != torch.bfloat16:
        raise ValueError(f"rotary_embedding: x must be a [B, T, H, D] bf16 tensor, got "
                         f"{x.dtype} {tuple(x.shape)}")
    T, D = x.shape[1], x.shape[3]
    if cos.shape != (T, D // 2) or sin.shape != (T, D // 2):
        raise ValueError(f"rotary_embedding: cos and sin must be [{T}, {D // 2}], got "
                         f"{tuple(cos.shape)} and {tuple(sin.shape)}")
    return _rotary(x.contiguous(), _bf16(cos), _bf16(sin), interleaved)


# ---------------------------------------------------------------- layer norm
#
# Two op families: with a residual (tkc::layer_norm_fwd / _bwd: h = dropout(x)
# + residual is written, and read back by the backward) and without one
# (tkc::layer_norm_fwd_nores / _bwd_nores: reads x only, writes no h; the
# backward reads x and redraws the dropout mask). Without dropout the
# residual's gradient is dx itself: the backward writes dx only and returns an
# empty dres (an op's outputs may not alias), and the autograd formula hands
# dx to both. The backward ops return dw and db stacked, [2, D].

@torch.library.custom_op("tkc::layer_norm_fwd", mutates_args=())
def _ln_fwd(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float,
            seed: int, offset: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    N, D = x.shape
    y, h = torch.empty_like(x), torch.empty_like(x)
    mean = torch.empty(N, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    _ln_kernels(D, p > 0)[0](x, residual, weight.view(1, D), bias.view(1, D), y, h,
                             mean.view(1, N), rstd.view(1, N), p, eps, seed, offset)
    return y, h, mean, rstd


@_ln_fwd.register_fake
def _(x, residual, weight, bias, eps, p, seed, offset):
    N = x.shape[0]
    stat = x.new_empty(N, dtype=torch.float32)
    return torch.empty_like(x), torch.empty_like(x), stat, torch.empty_like(stat)


@torch.library.custom_op("tkc::layer_norm_bwd", mutates_args=())
def _ln_bwd(dy: Tensor, dh_next: Tensor, h: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor,
            p: float, seed: int, offset: int) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dres, [dw; db]); dres is empty without dropout (it is dx)."""
    N, D = dy.shape
    dx = torch.empty_like(dy)
    part, dw, db = _ln_partials(dy, D)
    bwd = _ln_kernels(D, p > 0)[1]
    if p > 0:
        dres = torch.empty_like(dy)
        bwd(dy, dh_next, h, weight.view(1, D), mean.view(1, N), rstd.view(1, N), dx, dres, dw, db,
            p, seed, offset)
    else:
        dres = dy.new_empty(0)
        bwd(dy, dh_next, h, weight.view(1, D), mean.view(1, N), rstd.view(1, N), dx, dw, db,
            p, seed, offset)
    return dx, dres, part.sum(1).to(weight.dtype)


@_ln_bwd.register_fake
def _(dy, dh_next, h, weight, mean, rstd, p, seed, offset):
    dres = torch.empty_like(dy) if p > 0 else dy.new_empty(0)
    return torch.empty_like(dy), dres, weight.new_empty(2, dy.shape[1])


def _ln_setup(ctx, inputs, output):
    _, _, weight, _, _, p, seed, offset = inputs
    _, h, mean, rstd = output
    ctx.save_for_backward(h, weight, mean, rstd)
    ctx.p, ctx.seed, ctx.offset = p, seed, offset


def _ln_backward(ctx, dy, dh, dmean, drstd):
    h, weight, mean, rstd = ctx.saved_tensors
    dy = torch.zeros_like(h) if dy is None else dy.contiguous()
    dh = torch.zeros_like(h) if dh is None else dh.contiguous()
    dx, dres, dwb = _ln_bwd(dy, dh, h, weight, mean, rstd, ctx.p, ctx.seed, ctx.offset)
    return dx, (dres if ctx.p > 0 else dx), dwb[0], dwb[1], None, None, None, None


_ln_fwd.register_autograd(_ln_backward, setup_context=_ln_setup)


@torch.library.custom_op("tkc::layer_norm_fwd_nores", mutates_args=())
def _ln_fwd_nores(x: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float, seed: int,
                  offset: int) -> tuple[Tensor, Tensor, Tensor]:
    N, D = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(N, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    _ln_kernels(D, p > 0, False)[0](x, weight.view(1, D), bias.view(1, D), y, mean.view(1, N),
                                    rstd.view(1, N), p, eps, seed, offset)
    return y, mean, rstd


@_ln_fwd_nores.register_fake
def _(x, weight, bias, eps, p, seed, offset):
    stat = x.new_empty(x.shape[0], dtype=torch.float32)
    return torch.empty_like(x), stat, torch.empty_like(stat)


@torch.library.custom_op("tkc::layer_norm_bwd_nores", mutates_args=())
def _ln_bwd_nores(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor, p: float,
                  seed: int, offset: int) -> tuple[Tensor, Tensor]:
    """(dx, [dw; db])."""
    N, D = dy.shape
    dx = torch.empty_like(dy)
    part, dw, db = _ln_partials(dy, D)
    _ln_kernels(D, p > 0, False)[1](dy, x, weight.view(1, D), mean.view(1, N), rstd.view(1, N),
                                    dx, dw, db, p, seed, offset)
    return dx, part.sum(1).to(weight.dtype)


@_ln_bwd_nores.register_fake
def _(dy, x, weight, mean, rstd, p, seed, offset):
    return torch.empty_like(dy), weight.new_empty(2, dy.shape[1])


def _ln_nores_setup(ctx, inputs, output):
    x, weight, _, _, p, seed, offset = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.p, ctx.seed, ctx.offset = p, seed, offset


def _ln_nores_backward(ctx, dy, dmean, drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dy = torch.zeros_like(x) if dy is None else dy.contiguous()
    dx, dwb = _ln_bwd_nores(dy, x, weight, mean, rstd, ctx.p, ctx.seed, ctx.offset)
    return dx, dwb[0], dwb[1], None, None, None, None


_ln_fwd_nores.register_autograd(_ln_nores_backward, setup_context=_ln_nores_setup)


def _philox(x: Tensor, p: float) -> tuple[int, int]:
    """(seed, offset) from the device's default generator, advanced past the
    numbers this call draws (PyTorch's accounting: one per 4 elements)."""
    if p == 0:
        return 0, 0
    gen = torch.cuda.default_generators[x.device.index or 0]
    seed, offset = gen.initial_seed() & 0x7FFFFFFF, gen.get_offset()
    gen.set_offset(offset + (x.numel() + 3) // 4 * 4)
    return seed, offset & 0x7FFFFFFF


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None = None,
               eps: float = 1e-5, dropout_p: float = 0.0, prenorm: bool = False):
    """LayerNorm(dropout(x) + residual) over the last dim (bf16, D a multiple of
    256), differentiable in x, residual, weight and bias. prenorm=True also
    returns h = dropout(x) + residual, the residual stream's next value."""
    if x.dtype != torch.bfloat16 or x.shape[-1] % 256:
        raise ValueError(f"layer_norm: x must be bf16 with a last dim multiple of 256, got "
                         f"{x.dtype} {tuple(x.shape)}")
    if not 0 <= dropout_p < 1:
        raise ValueError(f"layer_norm: dropout_p must be in [0, 1), got {dropout_p}")
    shape, D = x.shape, x.shape[-1]
    x2 = x.reshape(-1, D).contiguous()
    seed, offset = _philox(x2, dropout_p)
    w, b = _bf16(weight), _bf16(bias)
    if residual is None and not (prenorm and dropout_p > 0):  # reads x only
        y = _ln_fwd_nores(x2, w, b, eps, dropout_p, seed, offset)[0].view(shape)
        return (y, x) if prenorm else y  # h = x (without dropout)
    # with a residual, or h = dropout(x) wanted: the residual kernels (a zero residual)
    r2 = residual.reshape(-1, D).to(torch.bfloat16).contiguous() if residual is not None \
        else torch.zeros_like(x2)
    y, h, _, _ = _ln_fwd(x2, r2, w, b, eps, dropout_p, seed, offset)
    y, h = y.view(shape), h.view(shape)
    return (y, h) if prenorm else y
