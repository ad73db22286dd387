# A persistent kernel over ragged groups whose row tiles start at a group's first row
# (the MoE counts layout's): tk-grid-ordering sees A's tile follow block_idx.y through
# the slice of its gl (the "auto" order groups rows: grouped(y, ...), not xyz); the
# producer reads the rows from the count gl that tk.ragged_item also reads (it only
# reads it); and the tile leaves in 16-row pieces whose coordinates are computed
# between the stores: tk-pipeline-staging's consumers meet once for all of them (one
# fence and sync, one issue holding every piece's store).
# RUN: tkc %s --kernel pieces | FileCheck %s
import tkc
from tkc import bf16, f32, gl, i32, rt, st, tma, warpgroup
from tkc.ops import load, subtile, where, zero

BM, BN, BK = 128, 64, 64

# Both copies of the pieces' stores (in the next item's loop, and after it): one meeting each.
# CHECK-LABEL: func.func @pieces
# CHECK-SAME: tk.order = "grouped(y, {{[0-9]+}}, l2)"
# CHECK: } {tk.staged = {role = "producer"
# CHECK: "tk.fence_async"
# CHECK-NEXT: "tk.sync"
# CHECK-NOT: "tk.sync"
# CHECK: scf.if
# CHECK-COUNT-8: "tk.tma_store"
# CHECK-NOT: "tk.fence_async"
# CHECK: } {tk.staged = {role = "consumer"
# CHECK: "tk.fence_async"
# CHECK-NEXT: "tk.sync"
# CHECK-NOT: "tk.sync"
# CHECK: scf.if
# CHECK-COUNT-8: "tk.tma_store"
# CHECK-NOT: "tk.fence_async"
# CHECK: } {tk.work_items}
@tkc.kernel(warps=12, persistent=True, order="auto", divisible={"K": BK}, ragged=("count", BM),
            grid=lambda b, c: (tkc.cdiv(c.c, BN), tkc.cdiv(c.r, BM), b.d))
def pieces(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, "E", "N", "K"), count: gl(i32, 1, 1, 1, "E"),
           ends: gl(i32, 1, 1, 1, "E"), c: gl(bf16, 1, 1, "M", "N")):
    bn, bm, e = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    n = load(i32, count, at=(0, 0, 0, e), fill=0) - bm * BM
    row0 = load(i32, ends, at=(0, 0, 0, e), fill=0) - n
    a_s, b_s, out = st(bf16, BM, BK), st(bf16, BN, BK), st(bf16, BM, BN)
    acc = zero(rt(f32, 16, BN))
    for k in tkc.range(a.c // BK, stages=2):
        tma.load(a_s, a.slice("r", row0, BM), (0, 0, 0, k))
        tma.load(b_s, b, (0, e, bn, k))
        warpgroup.mma_ABt(acc, subtile(a_s, 64, BK, (tkc.warpgroupid(), 0)), b_s)
        warpgroup.mma_async_wait(acc)
    warpgroup.store(out, acc.to(bf16), (tkc.warpgroupid(), 0))
    pieces = [(subtile(out, 16, BN, (i, 0)), where(n > 16 * i, row0 // 16 + i, (c.r + 15) // 16))
              for i in range(BM // 16)]
    for piece, row in pieces:
        tma.store(c, piece, (0, 0, row, bn))
