# i32 register tiles lower to i32 arithmetic on the fragment values (wrapping
# add/mul, signed max/min, abs.s32), conversions by cvt.rzi.s32.f32 (toward
# zero, saturating) and cvt.rn.f32.s32, comparisons by setp.*.s32, row sums
# by add.s32 across shuffles; a ragged i32 load presets its registers with
# the fill's bits; a one-element store of an index value is one st.global.b32
# by lane 0, an int64 element one ld/st.global.b64; carried i32 vectors stay
# i32 words (not packed as 16-bit pairs). A negation reaches ptxas as not + 1,
# never neg.s32 (ptxas 12.9 / 13.0 dropped a neg.s32 feeding the three-input
# max it fuses: compiler.py's avoid_ptxas_bugs).
# RUN: tkc %s --kernel arith --emit=tile | FileCheck %s --check-prefix=TILE
# RUN: tkc %s --kernel arith --emit=ptx -o %t.arith.ptx && FileCheck %s --check-prefix=ARITH < %t.arith.ptx
# RUN: tkc %s --kernel convert --emit=ptx -o %t.convert.ptx && FileCheck %s --check-prefix=CONVERT < %t.convert.ptx
# RUN: tkc %s --kernel reduce --emit=ptx -o %t.reduce.ptx && FileCheck %s --check-prefix=REDUCE < %t.reduce.ptx
# RUN: tkc %s --kernel row_min --emit=ptx | FileCheck %s --check-prefix=ROWMIN
# RUN: tkc %s --kernel ragged --emit=nvvm | FileCheck %s --check-prefix=RAGGED
# RUN: tkc %s --kernel elements64 --emit=ptx -o %t.e64.ptx && FileCheck %s --check-prefix=E64 < %t.e64.ptx
# RUN: tkc %s --kernel carried --emit=nvvm | FileCheck %s --check-prefix=CARRIED
# RUN: ptxas -arch=sm_90a %t.arith.ptx -o %t.cubin
import tkc
from tkc import f32, gl, i32, i64, rt, rv
from tkc.ops import abs, iota, load, max, min, row_max, row_sum, store, sum, where, zero

# TILE-LABEL: func.func @arith
# TILE: %[[K:.*]] = arith.index_cast %{{.*}} : index to i32
# TILE: "tk.add"(%{{.*}}, %[[K]]) : (!tk.rt<i32, 16 : i64, 16 : i64, "wide">, i32)
# TILE: "tk.iota"(%{{.*}}) {axis = 1 : i64} : (i32) -> !tk.rt<i32
# TILE: "tk.where"({{.*}}) {cmp = "lt"} : (!tk.rt<i32, {{.*}}>, !tk.rt<i32, {{.*}}>, !tk.rt<i32, {{.*}}>, i32)
# ARITH-LABEL: .entry arith(
# ARITH-DAG: add.s32
# ARITH-DAG: mul.lo.s32
# ARITH-DAG: max.s32
# ARITH-DAG: min.s32
# ARITH-DAG: abs.s32
# ARITH-DAG: setp.lt.s32
# ARITH-DAG: selp.b32
# ARITH-NOT: cvt.{{.*}}f32


@tkc.kernel(warps=1)
def arith(a: gl(i32, 1, 1, 16, 16), b: gl(i32, 1, 1, 16, 16), o: gl(i32, 1, 1, 16, 16)):
    x, y = load(rt(i32, 16, 16), a, (0, 0, 0, 0)), load(rt(i32, 16, 16), b, (0, 0, 0, 0))
    k = tkc.block_idx.x
    z = max(x + k, y) * min(y, 3) - abs(x)
    store(o, where(x < y, iota(rt(i32, 16, 16), 1, start=k), -1) + z, (0, 0, 0, 0))


# CONVERT-LABEL: .entry convert(
# CONVERT: cvt.rzi.s32.f32
# CONVERT: cvt.rn.f32.s32


@tkc.kernel(warps=1)
def convert(a: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
    store(o, load(rt(f32, 16, 16), a, (0, 0, 0, 0)).to(i32).to(f32), (0, 0, 0, 0))


# REDUCE-LABEL: .entry reduce(
# REDUCE: shfl.sync.bfly.b32
# REDUCE: add.s32
# REDUCE: max.s32
# REDUCE-NOT: cvt
# REDUCE: setp.ne.b32 {{.*}}, 0;
# REDUCE: st.global.b32


@tkc.kernel(warps=1)
def reduce(a: gl(i32, 1, 1, 16, 64), n: gl(i32, 1, 1, 1, 16)):
    x = load(rt(i32, 16, 64), a, (0, 0, 0, 0))
    store(n, sum(row_sum(x)) + max(row_max(x)), at=(0, 0, 0, 0), clip=True)


# ROWMIN-LABEL: .entry row_min(
# ROWMIN-NOT: neg.s32
# ROWMIN: not.b32 [[N:%r[0-9]+]], %r{{[0-9]+}};
# ROWMIN-NEXT: add.s32 [[N]], [[N]], 1;
# ROWMIN: max.s32
# ROWMIN-NOT: neg.s32


@tkc.kernel(warps=1)
def row_min(a: gl(i32, 1, 1, 16, 64), n: gl(i32, 1, 1, 1, 16)):
    store(n, -row_max(-load(rt(i32, 16, 64), a, (0, 0, 0, 0))), (0, 0, 0, 0))


# RAGGED-LABEL: llvm.func @ragged
# RAGGED: llvm.inline_asm has_side_effects "{ mov.b32 $0, 0xfffffffb; mov.b32 $1, 0xfffffffb; @$3 ld.global.v2.b32 {$0, $1}, [$2]; }", "=r,=r,l,b"


@tkc.kernel(warps=1)
def ragged(a: gl(i32, 1, 1, None, None), o: gl(i32, 1, 1, None, None)):
    store(o, load(rt(i32, 16, 32), a, (0, 0, 0, 0), fill=-5), (0, 0, 0, 0), clip=True)


# E64-LABEL: .entry elements64(
# E64: ld.global.b64
# E64: st.global.b64


@tkc.kernel(warps=1)
def elements64(a: gl(i64, 1, 1, 1, None), o: gl(i64, 1, 1, 1, None)):
    v = load(i64, a, at=(0, 0, 0, tkc.block_idx.x), fill=-1)
    store(o, v * 3, at=(0, 0, 0, tkc.block_idx.x), clip=True)


# CARRIED-LABEL: llvm.func @carried
# CARRIED: scf.for {{.*}} iter_args({{.*}}) -> (i32, i32)


@tkc.kernel(warps=1)
def carried(a: gl(i32, 1, 1, None, 32), o: gl(i32, 1, 1, 1, 16)):
    acc = zero(rv(i32, 16))
    for j in tkc.range(a.r // 16):
        acc = acc + row_sum(load(rt(i32, 16, 32), a, (0, 0, j, 0)))
    store(o, acc, (0, 0, 0, 0))
