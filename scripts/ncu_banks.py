"""Run each library GEMM (and attention) once, for `ncu`: shared-memory bank
conflicts, tensor-pipe and DRAM counters. `python3 scripts/ncu_banks.py [N]`
(N x N x N GEMMs, default 1024). Usage on the GPU machine:
  ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum python3 scripts/ncu_banks.py
"""
import sys

import torch

from tkc.kernels import attention_fwd, gemm, gemm_hopper

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
for k in (gemm("bf16"), gemm_hopper("bf16")):
    k(a, b, c)
q, kk, v = (torch.randn(1, 4, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
attention_fwd(64)(q, kk, v, torch.empty_like(q), 0.125)
torch.cuda.synchronize()
