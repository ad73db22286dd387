"""The multi-rank ring kernel, shared by the interpreter tests
(test_peers.py), the one-GPU test (test/gpu/test_peers_one_gpu.py) and the
torchrun script (test/gpu/multi/run_peers.py): imports tkc only, so a GPU
machine without MLIR imports it too."""
from __future__ import annotations

import tkc
from tkc import bf16, gl, i32, pgl, st, tma

T = 64


@tkc.kernel(warps=1, grid=lambda x, flags, y, out: (1,))
def ring(x: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 16), y: gl(bf16, 1, 1, T, T),
         out: gl(bf16, 1, 1, T, T)):
    """Every rank pushes its tile y into row block `rank` of every rank's x,
    then reads its right neighbour's block from its own x into out."""
    me, n = tkc.rank(), tkc.world_size()
    s, t = st(bf16, T, T), st(bf16, T, T)
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, y, (0, 0, 0, 0), bar)
    tkc.wait(bar, 0)
    for p in tkc.range(n):
        tma.store_async(x.peer(p), s, (0, 0, me, 0))
    tma.store_async_wait(writes=True)
    for p in tkc.range(n):
        tkc.signal(flags.peer(p), at=(0, 0, 0, me))
    src = (me + 1) % n
    tkc.wait_signal(flags, at=(0, 0, 0, src), value=1)
    tma.expect(bar, t)
    tma.load_async(t, x, (0, 0, src, 0), bar)
    tkc.wait(bar, 1)
    tma.store_async(out, t, (0, 0, 0, 0))
    tma.store_async_wait()
    tkc.barrier_all(flags, at=(0, 0, 0, 8))
