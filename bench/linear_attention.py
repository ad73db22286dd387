"""The linear-attention kernels on the GPU next to flash-linear-attention's
Triton kernels of the same semantics, interleaved in rounds (each round times
every contender once), the median of the per-round ratios (METHOD.md;
BENCHMARKS.md has the results):

    Based (F 16, DV 64)          tkc.based               FLA parallel_based(use_norm=False)
    linear attention (F = DV)    tkc.linear_attention    FLA chunk_linear_attn(normalize=False)
    Mamba-2 SSD, scalar decay    tkc.linear_attention(g) FLA chunk_simple_gla
    Hedgehog (D = DV = 128)      tkc.hedgehog            FLA chunk_linear_attn(normalize=False)

    python bench/linear_attention.py [--out FILE.json] [--quick]

Each contender gets its own layout (tkc [B, H, L, D], FLA [B, T, H, D], made
outside the timing) and its output is checked against the other's first.
FLA has no Hedgehog: its peer is linear attention of the same size (as the
ThunderKittens paper compares), which computes something else, so
tkc.hedgehog is checked against the float64 reference on one (batch, head).
"""
from __future__ import annotations

import sys

from tkc.bench import peer as bench

try:
    import torch
except ImportError:
    torch = None


def configs(quick: bool):
    Ls = (1024, 4096, 8192) if not quick else (1024,)
    for L in Ls:
        yield "based", 16, 16, L, 16, 64
    for L in Ls[:2]:
        yield "linear", 16, 16, L, 128, 128
        yield "ssd", 16, 16, L, 64, 64
        yield "ssd", 16, 16, L, 128, 64
        yield "hedgehog", 16, 16, L, 128, 128


def contenders(kind):
    import tkc
    from fla.ops.based import parallel_based
    from fla.ops.linear_attn import chunk_linear_attn
    from fla.ops.simple_gla import chunk_simple_gla
    if kind == "based":
        return (lambda q, k, v, g: tkc.based(q, k, v),
                lambda q, k, v, g: parallel_based(q, k, v, use_norm=False))
    if kind == "hedgehog":     # g: (qmap, kmap, alpha, beta)
        return (lambda q, k, v, g: tkc.hedgehog(q, k, v, *g),
                lambda q, k, v, g: chunk_linear_attn(q, k, v, normalize=False)[0])
    if kind == "linear":
        return (lambda q, k, v, g: tkc.linear_attention(q, k, v),
                lambda q, k, v, g: chunk_linear_attn(q, k, v, normalize=False)[0])
    return (lambda q, k, v, g: tkc.linear_attention(q, k, v, g=g),
            lambda q, k, v, g: chunk_simple_gla(q, k, v, g=g)[0])


def hedgehog_args(H: int, D: int):
    """(qmap, kmap, alpha, beta) as ThunderKittens' generator draws them."""
    qmap, kmap = (torch.randn(H, D, 64, device="cuda").bfloat16() for _ in range(2))
    return qmap, kmap, torch.rand(H, device="cuda") * 3, torch.rand(H, device="cuda")


def hedgehog_error(o, q, k, v, g) -> float:
    """tkc.hedgehog's output against the float64 reference on (batch 0, head 0)."""
    import numpy as np

    from tkc.kernels import reference
    first = lambda x: x[:1].float().cpu().numpy()  # noqa: E731  head 0 (of batch 0)
    ref = reference.hedgehog(*(first(x[:, :1]) for x in (q, k, v)), *(first(x) for x in g),
                             q.shape[-1] ** -0.5)
    return float(np.linalg.norm(first(o[:, :1]) - ref) / np.linalg.norm(ref))


def main() -> int:
    args = bench.arguments("linear attention")
    if args is None:
        return 0
    try:
        import fla.ops  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"linear attention benchmark: flash-linear-attention is not importable ({e})")
        return 0
    rows = []
    print(bench.heading(f"{'kernel':8} {'B':>3} {'H':>3} {'L':>5} {'F':>4} {'DV':>4} {'tkc ms':>8} "
                        f"{'FLA ms':>8} {'FLA/tkc':>8}"))
    for kind, B, H, L, F, DV in configs(args.quick):
        torch.manual_seed(0)
        qk = 1.0 if kind == "based" else 0.3
        q, k = (torch.randn(B, H, L, F, device="cuda") * qk for _ in range(2))
        q, k = q.bfloat16(), k.bfloat16()
        v = torch.randn(B, H, L, DV, device="cuda").bfloat16()
        g = -torch.rand(B, H, L, device="cuda") * 0.05 if kind == "ssd" else None
        t = lambda x: None if x is None else x.transpose(1, 2).contiguous()  # noqa: E731
        fq, fk, fv, fg = t(q), t(k), t(v), t(g)
        if kind == "hedgehog":   # its peer ignores g
            g = hedgehog_args(H, F)
        mine, peer = contenders(kind)
        ours, theirs = mine(q, k, v, g).float(), peer(fq, fk, fv, fg).transpose(1, 2).float()
        err = (hedgehog_error(ours, q, k, v, g) if kind == "hedgehog"
               else float((ours - theirs).norm() / theirs.norm()))
        r = bench.timed(f"{kind} L{L}", lambda: mine(q, k, v, g), lambda: peer(fq, fk, fv, fg), err,
                        "the reference" if kind == "hedgehog" else "FLA")
        if r is None:
            continue
        print(f"{kind:8} {B:3} {H:3} {L:5} {F:4} {DV:4} {r.tkc:8.3f} {r.peer:8.3f} {r.ratio:8.2f}")
        rows.append(dict(kernel=kind, B=B, H=H, L=L, F=F, DV=DV, tkc_ms=r.tkc_ms, fla_ms=r.peer_ms,
                         ratio=r.ratio, rel_err=err))
    bench.save(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
