"""torch.nn modules computed by tkc's ops: drop-in subclasses of nn.Linear,
nn.LayerNorm and nn.RMSNorm (same parameters, state dicts and init), and
`convert`, which swaps them into an existing model.

    model = tkc.nn.convert(model)          # its Linear / LayerNorm / RMSNorm layers, where tkc serves them
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()

The kernels are bf16: call the modules on bf16 tensors, or in a bf16
autocast region (float32 weights and inputs are then cast, as autocast casts
nn.Linear's). Linear takes a fused activation ("gelu", "silu") that
nn.Linear has not.
"""
from __future__ import annotations

import torch
from torch import nn

from .torchops.gemm import ACTIVATIONS, linear
from .torchops.norms import MAX_D, layer_norm, rms_norm

__all__ = ["LayerNorm", "Linear", "RMSNorm", "convert"]


class Linear(nn.Linear):
    """nn.Linear as tkc.linear: act(x W^T + b), act None, "gelu" (erf) or "silu" fused
    in the GEMM's epilogue. in_features and out_features multiples of 8."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation: str | None = None, device=None, dtype=None):
        if activation not in ACTIVATIONS:
            raise ValueError(f"tkc.nn.Linear: activation must be one of {ACTIVATIONS}, got {activation!r}")
        super().__init__(in_features, out_features, bias, device, dtype)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", activation={self.activation!r}" if self.activation else "")


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm as tkc.layer_norm: one normalized dim, a multiple of 256 up to 16384,
    with its weight and bias."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, eps=self.eps)


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm as tkc.rms_norm: one normalized dim, a multiple of 256 up to 16384, with
    its weight. eps=None is nn.RMSNorm's: the input dtype's machine epsilon."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        return rms_norm(x, self.weight, eps=eps)


def _served_width(shape) -> bool:
    return len(shape) == 1 and shape[0] % 256 == 0 and 256 <= shape[0] <= MAX_D


def _swapped(m: nn.Module) -> nn.Module | None:
    """m's tkc twin sharing its parameters (its class changed in place: state dict,
    hooks and references stay), or None where tkc cannot serve it."""
    kind = type(m)
    if kind is nn.Linear and not m.in_features % 8 and not m.out_features % 8:
        m.__class__, m.activation = Linear, None
    elif kind is nn.LayerNorm and _served_width(m.normalized_shape) and m.weight is not None \
            and m.bias is not None:
        m.__class__ = LayerNorm
    elif kind is nn.RMSNorm and _served_width(m.normalized_shape) and m.weight is not None:
        m.__class__ = RMSNorm
    else:
        return None
    return m


def convert(model: nn.Module) -> nn.Module:
    """model with each nn.Linear, nn.LayerNorm and nn.RMSNorm that tkc serves (Linear:
    features multiples of 8; the norms: one affine dim, a multiple of 256 up to 16384,
    LayerNorm with a bias) computed by tkc's ops, in place: the same module objects and
    parameters, so optimizers, state dicts and hooks keep working. The others stay as
    they are; `model.tkc_converted` lists the converted modules' names."""
    done = [name for name, m in model.named_modules() if _swapped(m) is not None]
    model.tkc_converted = done
    return model
