"""Two attention outputs over disjoint key sets merged into the output over
their union: ring attention's step (tkc/torchops/ring.py); and the splits of
split-KV attention merged (merge_splits, inside attention_hopper's split
kernel: the last split of a query tile to finish merges them).

(oa, la) and (ob, lb) are the outputs and log-sum-exps of the same query
rows over two key sets; over the union the output is their softmax-weighted
mean, as FlashAttention merges two key blocks:

    m = max(la, lb),  ea = exp(la - m),  eb = exp(lb - m)
    o = (oa ea + ob eb) / (ea + eb),  lse = m + log(ea + eb)

A row with no keys on a side has lse +inf there (tkc.attention's convention)
and adds nothing; a row with none on either side gets o = 0 and lse +inf.

merge(oa, la, ob, lb, o, lo, r0): oa [B, H, R, D] (bf16, or the f32
accumulator of earlier merges), ob [B, H, R, D] bf16, la, lb [B, H, 1, R]
f32; the result goes to rows r0 .. r0 + R - 1 of o [B, H, L, D] (bf16 or
f32) and of lo [B, H, 1, L]: the whole output's rows of one query chunk,
so that the last merge writes the op's output in place (a gl is a
contiguous tensor, not a slice of one). o may be oa and lo la (r0 = 0): each
warp reads its rows before it writes them.

One pass, each row's two outputs read once and the result written once,
where the same merge in torch ops (to f32, logaddexp, exp, two products, a
sum, then a cat and a cast) reads and writes several times the bytes: on 2
H200s at 32k tokens ring attention went from 8.93 to 7.98 ms (BENCHMARKS.md).
"""
from __future__ import annotations

import math

import tkc.dsl as tkc
from tkc.diagnostics import TkcError
from tkc.dsl import bf16, f32, gl, i32, rv
from tkc.ops import exp, load, log, max, store, where, zero

WARPS = 4
ROWS = 4   # rows a warp: all their loads issued before the first store
DTYPES = {"bf16": bf16, "f32": f32}


def attention_merge(D: int = 128, acc: str = "bf16", out: str = "bf16"):
    """The merge kernel for head dim D: oa of dtype acc, o of dtype out."""
    if D % 32 or not 32 <= D <= 256:
        raise TkcError(f"attention_merge: the head dim D = {D} must be a multiple of 32 in 32..256")
    if acc not in DTYPES or out not in DTYPES:
        raise TkcError(f"attention_merge: acc and out must be 'bf16' or 'f32', got {acc!r}, {out!r}")
    A, O = DTYPES[acc], DTYPES[out]

    @tkc.kernel(name=f"ring_merge_d{D}_{acc}_{out}", warps=WARPS, inplace={"o": "oa", "lo": "la"},
                grid=lambda oa, la, ob, lb, o, lo, r0: (tkc.cdiv(oa.r, WARPS * ROWS), oa.d, oa.b))
    def merge(oa: gl(A, "B", "H", "R", D), la: gl(f32, "B", "H", 1, "R"),
              ob: gl(bf16, "B", "H", "R", D), lb: gl(f32, "B", "H", 1, "R"),
              o: gl(O, "B", "H", None, D), lo: gl(f32, "B", "H", 1, None), r0: i32):
        h, b = tkc.block_idx.y, tkc.block_idx.z
        first = (tkc.block_idx.x * WARPS + tkc.warpid()) * ROWS
        rows = [first + r for r in range(ROWS)]
        xa = [load(rv(f32, D, "flat"), oa, (b, h, i, 0), fill=0.0) for i in rows]
        xb = [load(rv(f32, D, "flat"), ob, (b, h, i, 0), fill=0.0) for i in rows]
        sa = [load(f32, la, at=(b, h, 0, i), fill=math.inf) for i in rows]
        sb = [load(f32, lb, at=(b, h, 0, i), fill=math.inf) for i in rows]
        for i, x, y, a, c in zip(rows, xa, xb, sa, sb):
            a = where(a < math.inf, a, -math.inf)   # no keys: weight exp(-inf) = 0
            c = where(c < math.inf, c, -math.inf)
            m = max(a, c)
            m = where(m > -math.inf, m, 0.0)        # (neither side: both weights 0)
            ea, eb = exp(a - m), exp(c - m)
            s = ea + eb
            inv = where(s > 0.0, 1.0 / s, 0.0)
            with tkc.if_(i < oa.r):
                store(o, x * (ea * inv) + y * (eb * inv), (b, h, r0 + i, 0))
                store(lo, where(s > 0.0, m + log(s), math.inf), at=(b, h, 0, r0 + i), clip=True)

    return merge


