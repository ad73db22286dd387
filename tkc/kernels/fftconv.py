"""Long convolution by FFT on the tensor cores (the paper's FFT convolution,
FlashFFTConv's Monarch form), with complex tiles:

    y = irfft(rfft(u, n=N) * rfft(k, n=N), n=N)[..., :L]

for u [B, D, L] and a filter k [D, <= N] per channel: L = N is a circular
convolution, L <= N / 2 a causal one. The filter's transform is computed once
on the host (fftconv_filter), as a model does for its long filters.

The DFT of a sequence x of N = N1 * N2 steps, laid out as the N1 x N2 matrix
X[n1, n2] = x[N2 n1 + n2], is three matrix steps (F_n: the n-point DFT
matrix, ω = exp(-2πi / N)):

    C = ((F_N1 X) * T) F_N2,    T[k1, n2] = ω^(k1 n2),    x̂[k1 + N1 k2] = C[k1, k2]

and the inverse is the same with conjugates, read back in X's layout:

    Y = conj(F_N1) (((C * K) conj(F_N2)) * conj(T)),      y[N2 n1 + n2] = Re Y[n1, n2]

where K[k1, k2] = k̂[k1 + N1 k2] is the filter's transform in C's layout. With
F_N1 / sqrt(N1) and F_N2 / sqrt(N2) (unitary steps), nothing is scaled by N
and the values stay near the input's size, as bf16 wants.

A warpgroup owns 64 rows: 64 / N1 sequences (consecutive channels of one
batch row) stacked, so the left products take the block-diagonal
kron(I, F_N1) (64 x 64) and the right products F_N2 as it is; per work item
that is 2 + 4 + 4 + 2 wgmmas (complex times real, complex times complex,
the real part only). A block owns 128 rows of channels (two consumer
warpgroups) and walks the batch, so the filter's tile is loaded once; u
streams in through the TMA ring of tk-pipeline-staging, and each warp stores
its rows of y from registers. The warpgroups meet only at the ring: the
exchange through shared memory before the last step is a warpgroup's own
(warpgroup.sync), so the two interleave instead of running in lockstep.
"""
from __future__ import annotations

import math

import numpy as np

import tkc
from tkc import bf16, f32, gl, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import store, subtile, zero

CONSUMERS = 2
SPLITS = {1024: (32, 32), 2048: (32, 64), 4096: (64, 64)}   # N -> (N1, N2)


def split(N: int) -> tuple[int, int]:
    """(N1, N2) of the FFT size N."""
    if N not in SPLITS:
        raise TkcError(f"fftconv: the FFT size N = {N} must be one of {sorted(SPLITS)}")
    return SPLITS[N]


