"""The linear-attention kernels as PyTorch ops (torch.library custom_op +
register_fake, so torch.compile traces them without a graph break):

    o = tkc.linear_attention(q, k, v)            # q, k [B, H, L, F], v [B, H, L, DV]
    o = tkc.linear_attention(q, k, v, g=g)       # decay: g [B, H, L] f32 (Mamba-2 / simple GLA)
    o = tkc.based(q, k, v)                       # q, k [B, H, L, 16], v [B, H, L, 64]
    o = tkc.hedgehog(q, k, v, qmap, kmap, alpha, beta)   # q, k, v [B, H, L, 128], maps [H, 128, 64]

bf16 in and out, f32 state; default scale 1/sqrt(F). Forward only: no
backward kernels yet, so a call whose inputs want a gradient is refused at
the call (eager.Op: its output would carry none). Semantics and
the kernels: tkc/kernels/linear_attention.py and tkc/kernels/hedgehog.py.
Importing this module needs torch, not MLIR.
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.hedgehog import D as HH_D, DV as HH_DV, P as HH_P, hedgehog as hedgehog_kernel
from ..kernels.linear_attention import BASED_DV, BASED_F, based as based_kernel
from ..kernels.linear_attention import PICKED, linear_attention as la_kernel, schedules
from ..runtime.callsite import caller
from ..tune import autotune, bucket
from .checks import autocast, check_device, dense, is_dense, softmax_scale
from .eager import Op, plain_key, public
from .plans import PlanCache, signature, sms

__all__ = ["SCHEDULES", "linear_attention", "based", "hedgehog", "schedule"]
DIMS = (64, 128, 192, 256)
# The schedule (consumer warpgroups, blocks an SM, ring stages) is tuned data per GPU
# (tkc/tune/tables), one space per (F, DV, decay) (kernels/linear_attention.py's schedules),
# keyed by the sequences (B x H, a power of two) and the SMs: a block runs one sequence, so
# how many there are against the SMs decides whether two blocks an SM or another warpgroup
# pays. A key no table holds takes its shape's nearest tuned key's pick (in B x H, at the
# same SMs), else default_schedule (the H100's hand picks).


@functools.lru_cache(maxsize=None)
def schedule(F: int, DV: int, decay: bool):
    """The autotuned space of the (F, DV, decay) kernel."""
    name = f"tkc.linear_attention.f{F}.v{DV}{'.decay' if decay else ''}"
    return autotune(space=schedules(F, DV, decay), key=_key, name=name,
                    fallback=lambda key: _nearest(name, key, schedules(F, DV, decay)),
                    examples=lambda: [functools.partial(_example, F, DV, decay, BH) for BH in EXAMPLE_BH])(
        lambda consumers, blocks_per_sm, stages: la_kernel(F, DV, decay, stages, consumers, blocks_per_sm))


EXAMPLE_BH = (32, 128, 256, 1024)   # the sequences `tkc tune --library` tunes at (L 4096)


def _nearest(name: str, key: tuple, space: list) -> dict:
    """The pick of the tuned key nearest in B x H (powers of two apart) at the
    key's SMs, one of the space's; else the space's first (default_schedule)."""
    from ..tune import tables
    for bh in sorted(EXAMPLE_BH, key=lambda bh: (abs(bh.bit_length() - key[0].bit_length()), bh)):
        config = tables.lookup(name, (bh, key[1]))
        if config in space:
            return config
    return space[0]


def _key(q, *rest) -> tuple:
    """A launch's key: the sequences (B x H) as a power of two, the SMs."""
    return bucket(q.shape[0] * q.shape[1]), sms(q.device)


def _example(F: int, DV: int, decay: bool, BH: int) -> list:
    """`tkc tune --library`'s arguments: BH sequences of 4096 steps (the kernel's views)."""
    L, dev = 4096, "cuda"
    q, k = ((torch.randn(BH, 1, L, F, device=dev) / F ** 0.25).to(torch.bfloat16) for _ in "qk")
    v = torch.randn(BH, 1, L, DV, device=dev).to(torch.bfloat16)
    g = [-torch.rand(BH, 1, 1, L, device=dev) * 0.1] if decay else []
    return [q, k, v, *g, torch.empty_like(v), F ** -0.5]


