"""What a model sees: transformer blocks built from tkc's ops beside the same
blocks in PyTorch, called as a training loop calls them.

    python -m tkc.bench.model [--config NAME ...] [--rounds R] [--compile [MODE ...]] [--amp] [--json FILE]

GPT's block (pre-norm, causal attention with rotary embeddings, a GELU MLP):

    h = LN1(x);  q, k, v = split(h W_qkv^T + b_qkv);  q, k = rope(q), rope(k)
    x = x + attention(q, k, v) W_o^T + b_o;  x = x + GELU(LN2(x) W_1^T + b_1) W_2^T + b_2

Llama's: RMSNorm for LN, no biases, 8 KV heads (GQA), SwiGLU: (SiLU(h W_g^T) * h W_u^T) W_d^T;
tkc.rms_norm and tkc.swiglu (gate, up and their product in one GEMM) beside F.rms_norm, SDPA's
enable_gqa and F.silu(F.linear) * F.linear.

tkc's: tkc.layer_norm (the second one fused with the residual add, prenorm=True),
tkc.linear (bias, and the GELU epilogue), tkc.rotary_embedding on the packed
projection's q and k (strided views, no copy), tkc.attention on their
[B, L, H, D] memory (its output in the same order: the reshape back is a view).
PyTorch's: F.layer_norm, F.linear, F.gelu, SDPA and the rotation in torch ops.

Per config and mode (forward without gradients; forward + backward), the
median over `rounds` interleaved rounds of each side's ms per block call
(CUDA events around a burst of eager calls, host time included) and the
median ratio torch / tkc (> 1: tkc faster). --compile adds both blocks
under torch.compile in each MODE ("default", "reduce-overhead": inductor's
CUDA graphs, ...; tkc's ops are custom ops there); --amp runs both in mixed
precision (float32 weights, torch.autocast to bf16). Before timing, the
blocks' outputs and gradients are compared (relative error against the
PyTorch block, both bf16).
"""
from __future__ import annotations

import argparse
import json
import statistics

from .peer import rel_err
from .timing import burst_ms, interleaved, median_ratio

# name: (block, batch, tokens, model width, heads); head dim 128; gpt: MLP 4x wide;
# llama: 8 KV heads (GQA), SwiGLU 14336 wide
CONFIGS = {"gpt-1.3b": ("gpt", 4, 2048, 2048, 16), "7b-width": ("gpt", 1, 4096, 4096, 32),
           "llama-8b": ("llama", 1, 4096, 4096, 32)}
KV_HEADS, SWIGLU = 8, 14336


def parameters(D: int, device: str = "cuda") -> dict:
    import torch
    bf = torch.bfloat16

    def w(*shape, scale):
        return (torch.randn(*shape, device=device) * scale).to(bf).requires_grad_()

    p = {"w_qkv": w(3 * D, D, scale=D ** -0.5), "w_o": w(D, D, scale=D ** -0.5),
         "w1": w(4 * D, D, scale=D ** -0.5), "w2": w(D, 4 * D, scale=(4 * D) ** -0.5)}
    for name, n in (("b_qkv", 3 * D), ("b_o", D), ("b1", 4 * D), ("b2", D)):
        p[name] = w(n, scale=0.02)
    for i in (1, 2):
        p[f"ln{i}_w"] = (1 + 0.1 * torch.randn(D, device=device)).to(bf).requires_grad_()
        p[f"ln{i}_b"] = w(D, scale=0.02)
    return p


def rope_tables(L: int, head_dim: int, device: str = "cuda"):
    """cos, sin [L, head_dim / 2] (bf16), RoPE's frequencies (base 10000)."""
    import torch
    inv = 10000.0 ** (-torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    ang = torch.arange(L, device=device).float()[:, None] * inv[None, :]
    return ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)


