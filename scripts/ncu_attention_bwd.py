"""tkc.attention's forward and backward at B4 H16 L4096 (or at the lengths
given, 16k tokens each), D 64, 128 and 256, causal and not, for ncu:
`ncu --profile-from-start off -k regex:attn_bwd --metrics
gpu__time_duration.sum python3 scripts/ncu_attention_bwd.py [--blhd] [1024 4096]`
(--blhd: FlashAttention's memory layout, [B, L, H, D]). ncu locks the
clocks, so two builds compare even when run apart: to compare with an older
commit, `git archive OLD tkc | tar -x -C .cache-ab/old`, build this script
with that tree on PYTHONPATH into TKC_CACHE_DIR=.cache-ab/a and with this one
into .cache-ab/b, carry .cache-ab and run each with its tree and cache (a
cache key includes its compiler's source, so each tree finds only its own)."""
from tkc.kernels.attention_bwd import attention_kernels

CONFIGS = [(D, causal) for D in (64, 128, 256) for causal in (False, True)]
KERNELS = [k for D, causal in CONFIGS for layout in ("bhld", "blhd") for k in attention_kernels(D, causal, layout)]


def main(lengths=(4096,), blhd=False):
    """Each sequence length L at B = 16384 / L (16k tokens, 16 heads)."""
    import torch

    import tkc
    from tkc.bench.timing import profile_once
    for L in lengths:
        for D, causal in CONFIGS:
            shape = (16384 // L, L, 16, D) if blhd else (16384 // L, 16, L, D)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            if blhd:
                q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            profile_once([lambda: tkc.attention(q, k, v, causal=causal).sum().backward()])


if __name__ == "__main__":
    import sys
    main([int(x) for x in sys.argv[1:] if x != "--blhd"] or (4096,), "--blhd" in sys.argv)
