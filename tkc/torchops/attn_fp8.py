"""FP8 attention forward as a PyTorch op: `tkc.attention_fp8`.

    o = tkc.attention_fp8(q, k, v, q_scale, k_scale, v_scale, causal=True)
    # q [B, Hq, Lq, D], k, v [B, Hkv, Lk, D] float8_e4m3fn; scales f32 [B, H]

o = softmax(scale * (q q_scale) (k k_scale)^T [causal mask]) (v v_scale) in
bf16 [B, Hq, Lq, D]: FlashAttention-3's FP8 forward (per-head descaling
factors, as its q_descale / k_descale / v_descale), with tkc.attention's
semantics otherwise: default scale 1/sqrt(D), bottom-right causal mask, a
query with no key gets 0, GQA/MQA when Hq is a multiple of Hkv, any Lq and
Lk. D 64, 128 or 256. return_lse=True also returns the log-sum-exp of each
query row [B, Hq, Lq] (f32, natural log).

The kernel (tkc/kernels/attention_hopper.py, dtype="f8e4m3") reads V
transposed, its keys in the order wgmma takes an 8-bit P from registers
(warpgroup.fp8_lane_order() per 32 keys, zero padded to a multiple of 32):
`fp8_v_layout` makes it on every call, one pass over V (a kernel,
tkc/kernels/attention_fp8_v.py, reads and writes B * Hkv * Lk * D bytes at
about a copy's speed: about what the forward's own reads of V cost); a
caller that reuses V can make vt once and call `attention_fp8_vt`. q, k and
v are made contiguous (a copy) when they are not.

Accuracy: P is rounded to e4m3 in registers (3 mantissa bits: each
probability within 2^-4 of itself; the row maximum's exact), so o differs
from float attention of the dequantised inputs by about 2.5e-2 relative
(2-norm) where the softmax is flat, less where a few keys dominate (6e-3 in
the tests' peaked rows; docs/attention.md, "FP8 forward").

Forward only, as tkc.scaled_mm: the FP8 inputs are quantised values, not
parameters, so no autograd formula is registered and o does not require
grad (no gradient reaches q, k, v or the scales; train with the bf16
tkc.attention).
"""
from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..hopper.fp8_lanes import K_GROUP
from ..kernels.attention_hopper import FP8_HEAD_DIMS
from ..kernels.attention_fp8_v import fp8_v_layout_kernel as v_layout_kernel
from ..kernels.attention_fp8_v import loads_for
from ..kernels.attention_tuned import fp8_forward_kernel
from ..runtime.callsite import caller
from ..tune import autotune, bucket
from .checks import attention_options, check_device, check_tensor, dense, softmax_scale
from .eager import Op, plain_key, public
from .plans import PlanCache, signature

__all__ = ["attention_fp8", "attention_fp8_vt", "fp8_v_layout"]
E4M3 = torch.float8_e4m3fn


# V's layout kernel: TMA loads a block, tuned per head dim and size (a power-of-two bucket of
# B * H * L * D bytes; `tkc tune --library --filter tkc.fp8_v_layout`).
V_EXAMPLES = ((4, 16, 8192), (4, 16, 4096), (16, 16, 1024), (1, 8, 4096), (2, 8, 1000))   # B, H, L


def _v_example(D: int, B: int, H: int, L: int) -> list:
    v = (torch.randn(B, H, L, D, device="cuda") * 4).to(E4M3)
    return [v, _v_fake(v)]


def _v_key(v: Tensor, vt: Tensor | None = None) -> int:
    """A layout call's key: the bucket of V's size (its launch's arguments: v, vt)."""
    return bucket(v.numel())


def _v_space(D: int):
    return autotune(space={"loads": list(loads_for(D))}, key=_v_key,
                    name=f"tkc.fp8_v_layout.d{D}",
                    examples=lambda: [functools.partial(_v_example, D, *e) for e in V_EXAMPLES],
                    )(lambda loads: v_layout_kernel(D, loads))


V_LAYOUT = {D: _v_space(D) for D in FP8_HEAD_DIMS}


def _v_kernel(v: Tensor):
    """The layout kernel for v's head dim and size: its bucket's tuned pick."""
    D = v.shape[3]
    return v_layout_kernel(D, V_LAYOUT[D].choose(_v_key(v))["loads"])


def _v_impl(v: Tensor) -> Tensor:
    """fp8_v_layout: one kernel (fp8_v_layout_kernel: V read by TMA and
    written once, the keys past L to a multiple of 32 zero)."""
    vt = _v_fake(v)   # V^T's shape, on v's device, contiguous
    if vt.numel():
        _v_kernel(v)(dense(v), vt)
    return vt


