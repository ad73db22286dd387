# tma.store_cta (distributed shared memory): CTA r copies its f32 tile into
# the same tile of CTA 1 - r: lane 0 maps the destination and the barrier
# into the peer's window of the cluster's shared space (mapa) and issues one
# bulk copy of the tile's 16384 bytes that completes on the peer's barrier;
# the receiver expects them (mbarrier.arrive.expect_tx) and waits. ptxas
# assembles the result.
# RUN: tkc %s --emit=tile | FileCheck %s --check-prefix=TILE
# RUN: tkc %s --emit=ptx -o %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin
import tkc
from tkc import f32, gl, rt, st, tma
from tkc.ops import load, store

# TILE: %[[MINE:.*]] = "tk.alloc"() : () -> !tk.st<f32, 64 : i64, 64 : i64
# TILE: %[[THEIRS:.*]] = "tk.alloc"() : () -> !tk.st<f32, 64 : i64, 64 : i64
# TILE: "tk.tma_store_cta"(%[[THEIRS]], %[[MINE]], %{{.*}}, %{{.*}})

# PTX-LABEL: .entry exchange(
# PTX: fence.proxy.async.shared::cta;
# PTX: mov.b32 [[N:%r[0-9]+]], 16384;
# PTX-NEXT: mbarrier.arrive.expect_tx.shared.b64 {{%rd[0-9]+}}, [__tkc_shared+{{[0-9]+}}], [[N]];
# PTX: mapa.shared::cluster.u32 dst, {{%r[0-9]+}}, [[CTA:%r[0-9]+]];
# PTX-NEXT: mapa.shared::cluster.u32 bar, {{%r[0-9]+}}, [[CTA]];
# PTX-NEXT: cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [dst], [{{%r[0-9]+}}], [[N]], [bar];
# PTX: mbarrier.try_wait.parity.shared::cta.b64


@tkc.kernel(warps=4, grid=lambda a, o: (2, 1, 1), cluster=(2, 1, 1))
def exchange(a: gl(f32, 1, 2, 64, 64), o: gl(f32, 1, 2, 64, 64)):
    r, w = tkc.cluster_ctarank(), tkc.warpid()
    mine, theirs = st(f32, 64, 64), st(f32, 64, 64)
    got = tkc.barrier()
    tkc.cluster_sync()
    x = load(rt(f32, 16, 64), a, (0, r, w, 0))
    store(mine, x, (w, 0))
    tkc.fence_async()
    tkc.sync()
    with tkc.if_(w == 0):
        tma.expect(got, theirs)
        tma.store_cta(theirs, mine, 1 - r, got)
    tkc.wait(got, 0)
    store(o, x + load(rt(f32, 16, 64), theirs, (w, 0)), (0, r, w, 0))
    tkc.cluster_sync()
