# tk-pipeline-staging, persistent: the finish of work item t runs inside item t+1's
# pipelined loop. Its register part (the bf16 conversions) stays at the item's end;
# the tiles it makes, packed as bf16 pairs, and the coordinates the stores need are
# carried to the next item (iter_args of the work-item loop, with a has_prev flag);
# chunk j (one tma.store) runs in iteration j right after that iteration's wgmma issue.
# Chunks a short loop has no iteration for run after it; the last item's after the
# work-item loop.
# RUN: tkc %s | FileCheck %s
# The carried tiles cross scf as packed i32 pairs, and ptxas keeps every wgmma in flight.
# RUN: tkc %s --emit=ptx -o %t.ptx && ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import subtile, zero

# CHECK-LABEL: func.func @gemm
# CHECK: %[[ITEMS:.*]]:{{[0-9]+}} = scf.for %{{.*}} iter_args({{.*}}, %[[PREV:.*]] = %false) -> ({{.*}}!tk.rt<bf16, 16 : i64, 128 : i64, "row">{{.*}}, i1) {
# CHECK:   scf.for %[[K:.*]] = %[[LB:[^ ]*]] to %{{.*}} step %[[STEP:[^ ]*]] iter_args
# CHECK:     "tk.warpgroup_mma_ab"
# CHECK:     %[[AT0:.*]] = arith.cmpi eq, %[[K]],
# CHECK:     %[[GO0:.*]] = arith.andi %[[PREV]], %[[AT0]]
# CHECK:     scf.if %[[GO0]] {
# CHECK:       "tk.store"
# CHECK:       "tk.fence_async"
# CHECK:       "tk.tma_store"
# CHECK:     %[[AT1:.*]] = arith.cmpi eq, %[[K]],
# CHECK:     scf.if
# CHECK:       "tk.tma_store"
# CHECK:     "tk.warpgroup_mma_wait"({{.*}}) {pending = 1 : i64}
# CHECK:   } {tk.staged = {role = "consumer", stages = {{[0-9]}} : i64}}
# CHECK:   "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# CHECK:   %[[TRIPS:.*]] = arith.ceildivsi
# CHECK:   arith.cmpi sle, %[[TRIPS]], %c0
# CHECK:   scf.if
# CHECK:     "tk.tma_store"
# CHECK:   arith.cmpi sle, %[[TRIPS]], %c1
# CHECK:   scf.if
# CHECK:     "tk.tma_store"
# CHECK:   "tk.copy"({{.*}}) : (!tk.rt<f32, 16 : i64, 128 : i64, "row">) -> !tk.rt<bf16, 16 : i64, 128 : i64, "row">
# CHECK:   "tk.copy"
# CHECK:   scf.yield {{.*}}, %true
# CHECK: } {tk.work_items}
# CHECK: scf.if %[[ITEMS]]#{{[0-9]+}} {
# CHECK:   "tk.tma_store"
# CHECK:   "tk.tma_store"
# CHECK: }
# CHECK: "tk.tma_store_wait"() {pending = 0 : i64}
# PTXAS: 0 bytes spill stores, 0 bytes spill loads
# PTXAS-NOT: C7514


@tkc.kernel(warps=8, grid=lambda a, b, c: (c.c // 256, c.r // 128), persistent=True)
def gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(bf16, 1, 1, "M", "N")):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    a_s, b_s = st(bf16, 128, 64), st(bf16, 64, 256)
    c_s = [st(bf16, 128, 128) for _ in range(2)]
    acc = zero(rt(f32, 16, 256))
    for k in tkc.range(a.c // 64, stages=3):
        tma.load(a_s, a, (0, 0, bm, k))
        tma.load(b_s, b, (0, 0, k, bn))
        warpgroup.mma_AB(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    for j in range(2):
        warpgroup.store(c_s[j], subtile(acc, 16, 128, (0, j)).to(bf16), (wg, 0))
        tma.store(c, c_s[j], (0, 0, bm, bn * 2 + j))