def _v_fake(v):
    B, H, L, D = v.shape
    return v.new_empty(B, H, D, -(-L // K_GROUP) * K_GROUP)


_v_layout = Op("tkc::fp8_v_layout", _v_impl, _v_fake)


@public
def fp8_v_layout(v: Tensor) -> Tensor:
    """V [B, H, L, D] (e4m3, on the GPU) as the FP8 forward reads it: vt [B,
    H, D, L32] with vt[b, h, d, 32 g + p] = v[b, h, 32 g + fp8_lane_order()[p],
    d], L32 = L rounded up to 32, keys past L zero (a custom op: one kernel
    launch, torch.compile sees it whole)."""
    key = plain_key("layout", v)
    run = _plain.get(key)
    if run is not None:   # a repeated eager call: the key fixes what the checks read
        return run(v)
    check_tensor("fp8_v_layout", "v", v, 4, "[B, H, L, D]", (E4M3,))
    if v.shape[3] not in FP8_HEAD_DIMS:
        raise TkcError(f"fp8_v_layout: head dim {v.shape[3]} is not supported (one of {FP8_HEAD_DIMS})",
                       caller())
    check_device("fp8_v_layout", ("v", v))
    if key is not None:   # eager: the plan at once next time (_v_impl itself, past the checks)
        _plain.keep(key, _v_impl)
        return _v_impl(v)
    return _v_layout(v)


def _fwd_impl(q: Tensor, k: Tensor, vt: Tensor, q_scale: Tensor, k_scale: Tensor, v_scale: Tensor,
              causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    B, H, L, D = q.shape
    keys = k.shape[2]
    o = torch.empty(B, H, L, D, device=q.device, dtype=torch.bfloat16)
    lse = torch.empty(B, H, L, device=q.device, dtype=torch.float32)
    if q.numel() == 0 or keys == 0:     # no rows, or no key: o = 0 (as for a query with no key)
        return o.zero_(), lse.fill_(math.inf)   # +inf, as the kernel's rows with no key
    q, k = dense(q), dense(k)
    fp8_forward_kernel(D, causal, keys)(q, k, vt, o, lse.unsqueeze(2), dense(q_scale),
                                        dense(k_scale), dense(v_scale), scale)
    return o, lse


def _fwd_fake(q, k, vt, q_scale, k_scale, v_scale, causal, scale):
    B, H, L, D = q.shape
    return q.new_empty(B, H, L, D, dtype=torch.bfloat16), q.new_empty(B, H, L, dtype=torch.float32)


_fwd = Op("tkc::attention_fp8_fwd", _fwd_impl, _fwd_fake)


# ---------------------------------------------------------------- repeated eager calls
#
# An eager call (eager.plain_key: nothing tracing, no gradient) whose tensors
# are contiguous keeps its plan under its key, and the next call with the key
# runs it at once: no checks, no custom ops, prepared launches (V laid out by
# its kernel).

def _plan(q, k, v, q_scale, k_scale, v_scale, causal: bool, scale: float, laid_out: bool):
    B, H, L, D = q.shape
    keys = k.shape[2]

    def outputs():
        return (torch.empty(B, H, L, D, device=q.device, dtype=torch.bfloat16),
                torch.empty(B, H, L, device=q.device, dtype=torch.float32))
    if q.numel() == 0 or keys == 0:     # as _fwd_impl: o = 0, lse = +inf
        def empty(*args):
            o, lse = outputs()
            return o.zero_(), lse.fill_(math.inf)
        return empty
    vt = v if laid_out else v.new_empty(_v_fake(v).shape)   # (a layout to prepare with: not run)
    o, lse = outputs()
    fwd = fp8_forward_kernel(D, causal, keys).prepare(q, k, vt, o, lse.unsqueeze(2), q_scale, k_scale, v_scale,
                                                      scale, bound=(8,))
    if laid_out:
        layout = None
    else:                               # the layout kernel, into a new vt
        def layout(v, launch=_v_kernel(v).prepare(v, vt), shape=vt.shape):
            out = torch.empty(shape, device=v.device, dtype=E4M3)
            launch(v, out)
            return out

    def run(q, k, v, q_scale, k_scale, v_scale):
        o, lse = outputs()   # (a prepared launch reads the data pointers alone: lse for its view)
        fwd(q, k, v if layout is None else layout(v), o, lse, q_scale, k_scale, v_scale)
        return o, lse
    return run


_plans = PlanCache(_plan)
_plain = PlanCache()   # an eager call's key -> its plan's run


def _kept_run(v_name: str, q, k, v, q_scale, k_scale, v_scale, causal, scale, return_lse):
    """The run an eager call keeps under its key (eager.plain_key), the
    arguments and options checked on its key's first call; None while
    tracing, with a gradient wanted or a tensor not contiguous (the custom
    ops then, checked)."""
    key = plain_key((v_name, causal, scale, return_lse), q, k, v, q_scale, k_scale, v_scale)
    run = _plain.get(key)
    if run is not None:
        return run
    fn = "attention_fp8" if v_name == "v" else "attention_fp8_vt"
    attention_options(fn, causal, scale, return_lse)
    _check(q, k, v, q_scale, k_scale, v_scale, v_name)
    if key is None or not all(t.is_contiguous() for t in (q, k, v, q_scale, k_scale, v_scale)):
        return None
    causal, scale, laid_out = bool(causal), softmax_scale(fn, scale, q.shape[3]), v_name == "vt"
    run = _plans((signature(q, k, v, q_scale, k_scale, v_scale), causal, scale, laid_out),
                 q, k, v, q_scale, k_scale, v_scale, causal, scale, laid_out)
    _plain.keep(key, run)
    return run


@public
def attention_fp8(q: Tensor, k: Tensor, v: Tensor, q_scale: Tensor, k_scale: Tensor, v_scale: Tensor,
                  causal: bool = False, scale: float | None = None, return_lse: bool = False):
    """softmax(scale * (q q_scale) (k k_scale)^T [causal mask]) (v v_scale)
    for q [B, Hq, Lq, D], k, v [B, Hkv, Lk, D] float8_e4m3fn on the GPU and
    per-head f32 scales q_scale [B, Hq], k_scale, v_scale [B, Hkv]: bf16
    [B, Hq, Lq, D]; return_lse=True also returns the log-sum-exp [B, Hq, Lq].
    V is brought into the kernel's layout on each call (fp8_v_layout: one
    kernel pass over V); forward only (module docstring)."""
    run = _kept_run("v", q, k, v, q_scale, k_scale, v_scale, causal, scale, return_lse)
    if run is not None:
        o, lse = run(q, k, v, q_scale, k_scale, v_scale)
    else:
        o, lse = _fwd(q, k, _v_layout(v), q_scale, k_scale, v_scale, causal,
                      softmax_scale("attention_fp8", scale, q.shape[3]))
    return (o, lse) if return_lse else o


@public
def attention_fp8_vt(q: Tensor, k: Tensor, vt: Tensor, q_scale: Tensor, k_scale: Tensor,
                     v_scale: Tensor, causal: bool = False, scale: float | None = None,
                     return_lse: bool = False):
    """attention_fp8 with V already in the kernel's layout: vt = fp8_v_layout(v)
    [B, Hkv, D, Lk32] (a V used by several calls is laid out once)."""
    run = _kept_run("vt", q, k, vt, q_scale, k_scale, v_scale, causal, scale, return_lse)
    if run is not None:
        o, lse = run(q, k, vt, q_scale, k_scale, v_scale)
    else:
        o, lse = _fwd(q, k, vt, q_scale, k_scale, v_scale, causal,
                      softmax_scale("attention_fp8_vt", scale, q.shape[3]))
    return (o, lse) if return_lse else o


# ---------------------------------------------------------------- argument checks

def _check(q, k, v, q_scale, k_scale, v_scale, v_name: str) -> None:
    """dtypes, shapes, heads, scales, devices, gradients: errors at the caller's line."""
    fn = "attention_fp8" if v_name == "v" else "attention_fp8_vt"
    for name, t in (("q", q), ("k", k), (v_name, v)):
        check_tensor(fn, name, t, 4, "[B, H, L, D]" if name != "vt" else "[B, Hkv, D, Lk32]", (E4M3,))
    B, Hq, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    if k.shape[0] != B or k.shape[3] != D:
        raise TkcError(f"{fn}: k must be [B, Hkv, Lk, D] with q's B = {B} and D = {D}, got shape "
                       f"{tuple(k.shape)}", caller())
    if D not in FP8_HEAD_DIMS:
        raise TkcError(f"{fn}: head dim {D} is not supported (one of {FP8_HEAD_DIMS})", caller())
    want = (B, Hkv, Lk, D) if v_name == "v" else (B, Hkv, D, -(-Lk // K_GROUP) * K_GROUP)
    if tuple(v.shape) != want:
        raise TkcError(f"{fn}: {v_name} must have shape {want} (k's B, Hkv, Lk and D"
                       f"{'' if v_name == 'v' else ': fp8_v_layout(v)'}), got {tuple(v.shape)}", caller())
    if v_name == "vt" and not v.is_contiguous():
        raise TkcError(f"{fn}: vt must be contiguous (as fp8_v_layout makes it)", caller())
    if Hkv == 0 or Hq % Hkv:
        raise TkcError(f"{fn}: the query heads ({Hq}) must be a multiple of the key/value heads "
                       f"({Hkv}), which must be at least 1", caller())
    for name, t, H in (("q_scale", q_scale, Hq), ("k_scale", k_scale, Hkv), ("v_scale", v_scale, Hkv)):
        check_tensor(fn, name, t, 2, f"[B, {'Hq' if name == 'q_scale' else 'Hkv'}] (one scale a head)",
                     (torch.float32,))
        if tuple(t.shape) != (B, H):
            raise TkcError(f"{fn}: {name} must be [B, {'Hq' if name == 'q_scale' else 'Hkv'}] = "
                           f"{(B, H)} (one scale a head), got {tuple(t.shape)}", caller())
    check_device(fn, ("q", q), ("k", k), (v_name, v), ("q_scale", q_scale), ("k_scale", k_scale),
                 ("v_scale", v_scale))
