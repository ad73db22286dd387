# tk-pipeline-staging, accumulating stores: tma.store_add in a pipelined loop
# (the attention backward's dQ) is a tk.pipeline_store {add}; the pass
# double-buffers its tile like any per-iteration store and issues a
# tma_store_add (cp.reduce.async.bulk ... add) where a store would go.
# RUN: tkc %s --emit=tile --kernel accumulate | FileCheck %s
# RUN: tkc %s --emit=ptx --kernel accumulate | FileCheck %s --check-prefix=PTX
# RUN: tkc %s --emit=tile --kernel accumulate_met | FileCheck %s --check-prefix=MET
# RUN: tkc %s --emit=tile --kernel accumulate_one_slot | FileCheck %s --check-prefix=ONE
import tkc
from tkc import f32, gl, rt, st, tma, warpgroup
from tkc.ops import zero

# With store_warp=True the store warp (the producer warpgroup's second warp)
# issues it. The output
# slots are a ring the consumers fill and the store warp drains (the input ring
# mirrored): at the top of iteration it the consumers wait until slot it % 2 is
# empty (parity it / 2 + 1: the first round passes); each consumer warp fences
# its writes and arrives on the full slot (count: the consumer warps) without
# meeting the others; the store warp waits for full slot k % 2 (phase k / 2),
# stores it, waits until the store has read it and arrives on its empty slot
# (count 1).
# CHECK-LABEL: func.func @accumulate
# CHECK: "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<f32, 64 : i64, 64 : i64
# CHECK-NEXT: %[[OUT:.*]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<f32, 64 : i64, 64 : i64
# CHECK: "tk.init_barrier"(%{{[0-9]+}}) {count = 4 : i64}
# CHECK-NEXT: %[[FULL:.*]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# CHECK-NEXT: "tk.init_barrier"(%[[FULL]]) {count = 4 : i64}
# CHECK-NEXT: %[[EMPTY:.*]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# CHECK-NEXT: "tk.init_barrier"(%[[EMPTY]]) {count = 1 : i64}
# CHECK: scf.for
# CHECK:   "tk.tma_load"
# CHECK: } {tk.staged = {role = "producer"
# CHECK: %[[W5:.*]] = arith.cmpi eq, %{{.*}}, %c5
# CHECK: scf.if %[[W5]] {
# CHECK:   scf.for %{{.*}} iter_args(%[[K:[a-z0-9_]+]] =
# CHECK:     %[[S:.*]] = arith.remui %[[K]], %c2
# CHECK:     %[[PH:.*]] = arith.divui %[[K]], %c2
# CHECK:     %[[F:.*]] = "tk.stage"(%[[FULL]], %[[S]])
# CHECK:     "tk.wait"(%[[F]], %[[PH]])
# CHECK:     %[[SLOT:.*]] = "tk.stage"(%[[OUT]], %[[S]])
# CHECK:     "tk.tma_store_add"(%arg1, %[[SLOT]],
# CHECK:     "tk.tma_store_wait"() {pending = 0 : i64}
# CHECK:     %[[E:.*]] = "tk.stage"(%[[EMPTY]], %[[S]])
# CHECK:     "tk.arrive"(%[[E]])
# CHECK:   } {tk.staged = {role = "stores"
# CHECK: } else {
# CHECK: scf.for %{{.*}} iter_args(%[[IT:[a-z0-9_]+]] =
# CHECK:   %[[CS:.*]] = arith.remui %[[IT]], %c2
# CHECK:   %[[CPH:.*]] = arith.divui %[[IT]], %c2
# CHECK:   %[[CE:.*]] = "tk.stage"(%[[EMPTY]], %[[CS]])
# CHECK:   %[[NEXT:.*]] = arith.addi %[[CPH]], %c1
# CHECK:   "tk.wait"(%[[CE]], %[[NEXT]])
# CHECK:   "tk.store"
# CHECK:   "tk.fence_async"
# CHECK-NEXT: "tk.sync"() {warps = 1 : i64}
# CHECK-NEXT: %[[CF:.*]] = "tk.stage"(%[[FULL]], %[[CS]])
# CHECK-NEXT: "tk.arrive"(%[[CF]])
# CHECK-NOT: "tk.tma_store
# CHECK: } {tk.staged = {role = "consumer"
# CHECK-NOT: "tk.tma_store
# PTX: cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group


@tkc.kernel(warps=4, grid=lambda x, acc: (1,))
def accumulate(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    """acc += every 64-row tile of x."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True):
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))


# Without the store warp (the default): consumer warp 0 issues the store after
# the consumers meet. Where they already meet between the last store's
# issue and the write (the author's tkc.sync), the wait for the slot's old
# store goes before that barrier and no second one follows: one barrier an
# iteration fewer.
# MET-LABEL: func.func @accumulate_met
# MET: scf.for
# MET: scf.for
# MET:   "tk.wait"
# MET:   "tk.tma_store_wait"() {pending = 1 : i64}
# MET-NEXT: }
# MET-NEXT: "tk.sync"() {id = 1 : i64, warps = 4 : i64}
# MET-NOT: "tk.sync"
# MET:   "tk.store"
# MET:   "tk.fence_async"
# MET-NEXT: "tk.sync"() {id = 1 : i64, warps = 4 : i64}
# MET:   "tk.tma_store_add"
# MET: } {tk.staged = {role = "consumer"


@tkc.kernel(warps=4, grid=lambda x, acc: (1,))
def accumulate_met(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    """accumulate, with a block barrier of the author's before the write."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2):
        tma.load(x_s, x, (0, 0, i, 0))
        t = warpgroup.load(rt(f32, 16, 64), x_s)
        tkc.sync()
        warpgroup.store(a_s, t, (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))


# store_slots=1 (with the store warp): one output slot; the consumers wait
# for the last iteration's store to have read it right before writing it (not
# at the iteration's top), parity it + 1 (the first round passes).
# ONE-LABEL: func.func @accumulate_one_slot
# ONE: "tk.alloc"() {stages = 1 : i64} : () -> !tk.st<f32, 64 : i64, 64 : i64
# ONE: } else {
# ONE: scf.for %{{.*}} iter_args(%[[IT:[a-z0-9_]+]] =
# ONE:   "tk.wait"
# ONE:   "tk.load"
# ONE:   %[[S:.*]] = arith.remui %[[IT]], %c1
# ONE:   %[[PH:.*]] = arith.divui %[[IT]], %c1
# ONE:   %[[E:.*]] = "tk.stage"(%{{.*}}, %[[S]])
# ONE:   %[[NEXT:.*]] = arith.addi %[[PH]], %c1
# ONE-NEXT: "tk.wait"(%[[E]], %[[NEXT]])
# ONE-NEXT: "tk.store"
# ONE: } {tk.staged = {role = "consumer"


@tkc.kernel(warps=4, grid=lambda x, acc: (1,))
def accumulate_one_slot(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    """accumulate with one output slot."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True, store_slots=1):
        tma.load(x_s, x, (0, 0, i, 0))
        t = warpgroup.load(rt(f32, 16, 64), x_s)
        warpgroup.store(a_s, t, (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))
