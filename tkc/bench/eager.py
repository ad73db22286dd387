"""What users see: each op called eagerly, as a model author calls it (host
time included), beside its peer in the same run, interleaved in rounds.

    python -m tkc.bench.eager [--only WORD ...] [--rounds R] [--json FILE] [--calling-thread]

Per row: the median over `rounds` rounds of the mean ms per call of a burst
of eager calls (CUDA events around them, no graph), tkc's and the peer's in
turn, and the median of the per-round ratios peer / tkc (> 1: tkc faster).
A burst is the row's `calls` or, for short calls, as many as last BURST_MS
on the faster side: a burst starts after a synchronise, and the first call
after one costs a cold host path (H200 hosts, 2026-11-29: tkc.fftconv's
44 µs of Python against 11 warm; 20-40 µs of intercept on a burst, torch's
C++ ops 0-20), which a model's stream of ops between synchronisations does
not pay once per op.
The kernel time alone (CUDA-graph replay) is `python -m tkc.bench`'s.
--calling-thread: every backward (tkc's and the peer's) on the calling thread,
torch.autograd.set_multithreading_enabled(False), as a host-bound training
loop can run it (docs/torch-ops.md).
"""
from __future__ import annotations

import argparse
import json
import statistics

from .timing import burst_ms, interleaved, median_ratio


