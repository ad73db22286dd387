"""A gated MLP's up projection as one PyTorch op: tkc.swiglu.

    h = tkc.swiglu(x, w_gate, w_up)   # silu(x w_gate^T) * (x w_up^T), x [..., K], w_* [F, K]

A Llama MLP's gate and up projections and their gating in one GEMM
(gemm_hopper's activation="swiglu"): each tile multiplies x by the rows of
both weights at once and writes only the gated product, where two linears
and a product write gate and up values, read them back and write the
product ([M, F] each, F the hidden width: 117 MB a pass at Llama-8B's 4096 x
14336). When a gradient is wanted the forward also stores the gate and up
values (the backward's), and the backward runs torch's silu_backward and
products on them, then four GEMMs: dx = dg w_gate + du w_up, dW_gate =
dg^T x, dW_up = du^T x.

The tile is tuned per GPU over gemm_space's schedules that put C's rows on
wgmma's M (the gating pairs columns within a thread: a swapped tile's pairs
sit in two warpgroups), keyed by C's rows and F, each bucketed (_key), at
the F of common models; a key not tuned takes its rows' pick at the nearest
tuned F. Tuned without the stored gate and up (an inference call's kernel);
a training call's takes the same tile.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.gemm_hopper import gemm_hopper
from ..kernels.gemm_space import SPACE, pruned_gated
from ..runtime.callsite import caller
from ..tune import autotune, bucket
from .checks import autocast, check_device, check_tensor, dense
from .eager import Op, plain_key, public
from .gemm import FEW, _check_rows, _gl, _matmul
from .plans import PlanCache, signature

__all__ = ["swiglu"]
BF16 = torch.bfloat16


@functools.lru_cache(maxsize=None)
def _kernel(preact: bool, BN: int = 256, cluster: int = 1, persistent: bool = True, split: int = 1,
            BM: int = 128, swap: bool = False, cluster_m: int = 1, sliced: bool = False):
    return gemm_hopper("bf16", True, BN=BN, persistent=persistent, activation="swiglu", preact=preact,
                       cluster=cluster, split=split, BM=BM, cluster_m=cluster_m, sliced=sliced)


def _key(rows: int, cols: int) -> tuple:
    """C's rows: one 16- or 64-row tile, else a power of four (256, 1024,
    4096, ...: the tiles' fill of the SMs changes little within one); and F:
    a power of two up to 4096, then a multiple of 2048 up to 16384 (the
    wave count of a 256-wide tile: 14336 and 16384 differ in their pick)."""
    few = next((f for f in FEW if rows <= f), None)
    r = few or 4 ** max(4, math.ceil(math.log(rows, 4) - 1e-9))
    f = bucket(cols) if cols <= 4096 or cols > 16384 else -(-cols // 2048) * 2048
    return (r, f)


ROWS = (16, 64, 256, 1024, 4096, 16384)
WIDTHS = (2048, 4096, 8192, 11008, 14336, 28672)   # models' F: tuned at these


def _examples() -> list:
    """`tkc tune --library`'s shapes: K 4096, C of each row key by the F of common models."""
    def make(m, n, k=4096):
        return lambda: [_gl(torch.randn(m, k, device="cuda").to(BF16)),
                        *(_gl((torch.randn(n, k, device="cuda") / 64).to(BF16)) for _ in "gu"),
                        _gl(torch.empty(m, n, device="cuda", dtype=BF16))]
    return [make(m, n) for m in ROWS for n in WIDTHS]


def _fits(config: dict, key: tuple) -> bool:
    """A key's candidates: every tile for C of up to 64 rows; 128-row ones
    beyond, and unsplit beyond 1024 rows (split-K is for C of few tiles)."""
    rows = key[0]
    return rows <= 64 or config["BM"] == 128 and (rows <= 1024 or config["split"] == 1)


def _nearest(key: tuple) -> dict:
    """An untuned key's pick: the tuned one of its rows at the nearest tuned F."""
    from ..tune import tables
    for f in sorted({_key(1, w)[1] for w in WIDTHS}, key=lambda f: abs(f - key[1])):
        config = tables.lookup(TILE.name, (key[0], f))
        if config is not None:
            return config
    return TILE.default


TILE = autotune(space=SPACE, prune=pruned_gated, name="tkc.swiglu.tile", flush_l2=True, examples=_examples,
                key=lambda x, wg, wu, c: _key(c.shape[-2], c.shape[-1]), fits=_fits, fallback=_nearest)(
    functools.partial(_kernel, False))


