"""Argument checks the ops share: each error names the op, the argument,
what was expected and what was found, at the caller's line (the first frame
outside tkc and torch: runtime/callsite.py)."""
from __future__ import annotations

import math
import numbers
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..runtime.args import ALIGN, strided_fits
from ..runtime.callsite import caller

# The device type the kernels run on. tkc.bench.fake_driver sets "cpu" so
# that the host path can be measured and tested on a machine without a GPU.
DEVICE_TYPE = "cuda"


def strided_takes(t: Tensor, row_dims: int = 1) -> bool:
    """Whether a strided gl (tkc.gl(..., strided=True)) takes t as it is, its
    last `row_dims` dims seen as one row: their elements adjacent, and the
    runtime's launch rule for the rest (args.strided_fits)."""
    if row_dims == 1:   # the common case in a few reads (a decode step checks its cache's each call:
        e, strides = t.element_size(), t.stride()   # a loop, not all() over a generator's frames)
        if strides and strides[-1] == 1 and not t.data_ptr() % ALIGN:
            for s in strides[:-1]:
                if s <= 0 or s * e % ALIGN:
                    break
            else:
                return True
    inner = 1
    for n, s in zip(reversed(t.shape[-row_dims:]), reversed(t.stride()[-row_dims:])):
        if n != 1 and s != inner:
            return False
        inner *= n
    e = t.element_size()
    return strided_fits((*t.shape[:-row_dims], inner), (*(s * e for s in t.stride()[:-row_dims]), e), e,
                        t.data_ptr())


def dense(t: Tensor) -> Tensor:
    """t contiguous from a 16-byte boundary, as TMA reads a dense operand: t
    itself, or a copy (a slice of a row, bias[1:] say, is contiguous yet
    starts mid-unit, so .contiguous() alone would keep it). While dynamo
    traces, or of a tensor with no pointer to read (fake, functional: export),
    t.contiguous(): the custom op's impl, which a compiled graph calls with
    real tensors, makes them dense itself."""
    if torch.compiler.is_compiling():
        return t.contiguous()
    try:
        ready = is_dense(t)
    except RuntimeError:
        return t.contiguous()
    return t if ready else t.clone(memory_format=torch.contiguous_format)


def is_dense(t: Tensor) -> bool:
    """Whether a real tensor is what dense() returns as it is: contiguous from
    a 16-byte boundary."""
    return t.is_contiguous() and not t.data_ptr() % ALIGN


def arranged(*ts: Tensor) -> Callable:
    """A function making contiguous those of ts' layouts the kernels cannot
    take (strided_takes; the identity in the common case). It is made for ts'
    signature and applied to tensors of the same one."""
    fits = [strided_takes(t) for t in ts]
    if all(fits):
        return lambda *xs: xs
    return lambda *xs: tuple(x if fit else dense(x) for x, fit in zip(xs, fits))


def _found(t) -> str:
    if not isinstance(t, Tensor):
        return type(t).__name__
    return f"{str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}"


def check_tensor(fn: str, name: str, t, rank: int | None = None, shape: str = "",
                 dtypes: tuple = ()) -> None:
    """t is a tensor of `rank` dims (shape describes them) and one of dtypes."""
    if not isinstance(t, Tensor):
        raise TkcError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}", caller())
    if rank is not None and t.dim() != rank:
        raise TkcError(f"{fn}: {name} must be {shape or f'{rank}-D'}, got shape "
                       f"{tuple(t.shape)}", caller())
    if dtypes and t.dtype not in dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        amp = " (or call the op in torch.autocast(..., dtype=torch.bfloat16))" \
            if torch.bfloat16 in dtypes and t.dtype == torch.float32 else ""
        raise TkcError(f"{fn}: {name} must be {names}, got {_found(t)}{amp}", caller())


def check_device(fn: str, *named: tuple[str, Tensor]) -> None:
    """Every tensor on the first one's CUDA device."""
    first = named[0][1].device
    for name, t in named:
        if t.device.type != DEVICE_TYPE or t.device != first:
            where = "a CUDA device" if first.type != DEVICE_TYPE else \
                f"{named[0][0]}'s CUDA device ({first})"
            raise TkcError(f"{fn}: {name} must be on {where}, got {t.device}", caller())


def check_flags(fn: str, **named) -> None:
    """Each option True or False (numpy's bools too): a string or None taken
    for its truth would pick a wrong kernel or none (causal="no" is true)."""
    for name, value in named.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TkcError(f"{fn}: {name} must be True or False, got {value!r}", caller())


def finite(fn: str, name: str, value) -> float:
    """A float option (eps, dropout_p, a scale) as a float: a finite real
    number, not a bool. Under torch.compile the value may be symbolic (a
    SymFloat, which isfinite cannot read without a graph break): it passes
    as it is, and the custom op's schema takes floats only."""
    if torch.compiler.is_compiling():
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TkcError(f"{fn}: {name} must be a finite number, got {value!r}", caller())
    return float(value)


def attention_options(fn: str, causal, scale, return_lse) -> None:
    """An attention call's options (on a key not kept: a kept run's were)."""
    check_flags(fn, causal=causal, return_lse=return_lse)
    if scale is not None:
        finite(fn, "scale", scale)


def softmax_scale(fn: str, scale, D: int) -> float:
    """The scores' scale: 1 / sqrt(D) by default, else the caller's (finite)."""
    return 1.0 / math.sqrt(D) if scale is None else finite(fn, "scale", scale)


def autocast(*tensors) -> tuple | None:
    """The tensors as an op takes them in a torch.autocast region of the ops'
    device to bf16 (AMP: float32 weights and activations): each floating
    tensor but bf16 and float64 cast to bf16 (differentiably), as autocast
    casts F.linear's inputs. None when there is no such region or nothing to
    cast (the op's checks then name what is wrong). The ops ask before their
    checks, which a call wanting gradients runs each time: the region's flag
    is read first, so outside a region that costs one read. A region to
    float16 is refused: the kernels are bf16."""
    if not torch.is_autocast_enabled(DEVICE_TYPE) or not any(_castable(t) for t in tensors):
        return None
    if torch.get_autocast_dtype(DEVICE_TYPE) != torch.bfloat16:
        raise TkcError(f"tkc's ops compute in bf16: under torch.autocast use dtype=torch.bfloat16, "
                       f"not {torch.get_autocast_dtype(DEVICE_TYPE)}", caller())
    return tuple(t.to(torch.bfloat16) if _castable(t) else t for t in tensors)


def _castable(t) -> bool:
    return isinstance(t, Tensor) and t.is_floating_point() and t.dtype not in (torch.bfloat16, torch.float64)
