# Scalars carried by loops and ifs are scf iter_args and results: an f32
# running max (maxnumf: PTX max.f32), an index count through an scf.if (LLVM
# makes it a select), a scalar compare per predicate kind (setp on f32 and
# on the integers); the lowering passes them through as registers.
# RUN: tkc %s --emit=tile | FileCheck %s
# RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
import math

import tkc
from tkc import f32, gl, i32
from tkc.ops import load, max, store

# CHECK-LABEL: func.func @running
# CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
# CHECK: %[[ZERO:.*]] = arith.constant 0 : index
# CHECK: %[[R:.*]]:2 = scf.for %[[I:.*]] = {{.*}} iter_args(%[[M:.*]] = %[[NEG]], %[[C:.*]] = %[[ZERO]]) -> (f32, index) {
# CHECK:   %[[V:.*]] = "tk.load"
# CHECK:   %[[M2:.*]] = arith.maxnumf %[[M]], %[[V]] : f32
# CHECK:   %[[GT:.*]] = arith.cmpf ogt, %[[V]], %{{.*}} : f32
# CHECK:   %[[C2:.*]] = scf.if %[[GT]] -> (index) {
# CHECK:     %[[INC:.*]] = arith.addi %[[C]], %{{.*}} : index
# CHECK:     scf.yield %[[INC]] : index
# CHECK:   } else {
# CHECK:     scf.yield %[[C]] : index
# CHECK:   }
# CHECK:   scf.yield %[[M2]], %[[C2]] : f32, index
# CHECK: }
# CHECK: arith.cmpi slt, %[[R]]#1, %{{.*}} : index
# PTX-LABEL: .entry running(
# PTX: max.f32
# PTX: setp.gt.f32
# PTX: setp.{{[a-z]+}}.s{{32|64}}


@tkc.kernel(warps=1, grid=lambda x, y, n: (1, 1))
def running(x: gl(f32, 1, 1, 1, None), y: gl(f32, 1, 1, 1, 16), n: i32):
    m, c = tkc.f32(-math.inf), tkc.i32(0)
    for i in tkc.range(x.c):
        v = load(f32, x, at=(0, 0, 0, i), fill=0.0)
        m = max(m, v)
        with tkc.if_(v > 0.5):
            c = c + 1
    with tkc.if_(c < n):
        store(y, m, at=(0, 0, 0, 0), clip=True)