SCHEDULES = [schedule(*shape) for shape in PICKED]   # (registered: tkc tune --library finds them)


def _la_kernel(F: int, DV: int, decay: bool, q: Tensor):
    """The kernel of q's key (its table's pick, else default_schedule)."""
    tuned = schedule(F, DV, decay)
    return tuned.kernel(tuned.choose(_key(q)))


@functools.lru_cache(maxsize=None)
def _based_kernel():
    return based_kernel()


@functools.lru_cache(maxsize=None)
def _hedgehog_kernel():
    return hedgehog_kernel()


def _empty_out(v: Tensor) -> Tensor:
    return torch.empty_like(v, memory_format=torch.contiguous_format)


def _plan(kernel, views, scale: float, *ts: Tensor):
    """One launch of `kernel` on (*ts, o, scale): `views(*ts)` are the kernel's
    gl views of the inputs (the same memory: later launches read the tensors'
    pointers); inputs that are not contiguous from a 16-byte boundary are
    copied on each call (checks.dense)."""
    fix = [not is_dense(t) for t in ts]
    like = ts[2]  # o is shaped like v

    def arrange(ts):
        return [dense(t) if f else t for t, f in zip(ts, fix)]
    launch = kernel.prepare(*views(*arrange(ts)), _empty_out(like), scale)

    if not any(fix):  # the common case: nothing to arrange
        def run(*ts, scale):
            o = torch.empty_like(ts[2], memory_format=torch.contiguous_format)
            launch(*ts, o, scale)
            return o
        return run

    def run(*ts, scale):
        ts = arrange(ts)
        o = _empty_out(ts[2])
        launch(*ts, o, scale)
        return o
    return run


_plans = PlanCache(_plan)
_plain = PlanCache()  # plain linear_attention calls (eager.plain_key): key -> run(q, k, v[, g])


def _run(key, kernel_of, views, scale: float, *ts: Tensor):
    """run(*ts) -> o through the plan of the inputs' signature (none for empty inputs)."""
    if ts[2].numel() == 0 or ts[0].numel() == 0:
        return lambda *ts: _empty_out(ts[2])
    plan = _plans((key, signature(*ts)), kernel_of(), views, scale, *ts)
    return functools.partial(plan, scale=scale)  # (a partial: no Python frame of its own)


def _launch(key, kernel_of, views, *ts: Tensor, scale: float) -> Tensor:
    return _run(key, kernel_of, views, scale, *ts)(*ts)


# The widest DV a (F, decay) kernel serves without spilling, in the registers and shared
# memory an SM lends it (the F x DV f32 state, its bf16 copy, the Q, K and V ring, O's tile;
# 2026-12-01: one 64 wider spills, serialises its wgmmas or does not fit,
# test_the_widest_values_each_kernel_serves). A wider v is served in column slices, each its
# own launch over the same q and k (the outputs' columns are independent; Q K^T is recomputed).
WIDEST = {(64, False): 256, (128, False): 192, (192, False): 128, (256, False): 128,
          (64, True): 192, (128, True): 128, (192, True): 64, (256, True): 64}


def widths(F: int, DV: int, decay: bool) -> list[int]:
    """The column slices of v (multiples of 64) the (F, DV, decay) call runs."""
    most, out = WIDEST[F, decay], []
    while DV > 0:
        out.append(min(most, DV))
        DV -= out[-1]
    return out


def _la_run(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, scale: float):
    F, DV = q.shape[-1], v.shape[-1]
    if g is not None and g.shape[-1] % 2:   # the kernel reads g in pairs: a zero log decay past the end
        inner = _la_run(q, k, v, _even(g), scale)
        return lambda q, k, v, g: inner(q, k, v, _even(g))
    slices = widths(F, DV, g is not None)
    if len(slices) > 1:   # v's columns in slices that fit (WIDEST), their outputs side by side
        bounds = [(sum(slices[:i]), sum(slices[:i + 1])) for i in range(len(slices))]
        runs = [(a, b, _la_run(q, k, v[..., a:b], g, scale)) for a, b in bounds]
        return lambda q, k, v, *g: torch.cat([run(q, k, v[..., a:b], *g) for a, b, run in runs], -1)
    if g is None:
        return _run("la", lambda: _la_kernel(F, DV, False, q), lambda *ts: ts, scale, q, k, v)
    return _run("la_decay", lambda: _la_kernel(F, DV, True, q),
                lambda q, k, v, g: (q, k, v, g.unsqueeze(2)), scale, q, k, v, g)


