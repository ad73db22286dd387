# tk-pipeline-staging: an iteration that ends with a wgmma in flight holds its slot into
# the next iteration, which releases it after its first wait that retires that wgmma:
# a pending = 0 wait, or (groups complete in order) a pending = n wait after n wgmmas of
# the body. Here the body's first wait is pending = 1 after two wgmmas.
# RUN: tkc %s --kernel held | FileCheck %s
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import store, zero

# CHECK-LABEL: func.func @held
# CHECK:   } {tk.staged = {role = "producer", stages = 2 : i64}}
# CHECK:   scf.for
# CHECK-NOT: "tk.arrive"
# CHECK:     "tk.warpgroup_mma_ab"
# CHECK-NEXT: "tk.zero"
# CHECK-NEXT: "tk.warpgroup_mma_abt"
# CHECK-NOT: "tk.arrive"
# CHECK:     "tk.warpgroup_mma_wait"({{.*}}) {pending = 1 : i64}
# The previous iteration's slot, once this is not the first:
# CHECK-NEXT: %[[LATER:[0-9]+]] = arith.cmpi ne
# CHECK-NEXT: scf.if %[[LATER]] {
# CHECK:       "tk.arrive"
# CHECK:     "tk.warpgroup_mma_ab"
# CHECK:     "tk.warpgroup_mma_wait"({{.*}}) {pending = 1 : i64}
# CHECK-NOT: "tk.arrive"
# CHECK:   } {tk.staged = {role = "consumer", stages = 2 : i64}}
# After the loop: wait for the wgmma left in flight, then release the last slot.
# CHECK-NEXT: "tk.warpgroup_mma_wait"({{.*}}) {pending = 0 : i64}
# CHECK:     "tk.arrive"


@tkc.kernel(warps=4, grid=lambda a, c: (1, 1, 1))
def held(a: gl(bf16, 1, 1, 64, "K"), c: gl(f32, 1, 3, 64, 64)):
    a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
    x, y, acc = zero(rt(f32, 16, 64)), zero(rt(f32, 16, 64)), zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, a, (0, 0, 0, k))
        p = warpgroup.mma_AB(a_s, b_s, zero(rt(f32, 16, 64)))
        q = warpgroup.mma_ABt(a_s, b_s, zero(rt(f32, 16, 64)))
        x = x + warpgroup.mma_async_wait(p, pending=1)
        warpgroup.mma_AB(acc, a_s, b_s)
        y = y + warpgroup.mma_async_wait(q, pending=1)
    acc = warpgroup.mma_async_wait(acc)
    store(c, x, (0, 0, tkc.warpid(), 0))
    store(c, y, (0, 1, tkc.warpid(), 0))
    store(c, acc, (0, 2, tkc.warpid(), 0))
