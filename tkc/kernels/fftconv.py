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

Two real sequences make one complex one: the convolution is linear and the
filter real, so Z = X_b + i X_b+1 (one channel, two batch rows) gives
Y = y_b + i y_b+1, half the transforms. A warpgroup owns 64 rows: 64 / N1
such pairs (consecutive channels) stacked, so the left products take the
block-diagonal kron(I, F_N1) (64 x 64) and the right products F_N2 as it is.
Where one factor is a constant, a complex product is three real ones
(Gauss: the constant's sums precomputed, the data's sum one add in
registers): per pair of sequences 4 + 3 + 3 + 3 wgmmas, against 2 x 12 for
the two one by one (2 + 4 + 4 + 2 each: complex times real, then complex
times complex, and the real part only at the end).

A block owns 64 W rows of channels (W consumer warpgroups: 4 where the tiles
are 32 wide, N 1024 and 2048 as 64 x 32, else 2) and walks the batch two
rows at a time, so the filter's tile is loaded once; u streams in
through the TMA ring of tk-pipeline-staging (a missing odd row reads as
zeros), and y leaves by TMA stores that each warpgroup issues from its own
rows of the E tiles once its last wgmma has read them. The warpgroups meet
only at the ring: every exchange through shared memory is a warpgroup's own
(warpgroup.sync, a named barrier each), so they interleave instead of
running in lockstep. (y stored from registers instead: 15-20% slower at N2 =
64, the stores' registers held until the stores have read them. Two pairs in
flight a warpgroup, one's elementwise steps under the other's wgmmas, each
wait leaving the other's groups pending: H200, 2026-12-02, B 16 D 768, N 2048
68.9 µs at two warpgroups, against 71.2 with one pair and the tuned three
warpgroups' 63.3; N 1024 40.5 against 32.5. Not kept. Nor persistent blocks,
the constants loaded once an SM: N 2048 D 768 64.9 against 63.5, D 1024 76.0
(its pick's tuning run: 76.8), N 1024 33.8 against 32.8, N 4096 115.0 against 114.5.)
"""
from __future__ import annotations

import math

import numpy as np

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import store, subtile, zero

CONSUMERS = {1024: 4, 2048: 4, 4096: 2}   # consumer warpgroups: narrow tiles leave registers for 4
SPLITS = {1024: (32, 32), 2048: (64, 32), 4096: (64, 64)}   # N -> (N1, N2): N2 = 32 where it can be (4 consumers)


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


def operands(N: int, L: int) -> list[np.ndarray]:
    """The kernel's constant operands as real planes, in its argument order:
    f (re, im); g and h as the Gauss sums (re, re + im, im - re); t (re, im)."""
    f, g, t, h = matrices(N, L)
    gauss = lambda m: [m.real, m.real + m.imag, m.imag - m.real]  # noqa: E731
    return [f.real, f.imag, *gauss(g), t.real, t.imag, *gauss(h)]


def filter_layout(kf, N: int):
    """fft(k, n=N) [..., N] -> K [..., N1, N2], K[k1, k2] = kf[k1 + N1 k2]
    (a numpy array or a torch tensor)."""
    N1, N2 = split(N)
    return kf.reshape(*kf.shape[:-1], N2, N1).swapaxes(-1, -2)


def block_channels(N: int, consumers: int | None = None) -> int:
    """Channels a block of `consumers` warpgroups (default CONSUMERS[N]) owns
    (D must be a multiple)."""
    return 64 * (consumers or CONSUMERS[N]) // split(N)[0]


def fftconv(N: int = 1024, L: int | None = None, consumers: int | None = None, stages="auto"):
    """The kernel conv(u, kf_re, kf_im, f_re, f_im, g_re, g_sum, g_diff, t_re,
    t_im, h_re, h_sum, h_diff, y, pairs) for FFT size N and sequence length L
    (default N): u, y [B, 1, D * L / N2, N2] (u [B, D, L] viewed in rows of
    N2 steps); kf [1, 1, D * N1, N2] the filter's transform in C's layout;
    the constants from `operands` (all bf16). `consumers`: warpgroups (default
    CONSUMERS[N]).

    A block owns block_channels(N) channels and `pairs` of the batch's pairs
    of rows (b, b + 1): the grid is channel groups x ceil(B / 2 / pairs). All
    pairs in one block (pairs = ceil(B / 2)) load the constants once; fewer
    let the grid fill the SMs when the channel groups alone do not (D 768 at
    N 1024: 96 groups for 132 SMs). A block's pairs past the batch load zeros
    and store nothing (TMA clips them)."""
    L = N if L is None else L
    N1, N2, R, K = shape(N, L)
    W = consumers or CONSUMERS[N]
    rows = 64 * W                         # rows of C a block owns (N1 per channel)
    box = next(b for b in (64, 32, 16) if K % b == 0)   # rows of y a TMA store moves
    per = rows // N1                      # channels a block owns
    name = f"fftconv_{N}" + ("" if L == N else f"_l{L}") + ("" if W == CONSUMERS[N] else f"_w{W}") + (
        "" if stages == "auto" else f"_s{stages}")
    U, KF = gl(bf16, "B", 1, "DR", N2), gl(bf16, 1, 1, "DN1", N2)
    M = lambda r, c: gl(bf16, 1, 1, r, c)  # noqa: E731

    @tkc.kernel(name=name, warps=4 * W, grid=lambda u, kf_re, kf_im, f_re, f_im, g_re, g_sum, g_diff,
                t_re, t_im, h_re, h_sum, h_diff, y, pairs: (
                    tkc.cdiv(u.r, per * R), tkc.cdiv(tkc.cdiv(u.b, 2), pairs)))
    def conv(u: U, kf_re: KF, kf_im: KF, f_re: M(64, K), f_im: M(64, K), g_re: M(N2, N2),
             g_sum: M(N2, N2), g_diff: M(N2, N2), t_re: M(64, N2), t_im: M(64, N2),
             h_re: M(64, 64), h_sum: M(64, 64), h_diff: M(64, 64), y: U, pairs: tkc.i32):
        blk, wg, w = tkc.block_idx.x, tkc.warpgroupid(), tkc.warpid() % 4
        f, t, kf = tkc.cst(bf16, 64, K), tkc.cst(bf16, 64, N2), tkc.cst(bf16, rows, N2)
        g, h = [st(bf16, N2, N2) for _ in range(3)], [st(bf16, 64, 64) for _ in range(3)]
        e_s = [st(bf16, rows, N2) for _ in range(3)]            # E: re, im, re + im
        x_s = tkc.cst(bf16, per * R, N2)                        # Z: rows b and b + 1
        for x, src, at in ((f, tkc.cgl(f_re, f_im), 0), (t, tkc.cgl(t_re, t_im), 0),
                           (kf, tkc.cgl(kf_re, kf_im), blk),
                           *zip(g, (g_re, g_sum, g_diff), (0, 0, 0)),
                           *zip(h, (h_re, h_sum, h_diff), (0, 0, 0))):
            tma.load(x, src, (0, 0, at, 0))
        mine = lambda x, r=64: subtile(x, r, N2, (wg, 0))        # noqa: E731  this warpgroup's rows
        crt = lambda: tkc.crt(f32, 16, N2)                       # noqa: E731
        for i in tkc.range(pairs, stages=stages):
            p = tkc.block_idx.y * pairs + i       # the batch's pair (2p, 2p + 1)
            tma.load(x_s.re, u, (2 * p, 0, blk, 0))
            tma.load(x_s.im, u, (2 * p + 1, 0, blk, 0))           # past the last row: zeros
            # C = ((F_N1 Z) * T) F_N2: the forward transform
            z = warpgroup.mma_async_wait(warpgroup.mma_AB(f, mine(x_s, K), zero(crt())))
            c = _gauss(z * warpgroup.load(crt(), t), g, conj=False)
            # times the filter's transform; the inverse's first two steps (the
            # twiddles read again from shared: held, they would crowd the wgmmas' registers)
            e = _gauss(c * warpgroup.load(crt(), mine(kf)), g, conj=True) * warpgroup.load(crt(), t).conj()
            with tkc.if_(w == 0):
                tma.store_async_wait()   # the last y out of e_s has been read
            warpgroup.sync()             # ... and our warps' last wgmma reads of e_s retired
            for x_, v in zip(e_s, (e.re, e.im, e.re + e.im)):
                warpgroup.store(mine(x_), v.to(bf16))
            tkc.fence_async()
            warpgroup.sync()             # e_s is this warpgroup's own: the other one goes on
            # Y = H E (Gauss, H constant): k1 = H.re (E.re + E.im), k2 = (H.re + H.im) E.im,
            # k3 = (H.im - H.re) E.re; Y.re = k1 - k2, Y.im = k1 + k3; K rows (the rest zero)
            k1, k2, k3 = (warpgroup.mma_AB(h[i], mine(e_s[j]), zero(tkc.rt(f32, 16, N2)), negate=i == 1)
                          for i, j in ((0, 2), (1, 1), (2, 0)))
            k1, k2, k3 = warpgroup.mma_async_wait(k1, k2, k3)
            warpgroup.sync()             # every warp's wgmmas have read e_s
            with tkc.if_(w < K // 16):   # y through e_s (free now) and out by TMA
                store(mine(e_s[0]), (k1 + k2).to(bf16), (w, 0))
                store(mine(e_s[1]), (k1 + k3).to(bf16), (w, 0))
            tkc.fence_async()
            warpgroup.sync()
            with tkc.if_(w == 0):        # K rows in boxes of `box` (a divisor of 64)
                for j in range(K // box):
                    out = lambda i: subtile(e_s[i], box, N2, (wg * (64 // box) + j, 0))  # noqa: E731
                    at = (blk * W * K + wg * K) // box + j
                    tma.store_async(y, out(0), (2 * p, 0, at, 0))
                    with tkc.if_(2 * p + 1 < u.b):
                        tma.store_async(y, out(1), (2 * p + 1, 0, at, 0))

    return conv


def _gauss(x, g, conj: bool):
    """x @ G (conj: x @ conj(G)) for complex f32 registers x and a constant G
    given as its Gauss sums g = (re, re + im, im - re) in shared memory: three
    wgmmas k1 = (x.re + x.im) G.re, k2 = x.re (G.im - G.re), k3 = x.im (G.re +
    G.im); x G = (k1 - k3) + i (k1 + k2). conj(G) has the sums -(im - re) and
    -(re + im): the same tiles, the other way round and negated."""
    acc = lambda: zero(tkc.rt(f32, 16, g[0].view.cols))  # noqa: E731
    k1 = warpgroup.mma_AB((x.re + x.im).to(bf16), g[0], acc())
    a, b = x.re.to(bf16), x.im.to(bf16)
    re = warpgroup.mma_AB(b, g[2] if conj else g[1], acc(), negate=not conj)
    im = warpgroup.mma_AB(a, g[1] if conj else g[2], acc(), negate=conj)
    k1, re, im = warpgroup.mma_async_wait(k1, re, im)
    return tkc.Complex(k1 + re, k1 + im)
