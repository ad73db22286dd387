"""numpy references for the kernel library (float64 math on the inputs)."""
from __future__ import annotations

import numpy as np


def gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """softmax(q k^T * scale) v over the last two dims, any leading dims."""
    return attention_lse(q, k, v, scale)[0]


def attention_lse(q, k, v, scale: float, causal: bool = False):
    """(o, lse) of attention over [..., H, L, D] arrays: GQA when q has a
    multiple of k's heads (axis -3), causal aligned bottom-right (query i
    sees key j iff j <= i + Lk - Lq), a query with no key: o = 0, lse = +inf."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    g = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * scale
    lq, lk = s.shape[-2:]
    if causal:
        s = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    o = p @ v / np.where(l == 0, 1.0, l)
    with np.errstate(divide="ignore"):
        lse = np.where(l == 0, np.inf, np.log(l) + m)[..., 0]
    return o, lse


def attention_merge(oa, la, ob, lb):
    """(o, lse) over the union of two disjoint key sets from each set's output
    and log-sum-exp (+inf: no keys), as tkc.kernels.attention_merge."""
    a = np.where(np.isposinf(la), -np.inf, la)
    b = np.where(np.isposinf(lb), -np.inf, lb)
    m = np.maximum(a, b)
    m = np.where(np.isneginf(m), 0.0, m)
    ea, eb = np.exp(a - m), np.exp(b - m)
    s = ea + eb
    with np.errstate(divide="ignore"):
        inv = np.where(s > 0, 1 / np.where(s > 0, s, 1), 0.0)   # neither side: o = 0, lse +inf
        o = (oa * ea[..., None] + ob * eb[..., None]) * inv[..., None]
        lse = np.where(s > 0, m + np.log(np.where(s > 0, s, 1)), np.inf)
    return o, lse


def attention_bwd(q, k, v, do, scale: float, causal: bool = False):
    """(dq, dk, dv) of attention_lse's o for upstream gradient do; GQA's dk, dv
    are summed over the query heads of each KV head."""
    g = q.shape[-3] // k.shape[-3]
    o, lse = attention_lse(q, k, v, scale, causal)
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    ke, ve = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    s = q @ np.swapaxes(ke, -1, -2) * scale
    with np.errstate(invalid="ignore"):
        p = np.nan_to_num(np.exp(s - lse[..., None]))  # lse = inf (no key): p = 0
    if causal:
        lq, lk = s.shape[-2:]
        p = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq), p, 0.0)
    dp = do @ np.swapaxes(ve, -1, -2)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    dq = ds @ ke * scale
    dk, dv = np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ do
    shape = (*k.shape[:-3], k.shape[-3], g, *k.shape[-2:])
    return dq, dk.reshape(shape).sum(-3), dv.reshape(shape).sum(-3)


def rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool = False) -> np.ndarray:
    """RoPE of x [B, T, H, D] with cos, sin [T, D/2]: pairs (i, i + D/2), or (2i, 2i + 1)."""
    x = x.astype(np.float64)
    c, s = cos[None, :, None, :].astype(np.float64), sin[None, :, None, :].astype(np.float64)
    half = x.shape[-1] // 2
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    out = np.empty_like(x)
    o1, o2 = (out[..., 0::2], out[..., 1::2]) if interleaved else (out[..., :half], out[..., half:])
    o1[...], o2[...] = x1 * c - x2 * s, x2 * c + x1 * s
    return out


def dropout_mask(seed: int, offset: int, shape, p: float) -> np.ndarray:
    """tkc's dropout keep-mask of a tensor of `shape` (tk.rand over its elements)."""
    from ..philox import uniform
    return uniform(seed, offset, np.arange(int(np.prod(shape))).reshape(shape)) >= p


def layernorm(x, residual, w, b, eps: float, keep=None, p: float = 0.0):
    """(y, h, mean, rstd) of LayerNorm(dropout(x) + residual) over the last dim
    (residual None: none)."""
    x, residual = x.astype(np.float64), 0.0 if residual is None else residual.astype(np.float64)
    h = (np.where(keep, x / (1 - p), 0) if keep is not None else x) + residual
    mean = h.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + eps)
    return (h - mean) * rstd * w + b, h, mean[..., 0], rstd[..., 0]


