"""One launch of tkc.fftconv at N 1024 and 4096 (B16, D1024), for ncu."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tkc  # noqa: E402

for N in (1024, 4096):
    u = torch.randn(16, 1024, N, device="cuda").bfloat16()
    kf = tkc.fftconv_filter(torch.randn(1024, N, device="cuda"), N)
    tkc.fftconv(u, kf)
torch.cuda.synchronize()
