# st(after_loop=True): a tile used only after the pipelined loop (a finish
# tile, a split-K partial staged for a peer) carries tk.after_ring, which
# tk-pipeline-staging checks (pytest: test_after_loop_tiles_are_checked) and
# counts over the ring: the two 16 KiB tiles lie over its 32 KiB slots, so
# the ring takes 6 stages beside the 16 KiB tile a peer copies into (5 with
# all three bumped). The plan lays them at the ring's start; ptxas assembles.
# RUN: tkc %s --kernel after --emit=tile | FileCheck %s
# RUN: tkc %s --kernel after --emit=ptx -o %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import load, store, zero

# CHECK-LABEL: func.func @after
# CHECK: "tk.alloc"() {stages = 6 : i64} : () -> !tk.st<bf16, 64 : i64, 256 : i64
# CHECK-NEXT: "tk.alloc"() {after_ring} : () -> !tk.st<f32, 64 : i64, 64 : i64
# CHECK-NEXT: "tk.alloc"() {after_ring} : () -> !tk.st<f32, 64 : i64, 64 : i64
# CHECK-NEXT: "tk.alloc"() : () -> !tk.st<f32, 64 : i64, 64 : i64


@tkc.kernel(warps=4, grid=lambda a, o: (2, 1, 1), cluster=(2, 1, 1))
def after(a: gl(bf16, 1, 1, 64, "K"), o: gl(f32, 1, 2, 64, 64)):
    r, w = tkc.cluster_ctarank(), tkc.warpid()
    a_s = st(bf16, 64, 256)
    out, mine = st(f32, 64, 64, after_loop=True), st(f32, 64, 64, after_loop=True)
    theirs = st(f32, 64, 64)                 # a peer's store_cta lands here: never over the ring
    got = tkc.barrier()
    tkc.cluster_sync()
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 256, stages="auto"):
        tma.load(a_s, a, (0, 0, 0, k))
        warpgroup.mma_ABt(acc, a_s, a_s)
        warpgroup.mma_async_wait(acc)
    store(mine, acc, (w, 0))
    tkc.fence_async()
    tkc.sync()
    with tkc.if_(w == 0):
        tma.expect(got, theirs)
        tma.store_cta(theirs, mine, 1 - r, got)
    tkc.wait(got, 0)
    store(out, acc + load(rt(f32, 16, 64), theirs, (w, 0)), (w, 0))
    tma.store(o, out, (0, r, 0, 0))
    tkc.cluster_sync()
