# tk-pipeline-staging: a wait_signal that only loads of plain gls may follow (an
# item's finish, waiting for a peer's partial it then reads from its pgl itself) is
# not the producer's: it stays in the consumers, where it stands. And a signal
# after banded TMA stores (each warp stores its own rows): every warp waits for
# its stores' writes and the consumers meet before the if around the signal, so
# warp 0's release covers every band.
# RUN: tkc %s --kernel finish | FileCheck %s
import tkc
from tkc import bf16, f32, gl, i32, pgl, rt, st, tma
from tkc.ops import load, store, zero

T = 64

# CHECK-LABEL: func.func @finish
# CHECK-NOT: "tk.wait_signal"
# CHECK: } {tk.staged = {role = "producer", stages = 2 : i64}}
# CHECK: "tk.wait_signal"(%arg2,
# CHECK: "tk.tma_store"(%arg1,
# CHECK: "tk.tma_store_wait"() {pending = 0 : i64, writes}
# CHECK-NEXT: "tk.sync"
# CHECK-NEXT: scf.if
# CHECK: "tk.tma_store_wait"() {pending = 0 : i64, writes}
# CHECK-NEXT: "tk.signal"(%arg3,
# CHECK: } {tk.work_items}
@tkc.kernel(warps=4, grid=lambda a, part, flags, counts, slots: (a.r // T,), persistent=True)
def finish(a: gl(bf16, 1, 1, None, T), part: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 64),
           counts: pgl(i32, 1, 1, 1, 64), slots: pgl(bf16, 1, 1, None, T)):
    """Item k: a pipelined sum of a's row tile k, plus the partial a peer
    pushed into slots once its flag says so; stored into part by bands, then
    warp 0 counts the tile."""
    k, w = tkc.block_idx.x, tkc.warpid()
    s = st(bf16, T, T)
    acc = zero(rt(f32, 16, T))
    for j in tkc.range(2, stages=2):
        tma.load(s, a, (0, 0, k, 0))
        acc = acc + load(rt(f32, 16, T), s, (w, 0))
    tkc.wait_signal(flags, at=(0, 0, 0, k), value=1)
    acc = acc + load(rt(f32, 16, T), slots, (0, 0, k * 4 + w, 0))
    o = st(bf16, T, T)
    store(o, acc, (w, 0))
    tma.store(part, o, (0, 0, k, 0))
    with tkc.if_(w == 0):
        tkc.signal(counts, at=(0, 0, 0, k), value=1)
