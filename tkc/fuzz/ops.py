"""Random calls of tkc's torch ops, written as a model author writes them
(`tkc fuzz --ops`; docs/fuzz.md, "Ops").

A case is Python source text, a pure function of (seed, index) through a
string-seeded random.Random: it builds the op's inputs (`rnd`: bf16 on the
device, or a leaf wanting a gradient, and the views models make: a weight
used transposed, FlashAttention's [B, L, H, D] memory seen as [B, H, L, D])
and calls one op into `out`. Shapes are drawn around each op's documented
domain and on both sides of its edges (zero sizes, one row, ragged lengths,
K and N off multiples of 8, an unsupported head dim or norm width, a weight
of the wrong size):

- a case inside the domain (`valid`) must be served and match the reference
  (ops_run.py: PyTorch in float64 on the same device), its output and, where
  `grads` names inputs, their gradients;
- a case outside it may be served (then it must match too) or refused by a
  TkcError located at the case's own line; anything else (another exception,
  a fault, a wrong answer) is a failure.

Work per case is capped (the float64 reference included) so that a GPU runs
thousands of cases in a few minutes.
"""
from __future__ import annotations

import dataclasses
import math
import random

OPS = ("matmul", "linear", "attention", "decode", "layer_norm", "rms_norm", "rotary")
HEAD_DIMS = (64, 96, 128, 256)   # tkc.attention's (torchops/attn.py refuses the rest)
NORM_MAX = 16384                 # tkc.layer_norm's and tkc.rms_norm's widest row
GRAD = 0.3                       # the share of cases whose gradients are checked too
OUTSIDE = 0.12                   # the share of cases drawn outside the op's domain


@dataclasses.dataclass
class Case:
    """One op call: `lines` build the inputs and set `out`; `op` and `params`
    say what the reference computes from `args` (the op's tensor arguments,
    by name in the lines' namespace); `grads` the arguments whose gradients
    are checked (empty: the forward alone); `valid`: inside the documented
    domain, so it must be served."""
    seed: int
    index: int
    op: str
    params: dict
    args: tuple
    lines: list
    valid: bool = True
    grads: tuple = ()

    @property
    def name(self) -> str:
        return f"<tkc-fuzz-ops {self.seed}:{self.index}>"

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


def generate(seed: int, index: int) -> Case:
    """Case `index` of `seed`: the op drawn first, then its shapes."""
    r = random.Random(f"tkc-fuzz-ops:{seed}:{index}")
    op = r.choice(OPS)
    case = Case(seed, index, op, {}, (), [])
    {"matmul": _matmul, "linear": _linear, "attention": _attention, "decode": _decode,
     "layer_norm": _norm, "rms_norm": _norm, "rotary": _rotary}[op](r, case)
    return case


def _size(r: random.Random, hi: int, lo: int = 1) -> int:
    """A dim: log-uniform in lo..hi, or one of the edges tiles make (lo 0: now and then none)."""
    if lo == 0:
        if r.random() < 0.03:
            return 0
        lo = 1
    if r.random() < 0.3:
        edges = [n for n in (1, 2, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 129, 192, 255, 256, 257, 777)
                 if lo <= n <= hi]
        if edges:
            return r.choice(edges)
    return int(round(math.exp(r.uniform(math.log(lo), math.log(hi)))))


