"""Memory-bound kernels on the GPU: achieved bandwidth next to a device-to-device
copy and the peers (flash-linear-attention's Triton kernels; torch.compile of
the same PyTorch code), interleaved in rounds, median ratio (METHOD.md).

    python bench/memory_bound.py [--out FILE.json]

Bytes counted: what each op must read and write once (inputs, outputs,
statistics), at their dtypes.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

from tkc.bench.timing import interleaved, median_ratio

try:
    import torch
except ImportError:  # a CPU machine: main() says so and exits
    torch = None

ROUNDS = 5


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def fla():
    try:
        from fla.modules.norm.layernorm import layer_norm as fla_ln
        from fla.modules.rotary import rotary_embedding as fla_rope
        return fla_rope, fla_ln
    except Exception as e:  # not installed: scripts/gpu.sh installs .fla/*.whl (README)
        print(f"# flash-linear-attention unavailable: {e}", file=sys.stderr)
        return None, None


def rope_eager(x, cos, sin):
    D = x.shape[-1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x[..., :D // 2].float(), x[..., D // 2:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).bfloat16()


def ln_eager(x, res, w, b):
    h = x.float() + res.float()
    return torch.nn.functional.layer_norm(h, (h.shape[-1],), w.float(), b.float(), 1e-5).bfloat16(), \
        h.bfloat16()


def rows(compile_peer: bool = True):
    from tkc.kernels import torch_ops
    fla_rope, fla_ln = fla()
    rope_c, ln_c = torch.compile(rope_eager), torch.compile(ln_eager)
    if not compile_peer:  # its compile takes a minute: --no-compile skips it
        rope_c, ln_c = None, None
    for L in (1024, 4096):
        B, H, D = 16, 16, 128
        x = torch.randn(B, L, H, D, device="cuda", dtype=torch.bfloat16)
        theta = torch.randn(L, D // 2, device="cuda")
        cos, sin = theta.cos().bfloat16(), theta.sin().bfloat16()
        fns = {"tkc": lambda: torch_ops.rotary_embedding(x, cos, sin), "copy": lambda: x.clone()}
        if rope_c is not None:
            fns["compile"] = lambda: rope_c(x, cos, sin)
        if fla_rope is not None:
            fns["fla"] = lambda: fla_rope(x, cos, sin)
        yield f"rotary B{B} H{H} D{D} L{L}", 2 * x.numel() * 2, 2 * x.numel() * 2, fns
    for N in (16384, 65536):
        D = 1024
        x, res = (torch.randn(N, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        w, b = torch.randn(D, device="cuda", dtype=torch.bfloat16), torch.randn(D, device="cuda", dtype=torch.bfloat16)
        fns = {"tkc": lambda: torch_ops.layer_norm(x, w, b, residual=res, prenorm=True),
               "copy": lambda: x.clone()}
        if ln_c is not None:
            fns["compile"] = lambda: ln_c(x, res, w, b)
        if fla_ln is not None:
            fns["fla"] = lambda: fla_ln(x, w, b, residual=res, prenorm=True)
        yield f"layernorm+residual fwd d{D} N{N}", 4 * x.numel() * 2 + 8 * N, 2 * x.numel() * 2, fns
        xg = x.clone().requires_grad_()
        y, h = torch_ops.layer_norm(xg, w, b, residual=res, prenorm=True)
        gy = torch.randn_like(y)
        fns = {"tkc": lambda: torch_ops._ln_bwd(gy, gy, h, w, torch.zeros(N, device="cuda"),
                                                torch.ones(N, device="cuda"), 0.0, 0, 0),
               "copy": lambda: x.clone()}
        yield f"layernorm bwd d{D} N{N}", 5 * x.numel() * 2 + 8 * N, 2 * x.numel() * 2, fns


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="memory-bound.json")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile peer")
    args = ap.parse_args(argv)
    if torch is None or not torch.cuda.is_available():
        print("bench/memory_bound.py: no CUDA GPU here (or no torch): nothing run.")
        return
    results = []
    print(f"{'op':40} {'tkc GB/s':>9} {'copy GB/s':>9} {'tkc/copy':>8}  peers (peer time / tkc time)")
    for name, nbytes, copy_bytes, fns in rows(not args.no_compile):
        times = interleaved(fns, rounds=ROUNDS)
        tkc_bw = gbps(nbytes, statistics.median(times["tkc"]))
        copy_bw = gbps(copy_bytes, statistics.median(times["copy"]))
        peers = {p: median_ratio(times[p], times["tkc"]) for p in fns if p not in ("tkc", "copy")}
        results.append({"op": name, "tkc_gbps": tkc_bw, "copy_gbps": copy_bw,
                        "fraction_of_copy": tkc_bw / copy_bw, "ratios": peers, "times_ms": times})
        print(f"{name:40} {tkc_bw:9.0f} {copy_bw:9.0f} {tkc_bw / copy_bw:8.2f}  "
              + "  ".join(f"{p} {r:.2f}x" for p, r in peers.items()), flush=True)
    with open(args.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
