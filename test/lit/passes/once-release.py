# tk-pipeline-staging, persistent: a tile loaded once per work item has two slots, and
# is handed back to the producer right after its last reader (not at the item's end):
# the next item's load runs under this item's last stages and its finish. After a loop
# that keeps its wgmma in flight, that is after the wait that retires them.
# RUN: tkc %s --kernel in_loop | FileCheck %s --check-prefix=LOOP
# RUN: tkc %s --kernel in_finish | FileCheck %s --check-prefix=FINISH
# RUN: tkc %s --kernel wide_q | FileCheck %s --check-prefix=WIDE
# RUN: tkc %s --kernel in_pending | FileCheck %s --check-prefix=PENDING
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import store, subtile, zero

# LOOP-LABEL: func.func @in_loop
# Q has two slots, and so have its full / empty barriers (after the K ring's pair):
# item j's are slot j % 2, at phase j / 2 % 2, in the producer and the consumers alike.
# LOOP:   %[[Q:[0-9]+]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<bf16, 128 : i64, 64 : i64, "128b">
# LOOP:   "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# LOOP-NEXT: "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# LOOP:   %[[FULL:[0-9]+]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# LOOP-NEXT: %[[EMPTY:[0-9]+]] = "tk.alloc"() {stages = 2 : i64} : () -> !tk.barrier
# LOOP:   %[[J4:[0-9]+]] = arith.remui %{{[0-9]+}}, %c4 : index
# LOOP:   %[[SLOT:[0-9]+]] = arith.remui %[[J4]], %c2 : index
# LOOP:   %[[PHASE:[0-9]+]] = arith.divui %[[J4]], %c2{{.*}} : index
# LOOP-NEXT: %[[QS:[0-9]+]] = "tk.stage"(%[[Q]], %[[SLOT]])
# LOOP-NEXT: %[[F:[0-9]+]] = "tk.stage"(%[[FULL]], %[[SLOT]])
# LOOP-NEXT: %[[E:[0-9]+]] = "tk.stage"(%[[EMPTY]], %[[SLOT]])
# LOOP:   "tk.wait"(%[[E]], {{.*}})
# LOOP:   "tk.tma_load"(%[[QS]], {{.*}}, %[[F]])
# LOOP:   } {tk.staged = {role = "producer", stages = 2 : i64}}
# LOOP:   scf.for {{.*}} -> (index, index, {{.*}}, i1) {
# LOOP:     %[[CJ4:[0-9]+]] = arith.remui %{{[0-9]+}}, %c4 : index
# LOOP:     %[[CSLOT:[0-9]+]] = arith.remui %[[CJ4]], %c2 : index
# LOOP:     %[[CPHASE:[0-9]+]] = arith.divui %[[CJ4]], %c2{{.*}} : index
# LOOP-NEXT: %[[CQ:[0-9]+]] = "tk.stage"(%[[Q]], %[[CSLOT]])
# LOOP-NEXT: %[[CF:[0-9]+]] = "tk.stage"(%[[FULL]], %[[CSLOT]])
# LOOP-NEXT: %[[CE:[0-9]+]] = "tk.stage"(%[[EMPTY]], %[[CSLOT]])
# LOOP-NEXT: "tk.wait"(%[[CF]], %[[CPHASE]])
# LOOP:     "tk.warpgroup_mma_abt"
# LOOP:     "tk.warpgroup_mma_wait"({{.*}}) {pending = 1 : i64}
# LOOP:   } {tk.staged = {role = "consumer", stages = 2 : i64}}
# LOOP-NEXT: "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# LOOP-NEXT: "tk.arrive"(%[[CE]]) {count = 1 : i64}
# The finish's stores still move into the next item's loop (overlap.py); the release stays.
# LOOP-NOT: "tk.arrive"(%[[CE]])
# LOOP:   scf.yield {{.*}}, %true
# LOOP-NOT: "tk.arrive"(%[[CE]])

# A tile the finish reads too is released after that read, and the finish stays in its item.
# FINISH-LABEL: func.func @in_finish
# FINISH:   } {tk.staged = {role = "consumer", stages = 2 : i64}}
# FINISH:   "tk.load"(%{{.*}}) : (!tk.st<bf16, 128 : i64, 64 : i64, "128b">
# FINISH-NEXT: "tk.arrive"(%{{[0-9a-z_]+}}) {count = 1 : i64}
# FINISH:   "tk.tma_store"
# FINISH:   scf.yield