def shape(N: int, L: int) -> tuple[int, int, int, int]:
    """(N1, N2, R, K): R rows of N2 steps hold a sequence of L steps, and a
    warpgroup's 64 / N1 sequences are K = 64 R / N1 rows of X (a multiple of
    16: L a multiple of N / 4)."""
    N1, N2 = split(N)
    if not (0 < L <= N and L % (N // 4) == 0):
        raise TkcError(f"fftconv: the length L = {L} must be N / 4, N / 2, 3N / 4 or N "
                       f"(N = {N}); pad the sequence or pick another N")
    R = L // N2
    return N1, N2, R, 64 * R // N1


def _dft(n: int) -> np.ndarray:
    return np.exp(-2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n)


def matrices(N: int, L: int) -> tuple[np.ndarray, ...]:
    """The kernel's constant operands, complex128:
    f [64, K]: kron(I, F_N1[:, :R]) / sqrt(N1), the first step on the R rows
        of each sequence (the rows past L are zeros: their columns dropped);
    g [N2, N2]: F_N2 / sqrt(N2);
    t [64, N2]: the twiddles T, stacked for the warpgroup's sequences;
    h [64, 64]: kron(I, conj(F_N1)[:R, :]) / sqrt(N1), the last step, only
        the R rows of each sequence kept (rows K.. zero)."""
    N1, N2, R, K = shape(N, L)
    S = 64 // N1
    F = _dft(N1) / math.sqrt(N1)
    t = np.exp(-2j * np.pi * np.outer(np.arange(N1), np.arange(N2)) / N)
    h = np.zeros((64, 64), complex)
    h[:K] = np.kron(np.eye(S), F.conj()[:R])
    return np.kron(np.eye(S), F[:, :R]), _dft(N2) / math.sqrt(N2), np.tile(t, (S, 1)), h


def filter_layout(kf: np.ndarray, N: int) -> np.ndarray:
    """fft(k, n=N) [..., N] -> K [..., N1, N2], K[k1, k2] = kf[k1 + N1 k2]."""
    N1, N2 = split(N)
    return np.swapaxes(kf.reshape(*kf.shape[:-1], N2, N1), -1, -2)


def items(N: int) -> int:
    """64-row parts a warpgroup interleaves (its mmas on one in flight while
    it works on the other): 2 where the tiles are narrow (N2 = 32), else 1."""
    return 2 if split(N)[1] == 32 else 1


def block_channels(N: int, parts: int | None = None) -> int:
    """Channels a block owns (D must be a multiple)."""
    return 64 * CONSUMERS * (parts or items(N)) // split(N)[0]


def fftconv(N: int = 1024, L: int | None = None, parts: int | None = None, stages="auto"):
    """The kernel conv(u, kf_re, kf_im, f_re, f_im, g_re, g_im, t_re, t_im,
    h_re, h_im, y) for FFT size N and sequence length L (default N), each
    warpgroup on `parts` 64-row parts at once (default items(N)):
    u, y [B, 1, D * L / N2, N2] (u [B, D, L] viewed in rows of N2 steps);
    kf [1, 1, D * N1, N2] the filter's transform in C's layout; f, g, t, h
    from `matrices` (all bf16, planar complex)."""
    L = N if L is None else L
    N1, N2, R, K = shape(N, L)
    P = parts or items(N)
    rows = 64 * CONSUMERS * P             # rows of C a block owns (N1 per channel)
    per = rows // N1                      # channels a block owns
    name = f"fftconv_{N}" + ("" if L == N else f"_l{L}") + ("" if P == items(N) else f"_p{P}") + (
        "" if stages == "auto" else f"_s{stages}")
    U, KF = gl(bf16, "B", 1, "DR", N2), gl(bf16, 1, 1, "DN1", N2)
    M = lambda r, c: gl(bf16, 1, 1, r, c)  # noqa: E731
    acc = lambda: zero(tkc.crt(f32, 16, N2))  # noqa: E731

    @tkc.kernel(name=name, warps=4 * CONSUMERS, grid=lambda u, *_: (tkc.cdiv(u.r, per * R), 1))
    def conv(u: U, kf_re: KF, kf_im: KF, f_re: M(64, K), f_im: M(64, K), g_re: M(N2, N2),
             g_im: M(N2, N2), t_re: M(64, N2), t_im: M(64, N2), h_re: M(64, 64), h_im: M(64, 64),
             y: U):
        blk, wg, w = tkc.block_idx.x, tkc.warpgroupid(), tkc.warpid() % 4
        f, g, t, h = tkc.cst(bf16, 64, K), tkc.cst(bf16, N2, N2), tkc.cst(bf16, 64, N2), tkc.cst(bf16, 64, 64)
        kf, e_s = tkc.cst(bf16, rows, N2), tkc.cst(bf16, rows, N2)
        x_s = st(bf16, per * R, N2)
        for x, src, at in ((f, (f_re, f_im), 0), (g, (g_re, g_im), 0), (t, (t_re, t_im), 0),
                           (h, (h_re, h_im), 0), (kf, (kf_re, kf_im), blk)):
            tma.load(x, tkc.cgl(*src), (0, 0, at, 0))
        tw = warpgroup.load(tkc.crt(f32, 16, N2), t)           # this warp's twiddles
        part = lambda x, i, r=64: subtile(x, r, N2, (wg * P + i, 0))  # noqa: E731  a part's rows
        for b in tkc.range(u.b, stages=stages):
            tma.load(x_s, u, (b, 0, blk, 0))
            # C = ((F_N1 X) * T) F_N2: the forward transform of 64 / N1 sequences a part
            xs = _wait([warpgroup.mma_AB(f, part(x_s, i, K), acc()) for i in range(P)])
            cs = _wait([warpgroup.mma_AB((x * tw).to(bf16), g, acc()) for x in xs])
            # times the filter's transform; the inverse's first two steps
            es = _wait([warpgroup.mma_AB((c * warpgroup.load(tkc.crt(f32, 16, N2), part(kf, i)))
                                         .to(bf16), g.conj(), acc()) for i, c in enumerate(cs)])
            warpgroup.sync()             # our warps' last reads of e_s (wgmmas) are retired
            for i, e in enumerate(es):
                warpgroup.store(part(e_s, i), (e * tw.conj()).to(bf16))
            tkc.fence_async()
            warpgroup.sync()             # e_s is this warpgroup's own: the other one goes on
            # y = Re(H E) = H.re E.re - H.im E.im: K rows (the rest of H is zero)
            ys = [warpgroup.mma_AB(h.re, part(e_s.re, i), zero(tkc.rt(f32, 16, N2))) for i in range(P)]
            ys = _wait([warpgroup.mma_AB(yr, h.im, part(e_s.im, i), negate=True) for i, yr in enumerate(ys)])
            for i, yr in enumerate(ys):
                with tkc.if_(w < K // 16):   # each warp its 16 rows, straight to y
                    store(y, yr.to(bf16), (b, 0, (blk * per * R + (wg * P + i) * K) // 16 + w, 0))

    return conv


def _wait(tiles: list) -> list:
    """warpgroup.mma_async_wait of all of them, as a list."""
    out = warpgroup.mma_async_wait(*tiles)
    return list(out) if len(tiles) > 1 else [out]
