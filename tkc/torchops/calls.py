"""An op call written down by its arguments' dtypes, shapes and layouts:
the language of `tkc build --call` (tkc/prebuild.py), in which an op that
finds an artifact missing offline names the command for its own call.

    layer_norm(bf16[4096, 12288], bf16[12288], bf16[12288])
    attention(bf16[2, 1024, 16, 128].permute(0, 2, 1, 3), ..., causal=True)

A call of a tkc op by name; tensors as DTYPE[dims] (bf16, f16, f32, i32, f8e4m3, f8e5m2) in
memory order, with .permute(...) (or .transpose(a, b), .t()) for the view a
layout is; i32([...]) for an int32 tensor with those values (varlen
offsets); Python literals for the rest.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["DTYPES", "describe"]

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "i32": torch.int32,
          "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2}
_NAMES = {v: k for k, v in DTYPES.items()}


def describe(op: str, args: tuple, kwargs: dict) -> str:
    """The call as the expression language writes it (tensors by dtype, shape
    and layout; small int32 tensors by value)."""
    parts = [_arg(a) for a in args] + [f"{k}={_arg(v)}" for k, v in kwargs.items()]
    return f"{op}({', '.join(parts)})"


def _arg(x) -> str:
    if not isinstance(x, Tensor):
        return repr(x)
    if x.dtype == torch.int32 and x.dim() == 1 and x.numel() <= 4096:
        return f"i32({x.tolist()})"
    name = _NAMES.get(x.dtype, str(x.dtype).removeprefix("torch."))
    order = sorted(range(x.dim()), key=lambda d: (-x.stride(d), d))  # memory order, outermost first
    base = f"{name}[{', '.join(str(x.shape[d]) for d in order)}]"
    if order == list(range(x.dim())):
        return base
    perm = [order.index(d) for d in range(x.dim())]  # back from memory order to x's dims
    return f"{base}.permute({', '.join(map(str, perm))})"