def tkc_block(x, p, cos, sin, heads: int):
    import tkc
    B, L, D = x.shape
    h = tkc.layer_norm(x, p["ln1_w"], p["ln1_b"])
    qkv = tkc.linear(h, p["w_qkv"], p["b_qkv"]).view(B, L, 3, heads, D // heads)
    q, k = (tkc.rotary_embedding(qkv[:, :, i], cos, sin) for i in (0, 1))
    o = tkc.attention(q.transpose(1, 2), k.transpose(1, 2), qkv[:, :, 2].transpose(1, 2), causal=True)
    a = tkc.linear(o.transpose(1, 2).reshape(B, L, D), p["w_o"], p["b_o"])
    h, x = tkc.layer_norm(a, p["ln2_w"], p["ln2_b"], residual=x, prenorm=True)   # LN2(x + a), x + a
    return x + tkc.linear(tkc.linear(h, p["w1"], p["b1"], activation="gelu"), p["w2"], p["b2"])


def torch_block(x, p, cos, sin, heads: int):
    import torch.nn.functional as F
    B, L, D = x.shape
    h = F.layer_norm(x, (D,), p["ln1_w"], p["ln1_b"])
    qkv = F.linear(h, p["w_qkv"], p["b_qkv"]).view(B, L, 3, heads, D // heads)
    q, k = _rope(qkv[:, :, 0], cos, sin), _rope(qkv[:, :, 1], cos, sin)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), qkv[:, :, 2].transpose(1, 2),
                                       is_causal=True)
    x = x + F.linear(o.transpose(1, 2).reshape(B, L, D), p["w_o"], p["b_o"])
    h = F.layer_norm(x, (D,), p["ln2_w"], p["ln2_b"])
    return x + F.linear(F.gelu(F.linear(h, p["w1"], p["b1"])), p["w2"], p["b2"])


def llama_parameters(D: int, heads: int, device: str = "cuda", kv_heads: int = KV_HEADS,
                     ffn: int = SWIGLU) -> dict:
    """The Llama block's weights: no biases, kv_heads key/value heads, an ffn-wide SwiGLU MLP."""
    import torch
    bf, hd = torch.bfloat16, D // heads

    def w(*shape):
        return (torch.randn(*shape, device=device) * shape[-1] ** -0.5).to(bf).requires_grad_()

    p = {"w_q": w(D, D), "w_kv": w(2 * kv_heads * hd, D), "w_o": w(D, D), "w_gate": w(ffn, D),
         "w_up": w(ffn, D), "w_down": w(D, ffn)}
    for i in (1, 2):
        p[f"norm{i}"] = (1 + 0.1 * torch.randn(D, device=device)).to(bf).requires_grad_()
    return p


def tkc_llama_block(x, p, cos, sin, heads: int):
    """RMSNorm, GQA attention with RoPE, RMSNorm fused with the residual add, SwiGLU."""
    import tkc
    B, L, D = x.shape
    hd = D // heads
    h = tkc.rms_norm(x, p["norm1"])
    q = tkc.rotary_embedding(tkc.linear(h, p["w_q"]).view(B, L, heads, hd), cos, sin)
    kv = tkc.linear(h, p["w_kv"]).view(B, L, 2, -1, hd)
    k = tkc.rotary_embedding(kv[:, :, 0], cos, sin)
    o = tkc.attention(q.transpose(1, 2), k.transpose(1, 2), kv[:, :, 1].transpose(1, 2), causal=True)
    a = tkc.linear(o.transpose(1, 2).reshape(B, L, D), p["w_o"])
    h, x = tkc.rms_norm(a, p["norm2"], residual=x, prenorm=True)
    return x + tkc.linear(tkc.swiglu(h, p["w_gate"], p["w_up"]), p["w_down"])


def torch_llama_block(x, p, cos, sin, heads: int):
    import torch.nn.functional as F
    B, L, D = x.shape
    hd = D // heads
    h = F.rms_norm(x, (D,), p["norm1"], 1e-6)
    q = _rope(F.linear(h, p["w_q"]).view(B, L, heads, hd), cos, sin)
    kv = F.linear(h, p["w_kv"]).view(B, L, 2, -1, hd)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), _rope(kv[:, :, 0], cos, sin).transpose(1, 2),
                                       kv[:, :, 1].transpose(1, 2), is_causal=True, enable_gqa=True)
    x = x + F.linear(o.transpose(1, 2).reshape(B, L, D), p["w_o"])
    h = F.rms_norm(x, (D,), p["norm2"], 1e-6)
    return x + F.linear(F.silu(F.linear(h, p["w_gate"])) * F.linear(h, p["w_up"]), p["w_down"])


def _rope(t, cos, sin):
    """RoPE in torch ops on [B, L, H, hd], pairs (i, i + hd / 2) as tkc.rotary_embedding's default."""
    import torch
    c, s, half = cos[None, :, None, :], sin[None, :, None, :], t.shape[-1] // 2
    t1, t2 = t[..., :half], t[..., half:]
    return torch.cat([t1 * c - t2 * s, t2 * c + t1 * s], -1)