# Where two Q slots would leave no room for the ring's two stages (Q and the output
# 64 KB each, the ring 2 x 32 KB: 256 KB with a second Q slot), Q keeps one slot.
# WIDE-LABEL: func.func @wide_q
# WIDE:   "tk.alloc"() : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b">
# WIDE-NEXT: "tk.alloc"() {stages = 2 : i64} : () -> !tk.st<bf16, 64 : i64, 256 : i64, "128b">
# WIDE:   "tk.alloc"() : () -> !tk.barrier
# WIDE-NEXT: "tk.alloc"() : () -> !tk.barrier

# The finish's wgmma reading Q is retired by a pending = 1 wait (groups complete in
# order; W's wgmma issued after it stays in flight): Q goes back there, W after the
# pending = 0 wait that follows.
# PENDING-LABEL: func.func @in_pending
# PENDING:   } {tk.staged = {role = "consumer", stages = 2 : i64}}
# PENDING:   "tk.warpgroup_mma_abt"(%{{[0-9]+}}, %[[W:[0-9]+]], %{{[0-9]+}})
# PENDING:   "tk.warpgroup_mma_abt"(%[[W]], %[[W]], %{{[0-9]+}})
# PENDING-NEXT: "tk.warpgroup_mma_wait"({{.*}}) {pending = 1 : i64}
# PENDING-NEXT: "tk.arrive"(%[[QE:[0-9]+]]) {count = 1 : i64}
# PENDING-NEXT: "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# PENDING-NEXT: "tk.arrive"
# PENDING-NOT: "tk.arrive"(%[[QE]])


def once_q(name: str, finish_reads_q: bool, D: int = 64):
    """Q loaded once per item, K streamed: o = (sum over K tiles of Q K^T)
    (+ Q when the finish reads Q too)."""
    @tkc.kernel(name=name, warps=8, grid=lambda q, k, o: (q.r // 128, 1, 1), persistent=True)
    def kernel(q: gl(bf16, 1, 1, "M", D), k: gl(bf16, 1, 1, "N", D), o: gl(bf16, 1, 1, "M", 64)):
        wg = tkc.warpgroupid()
        q_s, k_s, o_s = st(bf16, 128, D), st(bf16, 64, D), st(bf16, 128, 64 if D == 64 else 256)
        tma.load(q_s, q, (0, 0, tkc.block_idx.x, 0))
        acc = zero(rt(f32, 16, 64))
        for j in tkc.range(k.r // 64, stages=2):
            tma.load(k_s, k, (0, 0, j, 0))
            warpgroup.mma_ABt(acc, subtile(q_s, 64, D, (wg, 0)), k_s)
            warpgroup.mma_async_wait(acc)
        out = acc.to(bf16)
        if finish_reads_q:
            out = out + warpgroup.load(rt(bf16, 16, 64), q_s, (wg, 0))
        warpgroup.store(subtile(o_s, 128, 64, (0, 0)), out, (wg, 0))
        tma.store(o, subtile(o_s, 128, 64, (0, 0)), (0, 0, tkc.block_idx.x, 0))
    return kernel


in_loop = once_q("in_loop", False)
in_finish = once_q("in_finish", True)
wide_q = once_q("wide_q", False, D=256)


def pending_finish(name: str, D: int = 64):
    """o = sum over K tiles of Q K^T + Q W^T + W W^T (a warpgroup's 64 rows)."""
    @tkc.kernel(name=name, warps=8, grid=lambda q, w, k, o: (q.r // 128, 1, 1), persistent=True)
    def kernel(q: gl(bf16, 1, 1, "M", D), w: gl(bf16, 1, 1, 64, D), k: gl(bf16, 1, 1, "N", D),
               o: gl(f32, 1, 1, "M", 64)):
        wg = tkc.warpgroupid()
        q_s, w_s, k_s = st(bf16, 128, D), st(bf16, 64, D), st(bf16, 64, D)
        tma.load(q_s, q, (0, 0, tkc.block_idx.x, 0))
        tma.load(w_s, w, (0, 0, 0, 0))
        acc = zero(rt(f32, 16, 64))
        for j in tkc.range(k.r // 64, stages=2):
            tma.load(k_s, k, (0, 0, j, 0))
            warpgroup.mma_ABt(acc, subtile(q_s, 64, D, (wg, 0)), k_s)
            warpgroup.mma_async_wait(acc)
        qw = warpgroup.mma_ABt(subtile(q_s, 64, D, (wg, 0)), w_s, zero(rt(f32, 16, 64)))
        ww = warpgroup.mma_ABt(w_s, w_s, zero(rt(f32, 16, 64)))
        qw = warpgroup.mma_async_wait(qw, pending=1)
        ww = warpgroup.mma_async_wait(ww)
        store(o, acc + qw + ww, (0, 0, tkc.block_idx.x * 8 + tkc.warpid(), 0))
    return kernel


in_pending = pending_finish("in_pending")
wide_pending = pending_finish("wide_pending", D=256)   # Q in one slot: the next load follows the release
