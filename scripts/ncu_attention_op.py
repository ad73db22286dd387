"""tkc.attention's forward and backward at B16 H16 L1024 and B4 H16 L4096, D 64
and 128, causal and not, one launch each, for locked-clock kernel times of
two trees under ncu (`.cache-ab/ab.sh "O A" 1 scripts/ncu_attention_op.py
attn_`, as scripts/ncu_attention_bwd.py's docstring describes)."""
from tkc.kernels.attention_bwd import attention_kernels

CONFIGS = [(D, causal) for D in (64, 128) for causal in (False, True)]
KERNELS = [k for D, causal in CONFIGS for k in attention_kernels(D, causal, "bhld")]


def main():
    import torch

    import tkc
    for B, L in ((16, 1024), (4, 4096)):
        for D, causal in CONFIGS:
            q, k, v = (torch.randn(B, 16, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            tkc.attention(q, k, v, causal=causal).sum().backward()  # load the modules
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
            o = tkc.attention(q, k, v, causal=causal)
            o.backward(torch.ones_like(o))
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
