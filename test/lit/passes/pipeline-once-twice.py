# tk-pipeline-staging: a shared tile TMA-loaded twice in a work item outside the
# pipelined loop (a finish reading chunks through one tile) is refused at the second
# load: each such load waits on and releases its tile once an item, so the second
# would overwrite what the first one's readers still read.
# RUN: not tkc %s --kernel twice 2>&1 | FileCheck %s
# CHECK: pipeline-once-twice.py:[[#@LINE+15]]:{{[0-9]+}}: error: tma.load: a shared tile is loaded at most once a work item outside the pipelined loop
# CHECK-SAME: the Python loop around this load unrolls it
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import zero


@tkc.kernel(warps=4, grid=lambda a, c: (4, 1), persistent=True)
def twice(a: gl(bf16, 1, 1, "M", "K"), c: gl(f32, 1, 1, "M", 64)):
    a_s, x_s = st(bf16, 64, 64), st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
        acc = acc + warpgroup.load(rt(f32, 16, 64), a_s, (0, 0))
    for j in range(2):
        tma.load(x_s, a, (0, 0, tkc.block_idx.x, j))  # <- twice
        acc = acc + warpgroup.load(rt(f32, 16, 64), x_s, (0, 0))
    warpgroup.store(c, acc, (0, 0, tkc.block_idx.x, 0))
