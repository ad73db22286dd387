# tk-pipeline-staging: a wait_signal that pipelined loads depend on is run by the
# producer warp before it issues them (in the loop body: before each stage's loads;
# at the work item's top level: before the item's ring). The consumers drop the
# wait when the data reaches them only through the ring (pull_chunks), and keep it
# when they touch a pgl's memory after it (per_item stores into peers).
# RUN: tkc %s --kernel pull_chunks | FileCheck %s --check-prefix=LOOP
# RUN: tkc %s --kernel per_item | FileCheck %s --check-prefix=ITEM
import tkc
from tkc import bf16, f32, gl, i32, pgl, rt, st, tma
from tkc.ops import load, store

T = 64

# LOOP-LABEL: func.func @pull_chunks
# LOOP: scf.for
# LOOP: "tk.wait"
# LOOP-NOT: "tk.tma_load"
# LOOP: "tk.wait_signal"(%arg1,
# LOOP: "tk.expect_bytes"
# LOOP: "tk.tma_load"({{.*}}, %arg0,
# LOOP: } {tk.staged = {role = "producer", stages = 2 : i64}}
# LOOP-NOT: "tk.wait_signal"
# LOOP: } {tk.staged = {role = "consumer", stages = 2 : i64}}
# LOOP-NOT: "tk.wait_signal"
# LOOP: return

# ITEM-LABEL: func.func @per_item
# ITEM: scf.for
# ITEM-NOT: "tk.tma_load"
# ITEM: "tk.wait_signal"(%arg1,
# ITEM: scf.for
# ITEM: "tk.tma_load"({{.*}}, %arg0,
# ITEM: } {tk.staged = {role = "producer", stages = 2 : i64}}
# ITEM: } {tk.staged = {role = "producer", stages = 2 : i64}}
# ITEM: "tk.signal"
# ITEM: "tk.wait_signal"(%arg1,
# ITEM: } {tk.staged = {role = "consumer", stages = 2 : i64}}
# ITEM: } {tk.work_items}
@tkc.kernel(warps=4, grid=lambda x, flags, y, out: (1,))
def pull_chunks(x: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 64), y: gl(bf16, 1, 1, None, T),
                out: gl(bf16, 1, 1, None, T)):
    """Rank r pushes its chunks y[k] (T rows each) into row block
    (r * chunks + k) of every rank's x, signalling flag (r * chunks + k) of
    each after its writes; then a pipelined loop copies the neighbour's
    chunks from its own x to out, waiting on each chunk's flag first (the
    producer waits, the consumers only read the ring)."""
    me, n = tkc.rank(), tkc.world_size()
    chunks = y.r // T
    src = (me + 1) % n
    s = st(bf16, T, T)
    bar = tkc.barrier()
    with tkc.if_(tkc.warpid() == 0):
        for k in tkc.range(chunks):
            tma.expect(bar, s)
            tma.load_async(s, y, (0, 0, k, 0), bar)
            tkc.wait(bar, k % 2)
            for p in tkc.range(n):
                tma.store_async(x.peer(p), s, (0, 0, me * chunks + k, 0))
            tma.store_async_wait(writes=True)
            for p in tkc.range(n):
                tkc.signal(flags.peer(p), at=(0, 0, 0, me * chunks + k))
    t = st(bf16, T, T)
    for k in tkc.range(chunks, stages=2):
        tkc.wait_signal(flags, at=(0, 0, 0, src * chunks + k), value=1)
        tma.load(t, x, (0, 0, src * chunks + k, 0))
        tma.store(out, t, (0, 0, k, 0))

@tkc.kernel(warps=4, grid=lambda x, flags, y, out: (y.r // T,), persistent=True)
def per_item(x: pgl(bf16, 1, 1, None, T), flags: pgl(i32, 1, 1, 1, 64), y: gl(bf16, 1, 1, None, T),
             out: gl(f32, 1, 1, None, T)):
    """Persistent: work item k pushes y's chunk k into every rank's x (each
    warp its 16 rows, by registers, then a signal of its own), then waits
    (at the item's top level, before the pipelined loop) for the left
    neighbour's chunk k and sums its 16-row pieces into out's rows k."""
    me, n = tkc.rank(), tkc.world_size()
    k, chunks = tkc.block_idx.x, y.r // T
    src = (me + n - 1) % n
    band = load(rt(bf16, 16, T), y, (0, 0, k * 4 + tkc.warpid(), 0))
    for p in tkc.range(n):
        store(x.peer(p), band, (0, 0, (me * chunks + k) * 4 + tkc.warpid(), 0))
    for p in tkc.range(n):
        tkc.signal(flags.peer(p), at=(0, 0, 0, me * chunks + k))
    tkc.wait_signal(flags, at=(0, 0, 0, src * chunks + k), value=4)
    t = st(bf16, 16, T)
    acc = tkc.ops.zero(rt(f32, 16, T))
    for j in tkc.range(T // 16, stages=2):
        tma.load(t, x, (0, 0, (src * chunks + k) * 4 + j, 0))
        acc = acc + load(rt(f32, 16, T), t, (0, 0))
        tkc.sync()
    store(out, acc, (0, 0, k * 4 + tkc.warpid(), 0))

