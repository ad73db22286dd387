# load of an 8-bit row-layout rt from an st (what a TMA put there): after the
# TMA's barrier, a lane's byte pairs (columns 2t, 2t+1 and 2t+8, 2t+9 of each
# 16, rows g and g+8) as ld.shared.b16 at their swizzled addresses, 4 a base
# tile, each pair widened by one cvt. tkc.fp8_v_layout's kernel reads V so.
# RUN: tkc %s --emit=ptx -o %t.ptx && FileCheck %s < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f8e4m3, f32, gl, rt, st, tma
from tkc.ops import load, store

# CHECK-LABEL: .entry shared8(
# CHECK: mbarrier.try_wait.parity.shared::cta.b64
# CHECK: ld.shared.b16 %rs[[P:[0-9]+]], [%rd[[A:[0-9]+]]];
# CHECK-NEXT: ld.shared.b16 %rs{{[0-9]+}}, [%rd[[A]]+256];
# CHECK-NEXT: ld.shared.b16 %rs{{[0-9]+}}, [%rd[[A]]+8];
# CHECK-NEXT: ld.shared.b16 %rs{{[0-9]+}}, [%rd[[A]]+264];
# CHECK-COUNT-4: ld.shared.b16
# CHECK-NOT: ld.shared
# CHECK: cvt.rn.f16x2.e4m3x2 tkh, %rs[[P]];
# CHECK: cp.async.bulk.tensor.4d.shared{{.*}}mbarrier::complete_tx


@tkc.kernel(warps=1, grid=lambda a, o: (1,))
def shared8(a: gl(f8e4m3, 1, 1, 16, 32), o: gl(f32, 1, 1, 16, 32)):
    s = st(f8e4m3, 16, 32)
    tma.load(s, a, (0, 0, 0, 0))
    store(o, load(rt(f8e4m3, 16, 32), s, (0, 0)).to(f32), (0, 0, 0, 0))