# block: (parameters(D, heads, device), tkc's block, PyTorch's block)
BLOCKS = {"gpt": (lambda D, heads, device="cuda": parameters(D, device), tkc_block, torch_block),
          "llama": (llama_parameters, tkc_llama_block, torch_llama_block)}


def setup(config: str, seed: int = 0, amp: bool = False):
    """(tkc's block, PyTorch's, the blocks' arguments after x: p, cos, sin, heads; x; dy).
    amp: mixed precision, float32 weights and x, both blocks in a bf16 autocast region."""
    import torch
    kind, B, L, D, H = CONFIGS[config]
    make, mine, theirs = BLOCKS[kind]
    torch.manual_seed(seed)
    p = make(D, H)
    if amp:
        p = {n: t.detach().float().requires_grad_() for n, t in p.items()}
        mine, theirs = _autocast(mine), _autocast(theirs)
    x = torch.randn(B, L, D, device="cuda", dtype=torch.float32 if amp else torch.bfloat16, requires_grad=True)
    return mine, theirs, (p, *rope_tables(L, D // H), H), x, torch.randn_like(x)


def _autocast(block):
    def amp(x, *args):
        import torch
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return block(x, *args)
    return amp


def check(config: str, amp: bool = False) -> dict:
    """Relative errors of tkc's block against PyTorch's: output, dx, and the weights' gradients."""
    mine, theirs, args, x, dy = setup(config, amp=amp)
    p = args[0]
    grads = {}
    for side, block in (("tkc", mine), ("torch", theirs)):
        x.grad = None
        for t in p.values():
            t.grad = None
        y = block(x, *args)
        y.backward(dy)
        grads[side] = {"y": y.detach(), "dx": x.grad.clone(), **{n: t.grad.clone() for n, t in p.items()}}
    return {n: round(rel_err(grads["tkc"][n], grads["torch"][n]), 5) for n in grads["tkc"]}


def measure(configs=tuple(CONFIGS), rounds: int = 5, modes=(), calls: int = 10, amp: bool = False) -> list[dict]:
    import torch
    out = []
    for config in configs:
        errors = check(config, amp)
        print(json.dumps({"config": config, "rel_err": errors}), flush=True)
        tkc_fn, torch_fn, args, x, dy = setup(config, seed=1, amp=amp)
        for wrap in (None, *modes):
            torch._dynamo.reset()
            mine, theirs = ((torch.compile(f, mode=wrap) if wrap else f) for f in (tkc_fn, torch_fn))
            for mode in ("forward", "fwd+bwd"):
                if mode == "forward":
                    def run(block):
                        def call():
                            with torch.no_grad():
                                block(x, *args)
                        return call
                else:
                    def run(block):
                        return lambda: block(x, *args).backward(dy)
                fns = {"tkc": run(mine), "torch": run(theirs)}
                for fn in fns.values():
                    for _ in range(3):   # compiles (records CUDA graphs), builds plans, loads kernels
                        fn()
                torch.cuda.synchronize()
                ms = interleaved(fns, rounds, timer=lambda fn: burst_ms(fn, calls))
                row = {"config": config, "precision": "amp" if amp else "bf16",
                       "shape": "B{} L{} D{} H{}".format(*CONFIGS[config][1:]), "mode": mode,
                       "compiled": wrap or "eager", "tkc_ms": round(statistics.median(ms["tkc"]), 3),
                       "torch_ms": round(statistics.median(ms["torch"]), 3),
                       "speedup": round(median_ratio(ms["torch"], ms["tkc"]), 3)}
                out.append(row)
                print(json.dumps(row), flush=True)
        args = x = dy = None   # this config's inputs freed before the next's
        torch.cuda.empty_cache()
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile", nargs="*", metavar="MODE",
                    help="also both blocks under torch.compile, in each mode (none given: default)")
    ap.add_argument("--amp", action="store_true",
                    help="mixed precision: float32 weights and x, both blocks in torch.autocast(bf16)")
    ap.add_argument("--json")
    opts = ap.parse_args(argv)
    modes = () if opts.compile is None else tuple(opts.compile) or ("default",)
    result = measure(opts.config, opts.rounds, modes, amp=opts.amp)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