def rows():
    """(group, name, tkc call, peer name, peer call, calls) per row; inputs made lazily."""
    import torch
    import torch.nn.functional as F

    import tkc
    bf, dev = torch.bfloat16, "cuda"

    def rnd(*shape, grad=False, scale=1.0):
        return (torch.randn(*shape, device=dev) * scale).to(bf).requires_grad_(grad)

    def gemm(m, n, k, batch=None, batched_b=False):   # batched_b: a B per batch (bmm's)
        a = rnd(*((batch,) if batch else ()), m, k)
        b = rnd(*((batch,) if batched_b else ()), k, n)
        return (lambda: tkc.matmul(a, b)), (lambda: torch.matmul(a, b))

    def linear(m, k, n):   # x w^T, w [n, k] as nn.Linear stores it (an LM head's vocabulary: n)
        x, w = rnd(m, k), rnd(n, k, scale=0.02)
        return (lambda: tkc.linear(x, w)), (lambda: F.linear(x, w))

    def gemm_bwd(m, n, k, batch=None):
        a = rnd(*((batch,) if batch else ()), m, k, grad=True)
        b = rnd(k, n, grad=True, scale=0.05)
        dc = rnd(*((batch,) if batch else ()), m, n)
        return (lambda: tkc.matmul(a, b).backward(dc)), (lambda: torch.matmul(a, b).backward(dc))

    def swiglu(m, k, f, bwd):
        x, wg, wu = rnd(m, k, grad=bwd), rnd(f, k, grad=bwd, scale=0.02), rnd(f, k, grad=bwd, scale=0.02)
        dh = rnd(m, f)
        mine = lambda: tkc.swiglu(x, wg, wu)  # noqa: E731
        peer = lambda: F.silu(F.linear(x, wg)) * F.linear(x, wu)  # noqa: E731
        if bwd:
            return (lambda: mine().backward(dh)), (lambda: peer().backward(dh))
        return mine, peer

    def attn(L, causal, bwd, D=128, B=16, H=16):
        B = max(1, 16384 // L)
        q, k, v = (rnd(B, H, L, D, grad=bwd) for _ in range(3))
        do = rnd(B, H, L, D)
        mine = lambda: tkc.attention(q, k, v, causal=causal)  # noqa: E731
        peer = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        if bwd:
            return (lambda: mine().backward(do)), (lambda: peer().backward(do))
        return mine, peer

    def chunk(Lq, Lk, D, causal):   # a prefill's chunk of 4096 tokens over its cache (32 heads)
        from torch.nn.attention.bias import causal_lower_right
        B = max(1, 4096 // Lq)
        q, k, v = rnd(B, 32, Lq, D), rnd(B, 32, Lk, D), rnd(B, 32, Lk, D)
        mask = causal_lower_right(Lq, Lk) if causal else None   # tkc's causal: the chunk ends the cache
        return (lambda: tkc.attention(q, k, v, causal=causal)), \
            (lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))

    def decode(B, Hq, Hkv, Lk, D=128):   # one query a head against a KV cache (no_grad)
        q, k, v = rnd(B, Hq, 1, D), rnd(B, Hkv, Lk, D), rnd(B, Hkv, Lk, D)
        return (lambda: tkc.attention(q, k, v)), \
            (lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=Hq != Hkv))

    def draft(B, Hq, Hkv, Lq, Lk, D=128):   # Lq draft tokens a head (causal) against a KV cache
        from torch.nn.attention.bias import causal_lower_right
        q, k, v = rnd(B, Hq, Lq, D), rnd(B, Hkv, Lk, D), rnd(B, Hkv, Lk, D)
        # SDPA's bottom-right causal mask, K/V repeated per query head once, outside the timing (H200,
        # 11-30: a bool mask with enable_gqa took 0.87-4.7x its time over 7 shapes, 3.2-4.7 at B1)
        kr, vr = k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1)
        return (lambda: tkc.attention(q, k, v, causal=True)), \
            (lambda: F.scaled_dot_product_attention(q, kr, vr, attn_mask=causal_lower_right(Lq, Lk)))

    def layernorm(n, d, bwd):
        x = rnd(n, d, grad=bwd)
        w, b = rnd(d, grad=bwd), rnd(d, grad=bwd)
        dy = rnd(n, d)
        mine = lambda: tkc.layer_norm(x, w, b)  # noqa: E731
        peer = lambda: F.layer_norm(x, (d,), w, b)  # noqa: E731
        if bwd:
            return (lambda: mine().backward(dy)), (lambda: peer().backward(dy))
        return mine, peer

    def rotary():
        x = rnd(1, 8192, 32, 128)
        ang = torch.rand(8192, 64, device=dev)
        cos, sin = ang.cos().to(bf), ang.sin().to(bf)
        out = torch.empty_like(x)
        return (lambda: tkc.rotary_embedding(x, cos, sin)), (lambda: out.copy_(x))

    def fftconv(L, N):
        u = rnd(16, 768, L)
        k = torch.randn(768, L if L == N else N - L + 1, device=dev)
        kf = tkc.fftconv_filter(k, N)

        def peer():
            return torch.fft.irfft(torch.fft.rfft(u.float(), n=N) * torch.fft.rfft(k, n=N),
                                   n=N)[..., :L].to(bf)
        return (lambda: tkc.fftconv(u, kf)), peer

    def scaled(m, n, k, scales):
        from .fp8_operands import block_operands, tensor_operands
        ops = block_operands(m, n, k) if scales == "block" else tensor_operands(m, n, k, scales == "row-wise")
        return (lambda: tkc.scaled_mm(*ops)), (lambda: torch._scaled_mm(*ops, out_dtype=bf))

    def quantize(m, k):
        x = rnd(m, k)

        def peer():   # the same in torch: 1x128 amax scales, e4m3 (saturated by the clamp)
            g = x.view(m, k // 128, 128).float()
            s = g.abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448
            return (g / s).clamp(-448, 448).to(torch.float8_e4m3fn).view(m, k), s.view(m, -1)
        return (lambda: tkc.quantize_fp8(x)), peer

    def attention_fp8(L, causal):
        q, k, v = (torch.randn(4, 16, L, 128, device=dev) for _ in range(3))
        scales = [t.abs().amax((2, 3)) / 448 for t in (q, k, v)]
        q8, k8, v8 = ((t / s[..., None, None]).to(torch.float8_e4m3fn) for t, s in zip((q, k, v), scales))
        qb, kb, vb = (t.to(bf) for t in (q, k, v))
        return (lambda: tkc.attention_fp8(q8, k8, v8, *scales, causal=causal)), \
            (lambda: tkc.attention(qb, kb, vb, causal=causal))

    table = [("gemm", f"matmul {m}x{n}x{k}", lambda m=m, n=n, k=k: gemm(m, n, k), "torch.matmul", 20)
             for m, n, k in ((1024, 1024, 1024), (2048, 2048, 2048), (777, 4096, 4096),
                             (8000, 8008, 4000), (3000, 3000, 3000), (4096, 4096, 4096),
                             (8192, 14336, 4096), (16, 4096, 4096), (64, 4096, 14336))]
    table += [("gemm", "matmul [8,2048,4096]x[4096,4096]", lambda: gemm(2048, 4096, 4096, 8),
               "torch.matmul", 10),
              ("gemm", "matmul [8,2048,4096]x[8,4096,4096]", lambda: gemm(2048, 4096, 4096, 8, True),
               "torch.matmul", 10),
              ("gemm", "matmul 4096^3 fwd+bwd", lambda: gemm_bwd(4096, 4096, 4096),
               "torch.matmul fwd+bwd", 10),
              ("gemm", "matmul 8192x14336x4096 fwd+bwd", lambda: gemm_bwd(8192, 14336, 4096),
               "torch.matmul fwd+bwd", 5),
              ("gemm", "matmul [8,2048,4096]x[4096,4096] fwd+bwd",
               lambda: gemm_bwd(2048, 4096, 4096, 8), "torch.matmul fwd+bwd", 5)]
    for m in (16, 2048):   # Llama-3-8B's LM head: a decode step's, a prefill chunk's
        table.append(("gemm", f"linear {m}x4096 -> 128256 (an LM head)", lambda m=m: linear(m, 4096, 128256),
                      "F.linear", 10))
    for m, bwd in ((16, False), (4096, False), (4096, True)):   # a Llama-8B MLP's: decode, training
        table.append(("gemm", f"swiglu {m}x4096 -> 14336{' fwd+bwd' if bwd else ''}",
                      lambda m=m, b=bwd: swiglu(m, 4096, 14336, b),
                      "F.silu(F.linear) * F.linear" + (" fwd+bwd" if bwd else ""), 10))
    for L in (1024, 1000):
        for causal in (False, True):
            for bwd in (False, True):
                name = f"attention L {L}{' causal' if causal else ''}{' fwd+bwd' if bwd else ''}"
                table.append(("attention", name, lambda L=L, c=causal, b=bwd: attn(L, c, b),
                              "SDPA" + (" fwd+bwd" if bwd else ""), 10))
    for L in (128, 256):   # short sequences, 16384 tokens (D 64: where the query tiles' fill decides)
        for D in (64, 128):
            table.append(("attention", f"attention D{D} L {L}", lambda L=L, D=D: attn(L, False, False, D=D),
                          "SDPA", 20))
    for L in (1024, 4096):   # Phi-3-mini's attention: 32 heads of 96
        for bwd in (False, True):
            table.append(("attention", f"attention D96 H32 L {L} causal{' fwd+bwd' if bwd else ''}",
                          lambda L=L, b=bwd: attn(L, True, b, D=96, H=32), "SDPA" + (" fwd+bwd" if bwd else ""), 10))
    for D, Lq, Lk, causal in ((64, 256, 16384, False), (64, 128, 4096, True), (128, 512, 16384, True),
                              (128, 1024, 8192, False)):
        table.append(("attention", f"attention chunk D{D} Lq {Lq} over Lk {Lk}{' causal' if causal else ''}",
                      lambda D=D, Lq=Lq, Lk=Lk, c=causal: chunk(Lq, Lk, D, c),
                      "SDPA" + (" causal_lower_right" if causal else ""), 10))
    for B, Hq, Hkv, Lk, D in ((1, 32, 8, 4096, 128), (1, 32, 8, 32768, 128), (8, 32, 8, 8192, 128),
                              (64, 32, 8, 2048, 128), (1, 64, 8, 8192, 64), (4, 16, 16, 8192, 256),
                              (1, 32, 32, 4096, 96)):
        table.append(("attention", f"attention decode B{B} Hq{Hq} Hkv{Hkv} Lk {Lk} D{D}",
                      lambda B=B, Hq=Hq, Hkv=Hkv, Lk=Lk, D=D: decode(B, Hq, Hkv, Lk, D), "SDPA", 20))
    for B, Hq, Hkv, Lq, Lk, D in ((1, 32, 8, 4, 8192, 128), (8, 32, 8, 4, 8192, 128), (4, 16, 16, 4, 8192, 256)):
        table.append(("attention", f"attention draft B{B} Hq{Hq} Hkv{Hkv} Lq {Lq} causal Lk {Lk} D{D}",
                      lambda B=B, Hq=Hq, Hkv=Hkv, Lq=Lq, Lk=Lk, D=D: draft(B, Hq, Hkv, Lq, Lk, D),
                      "SDPA causal_lower_right", 20))
    for n, d in ((16384, 1024), (8192, 8192), (4096, 16384)):   # (16384: the widest D the norms serve)
        for bwd in (False, True):
            table.append(("memory", f"layer_norm {n}x{d}{' fwd+bwd' if bwd else ''}",
                          lambda n=n, d=d, b=bwd: layernorm(n, d, b),
                          "F.layer_norm" + (" fwd+bwd" if bwd else ""), 20))
    table.append(("memory", "rotary [1,8192,32,128]", rotary, "copy", 20))
    for L, N in ((1024, 1024), (2048, 2048), (4096, 4096), (1024, 2048), (2048, 4096)):
        kind = "circular" if L == N else "causal"
        table.append(("fftconv", f"fftconv B16 D768 L {L} N {N} ({kind})",
                      lambda L=L, N=N: fftconv(L, N), "torch.fft", 20))
    for scales, (m, n, k) in (("per-tensor", (8192,) * 3), ("row-wise", (8192,) * 3),
                              ("block", (4096, 7168, 16384))):
        table.append(("fp8", f"scaled_mm {scales} {m}x{n}x{k}", lambda m=m, n=n, k=k, s=scales: scaled(m, n, k, s),
                      "torch._scaled_mm", 10))
    for m in (4096, 16384):
        table.append(("fp8", f"quantize_fp8 {m}x7168", lambda m=m: quantize(m, 7168), "torch ops", 20))
    for L in (4096, 8192):
        for causal in (False, True):
            table.append(("fp8", f"attention_fp8 B4 H16 L {L} D128{' causal' if causal else ''}",
                          lambda L=L, c=causal: attention_fp8(L, c), "tkc.attention bf16", 10))
    return table


BURST_MS = 2.0


def _burst(mine, peer, calls: int) -> int:
    """calls, or more: enough that the faster side's burst lasts BURST_MS."""
    fastest = min(burst_ms(mine, calls), burst_ms(peer, calls))
    return max(calls, int(BURST_MS / max(fastest, 1e-3)) + 1)


def measure(only=(), rounds: int = 5) -> list[dict]:
    import torch
    out = []
    for group, name, make, peer_name, calls in rows():
        if only and not any(w in name or w == group for w in only):
            continue
        try:
            mine, peer = make()
            for fn in (mine, peer):
                fn()
            torch.cuda.synchronize()
            n = _burst(mine, peer, calls)
            ms = interleaved({"tkc": mine, "peer": peer}, rounds, timer=lambda fn: burst_ms(fn, n))
            out.append({"row": name, "tkc_ms": round(statistics.median(ms["tkc"]), 4),
                        "peer": peer_name, "peer_ms": round(statistics.median(ms["peer"]), 4),
                        "speedup": round(median_ratio(ms["peer"], ms["tkc"]), 3), "calls": n})
        except Exception as e:  # noqa: BLE001  (a row that fails is reported, the rest run)
            out.append({"row": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        print(json.dumps(out[-1]), flush=True)
        torch.cuda.empty_cache()
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", default=())
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json")
    p.add_argument("--calling-thread", action="store_true",
                   help="the backwards on the calling thread, not autograd's device thread")
    opts = p.parse_args(argv)
    import torch
    with torch.autograd.set_multithreading_enabled(not opts.calling_thread):
        result = measure(opts.only, opts.rounds)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
