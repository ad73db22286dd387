"""Building ahead of time the kernels an op call picks: `tkc build --call`.

    tkc build --call "layer_norm(bf16[4096, 12288], bf16[12288], bf16[12288])"

An op picks its kernels from its arguments' shapes, layouts and flags, so the
way to build what a call needs is to make that call: `prebuild` evaluates the
expression (the language of tkc/torchops/calls.py) on CPU tensors of those
shapes (zeros) through the fake driver (tkc.bench.fake_driver), forward
without and with gradients and backward, and every kernel the op prepares is
compiled into the cache on the way. Needs torch.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import shlex

import torch
from torch import Tensor

import tkc

from .bench.fake_driver import fake_driver
from .runtime.callsite import standing_at
from .torchops.calls import DTYPES
from .torchops.eager import ForwardOnly

__all__ = ["INFERENCE_ONLY", "prebuild"]

INFERENCE_ONLY = {("attention", "k_lengths")}   # (op, keyword): calls without a backward


def prebuild(expr: str, command: str = "tkc build", gpu: bool = False) -> None:
    """Make the call `expr` through the fake driver, building what it launches
    (forward without gradients, then, for an op with a backward, with them
    and backward). The op's errors are located at the command (`tkc build
    --call '...'`), there being no line of the user's. gpu=True: on the GPU
    instead (its tensors zeros there; `tkc tune --call` of an op, whose keys
    are the GPU's own)."""
    call = _parse(expr)
    fn = getattr(tkc, call.func.id)
    # a call with one of these keywords has no backward (and refuses gradients): the forward alone
    inference = any((call.func.id, k.arg) in INFERENCE_ONLY for k in call.keywords)
    # an argument the op refuses is the command's mistake: its errors name the command
    device = "cuda" if gpu else "cpu"
    with contextlib.nullcontext() if gpu else fake_driver(), standing_at(f"{command} --call {shlex.quote(expr)}"):
        for grad in (False,) if inference else (False, True):
            args = [_value(a, grad, device) for a in call.args]
            kwargs = {k.arg: _value(k.value, grad, device) for k in call.keywords}
            try:   # arguments the op's signature does not take: the command's mistake
                inspect.signature(fn).bind(*args, **kwargs)
            except TypeError as e:
                raise ValueError(f"--call {expr!r}: {e}") from None
            try:
                with torch.set_grad_enabled(grad):
                    out = fn(*args, **kwargs)
            except ForwardOnly:
                if grad:   # an op without a backward: its forward, built above, is all it launches
                    return
                raise
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if grad and any(isinstance(o, Tensor) and o.requires_grad for o in outs):
                torch.autograd.backward([o for o in outs if isinstance(o, Tensor) and o.requires_grad],
                                        [torch.zeros_like(o) for o in outs
                                         if isinstance(o, Tensor) and o.requires_grad])


def _parse(expr: str) -> ast.Call:
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"--call {expr!r}: not an expression ({e.msg})") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in tkc._TORCH_OPS):
        raise ValueError(f"--call {expr!r}: expected a call of one of tkc's ops "
                         f"({', '.join(tkc._TORCH_OPS)})")
    return node


def _value(node: ast.AST, grad: bool, device: str = "cpu"):
    """A tensor expression as a tensor of zeros on `device` (floats require
    grad when `grad`), anything else as its literal."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id in DTYPES:
        dims = ast.literal_eval(node.slice)
        dims = dims if isinstance(dims, tuple) else (dims,)
        dtype = DTYPES[node.value.id]
        return torch.zeros(dims, dtype=dtype, device=device).requires_grad_(grad and dtype.is_floating_point)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "i32":
        return torch.tensor(ast.literal_eval(node.args[0]), dtype=torch.int32, device=device)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("transpose", "permute", "t"):
        base = _value(node.func.value, False, device)
        view = getattr(base, node.func.attr)(*(ast.literal_eval(a) for a in node.args))
        return view.detach().requires_grad_(grad and base.is_floating_point()) if grad else view
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"--call: cannot read {ast.unparse(node)!r} (tensors are written "
                         f"DTYPE[dims], e.g. bf16[4, 1024])") from None
