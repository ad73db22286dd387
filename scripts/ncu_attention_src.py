"""Warp stall samples by SASS instruction for a few attention rows, tkc's
kernel beside cuDNN's (one launch each; bhld, 16k tokens x 16 heads):

    ncu --profile-from-start off -k regex:"attn_bwd|attn_fwd|flash_fprop|flash_bprop" \\
        --section SourceCounters --section WarpStateStats -o src python3 scripts/ncu_attention_src.py
    ncu -i src.ncu-rep --page source --csv --print-source sass > src.csv
    python3 scripts/ncu_stalls.py src.csv 30

(`tkc build scripts/ncu_attention_src.py` first.)"""
from tkc.kernels.attention_bwd import attention_kernels

ROWS = [("bwd", 128, False, 1024), ("fwd", 64, True, 1024), ("fwd", 64, False, 1024)]
KERNELS = [k for D, c in sorted({(D, c) for _, D, c, _ in ROWS}) for k in attention_kernels(D, c, "bhld")]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    from tkc.bench.timing import profile_once
    torch.manual_seed(0)
    for phase, D, causal, L in ROWS:
        shape = (16384 // L, 16, L, D)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

        def cudnn(q=q, k=k, v=v, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return sdpa(q, k, v, is_causal=causal)
        for f in (lambda q=q, k=k, v=v, causal=causal: tkc.attention(q, k, v, causal=causal), cudnn):
            if phase == "fwd":
                profile_once([f])
            else:
                o = f()
                profile_once([lambda o=o: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)])
        print(phase, D, causal, L, flush=True)


if __name__ == "__main__":
    main()
