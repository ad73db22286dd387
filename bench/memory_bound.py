"""Memory-bound kernels on the GPU: achieved bandwidth next to a device-to-device
copy and the peers (flash-linear-attention's Triton kernels; torch.compile of
the same PyTorch code), interleaved in rounds, median ratio (METHOD.md).

    python bench/memory_bound.py [--out FILE.json] [--no-compile]

Bytes counted: what each op must read and write once (inputs, outputs,
statistics), at their dtypes. Each tkc result is checked against PyTorch
(float32 math) before it is timed (`rel err`; quantize_fp8's against the
eager rule, dequantised). Rotary rows also time the
kernel's other block shapes (KERNELS below: `tkc build bench/memory_bound.py`
builds them) as peers: `b2 1.02x` means the library's shape is 2% faster.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

from tkc.bench.timing import interleaved, median_ratio
from tkc.kernels import rotary

try:
    import torch
except ImportError:  # a CPU machine: main() says so and exits
    torch = None

ROUNDS = 5
# Rotary's other block shapes (the op's: its tuned split of a block's heads, 4 blocks
# an SM): 4 warps of one head, 2 blocks an SM; 8 heads a block (a 32 KB tile), 2 blocks an SM.
VARIANTS = {"b2": dict(blocks_per_sm=2), "w8b2": dict(warps=8, blocks_per_sm=2)}
KERNELS = [rotary(128, il, **cfg) for cfg in VARIANTS.values() for il in (False, True)]


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def rel_err(x, ref) -> float:
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def fla():
    try:
        from fla.modules.norm.layernorm import layer_norm as fla_ln
        from fla.modules.norm.layernorm import layer_norm_bwd as fla_ln_bwd
        from fla.modules.norm.layernorm import layer_norm_fwd as fla_ln_fwd
        from fla.modules.rotary import rotary_embedding as fla_rope
        return fla_rope, fla_ln, fla_ln_fwd, fla_ln_bwd
    except Exception as e:  # not installed: scripts/gpu.sh installs .fla/*.whl (README)
        print(f"# flash-linear-attention unavailable: {e}", file=sys.stderr)
        return None, None, None, None


def rope_eager(x, cos, sin, interleaved=False):
    c, s = cos[None, :, None, :].float(), sin[None, :, None, :].float()
    D = x.shape[-1]
    if interleaved:
        x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
        return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2).bfloat16()
    x1, x2 = x[..., :D // 2].float(), x[..., D // 2:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).bfloat16()


def ln_eager(x, res, w, b):
    h = x.float() + res.float() if res is not None else x.float()
    y = torch.nn.functional.layer_norm(h, (h.shape[-1],), w.float(), b.float(), 1e-5).bfloat16()
    return (y, h.bfloat16()) if res is not None else y


def ln_bwd_eager(dy, dh_next, h, w, mean, rstd):
    """LayerNorm's backward in PyTorch (the torch.compile peer): dx (= dresidual), dw, db."""
    dy, h = dy.float(), h.float()
    xhat = (h - mean[:, None]) * rstd[:, None]
    g = dy * w.float()
    dh = (g - xhat * (g * xhat).mean(-1, keepdim=True) - g.mean(-1, keepdim=True)) * rstd[:, None]
    if dh_next is not None:
        dh = dh + dh_next.float()
    return dh.bfloat16(), (dy * xhat).sum(0).bfloat16(), dy.sum(0).bfloat16()


