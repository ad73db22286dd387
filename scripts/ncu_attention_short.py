"""The attention forward at 1k tokens (B16 H16 L1024 D128, not causal) for ncu:
tkc's forward, its persistent form and cuDNN's, one launch each after a warm-up.
`tkc build scripts/attention_probe.py` first. Run under
`ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats
--section Occupancy --section LaunchStats python3 scripts/ncu_attention_short.py`."""
import math

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

from tkc.bench.timing import profile_once
from tkc.kernels.attention_hopper import attention_hopper

KERNELS = [attention_hopper(128), attention_hopper(128, persistent=True)]


def main():
    q, k, v = (torch.randn(16, 16, 1024, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(16, 16, 1, 1024, device="cuda")
    runs = [lambda f=f: f(q, k, v, o, lse, 1 / math.sqrt(128)) for f in KERNELS]

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            sdpa(q, k, v)
    runs.append(cudnn)
    profile_once(runs)


if __name__ == "__main__":
    main()
