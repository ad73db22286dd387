"""The references `tkc fuzz --ops` checks each op against: PyTorch in float64
on the op's device (differentiable, for the gradients), from the op's
arguments as float64 leaves (ops_run.py), per op as its docstring defines it."""
from __future__ import annotations

import math


def reference(case, args: dict) -> tuple:
    """The op's outputs (a tuple, as the op returns them) for case.op and case.params."""
    import torch
    import torch.nn.functional as F
    p, op = case.params, case.op
    if op == "matmul":
        return (args["a"] @ args["b"],)
    if op == "linear":
        y = F.linear(args["x"], args["w"], args["bias"])
        return ({"gelu": F.gelu, "silu": F.silu}.get(p["activation"], lambda t: t)(y),)
    if op == "swiglu":
        return (F.silu(args["x"] @ args["wg"].t()) * (args["x"] @ args["wu"].t()),)
    if op in ("attention", "decode"):
        o, lse = attention(args["q"], args["k"], args["v"], p["causal"], p["scale"], args.get("n"))
        return (o, lse) if p["lse"] else (o,)
    if op == "varlen":
        # the lengths the cu_seqlens hold (an off-by-one case changes an entry, not the params)
        lq, lk = ([b - a for a, b in zip(cu.tolist(), cu.tolist()[1:])] for cu in (args["cq"], args["ck"]))
        return (_varlen(args["q"], args["k"], args["v"], lq, lk, p["causal"]),)
    if op in ("layer_norm", "rms_norm"):
        x, w, r, drop = args["x"], args["w"], args["r"], p.get("p")
        if drop:   # the mask the op drew, read off its h (ops.py); dropped about p of the elements
            keep = args["keep"]
            x = x * keep / (1 - drop)
            n = keep.numel()
            if not keep.is_meta and n >= 1000 and \
                    abs(1 - keep.double().mean() - drop) > 6 * (drop * (1 - drop) / n) ** 0.5:
                raise ValueError(f"dropout_p={drop} dropped {1 - keep.double().mean():.3f} of the elements")
        h = x if r is None else x + r
        if op == "layer_norm":
            y = F.layer_norm(h, (h.shape[-1],), w, args["b"], 1e-5)
        else:
            y = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + 1e-6)
            y = y if w is None else y * w
        return (y, h) if p["prenorm"] else (y,)
    if op == "rotary":
        return (_rotary(args["x"], args["cos"], args["sin"], p["interleaved"]),)
    if op == "scaled_mm":
        return (_scaled_mm(args["a"], args["b"], args["sa"], args["sb"], p["mode"]),)
    if op == "quantize_fp8":
        from ..torchops.quantize import reference as quantized
        q, s = quantized(args["x"].bfloat16())
        return q.double(), s.double()
    if op == "fftconv":
        u, k, N = args["u"], args["k"], p["N"]
        y = torch.fft.irfft(torch.fft.rfft(u, n=N) * torch.fft.rfft(k, n=N), n=N)
        return (y[..., :u.shape[-1]],)
    if op == "linear_attention":
        return (linear_attention(args["q"], args["k"], args["v"], args["g"]),)
    if op == "attention_fp8":   # the dequantised inputs' attention
        q = args["q"] * args["qs"][:, :, None, None]
        k, v = (args[n] * args[s][:, :, None, None] for n, s in (("k", "ks"), ("v", "vs")))
        return (attention(q, k, v, p["causal"], None)[0],)
    if op == "grouped_scaled_mm":
        return (_grouped(args["a"], args["b"], args["sa"], args["sb"], args["g"], p["layout"]),)
    if op == "based":
        q, k, v = args["q"], args["k"], args["v"]
        x = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        w = (1 + x + x * x / 2) * torch.ones_like(x).tril()
        return (w @ v,)
    if op == "hedgehog":
        return (_hedgehog(*(args[n] for n in ("q", "k", "v", "qm", "km", "al", "be"))),)
    raise ValueError(f"no reference for {op!r}")