GROUP = 16  # splits whose loads a warp issues together (a runtime loop over groups of them): the
            # split counts of a decode step on 132 SMs (16-17) in one round trip (H200, torch.profiler:
            # D 128 3.9 -> 2.4 µs, D 64 2.8 -> 2.1 against GROUP 8's two; no spills at D 256)


def merge_splits(op, lp, o, lo, b, h, i, splits, D: int) -> None:
    """Split-KV attention's last step (attention_hopper's "split" layout), for
    row i of one (batch b, head h), by the warp that calls it: the splits'
    normalised outputs op [B, H, splits * R, D] (f32; split s's rows from
    s * R, R = o.r) and their lse lp [B, H, 1, splits * R] merged into o [B,
    H, R, D] (bf16) and lo [B, H, 1, R]; nothing for a row past R. It reads
    the splits GROUP at a time (their loads in flight together), keeping the
    running maximum m of their lse, sum_s op_s exp(lp_s - m) and sum_s
    exp(lp_s - m), both rescaled when m grows; a split with no key (lse
    +inf) weighs 0, a row with none anywhere gets o = 0 and lse +inf."""
    R = o.r
    m, tot, acc = tkc.f32(-math.inf), tkc.f32(0.0), zero(rv(f32, D, "flat"))
    for g in tkc.range(tkc.cdiv(splits, GROUP)):
        at = [(g * GROUP + s) * R + i for s in range(GROUP)]   # past the last split: filled
        ls = [load(f32, lp, at=(b, h, 0, a), fill=math.inf) for a in at]
        xs = [load(rv(f32, D, "flat"), op, (b, h, a, 0), fill=0.0) for a in at]
        ls = [where(x < math.inf, x, -math.inf) for x in ls]   # no key: weight exp(-inf) = 0
        new = m
        for x in ls:
            new = max(new, x)
        ms = where(new > -math.inf, new, 0.0)                  # (no key yet: every weight 0)
        alpha = exp(m - ms)
        es = [exp(x - ms) for x in ls]
        acc, tot = acc * alpha, tot * alpha
        for x, e in zip(xs, es):
            acc, tot = acc + x * e, tot + e
        m = new
    inv = where(tot > 0.0, 1.0 / tot, 0.0)
    with tkc.if_(i < R):
        store(o, (acc * inv).to(bf16), (b, h, i, 0))
        store(lo, where(tot > 0.0, m + log(tot), math.inf), at=(b, h, 0, i), clip=True)


def attention_merge_splits(D: int = 128):
    """merge_splits as a kernel of its own (a warp a row): merge(op, lp, o,
    lo) with op [B, H, S * R, D], lp [B, H, 1, S * R] (f32), o [B, H, R, D]
    (bf16, strided: a packed view of the op's output), lo [B, H, 1, R]. The
    decode path's second launch where its steps are captured into a CUDA
    graph (the split kernel merging its own splits costs kernel time there:
    torchops/attn_decode.py)."""
    if D % 32 or not 32 <= D <= 256:
        raise TkcError(f"attention_merge_splits: the head dim D = {D} must be a multiple of 32 in 32..256")

    @tkc.kernel(name=f"attn_split_merge_d{D}", warps=WARPS,
                grid=lambda op, lp, o, lo: (tkc.cdiv(o.r, WARPS), o.d, o.b))
    def merge(op: gl(f32, "B", "H", "SR", D), lp: gl(f32, "B", "H", 1, "SR"),
              o: gl(bf16, "B", "H", "R", D, strided=True), lo: gl(f32, "B", "H", 1, "R")):
        merge_splits(op, lp, o, lo, tkc.block_idx.z, tkc.block_idx.y, tkc.block_idx.x * WARPS + tkc.warpid(),
                     op.r // o.r, D)

    return merge