def _rows8(r: random.Random, hi: int, outside: bool) -> int:
    """A dim TMA moves in 16-byte rows (a multiple of 8 bf16), or off by a few when outside."""
    n = 8 * _size(r, hi // 8)
    return n + r.choice((1, 2, 4, 5)) if outside else n


def _grad(r: random.Random) -> bool:
    return r.random() < GRAD


def _matmul(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    bad = r.choice(("K", "N")) if outside else ""
    M, K, N = _size(r, 3000), _rows8(r, 2048, bad == "K"), _rows8(r, 2048, bad == "N")
    if r.random() < 0.03:
        M = 0
    batch = r.choice(((), (), (), (r.randint(1, 4),), (2, 3)))
    while M * K * N * max(1, math.prod(batch)) > 2 ** 32:
        M = max(1, M // 2)
    b_batched = bool(batch) and r.random() < 0.5
    g = _grad(r)
    G = ", grad=True" if g else ""
    dims = ", ".join(map(str, batch)) + ", " if batch else ""
    if r.random() < 0.2:   # a transposed view of a row-major [.., K, M]
        c.lines.append(f"a = rnd({dims}{K}, {M}{G}).transpose(-1, -2)")
    else:
        c.lines.append(f"a = rnd({dims}{M}, {K}{G})")
    if not b_batched and r.random() < 0.4:   # a weight [N, K] used as its transpose
        c.lines.append(f"b = rnd({N}, {K}{G}, scale=0.1).t()")
    else:
        c.lines.append(f"b = rnd({dims if b_batched else ''}{K}, {N}{G}, scale=0.1)")
    c.lines.append("out = tkc.matmul(a, b)")
    c.args, c.valid, c.grads = ("a", "b"), not outside, ("a", "b") if g else ()


def _linear(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    bad = r.choice(("K", "N", "bias")) if outside else ""
    K, N = _rows8(r, 2048, bad == "K"), _rows8(r, 2048, bad == "N")
    lead = r.choice(((_size(r, 2000, 0),), (r.randint(1, 4), _size(r, 600))))
    act = r.choice((None, None, "gelu", "silu"))
    bias = r.random() < 0.5 or bad == "bias"
    g = _grad(r)
    G = ", grad=True" if g else ""
    c.lines += [f"x = rnd({', '.join(map(str, lead))}, {K}{G})", f"w = rnd({N}, {K}{G}, scale=0.05)",
                f"bias = rnd({N + (8 if bad == 'bias' else 0)}{G})" if bias else "bias = None",
                f"out = tkc.linear(x, w, bias, {act!r})"]
    c.params = {"activation": act}
    c.args, c.valid = ("x", "w", "bias"), not outside
    c.grads = tuple(a for a in ("x", "w", "bias") if g and (a != "bias" or bias))


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
    Lq = _size(r, 2048)
    Lk = Lq if r.random() < 0.5 else _size(r, 4096)
    while B * Hq * Lq * Lk * max(D, 64) > 2 ** 31:
        Lk, Lq = max(1, Lk // 2), max(1, Lq // 2) if Lq > Lk // 2 else Lq
    causal, lse = r.random() < 0.4, r.random() < 0.2
    scale = None if r.random() < 0.6 else round(r.uniform(0.03, 0.3), 3)
    g = _grad(r) and not lse
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
    Lk = _size(r, 32768, 16)
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
    D = 256 * _size(r, NORM_MAX // 256)
    D = D + r.choice((8, 100, 128)) if outside == "D" else D
    rows = _size(r, 4000, 0)
    while rows * D > 2 ** 25:
        rows //= 2
    lead = r.choice(((rows,), (2, max(rows // 2, 1))))
    residual, prenorm = r.random() < 0.4, r.random() < 0.2
    wdtype = r.choice(("torch.bfloat16", "torch.float32"))
    g = _grad(r)
    G = ", grad=True" if g else ""
    shape = ", ".join(map(str, (*lead, D)))
    Dw = D + 256 if outside == "weight" else D
    c.lines += [f"x = rnd({shape}{G})", f"r = rnd({shape}{G})" if residual else "r = None",
                f"w = (1 + 0.1 * torch.randn({Dw}, device=DEVICE)).to({wdtype}).requires_grad_({g})"]
    if rms:
        c.lines.append(f"out = tkc.rms_norm(x, w, residual=r, prenorm={prenorm})")
        c.args = ("x", "w", "r")
    else:
        c.lines += [f"b = (0.1 * torch.randn({D}, device=DEVICE)).to({wdtype}).requires_grad_({g})",
                    f"out = tkc.layer_norm(x, w, b, residual=r, prenorm={prenorm})"]
        c.args = ("x", "w", "b", "r")
    c.params = {"prenorm": prenorm}
    c.valid = not outside
    c.grads = tuple(a for a in c.args if g and (a != "r" or residual)) if not prenorm else ()


def _rotary(r: random.Random, c: Case) -> None:
    outside = r.random() < OUTSIDE
    D = r.choice((48, 80)) if outside else r.choice((32, 64, 96, 128, 256))
    B, T, H = r.randint(1, 3), _size(r, 2048), r.choice((1, 2, 8, 32))
    while B * T * H * D > 2 ** 24:
        T = max(1, T // 2)
    inter, g = r.random() < 0.5, _grad(r)
    c.lines += [f"x = rnd({B}, {T}, {H}, {D}{', grad=True' if g else ''})",
                f"ang = torch.rand({T}, {D // 2}, device=DEVICE) * 6.3",
                f"cos, sin = ang.cos(), ang.sin()",
                f"out = tkc.rotary_embedding(x, cos, sin, interleaved={inter})"]
    c.params = {"interleaved": inter}
    c.args, c.valid, c.grads = ("x", "cos", "sin"), not outside, ("x",) if g else ()