def _hedgehog(q, k, v, qm, km, alpha, beta, chunk: int = 64):
    """tkc.hedgehog's docstring (tkc.kernels.reference.hedgehog in torch): a
    sliding-window softmax over the query's chunk (causally) and the one
    before, alpha phi(q).phi(k) before those, normalised together."""
    import torch
    L = q.shape[-2]
    t = torch.arange(L, device=q.device)[:, None]
    s = t.T
    window, linear = (s <= t) & (s // chunk >= t // chunk - 1), s // chunk <= t // chunk - 2
    x = q @ k.transpose(-1, -2)
    m = x.masked_fill(~window, -math.inf).amax(-1, keepdim=True)
    a = torch.where(window, torch.exp((torch.where(window, x, m) - m) * q.shape[-1] ** -0.5), 0.0)

    def phi(y, fmap):   # [B, H, L, D] x [H, D, P] -> concat(softmax(y fmap), softmax(-y fmap)), at least 1e-6
        z = torch.einsum("bhld,hdp->bhlp", y, fmap)
        return torch.cat([z.softmax(-1), (-z).softmax(-1)], -1).clamp(min=1e-6)
    lin = phi(q, qm) @ phi(k, km).transpose(-1, -2)
    a = a * beta[:, None, None] + torch.where(linear, lin * alpha[:, None, None], 0.0)
    return (a @ v) / (a.sum(-1, keepdim=True) + 1e-6)


def attention(q, k, v, causal: bool, scale, lengths=None):
    """(o, lse) of [B, H, L, D] inputs (GQA: k, v's heads repeated), the causal
    mask bottom-right; lengths: batch b's first lengths[b] keys, its queries
    the last of them. A row that sees no key: o 0, lse +inf (tkc's rule)."""
    import torch
    G = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    Lq, Lk = q.shape[-2], k.shape[-2]
    i, j = torch.arange(Lq, device=q.device)[:, None], torch.arange(Lk, device=q.device)[None]
    n = torch.full((q.shape[0],), Lk, device=q.device) if lengths is None else lengths.clamp(0, Lk).long()
    seen = j[None] < n[:, None, None]
    if causal:
        seen = seen & (j[None] <= i[None] + (n - Lq)[:, None, None])
    s = s.masked_fill(~seen[:, None], float("-inf"))
    lse = torch.logsumexp(s, -1)
    empty = torch.isinf(lse)
    o = torch.exp(s - lse.masked_fill(empty, 0)[..., None]) @ v
    return o, lse.masked_fill(empty, float("inf"))


def _varlen(q, k, v, lq: list, lk: list, causal: bool):
    """attention_varlen's output [Tq, Hq, D]: each sequence's own attention."""
    import torch
    outs, q0, k0 = [], 0, 0
    if min(lq + lk, default=0) < 0 or sum(lq) != len(q) or sum(lk) != len(k):
        raise ValueError(f"cu_seqlens do not partition the tokens: lengths {lq}, {lk}")
    for a, b in zip(lq, lk):
        qs, ks, vs = (t.transpose(0, 1)[None] for t in (q[q0:q0 + a], k[k0:k0 + b], v[k0:k0 + b]))
        outs.append(attention(qs, ks, vs, causal, None)[0][0].transpose(0, 1))
        q0, k0 = q0 + a, k0 + b
    return torch.cat(outs) if outs else q[:0]


def _rotary(x, cos, sin, interleaved: bool):
    import torch
    c, s = cos.bfloat16().double()[None, :, None], sin.bfloat16().double()[None, :, None]   # used as bf16
    half = x.shape[-1] // 2
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    return torch.stack((o1, o2), -1).flatten(-2) if interleaved else torch.cat((o1, o2), -1)


def _scaled_mm(a, b, sa, sb, mode: str):
    if mode == "block":   # sa [M, K/128] over 1x128 blocks of a, sb [K/128, N/128] over 128x128 of b
        K, N = b.shape
        sa = sa.repeat_interleave(128, 1)
        sb = sb.repeat_interleave(128, 0).repeat_interleave(128, 1)[:K, :N]
        return (a * sa) @ (b * sb)
    return (a @ b) * sa * sb


def linear_attention(q, k, v, g):
    """o_t = F^-1/2 sum_{s<=t} exp(G_t - G_s) (q_t . k_s) v_s, G the cumulative sum of g."""
    import torch
    L = q.shape[-2]
    w = torch.ones(L, L, device=q.device, dtype=q.dtype).tril()
    if g is not None:
        G = g.double().cumsum(-1)
        w = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(w == 0, float("-inf")))
    return ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5 * w) @ v


def _grouped(a, b, sa, sb, g, layout: str):
    """Each expert's rows of a times b[e] with the block scales; the rows the
    op leaves unwritten NaN (padding blocks and blocks naming no expert, rows
    past the counts, a masked expert's rows past its count)."""
    import torch
    E, K, N = b.shape
    bs = [b[e] * sb[e].repeat_interleave(128, 0).repeat_interleave(128, 1)[:K, :N] for e in range(E)]
    out = torch.full((*a.shape[:-1], N), float("nan"), dtype=a.dtype, device=a.device)
    deq = a * sa.repeat_interleave(128, -1)
    if layout == "masked":
        for e in range(E):
            n = int(g[e])
            out[e, :n] = deq[e, :n] @ bs[e]
        return out
    if layout == "counts":
        start = 0
        for e in range(E):
            n = int(g[e])
            out[start:start + n] = deq[start:start + n] @ bs[e]
            start += n
        return out
    for blk, e in enumerate(g.tolist()):
        if 0 <= e < E:   # (-1 pads; a block naming no expert is not written: the op's docstring)
            out[128 * blk:128 * blk + 128] = deq[128 * blk:128 * blk + 128] @ bs[e]
    return out
