"""tkc.attention's backward and cuDNN's at B4 H16 L4096, D 64 and 128, causal
and not, one launch each, for ncu's pipe and shared-memory utilisation (is
the backward bound by shared memory's bandwidth, where its wgmmas read both
operands from shared memory?): `ncu --profile-from-start off -k
regex:"attn_bwd|cudnn" --section ComputeWorkloadAnalysis --section
MemoryWorkloadAnalysis --page raw --csv python3
scripts/ncu_attention_bwd_pipes.py`, then compare
sm__pipe_tensor_cycles_active, l1tex__data_bank_reads / writes and
l1tex__data_pipe_lsu_wavefronts_mem_shared of tkc's kernel and cuDNN's."""
from tkc.kernels.attention_bwd import attention_kernels

CONFIGS = [(D, causal) for D in (64, 128) for causal in (False, True)]
KERNELS = [k for D, causal in CONFIGS for k in attention_kernels(D, causal, "bhld")]


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tkc
    from tkc.bench.timing import profile_once

    def cudnn(q, k, v, causal):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return sdpa(q, k, v, is_causal=causal)

    for D, causal in CONFIGS:
        q, k, v = (torch.randn(4, 16, 4096, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        for f in (lambda: tkc.attention(q, k, v, causal=causal), lambda: cudnn(q, k, v, causal)):
            o = f()                       # the forward outside the profiled range
            profile_once([lambda: o.backward(torch.ones_like(o), retain_graph=True)])


if __name__ == "__main__":
    main()