def _even(g: Tensor) -> Tensor:
    return torch.nn.functional.pad(g, (0, 1))


def _la_impl(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, scale: float) -> Tensor:
    return _la_run(q, k, v, g, scale)(*(t for t in (q, k, v, g) if t is not None))


def _based_impl(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    return _launch("based", _based_kernel, lambda *ts: ts, q, k, v, scale=scale)


def _hedgehog_impl(q: Tensor, k: Tensor, v: Tensor, qmap: Tensor, kmap: Tensor, alpha: Tensor,
                   beta: Tensor, scale: float) -> Tensor:
    def views(q, k, v, qmap, kmap, alpha, beta):
        return (q, k, v, qmap.unsqueeze(0), kmap.unsqueeze(0), alpha.view(1, 1, 1, -1),
                beta.view(1, 1, 1, -1))
    return _launch("hedgehog", _hedgehog_kernel, views, q, k, v, qmap, kmap, alpha, beta,
                   scale=scale)


_la = Op("tkc::linear_attention", _la_impl, lambda q, k, v, g, scale: _empty_out(v))
_based = Op("tkc::based", _based_impl, lambda q, k, v, scale: _empty_out(v))
_hedgehog = Op("tkc::hedgehog", _hedgehog_impl, lambda q, k, v, *rest: _empty_out(v))


@public
def linear_attention(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None,
                     scale: float | None = None) -> Tensor:
    """Causal linear attention o_t = scale * sum_{s<=t} w(t, s) (q_t . k_s) v_s
    for q, k [B, H, L, F] and v [B, H, L, DV] (bf16, on the GPU; F and DV 64,
    128, 192 or 256): w = 1, or with g [B, H, L] (f32, log decays, <= 0)
    w = exp(g_(s+1) + .. + g_t) (Mamba-2's SSD with scalar decay = FLA's
    chunk_simple_gla; q = C, k = B, v = x dt, g = A dt). Any L (even with g).
    g > 0 is computed as written: weights above 1 that grow as exp of their
    sums (test_positive_log_decays_grow_as_written), so outputs pass f32's
    and bf16's range (inf) once a sum of g over the sequence nears 88."""
    key = plain_key(scale, q, k, v, g)
    run = _plain.get(key)
    if run is not None:
        return run(q, k, v) if g is None else run(q, k, v, g)
    if (cast := autocast(q, k, v)) is not None:   # AMP: float32 q, k, v in a bf16 region (g stays f32)
        return linear_attention(*cast, g, scale)
    _check("linear_attention", q, k, v, None, DIMS)
    if g is not None:
        if not isinstance(g, Tensor) or g.dtype != torch.float32 or tuple(g.shape) != tuple(q.shape[:3]):
            raise TkcError(f"linear_attention: g must be an f32 tensor {list(q.shape[:3])} "
                           f"([B, H, L]), got {getattr(g, 'dtype', type(g).__name__)} "
                           f"{tuple(getattr(g, 'shape', ()))}", caller())
        if g.device != q.device:
            raise TkcError(f"linear_attention: g must be on {q.device}, got {g.device}", caller())
    if key is not None:  # plain: next time straight to the plan's run
        run = _la_run(q, k, v, g, softmax_scale("linear_attention", scale, q.shape[-1]))
        _plain.keep(key, run)
        return run(q, k, v) if g is None else run(q, k, v, g)
    return _la(q, k, v, g, softmax_scale("linear_attention", scale, q.shape[-1]))


@public
def based(q: Tensor, k: Tensor, v: Tensor, scale: float | None = None) -> Tensor:
    """Based's linear attention: o_t = sum_{s<=t} (1 + x + x^2 / 2) v_s with
    x = scale * q_t . k_s (the 2nd-order Taylor map of softmax; no
    normaliser, as FLA's parallel_based(use_norm=False)), for q, k [B, H, L,
    16] and v [B, H, L, 64] (bf16, on the GPU); scale defaults to 1/4."""
    if (cast := autocast(q, k, v)) is not None:
        return based(*cast, scale)
    _check("based", q, k, v, (BASED_F,), (BASED_DV,))
    return _based(q, k, v, softmax_scale("based", scale, q.shape[-1]))


@public
def hedgehog(q: Tensor, k: Tensor, v: Tensor, qmap: Tensor, kmap: Tensor, alpha: Tensor,
             beta: Tensor, scale: float | None = None) -> Tensor:
    """Hedgehog attention (ThunderKittens' kernels/hedgehog): a sliding-window
    softmax over the query's chunk of 64 (causally) and the chunk before,
    plus linear attention with the feature map phi(x) = max(concat(softmax(x
    map), softmax(-x map)), 1e-6) over the chunks before those, normalised
    together: a = beta_h exp((q.k - m) scale) in the window (m the window's
    largest q.k), alpha_h phi(q).phi(k) before it, o = sum a v / (sum a +
    1e-6). q, k, v [B, H, L, 128] (bf16, on the GPU), qmap, kmap [H, 128,
    64] (bf16), alpha, beta [H] (f32); scale defaults to 1/sqrt(128); any L.
    Semantics: tkc/kernels/hedgehog.py (reference.hedgehog)."""
    if (cast := autocast(q, k, v, qmap, kmap)) is not None:   # (alpha, beta stay f32)
        return hedgehog(*cast, alpha, beta, scale)
    if isinstance(q, Tensor) and q.dim() == 4:
        H = q.shape[1]
        for name, t, dtype, shape in (("qmap", qmap, torch.bfloat16, (H, HH_D, HH_P)),
                                      ("kmap", kmap, torch.bfloat16, (H, HH_D, HH_P)),
                                      ("alpha", alpha, torch.float32, (H,)),
                                      ("beta", beta, torch.float32, (H,))):
            if not isinstance(t, Tensor) or t.dtype != dtype or tuple(t.shape) != shape:
                raise TkcError(f"hedgehog: {name} must be a {str(dtype).split('.')[-1]} tensor "
                               f"{list(shape)}, got {getattr(t, 'dtype', type(t).__name__)} "
                               f"{tuple(getattr(t, 'shape', ()))}", caller())
            if t.device != q.device:
                raise TkcError(f"hedgehog: {name} must be on {q.device}, got {t.device}", caller())
    _check("hedgehog", q, k, v, (HH_D,), (HH_DV,))
    return _hedgehog(q, k, v, qmap, kmap, alpha, beta, softmax_scale("hedgehog", scale, q.shape[-1]))


def _check(fn: str, q, k, v, features, values) -> None:
    """Types, ranks, shapes, dims and device: errors at the caller's line."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TkcError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}", caller())
        if t.dim() != 4:
            raise TkcError(f"{fn}: {name} must be [B, H, L, D], got shape {tuple(t.shape)}", caller())
        if t.dtype != torch.bfloat16:
            raise TkcError(f"{fn}: {name} must be bf16, got {t.dtype}", caller())
    if k.shape != q.shape:
        raise TkcError(f"{fn}: q and k must have one shape, got {tuple(q.shape)} and "
                       f"{tuple(k.shape)}", caller())
    if v.shape[:3] != q.shape[:3]:
        raise TkcError(f"{fn}: v must be [B, H, L, DV] with q's B, H, L {tuple(q.shape[:3])}, got "
                       f"{tuple(v.shape)}", caller())
    if q.shape[-1] not in (features or DIMS):
        dim = "head dim" if fn == "hedgehog" else "feature dim"   # hedgehog maps q's head dim
        raise TkcError(f"{fn}: the {dim} {q.shape[-1]} is not supported (one of "
                       f"{features or DIMS})", caller())
    if v.shape[-1] not in values:
        raise TkcError(f"{fn}: the value dim {v.shape[-1]} is not supported (one of {values})",
                       caller())
    check_device(fn, ("q", q), ("k", k), ("v", v))