def _plan(x: Tensor, wg: Tensor, wu: Tensor, preact: bool):
    M, F = x.shape[0], wg.shape[0]
    dev = x.device
    out = functools.partial(torch.empty, M, F, device=dev, dtype=BF16)
    if x.numel() == 0 or wg.numel() == 0:   # no rows, or K = 0 (gate and up are zeros)
        return lambda x, wg, wu, shape=(M, F): (torch.zeros(shape, device=x.device, dtype=BF16),
                                                 *((out().zero_(), out().zero_()) if preact else ()))
    launch = _kernel(preact, **TILE.choose(_key(M, F))).prepare(
        _gl(x), _gl(wg), _gl(wu), *(_gl(out()) for _ in range(3 if preact else 1)))

    if preact:
        def run(x, wg, wu):
            y, g, u = out(), out(), out()
            launch(x, wg, wu, y, g, u)
            return y, g, u
    else:   # shape: y's (a plain call's [..., F]: the launch reads its pointer)
        def run(x, wg, wu, shape=(M, F)):
            y = torch.empty(shape, device=dev, dtype=BF16)
            launch(x, wg, wu, y)
            return (y,)
    return run


_plans = PlanCache(_plan)


def _impl(x: Tensor, w_gate: Tensor, w_up: Tensor, preact: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(h, gate, up): h = silu(x w_gate^T) * (x w_up^T) for x [M, K] and
    w_* [F, K] (row-major, copied where TMA cannot read them: checks.dense);
    gate and up when preact (else empty)."""
    x, w_gate, w_up = dense(x), dense(w_gate), dense(w_up)
    out = _plans((signature(x, w_gate, w_up), preact), x, w_gate, w_up, preact)(x, w_gate, w_up)
    return out if preact else (out[0], x.new_empty(0), x.new_empty(0))


def _fake(x, w_gate, w_up, preact):
    h = x.new_empty(x.shape[0], w_gate.shape[0])
    return (h, torch.empty_like(h), torch.empty_like(h)) if preact else (h, x.new_empty(0), x.new_empty(0))


def _setup(ctx, inputs, output):
    x, wg, wu, _ = inputs
    ctx.save_for_backward(x, wg, wu, output[1], output[2])


def _backward(ctx, dh, dg_unused, du_unused):
    if dh is None:
        return None, None, None, None
    x, wg, wu, g, u = ctx.saved_tensors
    dh = dense(dh)
    dg = torch.ops.aten.silu_backward(dh * u, g)      # d/dg silu(g) u
    du = dh * torch.nn.functional.silu(g)
    need_x, need_g, need_u = ctx.needs_input_grad[:3]
    dx = _matmul(dg, wg) + _matmul(du, wu) if need_x else None   # dG W_gate + dU W_up
    dwg = _matmul(dg.transpose(0, 1), x) if need_g else None
    dwu = _matmul(du.transpose(0, 1), x) if need_u else None
    return dx, dwg, dwu, None


_swiglu = Op("tkc::swiglu", _impl, _fake, _setup, _backward)
_plain = PlanCache()   # plain calls (eager.plain_key): key -> run


@public
def swiglu(x: Tensor, w_gate: Tensor, w_up: Tensor) -> Tensor:
    """silu(x w_gate^T) * (x w_up^T) in bf16 (f32 accumulation and gating)
    for x [..., K] and w_gate, w_up [F, K] (nn.Linear's layout: a Llama
    MLP's gate_proj and up_proj weights); differentiable in all three. K and
    F multiples of 8."""
    key = plain_key(None, x, w_gate, w_up)
    run = _plain.get(key)
    if run is not None:
        return run(x, w_gate, w_up)
    if (cast := autocast(x, w_gate, w_up)) is not None:   # AMP: float32 weights, activations
        return swiglu(*cast)
    fn = "swiglu"
    check_tensor(fn, "x", x, None, "", (BF16,))
    check_tensor(fn, "w_gate", w_gate, 2, "[F, K]", (BF16,))
    check_tensor(fn, "w_up", w_up, 2, "[F, K]", (BF16,))
    if w_up.shape != w_gate.shape:
        raise TkcError(f"{fn}: w_gate and w_up must have one shape [F, K], got {tuple(w_gate.shape)} "
                       f"and {tuple(w_up.shape)}", caller())
    if x.dim() < 1 or x.shape[-1] != w_gate.shape[1]:
        raise TkcError(f"{fn}: x's last dim must be the weights' K = {w_gate.shape[1]}, got shape "
                       f"{tuple(x.shape)}", caller())
    _check_rows(fn, K=w_gate.shape[1], F=w_gate.shape[0])
    check_device(fn, ("x", x), ("w_gate", w_gate), ("w_up", w_up))
    x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])   # (-1 is ambiguous when K = 0)
    x2, wg, wu = dense(x2), dense(w_gate), dense(w_up)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (x, wg, wu))
    h = _swiglu(x2, wg, wu, grad)[0]
    shape = (*x.shape[:-1], w_gate.shape[0])
    if key is not None and x2.data_ptr() == x.data_ptr() and wg is w_gate and wu is w_up:
        plan = _plans((signature(x2, wg, wu), False), x2, wg, wu, False)
        _plain.keep(key, lambda x, wg, wu: plan(x, wg, wu, shape)[0])   # (h made [..., F]: no view)
    return h.view(shape)

