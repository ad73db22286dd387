"""The FFT long convolution as a PyTorch op (torch.library custom_op +
register_fake, so torch.compile traces it without a graph break):

    kf = tkc.fftconv_filter(k, N)     # once per filter: k [D, Lk] -> its transform
    y = tkc.fftconv(u, kf)            # u [B, D, L] bf16 -> y [B, D, L] bf16

y = irfft(rfft(u, n=N) * rfft(k, n=N), n=N)[..., :L]: a circular convolution
when L = N, a causal one when Lk <= N - L + 1 (e.g. N = 2L). Forward only.
The kernel and its layouts: tkc/kernels/fftconv.py. Importing this module
needs torch, not MLIR.
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.fftconv import CONSUMERS, SPLITS, block_channels, filter_layout, operands, shape
from ..kernels.fftconv import fftconv as fftconv_kernel
from ..runtime.callsite import caller
from ..tune import Bound, autotune
from .checks import autocast, check_device, dense
from .eager import Op, plain_key, public
from .plans import At, PlanCache, signature, sms

__all__ = ["fftconv", "fftconv_filter"]


@functools.lru_cache(maxsize=None)
def _kernel(N: int, L: int, consumers: int):
    return fftconv_kernel(N, L, consumers if consumers != CONSUMERS[N] else None)


@functools.lru_cache(maxsize=None)
def _operands(N: int, L: int, device: torch.device) -> tuple[Tensor, ...]:
    """The kernel's constants (fftconv.operands) as bf16 [1, 1, r, c] tensors."""
    return tuple(torch.from_numpy(x).to(device, torch.bfloat16)[None, None].contiguous()
                 for x in operands(N, L))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# The schedule (W consumer warpgroups, n batch pairs a block) is tuned data
# per GPU (tkc/tune/tables; measured against each other in BENCHMARKS.md "FFT
# convolution"), one space per N: W the library's or one fewer (smaller
# channel groups: more blocks), n 1 to 16 (a batch of up to 32 exactly; a
# larger one's pick is tuned at its key or filled). A call's key is what the
# choice depends on: N, D (the channel groups, per W: exact, as 768 and 1024
# pick differently), ceil(B / 2) (the pairs to split) and the SMs to fill (a
# GPU of other SMs reading the H200's table misses its picks and fills its own).
#
# n is a launch argument, not a build parameter: a candidate is the W kernel
# with `pairs` bound (tune.Bound), which tuning times like any kernel, and the
# candidates of one W share one kernel (built once; the library's). The
# candidates are built and timed at L = N; a call of another L takes its N's pick.
EXAMPLES = [(D, B) for D in (512, 768, 1024, 2048) for B in (2, 4, 8, 16)]   # at each N


def _key(N: int, D: int, B: int, sms: int) -> tuple:
    return N, D, _cdiv(B, 2), sms