def rotary_rows(ops, fla_rope, rope_c):
    for B, H, L, pairs in ((16, 16, 1024, False), (16, 16, 4096, False),   # pairs: interleaved
                           (16, 16, 4096, True), (4, 32, 16384, False)):
        D = 128
        x = torch.randn(B, L, H, D, device="cuda", dtype=torch.bfloat16)
        theta = torch.randn(L, D // 2, device="cuda")
        cos, sin = theta.cos().bfloat16(), theta.sin().bfloat16()
        fns = {"tkc": lambda: ops.rotary_embedding(x, cos, sin, pairs), "copy": lambda: x.clone()}
        ref = rope_eager(x, cos, sin, pairs)
        errs = {"tkc": rel_err(fns["tkc"](), ref)}
        for name, cfg in VARIANTS.items():
            out, kernel = torch.empty_like(x), rotary(D, pairs, **cfg)
            fn = (lambda k, o: lambda: k(x.view(B, 1, L, H * D), cos, sin, o.view(B, 1, L, H * D)))(kernel, out)
            fn()
            errs[name] = rel_err(out, ref)
            fns[name] = fn
        if rope_c is not None:
            fns["compile"] = lambda: rope_c(x, cos, sin, pairs)
        if fla_rope is not None:
            fns["fla"] = lambda: fla_rope(x, cos, sin, interleaved=pairs)
        kind = "interleaved" if pairs else "half-split"
        yield f"rotary {kind} B{B} H{H} D{D} L{L}", 2 * x.numel() * 2, 2 * x.numel() * 2, fns, errs


def layernorm_rows(ops, fla_ln, fla_ln_fwd, fla_ln_bwd, ln_c, ln_bwd_c):
    from tkc.torchops.norm_plans import no_dropout
    for N in (16384, 65536):
        D = 1024
        x, res, gy, gh = (torch.randn(N, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        w, b = torch.randn(D, device="cuda", dtype=torch.bfloat16), torch.randn(D, device="cuda", dtype=torch.bfloat16)
        copy = {"copy": lambda: x.clone()}
        # forward, with a residual (prenorm: y and h) and without one (y)
        for residual in (res, None):
            ref = ln_eager(x, residual, w, b)
            if residual is not None:
                fns = {"tkc": lambda: ops.layer_norm(x, w, b, residual=res, prenorm=True), **copy}
                err = max(rel_err(a, r) for a, r in zip(fns["tkc"](), ref))
            else:
                fns = {"tkc": lambda: ops.layer_norm(x, w, b), **copy}
                err = rel_err(fns["tkc"](), ref)
            if ln_c is not None:
                fns["compile"] = (lambda r: lambda: ln_c(x, r, w, b))(residual)
            if fla_ln is not None:
                fns["fla"] = (lambda r: lambda: fla_ln(x, w, b, residual=r, prenorm=r is not None))(residual)
            tensors = 4 if residual is not None else 2  # x (, residual) read; y (, h) written
            what = "layernorm+residual fwd" if residual is not None else "layernorm fwd (no residual)"
            yield f"{what} d{D} N{N}", tensors * x.numel() * 2 + 8 * N, 2 * x.numel() * 2, fns, {"tkc": err}
        # backward, with a residual (dy, dh_next, h read; dx = dresidual written) and without
        # one (dy, x read; dx written); the peers run from the same saved tensors
        none = no_dropout(x.device)   # the dropout's seed and offset (none read)
        y, h, mean, rstd = ops._ln_fwd(x, res, w, b, 1e-5, 0.0, none)
        _, mean0, rstd0 = ops._ln_fwd_nores(x, w, b, 1e-5, 0.0, none)
        for residual in (True, False):
            hh, m, r, dhn = (h, mean, rstd, gh) if residual else (x, mean0, rstd0, None)
            if residual:
                fns = {"tkc": lambda: ops._ln_bwd(gy, gh, h, w, mean, rstd, 0.0, none, True)}
            else:
                fns = {"tkc": lambda: ops._ln_bwd_nores(gy, x, w, mean0, rstd0, 0.0, none, True)}
            got, ref = fns["tkc"](), ln_bwd_eager(gy, dhn, hh, w, m, r)
            err = max(rel_err(got[0], ref[0]), rel_err(got[-1][0], ref[1]), rel_err(got[-1][1], ref[2]))
            fns.update(copy)
            if ln_bwd_c is not None:
                fns["compile"] = (lambda a: lambda: ln_bwd_c(*a))((gy, dhn, hh, w, m, r))
            if fla_ln_bwd is not None:
                _, fm, fr, fh = fla_ln_fwd(x, w, b, 1e-5, residual=res if residual else None)
                fns["fla"] = (lambda a, k: lambda: fla_ln_bwd(*a, **k))(
                    (gy, fh, w, b, fm, fr), dict(dres=dhn, has_residual=residual, x_dtype=torch.bfloat16))
            tensors = 4 if residual else 3
            what = "layernorm+residual bwd" if residual else "layernorm bwd (no residual)"
            yield f"{what} d{D} N{N}", tensors * x.numel() * 2 + 8 * N, 2 * x.numel() * 2, fns, {"tkc": err}


def quantize_eager(x):
    """tkc.quantize_fp8's rule in PyTorch ops (tkc.torchops.quantize.reference): (q, scales)."""
    from tkc.torchops.quantize import reference
    return reference(x)


def quantize_rows(ops, quant_c):
    """tkc.quantize_fp8: bytes are x read, q and the scales written; the error is of the
    dequantised result against the eager rule's (0: they agree bit for bit)."""
    for M, K in ((4096, 7168), (16384, 7168)):
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        fns = {"tkc": lambda: ops.quantize_fp8(x), "copy": lambda: x.clone()}
        deq = lambda q, s: q.float() * s.repeat_interleave(128, 1)  # noqa: E731
        errs = {"tkc": rel_err(deq(*fns["tkc"]()), deq(*quantize_eager(x)))}
        if quant_c is not None:
            fns["compile"] = lambda: quant_c(x)
        yield f"quantize_fp8 1x128 M{M} K{K}", M * K * 3 + M * K // 32, 2 * x.numel() * 2, fns, errs


def rows(compile_peer: bool = True):
    import tkc.torchops
    from tkc.torchops import norms
    fla_rope, fla_ln, fla_ln_fwd, fla_ln_bwd = fla()
    rope_c, ln_c, ln_bwd_c, quant_c = None, None, None, None
    if compile_peer:  # its compile takes a minute: --no-compile skips it
        rope_c, ln_c, ln_bwd_c, quant_c = (torch.compile(f) for f in (rope_eager, ln_eager, ln_bwd_eager,
                                                                       quantize_eager))
    yield from quantize_rows(tkc.torchops, quant_c)
    yield from rotary_rows(tkc.torchops, fla_rope, rope_c)
    yield from layernorm_rows(norms, fla_ln, fla_ln_fwd, fla_ln_bwd, ln_c, ln_bwd_c)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="memory-bound.json")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile peer")
    args = ap.parse_args(argv)
    if torch is None or not torch.cuda.is_available():
        print("bench/memory_bound.py: no CUDA GPU here (or no torch): nothing run.")
        return
    results = []
    print(f"{'op':46} {'rel err':>8} {'tkc GB/s':>9} {'copy GB/s':>9} {'tkc/copy':>8}  "
          "peers (peer time / tkc time)")
    for name, nbytes, copy_bytes, fns, errs in rows(not args.no_compile):
        times = interleaved(fns, rounds=ROUNDS)
        tkc_bw = gbps(nbytes, statistics.median(times["tkc"]))
        copy_bw = gbps(copy_bytes, statistics.median(times["copy"]))
        peers = {p: median_ratio(times[p], times["tkc"]) for p in fns if p not in ("tkc", "copy")}
        results.append({"op": name, "tkc_gbps": tkc_bw, "copy_gbps": copy_bw, "rel_err": errs,
                        "fraction_of_copy": tkc_bw / copy_bw, "ratios": peers, "times_ms": times})
        bad = [k for k, e in errs.items() if not e < 2e-2]
        print(f"{name:46} {errs['tkc']:8.1e} {tkc_bw:9.0f} {copy_bw:9.0f} {tkc_bw / copy_bw:8.2f}  "
              + "  ".join(f"{p} {r:.2f}x" for p, r in peers.items())
              + (f"  WRONG: {bad}" if bad else ""), flush=True)
    with open(args.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
