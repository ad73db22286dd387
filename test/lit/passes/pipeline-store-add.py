# tk-pipeline-staging, accumulating stores: tma.store_add in a pipelined loop
# (the attention backward's dQ) is a tk.pipeline_store {add}; the pass
# double-buffers its tile like any per-iteration store and issues a
# tma_store_add (cp.reduce.async.bulk ... add) where a store would go.
# RUN: tkc %s --emit=tile --kernel accumulate | FileCheck %s
# RUN: tkc %s --emit=ptx --kernel accumulate | FileCheck %s --check-prefix=PTX
# RUN: tkc %s --emit=tile --kernel accumulate_met | FileCheck %s --check-prefix=MET
import tkc
from tkc import f32, gl, rt, st, tma, warpgroup
from tkc.ops import subtile

# Each warp writes its own 16 x 64 box of the tile (warpgroup.store): each
# warp waits for its own old store, fences, and adds its box by TMA, with no
# barrier between the warps (_boxes).
# CHECK-LABEL: func.func @accumulate
# CHECK: "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<f32, 64 : i64, 64 : i64
# CHECK: scf.for
# CHECK:   "tk.tma_load"
# CHECK: scf.for
# CHECK:   "tk.wait"
# CHECK-NOT: "tk.sync"() {id
# CHECK:   "tk.tma_store_wait"() {pending = 1 : i64}
# CHECK-NEXT: "tk.store"
# CHECK:      "tk.fence_async"
# CHECK-NEXT: "tk.sync"() {warps = 1 : i64}
# CHECK:      "tk.subtile"({{.*}}) : (!tk.st<f32, 64 : i64, 64 : i64, "128b">, index, index) -> !tk.st<f32, 16 : i64, 64 : i64, "128b">
# CHECK-NOT: "tk.sync"() {id
# CHECK:   "tk.tma_store_add"({{.*}}!tk.st<f32, 16 : i64, 64 : i64
# CHECK-NOT: "tk.tma_store"(
# CHECK: } {tk.staged = {role = "consumer"
# CHECK-NEXT: "tk.tma_store_wait"() {pending = 0 : i64}
# PTX: cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group


@tkc.kernel(warps=4, grid=lambda x, acc: (1,))
def accumulate(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    """acc += every 64-row tile of x."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2):
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))


# A tile written in two halves is stored by warp 0 after a barrier. Where
# the consumers already meet between the last store's issue and the write
# (the author's tkc.sync, as around the attention backward's dS^T), the wait
# for the slot's old store goes before that barrier and no second one
# follows: one barrier an iteration fewer.
# MET-LABEL: func.func @accumulate_met
# MET: scf.for
# MET: scf.for
# MET:   "tk.wait"
# MET:   "tk.tma_store_wait"() {pending = 1 : i64}
# MET-NEXT: }
# MET-NEXT: "tk.sync"() {id = 1 : i64, warps = 4 : i64}
# MET-NOT: "tk.sync"
# MET:   "tk.store"
# MET:   "tk.store"
# MET:   "tk.fence_async"
# MET-NEXT: "tk.sync"() {id = 1 : i64, warps = 4 : i64}
# MET:   "tk.tma_store_add"({{.*}}!tk.st<f32, 64 : i64, 64 : i64
# MET: } {tk.staged = {role = "consumer"


@tkc.kernel(warps=4, grid=lambda x, acc: (1,))
def accumulate_met(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    """accumulate, the tile written in column halves after a block barrier
    of the author's."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2):
        tma.load(x_s, x, (0, 0, i, 0))
        left = warpgroup.load(rt(f32, 16, 32), subtile(x_s, 64, 32, (0, 0)))
        right = warpgroup.load(rt(f32, 16, 32), subtile(x_s, 64, 32, (0, 1)))
        tkc.sync()
        warpgroup.store(subtile(a_s, 64, 32, (0, 0)), left, (0, 0))
        warpgroup.store(subtile(a_s, 64, 32, (0, 1)), right, (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))