def _call_key(N: int):
    """The key of a kernel call's arguments (u [B, 1, D R, N2], kf_re [1, 1, D N1, N2], ...)."""
    N1 = SPLITS[N][0]
    return lambda u, kf_re, *rest: _key(N, kf_re.shape[-2] // N1, u.shape[0], sms(u.device))


def _fill(key: tuple) -> dict:
    """The schedule of a key the tables lack: the library's W, and the batch
    split over just enough blocks a channel group that the grid fills the
    SMs in one wave (all pairs in one block, loading the constants once,
    where the groups alone fill them)."""
    N, D, P, sms = key
    groups = D // block_channels(N)
    return {"consumers": CONSUMERS[N], "pairs": _cdiv(P, min(P, max(1, sms // groups)))}


def _example(N: int, D: int, B: int) -> list:
    """One call's kernel arguments on the GPU (L = N), as _plan makes them."""
    N1, N2 = SPLITS[N]
    u = torch.randn(B, 1, D * N // N2, N2, device="cuda").to(torch.bfloat16)
    kf = fftconv_filter(torch.randn(D, N, device="cuda"), N)
    return [u, kf[0].view(1, 1, D * N1, N2), kf[1].view(1, 1, D * N1, N2),
            *_operands(N, N, u.device), torch.empty_like(u)]


def _space(N: int):
    W = CONSUMERS[N]
    return autotune(space={"consumers": [w for w in (W, W - 1) if w >= 2], "pairs": list(range(1, 17))},
                    key=_call_key(N), name=f"tkc.fftconv.schedule.n{N}", fallback=_fill,
                    examples=lambda: [functools.partial(_example, N, D, B) for D, B in EXAMPLES],
                    )(lambda consumers, pairs: Bound(_kernel(N, N, consumers), pairs=pairs))


SCHEDULE = {N: _space(N) for N in SPLITS}


def _schedule(N: int, D: int, B: int, sms: int) -> tuple[int, int]:
    """(consumer warpgroups, pairs a block) of a call: its key's tuned pick
    (checked against the library's W at this very key when tuned; a block
    of a W whose channel groups do not divide D loads its missing channels as
    zeros and stores nothing for them), else the fill rule."""
    config = SCHEDULE[N].choose(_key(N, D, B, sms))
    return config["consumers"], config["pairs"]


def _plan(u: Tensor, kf: Tensor):
    B, D, L = u.shape
    _, _, N1, N2 = kf.shape
    N, R = N1 * N2, L // N2
    if u.numel() == 0:
        return lambda u, kf: torch.empty_like(u)
    rows = lambda x: x.view(B, 1, D * R, N2)  # noqa: E731
    operands = _operands(N, L, u.device)  # cached for the process: the bound pointers stay valid
    consumers, pairs = _schedule(N, D, B, sms(u.device))
    # the constants and the split are bound: a call passes u, kf's planes and y
    consts = range(3, 3 + len(operands))
    launch = _kernel(N, L, consumers).prepare(rows(u), kf[0].view(1, 1, D * N1, N2),
                                              kf[1].view(1, 1, D * N1, N2), *operands,
                                              rows(torch.empty_like(u)), pairs,
                                              bound=(*consts, 4 + len(operands)))

    second = kf[1].data_ptr() - kf.data_ptr()  # kf's second plane, at this byte offset

    def run(u, kf):
        y = torch.empty_like(u)
        launch(u, kf, At(kf, second), y)
        return y
    return run


_plans = PlanCache(_plan)
_plain = PlanCache()  # plain calls (eager.plain_key): key -> run(u, kf)


def _fftconv_impl(u: Tensor, kf: Tensor) -> Tensor:
    """u and kf contiguous (fftconv makes them so)."""
    return _plans(signature(u, kf), u, kf)(u, kf)


_fftconv = Op("tkc::fftconv", _fftconv_impl,
              lambda u, kf: torch.empty_like(u, memory_format=torch.contiguous_format))


def fftconv_filter(k: Tensor, N: int) -> Tensor:
    """The transform of filters k [D, Lk] (Lk <= N, any float dtype) for
    tkc.fftconv with FFT size N (1024, 2048 or 4096): fft(k, n=N) in the
    kernel's layout, [2, D, N1, N2] bf16 (real and imaginary planes).
    Computed once per filter, as a model keeps its long filters' transforms."""
    if not isinstance(k, Tensor) or k.dim() != 2 or not k.is_floating_point():
        raise TkcError(f"fftconv_filter: k must be a float tensor [D, Lk], got "
                       f"{getattr(k, 'dtype', type(k).__name__)} {tuple(getattr(k, 'shape', ()))}",
                       caller())
    if N not in SPLITS:
        raise TkcError(f"fftconv_filter: the FFT size N = {N} must be one of {sorted(SPLITS)}",
                       caller())
    if k.shape[-1] > N:
        raise TkcError(f"fftconv_filter: the filter has {k.shape[-1]} taps, more than N = {N}",
                       caller())
    kf = filter_layout(torch.fft.fft(k.double(), n=N), N)
    return torch.stack([kf.real, kf.imag]).to(torch.bfloat16).contiguous()


@public
def fftconv(u: Tensor, kf: Tensor) -> Tensor:
    """y = irfft(rfft(u, n=N) * rfft(k, n=N), n=N)[..., :L] for u [B, D, L]
    (bf16, on the GPU) and kf = fftconv_filter(k, N): L = N (circular) or N / 4,
    N / 2, 3N / 4 (causal when k has at most N - L + 1 taps). D a multiple of
    the channels a block owns (8 for N 1024, 4 for 2048, 2 for 4096).

    A non-finite value in u (NaN, inf) does not stay in its (batch, channel):
    it also reaches the other batch row of its pair (rows b and b ^ 1 are
    transformed as one complex sequence, b + i (b ^ 1)) and the other
    channels of its group of 64 / N1 (2 for N 1024, 1 for 2048 and 4096:
    their DFTs are one block-diagonal product, whose zeros times NaN or inf
    give NaN). Finite values never mix."""
    key = plain_key(None, u, kf)
    run = _plain.get(key)
    if run is not None:
        return run(u, kf)
    if (cast := autocast(u)) is not None:   # AMP: a float32 u in a bf16 region
        return fftconv(cast[0], kf)
    if not isinstance(u, Tensor) or u.dim() != 3 or u.dtype != torch.bfloat16:
        raise TkcError(f"fftconv: u must be a bf16 tensor [B, D, L], got "
                       f"{getattr(u, 'dtype', type(u).__name__)} {tuple(getattr(u, 'shape', ()))}",
                       caller())
    if not isinstance(kf, Tensor) or kf.dim() != 4 or kf.shape[0] != 2 or kf.dtype != torch.bfloat16 \
            or (kf.shape[2] * kf.shape[3], tuple(kf.shape[2:])) not in SPLITS.items():
        raise TkcError("fftconv: kf must be fftconv_filter(k, N) ([2, D, N1, N2] bf16), got "
                       f"{getattr(kf, 'dtype', type(kf).__name__)} {tuple(getattr(kf, 'shape', ()))}",
                       caller())
    B, D, L = u.shape
    N1, N2 = kf.shape[2:]
    if kf.shape[1] != D:
        raise TkcError(f"fftconv: kf has {kf.shape[1]} channels, u has D = {D}", caller())
    if D % block_channels(N1 * N2):
        raise TkcError(f"fftconv: D = {D} must be a multiple of {block_channels(N1 * N2)} for "
                       f"N = {N1 * N2}",
                       caller())
    try:
        shape(N1 * N2, L)
    except TkcError as e:
        raise TkcError(str(e), caller()) from None
    check_device("fftconv", ("u", u), ("kf", kf))
    if key is not None and u.is_contiguous() and kf.is_contiguous():  # plain: next time at once
        run = _plans(signature(u, kf), u, kf)
        _plain.keep(key, run)
        return run(u, kf)
    return _fftconv(dense(u), dense(kf))

