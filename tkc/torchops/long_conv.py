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
from .checks import check_device
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


# A block's setup (loading the DFT matrices, twiddles and its channels'
# filter, filling and draining its ring) costs about one batch pair's work:
# fitted to the kernel's times on the H200 at B 16, D 768, N 1024 with 8 / 4 /
# 2 / 1 pairs a block (1 / 2 / 3 / 6 waves): 39.8 / 43.6 / 41.5 / 53.5 µs
# = waves x (pairs + 1) x 4.4 µs. _pairs weighs it against idle SMs.
SETUP_PAIRS = 1.0


# A block's time per pair against its consumer warpgroups W goes as W + 3.3:
# a part per consumer and a fixed one (its producer, the memory's latency);
# fitted to W 4 and 3 at B 16, D 768, N 1024, 8 pairs a block: 39.3 and 33.9 µs.
PAIR_FIXED = 3.3


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _waves(groups: int, B: int, n: int, sms: int) -> int:
    """Waves of one block an SM: groups x the batch's pairs in blocks of n."""
    return _cdiv(groups * _cdiv(_cdiv(B, 2), n), sms)


def _pairs(groups: int, B: int, sms: int) -> int:
    """The batch pairs a block takes: the split of the batch's ceil(B / 2)
    pairs over blocks that finishes first, with `groups` channel groups and
    one block an SM: waves x (pairs a block + its setup); the most pairs a
    block among equals (fewest constant loads)."""
    return min(range(_cdiv(B, 2), 0, -1),
               key=lambda n: _waves(groups, B, n, sms) * (n + SETUP_PAIRS))


def _schedule(N: int, D: int, B: int, sms: int) -> tuple[int, int]:
    """(consumer warpgroups, pairs a block): the library's W and the one
    fewer (where a block keeps two, and D is a multiple of its channels),
    each with its best split; the fastest by the model above, the larger W
    among equals."""
    best = None
    for W in (CONSUMERS[N], CONSUMERS[N] - 1):
        if W < 2 or D % block_channels(N, W):
            continue
        groups = D // block_channels(N, W)
        n = _pairs(groups, B, sms)
        time = _waves(groups, B, n, sms) * (n + SETUP_PAIRS) * (W + PAIR_FIXED)
        if best is None or time < best[0]:
            best = (time, W, n)
    return best[1], best[2]


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
    return _fftconv(u.contiguous(), kf.contiguous())