def layernorm_bwd(dy, dh_next, h, w, mean, rstd, keep=None, p: float = 0.0):
    """(dx, dresidual, dw, db) of layernorm's outputs y and h, given h, mean, rstd
    (dh_next None: h feeds only the norm)."""
    dy, h = dy.astype(np.float64), h.astype(np.float64)
    xhat = (h - mean[..., None]) * rstd[..., None]
    g = dy * w
    dh = (g - xhat * (g * xhat).mean(-1, keepdims=True) - g.mean(-1, keepdims=True)) * rstd[..., None]
    dh = dh + (0.0 if dh_next is None else dh_next)
    dx = np.where(keep, dh / (1 - p), 0) if keep is not None else dh
    return dx, dh, (dy * xhat).sum(0), dy.sum(0)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to bfloat16 (nearest even), returned as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def linear_attention(q, k, v, scale: float, g=None) -> np.ndarray:
    """Causal linear attention over [..., L, F] / [..., L, DV] arrays:
    o_t = scale * sum_{s<=t} exp(G_t - G_s) (q_t . k_s) v_s, G the cumulative
    sum of the log decay g [..., L] (g None: no decay)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    a = q @ np.swapaxes(k, -1, -2) * scale
    L = a.shape[-1]
    if g is not None:
        G = np.cumsum(g.astype(np.float64), axis=-1)
        with np.errstate(over="ignore"):
            a = a * np.exp(G[..., :, None] - G[..., None, :])
    return np.where(np.tri(L, dtype=bool), a, 0.0) @ v


def based(q, k, v, scale: float) -> np.ndarray:
    """Based's causal linear attention with the 2nd-order Taylor map, no
    normaliser: o_t = sum_{s<=t} (1 + x + x^2 / 2) v_s, x = scale * q_t . k_s."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    x = q @ np.swapaxes(k, -1, -2) * scale
    L = x.shape[-1]
    return np.where(np.tri(L, dtype=bool), 1 + x + x * x / 2, 0.0) @ v


def hedgehog_features(x, fmap, clamp: float = 1e-6) -> np.ndarray:
    """Hedgehog's feature map of x [B, H, L, D] with fmap [H, D, P]:
    concat(softmax(x fmap), softmax(-x fmap)) over the P projected columns
    (2P features), clamped below at `clamp` as ThunderKittens' reference."""
    x = np.einsum("bhld,hdp->bhlp", x.astype(np.float64), fmap.astype(np.float64))

    def softmax(y):
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    return np.maximum(np.concatenate([softmax(x), softmax(-x)], axis=-1), clamp)


def hedgehog(q, k, v, qmap, kmap, alpha, beta, scale: float, chunk: int = 64) -> np.ndarray:
    """Hedgehog's hybrid attention (ThunderKittens' kernels/hedgehog) for q, k
    [B, H, L, D], v [B, H, L, DV], maps [H, D, P], alpha, beta [H]. Query t
    in chunk c = t // chunk: sliding-window softmax over W(t) = {s <= t,
    s // chunk >= c - 1} (the chunk causally and the whole chunk before),
    linear attention over the chunks before that, one normaliser:
        a(t, s) = beta_h exp((q_t.k_s - m_t) scale), s in W(t), m_t = max over W(t) of q_t.k_s
        a(t, s) = alpha_h phi(q_t).phi(k_s),          s // chunk <= c - 2
        o_t = sum_s a(t, s) v_s / (sum_s a(t, s) + 1e-6)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    L = q.shape[-2]
    t, s = np.arange(L)[:, None], np.arange(L)[None, :]
    window = (s <= t) & (s // chunk >= t // chunk - 1)
    linear = s // chunk <= t // chunk - 2
    x = q @ np.swapaxes(k, -1, -2)
    m = np.where(window, x, -np.inf).max(axis=-1, keepdims=True)
    a = np.where(window, np.exp((np.where(window, x, m) - m) * scale), 0.0)
    a = a * np.asarray(beta, np.float64)[:, None, None]
    lin = hedgehog_features(q, qmap) @ np.swapaxes(hedgehog_features(k, kmap), -1, -2)
    a = a + np.where(linear, lin * np.asarray(alpha, np.float64)[:, None, None], 0.0)
    return (a @ v) / (a.sum(axis=-1, keepdims=True) + 1e-6)


def fftconv(u, k, N: int):
    """y = irfft(rfft(u, n=N) * rfft(k, n=N), n=N)[..., :L] for u [B, D, L]
    and k [D, Lk]: circular (L = N) or causal (L + Lk - 1 <= N) convolution."""
    L = u.shape[-1]
    uf = np.fft.rfft(np.asarray(u, np.float64), n=N)
    kf = np.fft.rfft(np.asarray(k, np.float64), n=N)
    return np.fft.irfft(uf * kf, n=N)[..., :L]
