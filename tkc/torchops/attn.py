"""Attention as a PyTorch op: `tkc.attention` and `tkc.attention_varlen`.

    o = tkc.attention(q, k, v, causal=True)      # q [B, Hq, Lq, D], k, v [B, Hkv, Lk, D]
    o.sum().backward()                            # dq, dk, dv by the backward kernels

    o = tkc.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)
                                                  # q [Tq, Hq, D] packed, cu_q int32 [B + 1]

Registered with torch.library (custom_op + register_fake + register_autograd,
FlashAttention-3's pattern), so torch.compile traces a model that calls it
without a graph break and autograd runs attention_bwd. The specialisation
(head dim, causal) is picked from the arguments. The kernels take strided
[B, H, L, D] views, so q, k, v go in as they are when D's elements are
adjacent and the other strides are whole 16-byte steps (checks.strided_takes): contiguous ones
(SDPA's layout), [B, L, H, D] memory (q.transpose(1, 2) of FlashAttention's
layout, as most models make them), q, k, v unbound from one packed
projection; anything else is made contiguous. The output and each gradient
take their input's memory order (_order: SDPA's or FlashAttention's). The
launches go to torch's current stream and allocate through torch, so they
can be captured in CUDA graphs (after a first call has loaded the kernels).

Semantics are SDPA's with FlashAttention 2+'s causal alignment (bottom-right:
query i sees key j iff j <= i + Lk - Lq; a query with no key gets 0): bf16
in and out, f32 softmax, default scale 1/sqrt(D), GQA/MQA when Hq is a
multiple of Hkv. Importing this module needs torch (not MLIR: with
TKC_OFFLINE=1 the kernels come from the artifact cache).
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.attention_bwd_kernel import dq_result
from ..kernels.attention_bwd_prep import stats_columns
from ..kernels.attention_hopper import HEAD_DIMS
from ..kernels.attention_tuned import backward_kernels, backward_schedule, forward_kernel
from ..runtime.callsite import caller
from . import checks
from .attn_decode import decode_family, decode_plan, family_key, family_step, lengths_plan, packable
from .checks import (arranged, attention_options, autocast, check_device, dense, softmax_scale,
                     strided_takes)
from .eager import Op, grad_key, kept_run, public, readable, wants_grad
from .plans import Later, PlanCache, scratch, signature

__all__ = ["attention", "attention_varlen"]


# ---------------------------------------------------------------- fixed-length batches

def _order(t: Tensor) -> str:
    """The memory order of a [B, H, L, D] tensor, which its output or
    gradient takes: "blhd" when its heads lie closer together than its rows
    (FlashAttention's [B, L, H, D] memory, a packed projection's), else
    "bhld" (SDPA's). A model reshapes an output of its input's order to
    [B, L, H * D] without a copy, and autograd sums a gradient of it into a
    packed projection's without a transpose."""
    return "blhd" if t.shape[1] > 1 and t.shape[2] > 1 and t.stride(1) < t.stride(2) else "bhld"


def _spec(t: Tensor, layout: str) -> tuple:
    """(size, strides) of a [B, H, L, D] tensor shaped like t in the layout's memory order."""
    B, H, L, D = t.shape
    if layout == "bhld":
        return (B, H, L, D), (H * L * D, L * D, D, 1)
    return (B, H, L, D), (L * H * D, D, H * D, 1)


def _like(t: Tensor, layout: str, dtype=None) -> Tensor:
    """An empty tensor shaped like t ([B, H, L, D]) in the layout's memory order."""
    return torch.empty_strided(*_spec(t, layout), device=t.device, dtype=dtype or t.dtype)


def _outputs(q: Tensor) -> Callable:
    """outputs(lse=True) -> (o, lse) for q's signature: o in q's memory order,
    lse [B, H, L] (lse=False: into scratch memory, for a call without a backward)."""
    B, H, L, D = q.shape
    o_spec, dev = _spec(q, _order(q)), q.device

    def outputs(lse: bool = True):
        return (torch.empty_strided(*o_spec, device=dev, dtype=q.dtype),
                torch.empty(B, H, L, device=dev, dtype=torch.float32) if lse
                else scratch(dev, B * H * L, "attention lse"))
    return outputs


def _fwd_plan(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float):
    """The forward for q, k, v's signature: layout, kernel, prepared launch."""
    D = q.shape[3]
    outputs = _outputs(q)
    if q.numel() == 0 or k.shape[2] == 0:  # no rows, or no key: o = 0 (as for a query with no key)
        def empty(q, k, v, scale, lse=True):
            o, lse = outputs()
            return o.zero_(), lse.fill_(math.inf)   # +inf, as the kernel's rows with no key
        return empty
    arrange = arranged(q, k, v)
    o, lse = outputs()
    kernel = forward_kernel(D, causal, "bhld", k.shape[2], q.shape[2])
    launch = kernel.prepare(*arrange(q, k, v), o, lse.unsqueeze(2), scale)

    def run(q, k, v, scale, lse=True):
        q, k, v = arrange(q, k, v)
        o, lse = outputs(lse)
        launch(q, k, v, o, lse, scale)
        return o, lse
    return run


_fwd_plans = PlanCache(_fwd_plan)


def _plan(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float):
    """The forward's run(q, k, v, scale, lse=True) for this call: a decode
    step's from its family (few query rows a KV head: packed, the keys split
    over the SMs; kept there, across key counts: attn_decode.decode_plan),
    else the plan of the call's signature."""
    key = (signature(q, k, v), causal)
    plan = _fwd_plans.get(key)
    if plan is None:
        plan = decode_plan(q, k, v, causal, _outputs) or _fwd_plans(key, q, k, v, causal, scale)
    return plan


def _fwd_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    return _plan(q, k, v, causal, scale)(q, k, v, scale)


def _fwd_infer(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float) -> Tensor:
    """o alone: the lse (for the backward only) goes to scratch memory."""
    return _plan(q, k, v, causal, scale)(q, k, v, scale, False)[0]


def _fwd_fake(q, k, v, causal, scale):
    B, H, L, D = q.shape
    return _like(q, _order(q)), q.new_empty(B, H, L, dtype=torch.float32)


def _bwd_plan(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
              scale: float):
    """The backward for the arguments' signature: prep and backward kernels,
    prepared; dQ's f32 accumulator and the statistics allocated per call."""
    B, H, L, D = q.shape
    specs, dev = [_spec(t, _order(t)) for t in (q, k, v)], q.device

    def outputs(first: int = 0):  # dq, dk, dv in their inputs' orders (dq from dq_result: first=1)
        return [torch.empty_strided(*spec, device=dev, dtype=q.dtype) for spec in specs[first:]]

    if q.numel() == 0 or k.numel() == 0:  # nothing flows: zero gradients
        return lambda *args: tuple(t.zero_() for t in outputs())
    arrange = arranged(q, k, v, o, do)
    q_, k_, v_, o_, do_ = arrange(q, k, v, o, do)
    prep_k, bwd_k = backward_kernels(D, causal, "bhld", k.shape[2])
    packed = backward_schedule(D, causal, "bhld", k.shape[2]).dq_packed
    stats_numel = B * H * 2 * stats_columns(L)  # a multiple of STATS_ALIGN: dq stays aligned

    def buffers():  # one f32 allocation: the statistics [B, H, 2, columns], then dq (the
        buf = torch.empty(stats_numel + q.numel(), device=dev, dtype=torch.float32)  # f32
        return buf, buf.as_strided(*specs[0], stats_numel)  # accumulator, zeroed by prep_k)

    stats, dq = buffers()
    stats = stats[:stats_numel].view(B, H, 2, -1)  # the launches read buffers()' pointers
    dk, dv = outputs(1)
    prep = prep_k.prepare(o_, do_, lse.view(B, H, 1, L), stats, dq)
    bwd = bwd_k.prepare(q_, k_, v_, do_, stats, dq, dk, dv, scale)

    def run(do, q, k, v, o, lse, scale):
        q, k, v, o, do = arrange(q, k, v, o, do)
        stats, dq = buffers()
        dk, dv = outputs(1)
        prep(o, do, lse, stats, dq)
        bwd(q, k, v, do, stats, dq, dk, dv, scale)
        return dq_result(dq, q.dtype, packed), dk, dv
    return run


_bwd_plans = PlanCache(_bwd_plan)


def _bwd_impl(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
              scale: float) -> tuple[Tensor, Tensor, Tensor]:
    # lse is keyed by q's shape: the forward made it, f32 [B, H, L] and new
    plan = _bwd_plans((signature(do, q, k, v, o), causal), do, q, k, v, o, lse, causal, scale)
    return plan(do, q, k, v, o, lse, scale)


def _bwd_fake(do, q, k, v, o, lse, causal, scale):
    return _like(q, _order(q)), _like(k, _order(k)), _like(v, _order(v))


def _setup(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale = causal, scale


def _backward(ctx, do, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    do = torch.zeros_like(o) if do is None else do  # only the lse was used (its gradient is not)
    run = kept_run(ctx, (do,))
    if run is not None:  # a kept eager forward's: straight to its backward plan
        plan = run.later.get(do)
        if plan is None:
            plan = _bwd_plans((signature(do, q, k, v, o), ctx.causal), do, q, k, v, o, lse,
                              ctx.causal, ctx.scale)
            run.later.keep(do, plan)
        return (*plan(do, q, k, v, o, lse, ctx.scale), None, None)
    dq, dk, dv = _bwd(do, q, k, v, o, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


_len_plans = PlanCache(lambda q, k, v, lens, causal: lengths_plan(q, k, v, lens, causal, _outputs(q)))


def _len_impl(q: Tensor, k: Tensor, v: Tensor, k_lengths: Tensor, causal: bool,
              scale: float) -> tuple[Tensor, Tensor]:
    return _len_plans((signature(q, k, v, k_lengths), causal), q, k, v, k_lengths, causal)(q, k, v, k_lengths,
                                                                                           scale)


def _len_fake(q, k, v, k_lengths, causal, scale):
    return _fwd_fake(q, k, v, causal, scale)


_len = Op("tkc::attention_kv_lengths", _len_impl, _len_fake)   # inference only: no autograd formula


def _checked(q, k, v) -> tuple | None:
    """tkc.attention's checks of q, k and v (errors at the caller's line):
    None when the call can go on, or, in a bf16 autocast region, q, k and v
    cast to bf16 for the call to be made again with."""
    if _fits(q, k, v):
        return None
    if (cast := autocast(q, k, v)) is not None:   # AMP: float32 q, k, v in a bf16 region
        return cast
    _check_qkv(q, k, v, 4)
    if k.shape[0] != q.shape[0]:
        raise TkcError(f"attention: q and k must have one batch size, got {q.shape[0]} and "
                       f"{k.shape[0]}", caller())
    check_device("attention", ("q", q), ("k", k), ("v", v))
    return None


def _with_lengths(q, k, v, k_lengths, causal: bool, scale, return_lse: bool):
    """tkc.attention with k_lengths: checked, then the decode path's split forward."""
    if (cast := _checked(q, k, v)) is not None:
        return _with_lengths(*cast, k_lengths, causal, scale, return_lse)
    B = q.shape[0]
    if not isinstance(k_lengths, Tensor) or k_lengths.dtype != torch.int32 or tuple(k_lengths.shape) != (B,) \
            or k_lengths.device != q.device:
        got = (f"{k_lengths.dtype} {tuple(k_lengths.shape)} on {k_lengths.device}"
               if isinstance(k_lengths, Tensor) else type(k_lengths).__name__)
        raise TkcError(f"attention: k_lengths must be an int32 tensor [B] = [{B}] on q's device, got {got}",
                       caller())
    if wants_grad(q, k, v):
        raise TkcError("attention: k_lengths is for inference (a KV cache's filled part): no gradient "
                       "flows through it; call it under torch.no_grad() or with tensors that need none",
                       caller())
    if not packable(q, k):
        raise TkcError(f"attention: k_lengths serves up to 64 query rows a KV head (Hq / Hkv x Lq = "
                       f"{q.shape[1] // k.shape[1]} x {q.shape[2]})", caller())
    attention_options("attention", causal, scale, return_lse)
    o, lse = _len(q, k, v, k_lengths, causal, softmax_scale("attention", scale, q.shape[3]))
    return (o, lse) if return_lse else o


_bwd = Op("tkc::attention_bwd", _bwd_impl, _bwd_fake)
_fwd = Op("tkc::attention_fwd", _fwd_impl, _fwd_fake, _setup, _backward, _fwd_infer)
_plain = PlanCache()  # eager calls (eager.grad_key): key -> run(q, k, v)
# Decode steps' eager runs: a few, since a growing cache's key is new at every step (its family
# keeps the launches); kept long, each would outlive Python's young collections (see
# runtime/launch.py, _few_frames)
_decode_runs = PlanCache()
_decode_runs.LIMIT = 8
# ... and the steps of their families (decode_family), by the eager key less what a growing
# cache changes at every step (attn_decode.family_key): such a step checks only that
_decode_families = PlanCache()
_decode_families.LIMIT = 64


def _decode_step(q, k, v, causal: bool, scale, return_lse: bool):
    """A plain call's step through the decode path's family (attn_decode.family_step:
    its launches kept across key counts), or None: not a decode step, a gradient
    wanted, arguments the checks must see (_fits)."""
    attention_options("attention", causal, scale, return_lse)   # (a family found was made by checked ones)
    if not _fits(q, k, v) or wants_grad(q, k, v):
        return None
    steps = decode_family(q, k, v, causal, _outputs)
    return None if steps is None else family_step(steps, softmax_scale("attention", scale, q.shape[3]),
                                                  return_lse)


@public
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None,
              return_lse: bool = False, k_lengths: Tensor | None = None):
    """softmax(q k^T * scale [causal mask]) v for q [B, Hq, Lq, D] and k, v
    [B, Hkv, Lk, D] (bf16, on the GPU; D 64, 96, 128 or 256; Hq a multiple of
    Hkv), differentiable in q, k and v. return_lse=True also returns the
    log-sum-exp of each query row [B, Hq, Lq] (f32).

    k_lengths (int32 [B], on q's device): batch b attends to its first
    k_lengths[b] keys (a KV cache's filled part; values clamped to 0 .. Lk,
    read on the GPU, so a captured CUDA graph's replays see new ones; a row
    with none gets 0 and lse +inf; causal: query i of Lq is at position
    k_lengths[b] - Lq + i). For decode steps: up to 64 query rows a KV head
    (Hq / Hkv x Lq), no gradient."""
    if k_lengths is not None:
        return _with_lengths(q, k, v, k_lengths, causal, scale, return_lse)
    key = grad_key((causal, scale, return_lse), q, k, v)
    run = _plain.get(key)
    if run is None and key is not None:
        run = _decode_runs.get(key)
        if run is None:   # a decode step at a new key count (a growing cache's, each step)?
            family = family_key(key)
            step = _decode_families.get(family)
            if step is None and (step := _decode_step(q, k, v, causal, scale, return_lse)) is not None:
                _decode_families.keep(family, step)
            if step is not None and (run := step(q, k, v)) is not None:
                _decode_runs.keep(key, run)
    if run is not None:
        return run(q, k, v)
    attention_options("attention", causal, scale, return_lse)
    if (cast := _checked(q, k, v)) is not None:
        return attention(*cast, causal, scale, return_lse)
    scale = softmax_scale("attention", scale, q.shape[3])
    if key is not None:  # the forward plan, next time straight away (eager.grad_key)
        plan = _plan(q, k, v, causal, scale)
        if wants_grad(q, k, v):  # the autograd call, with the plan for its forward
            fwd = lambda q, k, v, causal, scale: plan(q, k, v, scale)  # noqa: E731
            fwd.later = Later()
            run = (lambda q, k, v: _fwd.fast(q, k, v, causal, scale, fwd)) if return_lse else \
                (lambda q, k, v: _fwd.fast_main(q, k, v, causal, scale, fwd))
        else:
            run = (lambda q, k, v: plan(q, k, v, scale)) if return_lse else \
                (lambda q, k, v: plan(q, k, v, scale, False)[0])
        _plain.keep(key, run)
        return run(q, k, v)
    return _fwd(q, k, v, causal, scale) if return_lse else _fwd.main_output(q, k, v, causal, scale)


# ---------------------------------------------------------------- variable-length batches

def _vfwd_impl(q: Tensor, k: Tensor, v: Tensor, cu_q: Tensor, cu_k: Tensor, max_q: int,
               max_k: int, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    T, H, D = q.shape
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(H, T, device=q.device, dtype=torch.float32)
    if T == 0 or k.shape[0] == 0 or len(cu_q) == 1:
        return o.zero_(), lse.fill_(math.inf)   # +inf, as the kernel's rows with no key
    forward_kernel(D, causal, "varlen", max_k, max_q)(*(_tokens(t) for t in (q, k, v, o)),
                                                      lse.unsqueeze(1), cu_q, cu_k, max_q, scale)
    return o, lse


def _tokens(t: Tensor) -> Tensor:
    """A [T, H, D] tensor as the varlen kernels' [T, H*D] gl: a view when a
    token's H*D elements are adjacent (contiguous, or split from a packed
    projection) and its rows whole 16-byte steps apart, else a contiguous copy's."""
    return (t if strided_takes(t, 2) else dense(t)).flatten(1)


def _vfwd_fake(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale):
    T, H, D = q.shape
    return torch.empty_like(q, memory_format=torch.contiguous_format), \
        q.new_empty(H, T, dtype=torch.float32)


def _vbwd_impl(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, cu_q: Tensor,
               cu_k: Tensor, max_q: int, max_k: int, causal: bool,
               scale: float) -> tuple[Tensor, Tensor, Tensor]:
    T, H, D = q.shape
    if T == 0 or k.shape[0] == 0 or len(cu_q) == 1:
        return tuple(torch.zeros_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    prep_k, bwd_k = backward_kernels(D, causal, "varlen", max_k)
    stats = torch.empty(H, 2, stats_columns(T, len(cu_q) - 1), device=q.device, dtype=torch.float32)
    dq = torch.empty(q.shape, device=q.device, dtype=torch.float32)  # zeroed by prep_k
    prep_k(_tokens(o), _tokens(do), lse.view(H, 1, T), stats, _tokens(dq), cu_q, max_q)
    dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (k, v))
    bwd_k(*(_tokens(t) for t in (q, k, v, do)), stats, *(_tokens(t) for t in (dq, dk, dv)),
          cu_q, cu_k, max_k, scale)
    return dq_result(dq, q.dtype, backward_schedule(D, causal, "varlen", max_k).dq_packed), dk, dv


def _vbwd_fake(do, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _vsetup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
    ctx.args = (max_q, max_k, causal, scale)


def _vbackward(ctx, do, dlse):
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    do = torch.zeros_like(o) if do is None else do
    dq, dk, dv = _vbwd(do, q, k, v, o, lse, cu_q, cu_k, *ctx.args)
    return dq, dk, dv, None, None, None, None, None, None


_vbwd = Op("tkc::attention_varlen_bwd", _vbwd_impl, _vbwd_fake)
_vfwd = Op("tkc::attention_varlen_fwd", _vfwd_impl, _vfwd_fake, _vsetup, _vbackward)


@public
def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                     max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                     scale: float | None = None, return_lse: bool = False):
    """Attention over a batch of sequences of different lengths packed along
    the tokens (FlashAttention's varlen API): q [Tq, Hq, D], k, v [Tk, Hkv, D];
    sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q and
    cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k and v (int32 [B + 1] on q's
    device, starting at 0, ending at Tq / Tk); max_seqlen_* bound the
    lengths. return_lse=True also returns the log-sum-exp [Hq, Tq]."""
    if (cast := autocast(q, k, v)) is not None:
        return attention_varlen(*cast, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                                scale, return_lse)
    _check_qkv(q, k, v, 3)
    for name, cu, t, most in (("cu_seqlens_q", cu_seqlens_q, q, max_seqlen_q),
                              ("cu_seqlens_k", cu_seqlens_k, k, max_seqlen_k)):
        _check_offsets(name, cu, t, most)
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise TkcError(f"attention_varlen: cu_seqlens_q and cu_seqlens_k must describe one batch, "
                       f"got shapes {tuple(cu_seqlens_q.shape)} and {tuple(cu_seqlens_k.shape)}",
                       caller())
    check_device("attention_varlen", ("q", q), ("k", k), ("v", v))
    attention_options("attention_varlen", causal, scale, return_lse)
    o, lse = _vfwd(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
                   causal, softmax_scale("attention_varlen", scale, q.shape[-1]))
    return (o, lse) if return_lse else o


# ---------------------------------------------------------------- argument checks

def _fits(q, k, v) -> bool:
    """The common case of attention's arguments in a few reads (else the
    checks below name what is wrong)."""
    if not (isinstance(q, Tensor) and isinstance(k, Tensor) and isinstance(v, Tensor)):
        return False
    qs, ks = q.shape, k.shape
    return q.dtype == k.dtype == v.dtype == torch.bfloat16 and len(qs) == len(ks) == 4 \
        and ks == v.shape and qs[3] == ks[3] and qs[3] in HEAD_DIMS and qs[0] == ks[0] \
        and ks[1] and not qs[1] % ks[1] and q.device == k.device == v.device \
        and q.device.type == checks.DEVICE_TYPE


def _check_qkv(q: Tensor, k: Tensor, v: Tensor, rank: int) -> None:
    """dtype, device, rank, head dim, GQA heads: errors at the caller's line."""
    what = "[B, H, L, D]" if rank == 4 else "[T, H, D]"
    fn = "attention" if rank == 4 else "attention_varlen"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TkcError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}", caller())
        if t.dim() != rank:
            raise TkcError(f"{fn}: {name} must be {what}, got shape {tuple(t.shape)}", caller())
        if t.dtype != torch.bfloat16:
            raise TkcError(f"{fn}: {name} must be bf16, got {t.dtype}", caller())
    D = q.shape[-1]
    if k.shape[-1] != D or v.shape[-1] != D:
        raise TkcError(f"{fn}: q, k and v must have one head dim, got {D}, {k.shape[-1]} and "
                       f"{v.shape[-1]}", caller())
    if D not in HEAD_DIMS:
        raise TkcError(f"{fn}: head dim {D} is not supported (one of {HEAD_DIMS})", caller())
    if k.shape != v.shape:
        raise TkcError(f"{fn}: k and v must have one shape, got {tuple(k.shape)} and "
                       f"{tuple(v.shape)}", caller())
    hq, hk = q.shape[-3] if rank == 4 else q.shape[1], k.shape[-3] if rank == 4 else k.shape[1]
    if hk == 0 or hq % hk:
        raise TkcError(f"{fn}: the query heads ({hq}) must be a multiple of the key/value heads "
                       f"({hk}), which must be at least 1", caller())


def _check_offsets(name: str, cu: Tensor, t: Tensor, most: int) -> None:
    """int32 [B + 1] on t's device; its values (0 first, ascending, ending at
    t's rows, gaps at most `most`) when they can be read: not while a CUDA
    graph is captured or anything traces (torch.compile, fake tensors), nor
    of a meta tensor."""
    if not isinstance(cu, Tensor) or cu.dtype != torch.int32 or cu.dim() != 1 or len(cu) < 2:
        raise TkcError(f"attention_varlen: {name} must be an int32 tensor [B + 1], got "
                       f"{getattr(cu, 'dtype', type(cu).__name__)} {tuple(getattr(cu, 'shape', ()))}",
                       caller())
    if cu.device != t.device:
        raise TkcError(f"attention_varlen: {name} must be on {t.device}, got {cu.device}", caller())
    if not readable(cu):
        return
    c = cu.tolist()
    lengths = [b - a for a, b in zip(c, c[1:])]
    if c[0] != 0 or c[-1] != t.shape[0] or min(lengths) < 0:
        raise TkcError(f"attention_varlen: {name} must rise from 0 to {t.shape[0]} (the rows of its "
                       f"tensor), got {c if len(c) <= 8 else c[:4] + ['...'] + c[-2:]}", caller())
    if max(lengths) > most:
        raise TkcError(f"attention_varlen: a sequence of {max(lengths)} rows is longer than the "
                       f"max_seqlen given for {name} ({most})", caller())
