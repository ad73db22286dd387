"""How `tkc fuzz --ops` draws each op's call (ops.py's generate picks the op):
its inputs' shapes and views, whether it is inside the documented domain,
which gradients are checked and what the reference needs (ops_run.py)."""
from __future__ import annotations

import math
import random

from .ops_case import HEAD_DIMS, NORM_MAX, OUTSIDE, Case, checks_grad, rows8, size


def _matmul(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    bad = r.choice(("K", "N")) if outside else ""
    M, K, N = size(r, 3000), rows8(r, 2048, bad == "K"), rows8(r, 2048, bad == "N")
    if r.random() < 0.03:
        M = 0
    batch = r.choice(((), (), (), (r.randint(1, 4),), (2, 3)))
    while M * K * N * max(1, math.prod(batch)) > 2 ** 32:
        M = max(1, M // 2)
    b_batched = bool(batch) and r.random() < 0.5
    g = checks_grad(r)
    G = ", grad=True" if g else ""
    dims = ", ".join(map(str, batch)) + ", " if batch else ""
    vector = r.choice(("a", "b")) if r.random() < 0.08 else ""   # torch.matmul's a [K] or b [K]
    if vector == "a":
        c.lines.append(f"a = rnd({K}{G})")
    elif r.random() < 0.2:   # a transposed view of a row-major [.., K, M]
        c.lines.append(f"a = rnd({dims}{K}, {M}{G}).transpose(-1, -2)")
    else:
        c.lines.append(f"a = rnd({dims}{M}, {K}{G})")
    if vector == "b":
        c.lines.append(f"b = rnd({K}{G}, scale=0.1)")
    elif not b_batched and r.random() < 0.4:   # a weight [N, K] used as its transpose
        c.lines.append(f"b = rnd({N}, {K}{G}, scale=0.1).t()")
    else:
        c.lines.append(f"b = rnd({dims if b_batched else ''}{K}, {N}{G}, scale=0.1)")
    c.lines.append("out = tkc.matmul(a, b)")
    # a vector b is a row times a's transpose: M takes N's rule, and N is not there
    valid = bad != "K" and M % 8 == 0 if vector == "b" else not outside
    c.args, c.valid, c.grads = ("a", "b"), valid, ("a", "b") if g else ()


def _linear(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    bad = r.choice(("K", "N", "bias")) if outside else ""
    K, N = rows8(r, 2048, bad == "K"), rows8(r, 2048, bad == "N")
    lead = r.choice(((size(r, 2000, 0),), (r.randint(1, 4), size(r, 600))))
    act = r.choice((None, None, "gelu", "silu"))
    bias = r.random() < 0.5 or bad == "bias"
    g = checks_grad(r)
    G = ", grad=True" if g else ""
    c.lines += [f"x = rnd({', '.join(map(str, lead))}, {K}{G})", f"w = rnd({N}, {K}{G}, scale=0.05)",
                f"bias = rnd({N + (8 if bad == 'bias' else 0)}{G})" if bias else "bias = None",
                f"out = tkc.linear(x, w, bias, {act!r})"]
    c.params = {"activation": act}
    c.args, c.valid = ("x", "w", "bias"), not outside
    c.grads = tuple(a for a in ("x", "w", "bias") if g and (a != "bias" or bias))


def _swiglu(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    bad = r.choice(("K", "F")) if outside else ""
    K, F = rows8(r, 2048, bad == "K"), rows8(r, 4096, bad == "F")
    rows = size(r, 2000, 0)
    g = checks_grad(r)
    G = ", grad=True" if g else ""
    c.lines += [f"x = rnd({rows}, {K}{G})", f"wg = rnd({F}, {K}{G}, scale=0.05)",
                f"wu = rnd({F}, {K}{G}, scale=0.05)", "out = tkc.swiglu(x, wg, wu)"]
    c.args, c.valid, c.grads = ("x", "wg", "wu"), not outside, ("x", "wg", "wu") if g else ()


def _heads(r: random.Random, outside: str) -> tuple[int, int]:
    Hkv = r.choice((1, 2, 4, 8))
    Hq = Hkv * r.choice((1, 1, 2, 4, 8))
    return (Hq + 1, Hkv) if outside == "heads" and Hkv > 1 else (Hq, Hkv)


def _qkv(r: random.Random, c: Case, B: int, Hq: int, Hkv: int, Lq: int, Lk: int, D: int, g: bool) -> None:
    """q, k, v: contiguous [B, H, L, D], or FlashAttention's [B, L, H, D] memory as transposed views."""
    G = ", grad=True" if g else ""
    for name, H, L in (("q", Hq, Lq), ("k", Hkv, Lk), ("v", Hkv, Lk)):
        if r.random() < 0.3:
            c.lines.append(f"{name} = rnd({B}, {L}, {H}, {D}{G}).transpose(1, 2)")
        else:
            c.lines.append(f"{name} = rnd({B}, {H}, {L}, {D}{G})")


def _attention(r: random.Random, c: Case) -> None:
    outside = r.choice(("D", "heads")) if r.random() < OUTSIDE else ""
    D = r.choice((48, 80, 160)) if outside == "D" else r.choice(HEAD_DIMS)
    Hq, Hkv = _heads(r, outside)
    B = 0 if r.random() < 0.02 else r.randint(1, 4)
    Lq = size(r, 2048)
    Lk = Lq if r.random() < 0.5 else size(r, 4096)
    while B * Hq * Lq * Lk * max(D, 64) > 2 ** 31:
        Lk, Lq = max(1, Lk // 2), max(1, Lq // 2) if Lq > Lk // 2 else Lq
    causal, lse = r.random() < 0.4, r.random() < 0.2
    scale = None if r.random() < 0.6 else round(r.uniform(0.03, 0.3), 3)
    g = checks_grad(r) and not lse
    _qkv(r, c, B, Hq, Hkv, Lq, Lk, D, g)
    c.lines.append(f"out = tkc.attention(q, k, v, causal={causal}, scale={scale}, return_lse={lse})")
    c.params = {"causal": causal, "scale": scale, "lse": lse}
    c.args, c.valid, c.grads = ("q", "k", "v"), not outside, ("q", "k", "v") if g else ()


def _decode(r: random.Random, c: Case) -> None:
    """A decode step: a few queries a head (draft tokens causal) over a long
    cache, the cache a slice of a longer buffer; or its filled part by k_lengths."""
    D = r.choice(HEAD_DIMS)
    Hq, Hkv = _heads(r, "")
    B, Lq = r.choice((1, 1, 2, 4, 8, 16)), r.choice((1, 1, 1, 2, 4, 8))
    Lk = size(r, 32768, 16)
    while B * Hkv * Lk * D > 2 ** 27:
        Lk //= 2
    causal = Lq > 1 and r.random() < 0.5
    lengths = r.random() < 0.3 and Hq // Hkv * Lq <= 64
    c.lines.append(f"q = rnd({B}, {Hq}, {Lq}, {D})")
    for name in "kv":
        c.lines.append(f"{name} = rnd({B}, {Hkv}, {Lk + 64}, {D})[:, :, :{Lk}]")   # a cache's filled part
    if lengths:
        c.lines += [f"n = torch.randint({Lq}, {Lk + 1}, ({B},), device=q.device, dtype=torch.int32)",
                    f"out = tkc.attention(q, k, v, causal={causal}, return_lse=True, k_lengths=n)"]
        c.args = ("q", "k", "v", "n")
    else:
        c.lines.append(f"out = tkc.attention(q, k, v, causal={causal}, return_lse=True)")
        c.args = ("q", "k", "v")
    c.params = {"causal": causal, "scale": None, "lse": True}


def _norm(r: random.Random, c: Case) -> None:
    rms = c.op == "rms_norm"
    outside = r.choice(("D", "weight")) if r.random() < OUTSIDE else ""
    D = 256 * size(r, NORM_MAX // 256)
    D = D + r.choice((8, 100, 128)) if outside == "D" else D
    rows = size(r, 4000, 0)
    while rows * D > 2 ** 25:
        rows //= 2
    lead = r.choice(((rows,), (2, max(rows // 2, 1))))
    residual, prenorm, p = r.random() < 0.4, r.random() < 0.2, r.choice((0.1, 0.5)) if r.random() < 0.2 else 0
    wdtype = r.choice(("torch.bfloat16", "torch.float32"))
    g = checks_grad(r)
    G = ", grad=True" if g else ""
    shape = ", ".join(map(str, (*lead, D)))
    Dw = D + 256 if outside == "weight" else D
    # (with dropout a small residual: a kept x/(1-p) below half an ulp of r would leave h = r, as dropped)
    small = ", scale=0.01" if p else ""
    # a norm without weight (or LayerNorm's bias): elementwise_affine=False, bias=False
    no_w, no_b = outside != "weight" and r.random() < 0.15, not rms and r.random() < 0.15
    c.lines += [f"x = rnd({shape}{G})", f"r = rnd({shape}{G}{small})" if residual else "r = None",
                "w = None" if no_w else
                f"w = (1 + 0.1 * torch.randn({Dw}, device=DEVICE)).to({wdtype}).requires_grad_({g})"]
    # dropout: h (prenorm's) tells which elements the mask kept, for the reference (a dropped one is r's)
    flags = f"prenorm={prenorm or bool(p)}" + (f", dropout_p={p}" if p else "")
    if not rms:
        c.lines.append("b = None" if no_b else
                       f"b = (0.1 * torch.randn({D}, device=DEVICE)).to({wdtype}).requires_grad_({g})")
    c.lines.append(f"out = tkc.rms_norm(x, w, residual=r, {flags})" if rms else
                   f"out = tkc.layer_norm(x, w, b, residual=r, {flags})")
    c.lines += ["keep = out[1] != (0 if r is None else r.to(out[1].dtype))"] if p else []
    c.args = ("x", "w", "r", *(() if rms else ("b",)), *(("keep",) if p else ()))
    c.params, c.valid = {"prenorm": prenorm or bool(p), "p": p}, not outside
    c.grads = tuple(a for a in c.args if g and a != "keep" and (a != "r" or residual) and not (a == "w" and no_w)
                    and not (a == "b" and no_b)) if p or not prenorm else ()


def _rotary(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    D = r.choice((48, 80)) if outside else r.choice((32, 64, 96, 128, 256))
    B, T, H = r.randint(1, 3), size(r, 2048), r.choice((1, 2, 8, 32))
    while B * T * H * D > 2 ** 24:
        T = max(1, T // 2)
    inter, g = r.random() < 0.5, checks_grad(r)
    c.lines += [f"x = rnd({B}, {T}, {H}, {D}{', grad=True' if g else ''})",
                f"ang = torch.rand({T}, {D // 2}, device=DEVICE) * 6.3",
                "cos, sin = ang.cos(), ang.sin()",
                f"out = tkc.rotary_embedding(x, cos, sin, interleaved={inter})"]
    c.params = {"interleaved": inter}
    c.args, c.valid, c.grads = ("x", "cos", "sin"), not outside, ("x",) if g else ()


def _varlen(r: random.Random, c: Case) -> None:
    """Packed sequences of different lengths (empty ones too), FlashAttention's varlen call."""
    outside = r.random() < OUTSIDE
    D, (Hq, Hkv) = r.choice(HEAD_DIMS), _heads(r, "")
    B = r.randint(1, 5)
    lq = [0 if r.random() < 0.1 else size(r, 700) for _ in range(B)]
    lk = lq if r.random() < 0.5 else [0 if r.random() < 0.1 else size(r, 900) for _ in range(B)]
    causal, g = r.random() < 0.4, checks_grad(r)
    G = ", grad=True" if g else ""
    cu = lambda ls: "[" + ", ".join(str(sum(ls[:i])) for i in range(B + 1)) + "]"  # noqa: E731
    short = max(max(lq) - 1, 0) if outside else max(lq)   # outside: a max_seqlen_q below the longest
    c.lines += [f"q = rnd({sum(lq)}, {Hq}, {D}{G})", f"k = rnd({sum(lk)}, {Hkv}, {D}{G})",
                f"v = rnd({sum(lk)}, {Hkv}, {D}{G})",
                f"cq = torch.tensor({cu(lq)}, device=DEVICE, dtype=torch.int32)",
                f"ck = torch.tensor({cu(lk)}, device=DEVICE, dtype=torch.int32)",
                f"out = tkc.attention_varlen(q, k, v, cq, ck, {short}, {max(lk)}, causal={causal})"]
    c.params = {"causal": causal}
    c.args, c.valid, c.grads = ("q", "k", "v", "cq", "ck"), not outside or max(lq) == 0, ("q", "k", "v") if g else ()


def _scaled_mm(r: random.Random, c: Case) -> None:
    """tkc.scaled_mm of e4m3 operands: per-tensor, row-wise or block scales, bf16 or f32 out."""
    mode = r.choice(("tensor", "row", "block"))
    outside = r.random() < OUTSIDE
    unit = 128 if mode == "block" else 16
    M, K, N = size(r, 3000), unit * size(r, 4096 // unit), rows8(r, 2048, False)
    K, N = (K + 8, N) if outside and r.random() < 0.5 else (K, N + 4) if outside else (K, N)
    out = r.choice(("torch.bfloat16", "torch.float32"))
    c.lines += [f"a = (torch.randn({M}, {K}, device=DEVICE) * 2).to(torch.float8_e4m3fn)",
                f"b = (torch.randn({N}, {K}, device=DEVICE) * 2).to(torch.float8_e4m3fn).t()"]
    if mode == "tensor":
        c.lines += ["sa = torch.rand((), device=DEVICE) + 0.1", "sb = torch.rand((), device=DEVICE) + 0.1"]
    elif mode == "row":
        c.lines += [f"sa = torch.rand({M}, 1, device=DEVICE) + 0.1", f"sb = torch.rand(1, {N}, device=DEVICE) + 0.1"]
    else:   # 1x128 blocks of a, 128x128 of b, both stored transposed (torch._scaled_mm's BlockWise)
        c.lines += [f"sa = (torch.rand({K // 128}, {M}, device=DEVICE) + 0.1).t()",
                    f"sb = (torch.rand({-(-N // 128)}, {K // 128}, device=DEVICE) + 0.1).t()"]
    c.lines.append(f"out = tkc.scaled_mm(a, b, sa, sb, out_dtype={out})")
    c.params = {"mode": mode}
    c.args, c.valid = ("a", "b", "sa", "sb"), not outside


def _quantize(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    M, K = size(r, 4000, 0), 128 * size(r, 64) + (r.choice((8, 64)) if outside else 0)
    c.lines += [f"x = rnd({M}, {K}, scale={r.choice((1e-3, 1.0, 100.0))})", "out = tkc.quantize_fp8(x)"]
    c.args, c.valid = ("x",), not outside


CHANNELS = {1024: 8, 2048: 4, 4096: 2}   # tkc.fftconv's D must be a multiple of these (its docstring)


def _fftconv(r: random.Random, c: Case) -> None:
    """u [B, D, L] with a filter of at most N taps (causal: N - L + 1) transformed for FFT size N."""
    outside = r.choice(("D", "L")) if r.random() < OUTSIDE else ""
    N = r.choice(tuple(CHANNELS))
    L = N * r.choice((1, 1, 2, 3)) // 4 if outside != "L" else N - 100
    D = CHANNELS[N] * r.randint(1, 96 // CHANNELS[N] * 2) + (1 if outside == "D" else 0)
    B = r.randint(1, 5)
    taps = r.randint(1, N if L == N else N - L + 1)
    c.lines += [f"u = rnd({B}, {D}, {L})", f"k = torch.randn({D}, {taps}, device=DEVICE) / {taps} ** 0.5",
                f"kf = tkc.fftconv_filter(k, {N})", "out = tkc.fftconv(u, kf)"]
    c.params = {"N": N}
    c.args, c.valid = ("u", "k"), not outside


def _linear_attention(r: random.Random, c: Case) -> None:
    """Causal linear attention, with log decays g <= 0 (Mamba-2's SSD) or without."""
    outside = r.random() < OUTSIDE
    F = r.choice((32, 96)) if outside else r.choice((64, 128, 192, 256))
    DV = r.choice((64, 128, 192, 256))
    B, H, L = r.randint(1, 2), r.choice((1, 2, 4)), size(r, 1500)
    decay = r.random() < 0.5
    c.lines += [f"q = rnd({B}, {H}, {L}, {F})", f"k = rnd({B}, {H}, {L}, {F})", f"v = rnd({B}, {H}, {L}, {DV})"]
    if decay:
        c.lines += [f"g = -torch.nn.functional.softplus(torch.randn({B}, {H}, {L}, device=DEVICE)) * 0.1",
                    "out = tkc.linear_attention(q, k, v, g)"]
    else:
        c.lines += ["g = None", "out = tkc.linear_attention(q, k, v)"]
    c.args, c.valid, c.tol = ("q", "k", "v", "g"), not outside, 2e-2


def _attention_fp8(r: random.Random, c: Case) -> None:
    """e4m3 q, k, v with per-head f32 scales (P rounded to e4m3 in the kernel: 5e-2)."""
    outside = r.random() < OUTSIDE
    D = 96 if outside else r.choice((64, 128, 256))
    Hq, Hkv = _heads(r, "")
    B, Lq = r.randint(1, 3), size(r, 2048)
    Lk = Lq if r.random() < 0.5 else size(r, 4096)
    while B * Hq * Lq * Lk * D > 2 ** 31:
        Lk, Lq = max(1, Lk // 2), max(1, Lq // 2)
    causal = r.random() < 0.4
    e4m3 = "to(torch.float8_e4m3fn)"
    c.lines += [f"q = (torch.randn({B}, {Hq}, {Lq}, {D}, device=DEVICE) * 2).{e4m3}",
                f"k = (torch.randn({B}, {Hkv}, {Lk}, {D}, device=DEVICE) * 2).{e4m3}",
                f"v = (torch.randn({B}, {Hkv}, {Lk}, {D}, device=DEVICE) * 2).{e4m3}",
                f"qs = torch.rand({B}, {Hq}, device=DEVICE) * 0.2 + 0.05",
                f"ks = torch.rand({B}, {Hkv}, device=DEVICE) * 0.2 + 0.05",
                f"vs = torch.rand({B}, {Hkv}, device=DEVICE) + 0.5",
                f"out = tkc.attention_fp8(q, k, v, qs, ks, vs, causal={causal})"]
    c.params = {"causal": causal}
    c.args, c.valid, c.tol = ("q", "k", "v", "qs", "ks", "vs"), not outside, 5e-2


def _based(r: random.Random, c: Case) -> None:
    """Based: q, k [B, H, L, 16], v [B, H, L, 64]."""
    outside = r.random() < OUTSIDE
    B, H, L = r.randint(1, 2), r.choice((1, 2, 4)), size(r, 2000)
    F = 32 if outside else 16
    c.lines += [f"q = rnd({B}, {H}, {L}, {F}, scale=0.5)", f"k = rnd({B}, {H}, {L}, {F}, scale=0.5)",
                f"v = rnd({B}, {H}, {L}, 64)", "out = tkc.based(q, k, v)"]
    c.args, c.valid, c.tol = ("q", "k", "v"), not outside, 2e-2


def _hedgehog(r: random.Random, c: Case) -> None:
    """Hedgehog: q, k, v [B, H, L, 128], feature maps [H, 128, 64], alpha and beta [H]."""
    outside = r.random() < OUTSIDE
    D, (B, H, L) = 64 if outside else 128, (r.randint(1, 2), r.choice((1, 2, 4)), size(r, 1500))
    c.lines += [f"q = rnd({B}, {H}, {L}, {D}, scale=0.3)", f"k = rnd({B}, {H}, {L}, {D}, scale=0.3)",
                f"v = rnd({B}, {H}, {L}, 128)", f"qm = rnd({H}, {D}, 64, scale=0.1)",
                f"km = rnd({H}, {D}, 64, scale=0.1)", f"al = torch.rand({H}, device=DEVICE) * 2",
                f"be = torch.rand({H}, device=DEVICE) + 0.5", "out = tkc.hedgehog(q, k, v, qm, km, al, be)"]
    c.args, c.valid, c.tol = ("q", "k", "v", "qm", "km", "al", "be"), not outside, 2e-2


def _grouped(r: random.Random, c: Case) -> None:
    """tkc.grouped_scaled_mm's three layouts (e4m3, 1x128 and 128x128 block
    scales): row blocks tagged with their expert (-1: padding), experts' rows
    back to back by counts, or masked [E, max_m, K] with each expert's count.
    The rows the op does not write are the reference's NaN (ops_run: not
    compared)."""
    layout = r.choice(("blocks", "counts", "masked"))
    outside = r.random() < OUTSIDE
    E, K, N = r.randint(1, 5), 128 * r.randint(1, 6), 8 * size(r, 128)
    K = K + 64 if outside else K
    e4m3 = "to(torch.float8_e4m3fn)"
    c.lines += [f"b = (torch.randn({E}, {N}, {K}, device=DEVICE) * 2).{e4m3}.transpose(1, 2)",
                f"sb = (torch.rand({E}, {-(-N // 128)}, {K // 128}, device=DEVICE) + 0.1).transpose(1, 2)"]
    if layout == "masked":
        M = size(r, 400)
        rows = [r.randint(0, M) for _ in range(E)]
        c.lines += [f"a = (torch.randn({E}, {M}, {K}, device=DEVICE) * 2).{e4m3}",
                    f"sa = (torch.rand({E}, {K // 128}, {M}, device=DEVICE) + 0.1).transpose(1, 2)",
                    f"g = torch.tensor({rows}, device=DEVICE, dtype=torch.int32)",
                    "out = tkc.grouped_scaled_mm(a, b, sa, sb, g)"]
    else:
        if layout == "counts":
            rows = [4 * r.randint(0, 100) for _ in range(E)]
            M = sum(rows) + 4 * r.randint(0, 8)
        else:   # each expert's rows padded to 128, now and then a block of padding alone (-1)
            rows = [128 * r.randint(0, 3) for _ in range(E)]
            blocks = [e for e, n in enumerate(rows) for _ in range(n // 128)]
            if r.random() < 0.3:
                blocks.insert(r.randint(0, len(blocks)), -1)
            M = 128 * len(blocks)
        c.lines += [f"a = (torch.randn({M}, {K}, device=DEVICE) * 2).{e4m3}",
                    f"sa = (torch.rand({K // 128}, {M}, device=DEVICE) + 0.1).t()"]
        if layout == "counts":
            c.lines += [f"g = torch.tensor({rows}, device=DEVICE, dtype=torch.int32)",
                        "out = tkc.grouped_scaled_mm(a, b, sa, sb, counts=g)"]
        else:
            c.lines += [f"g = torch.tensor({blocks}, device=DEVICE, dtype=torch.int32)",
                        "out = tkc.grouped_scaled_mm(a, b, sa, sb, g)"]
    c.params = {"layout": layout}
    c.args, c.valid = ("a", "b", "sa", "sb", "g"), not outside


DRAWS = {"matmul": _matmul, "linear": _linear, "swiglu": _swiglu, "attention": _attention, "decode": _decode,
         "varlen": _varlen, "layer_norm": _norm, "rms_norm": _norm, "rotary": _rotary, "scaled_mm": _scaled_mm,
         "quantize_fp8": _quantize, "fftconv": _fftconv, "linear_attention": _linear_attention,
         "attention_fp8": _attention_fp8, "based": _based, "grouped_scaled_mm": _grouped,
         "hedgehog": _hedgehog}
