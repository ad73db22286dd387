# tk-pipeline-staging and tkc.atomic_add: a block counts itself done once the
# writes of the TMA stores it names (after=) have completed.
# RUN: tkc %s --emit=tile --kernel last_warp | FileCheck %s
# RUN: tkc %s --emit=ptx --kernel last_warp | FileCheck %s --check-prefix=PTX
# RUN: tkc %s --emit=tile --kernel last_issuer | FileCheck %s --check-prefix=ISSUER
import tkc
from tkc import f32, gl, i32, rt, st, tma, warpgroup
from tkc.ops import atomic_add, load, store

# With the store warp, the store warp waits for its stores' writes (not only
# their reads: {writes}), adds (a one-warp group) leaving the old value in the
# scratch, and arrives on a barrier of its own; the consumers wait on that
# barrier and read the old value (delegated): they never wait for a write
# themselves, and meet for nothing.
# CHECK-LABEL: func.func @last_warp
# CHECK: %[[SCRATCH:.*]] = "tk.alloc"() : () -> !tk.sv<f32, 16 : i64>
# CHECK: %[[DRAINED:.*]] = "tk.alloc"() : () -> !tk.barrier
# CHECK-NEXT: "tk.init_barrier"(%[[DRAINED]]) {count = 1 : i64}
# CHECK: scf.for
# CHECK:   "tk.tma_store_add"
# CHECK:   "tk.tma_store_wait"() {pending = 0 : i64}
# CHECK: } {tk.staged = {role = "stores"
# CHECK-NEXT: "tk.tma_store_wait"() {pending = 0 : i64, writes}
# CHECK: "tk.atomic_add"(%arg2, %[[SCRATCH]], {{.*}}) {after = array<i64: 1>, value = 1 : i64, warps = 1 : i64}
# CHECK-NEXT: "tk.arrive"(%[[DRAINED]])
# CHECK: } else {
# CHECK: } {tk.staged = {role = "consumer"
# CHECK: "tk.wait"(%[[DRAINED]], %{{.*}})
# CHECK-NEXT: "tk.atomic_add"(%arg2, %[[SCRATCH]], {{.*}}) {after = array<i64: 1>, delegated, id = 1 : i64, value = 1 : i64, warps = 4 : i64}
# PTX: cp.async.bulk.wait_group 0;
# PTX: atom.acq_rel.gpu.global.add.u32
# PTX-NEXT: // end inline asm
# PTX-NEXT: st.shared.b32 [__tkc_shared+{{[0-9]+}}]


@tkc.kernel(warps=4, grid=lambda x, acc, count, out: (2,))
def last_warp(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64), count: gl(i32, 1, 1, 1, 16),
              out: gl(f32, 1, 1, 64, 64)):
    """acc += x's tiles, by two blocks; the last one copies acc to out."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True):
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))
    with tkc.if_(atomic_add(count, 1, at=(0, 0, 0, 0), after=acc) == 1):
        store(out, load(rt(f32, 16, 64), acc, (0, 0, tkc.warpid(), 0)), (0, 0, tkc.warpid(), 0))


# Without it, consumer warp 0 issued the stores: it waits for their writes
# before the atomic's meeting, after which its thread 0 adds.
# ISSUER-LABEL: func.func @last_issuer
# ISSUER: } {tk.staged = {role = "consumer"
# ISSUER: scf.if
# ISSUER-NEXT: "tk.tma_store_wait"() {pending = 0 : i64, writes}
# ISSUER: "tk.atomic_add"({{.*}}) {after = array<i64: 1>, id = 1 : i64, value = 1 : i64, warps = 4 : i64}


@tkc.kernel(warps=4, grid=lambda x, acc, count, out: (2,))
def last_issuer(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64), count: gl(i32, 1, 1, 1, 16),
                out: gl(f32, 1, 1, 64, 64)):
    """last_warp without the store warp."""
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2):
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))
    with tkc.if_(atomic_add(count, 1, at=(0, 0, 0, 0), after=acc) == 1):
        store(out, load(rt(f32, 16, 64), acc, (0, 0, tkc.warpid(), 0)), (0, 0, tkc.warpid(), 0))
