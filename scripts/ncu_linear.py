"""One launch each of tkc.based (L 4096), tkc.linear_attention with decay
(F = DV = 64, L 1024) and tkc.hedgehog (L 4096), B16 H16, after a warm-up,
for ncu: `ncu --profile-from-start off --section SpeedOfLight --section
Occupancy --section WarpStateStats --section SourceCounters -o REPORT python3
scripts/ncu_linear.py`, then `python3 scripts/ncu_stalls.py REPORT` for the
stall samples by SASS instruction."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tkc  # noqa: E402
from tkc.bench.timing import profile_once  # noqa: E402
from bench.linear_attention import hedgehog_args  # noqa: E402


def launches():
    q, k = (torch.randn(16, 16, 4096, 16, device="cuda").bfloat16() for _ in range(2))
    v = torch.randn(16, 16, 4096, 64, device="cuda").bfloat16()
    yield lambda: tkc.based(q, k, v)
    qd, kd, vd = (torch.randn(16, 16, 1024, 64, device="cuda").bfloat16() * 0.3 for _ in range(3))
    g = -torch.rand(16, 16, 1024, device="cuda") * 0.05
    yield lambda: tkc.linear_attention(qd, kd, vd, g=g)
    qh, kh, vh = (torch.randn(16, 16, 4096, 128, device="cuda").bfloat16() * 0.3 for _ in range(3))
    maps = hedgehog_args(16, 128)
    yield lambda: tkc.hedgehog(qh, kh, vh, *maps)


def main():
    profile_once(list(launches()))


if __name__ == "__main__":
    main()
