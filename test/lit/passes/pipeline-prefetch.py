# tk-pipeline-staging: a tma.prefetch at the kernel's top level (an L2 hint, here for
# the next block's Q tile) is issued by the producer warp, after the once-loads before
# it and before the ring, and leaves the consumers' code: nothing waits for it.
# RUN: tkc %s --kernel prefetch_next | FileCheck %s
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import store, subtile, zero

# CHECK-LABEL: func.func @prefetch_next
# CHECK: "tk.tma_load"(%{{[0-9]+}}, %arg0, {{.*}}) : (!tk.st<bf16, 128 : i64, 64 : i64, "128b">
# CHECK: %[[NEXT:[0-9]+]] = arith.addi %{{[0-9]+}}, %c1{{.*}} : index
# CHECK: "tk.tma_prefetch"(%{{[0-9]+}}, %arg0, %c0{{.*}}, %c0{{.*}}, %[[NEXT]], %c0{{.*}}) : (!tk.st<bf16, 128 : i64, 64 : i64, "128b">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, 64 : i64>, index, index, index, index) -> ()
# CHECK: scf.for
# CHECK: "tk.tma_load"
# CHECK: } {tk.staged = {role = "producer", stages = 2 : i64}}
# CHECK-NOT: "tk.tma_prefetch"
# CHECK: } {tk.staged = {role = "consumer", stages = 2 : i64}}
# CHECK-NOT: "tk.tma_prefetch"
# CHECK: return


@tkc.kernel(warps=8, grid=lambda q, k, o: (q.r // 128, 1, 1))
def prefetch_next(q: gl(bf16, 1, 1, "M", 64), k: gl(bf16, 1, 1, "N", 64), o: gl(f32, 1, 1, "M", 64)):
    """o = sum over K tiles of Q K^T, a block a 128-row Q tile."""
    wg = tkc.warpgroupid()
    q_s, k_s = st(bf16, 128, 64), st(bf16, 64, 64)
    tma.load(q_s, q, (0, 0, tkc.block_idx.x, 0))
    tma.prefetch(q_s, q, (0, 0, tkc.block_idx.x + 1, 0))
    acc = zero(rt(f32, 16, 64))
    for j in tkc.range(k.r // 64, stages=2):
        tma.load(k_s, k, (0, 0, j, 0))
        warpgroup.mma_ABt(acc, subtile(q_s, 64, 64, (wg, 0)), k_s)
        warpgroup.mma_async_wait(acc)
    store(o, acc, (0, 0, tkc.block_idx.x * 8 + tkc.warpid(), 0))
