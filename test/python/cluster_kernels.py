"""Thread-block cluster kernels (docs/dsl.md, "Clusters"), shared by the
interpreter tests (test_cluster.py) and the GPU tests
(test/gpu/test_cluster_gpu.py), which import them at module level so that
`tkc build test/gpu/test_cluster_gpu.py` prebuilds them.

- multicast_copy: a cluster of 2 CTAs; each TMA-loads one 64-row half of a
  128 x 64 bf16 tile and multicasts it to both, so each CTA holds the whole
  tile and stores it to its own output.
- exchange_sum: a cluster of 2 CTAs; each writes its f32 tile to shared
  memory and copies it into the peer's (tma.store_cta, distributed shared
  memory), then adds the peer's to its own: both outputs are the sum (a
  split-K reduction's step).
- cluster_gemm(release_peer): C = A B by hand with a 2-stage TMA pipeline,
  one 128 x 64 C tile a CTA, the 2 CTAs of a (2, 1, 1) cluster along N
  sharing A: each loads half of the A tile with multicast to both, and its
  own B tile. A stage is free again when the consumers of both CTAs have
  read it: each consumer warp arrives on its own CTA's empty barrier and on
  the peer's (tkc.arrive(bar, cta=...)). release_peer=False leaves out the
  remote arrivals: a deadlock (the producers wait on the peers' consumers).
- staged_cluster_gemm: the same product written as a plain pipelined loop
  (tkc.range(stages=...)), two consumer warpgroups and a 128 x 128 C tile a
  CTA in (2, 1, 1) clusters: tk-pipeline-staging finds that A's tile does
  not follow block_idx.x and multicasts it (each CTA loads 64 of its rows),
  counts both CTAs' consumers on a slot's empty barrier and syncs the
  cluster after the inits and before the end. B's tile stays per CTA.
  persistent_cluster_gemm: the same, persistent: the clusters loop over
  their items (tk-grid-ordering pairs a cluster's CTAs on one row of C).
- column_cluster_gemm: the same loop in (1, 4, 1) clusters: B's tile does
  not follow block_idx.y, so a cluster's column of CTAs (four row blocks
  of C) shares it, each loading 16 of its 64 rows; A's stays per CTA.
- row_cluster_gemm: (2, 2, 1) clusters whose B load is written through
  block_idx.y: only A's tile is shared, along x, and a slot passes between
  the 2 CTAs of a cluster's row (ranks rank - rank % 2 + i), not all four.
- grid_cluster_gemm: (2, 2, 1) clusters: A's tile is shared along x (a
  cluster's row: each of its 2 CTAs loads half), B's along y (its
  column), and a slot is free when all four CTAs' consumers released it.
"""
import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.ops import load, mma_AB, store, subtile, zero

BM, BN, BK = 128, 64, 64
CONSUMERS = 4          # warps 0-3 compute 32 rows each; warp 4 is the producer


@tkc.kernel(warps=4, grid=lambda a, o: (2, 1, 1), cluster=(2, 1, 1))
def multicast_copy(a: gl(bf16, 1, 1, 128, 64), o: gl(bf16, 1, 2, 128, 64)):
    r, w = tkc.cluster_ctarank(), tkc.warpid()
    s = st(bf16, 128, 64)
    full = tkc.barrier()
    tkc.cluster_sync()                        # the peer's barrier is initialised
    with tkc.if_(w == 0):
        tma.expect(full, s)                   # both halves land in each CTA
        tma.load_async(subtile(s, 64, 64, (r, 0)), a, (0, 0, r, 0), full, multicast=0b11)
    tkc.wait(full, 0)
    store(o, load(rt(bf16, 32, 64), s, (w, 0)), (0, r, w, 0))
    tkc.cluster_sync()                        # nobody leaves while its tile may still be written


@tkc.kernel(warps=4, grid=lambda a, o: (2, 1, 1), cluster=(2, 1, 1))
def exchange_sum(a: gl(f32, 1, 2, 64, 64), o: gl(f32, 1, 2, 64, 64)):
    r, w = tkc.cluster_ctarank(), tkc.warpid()
    mine, theirs = st(f32, 64, 64), st(f32, 64, 64)
    got = tkc.barrier()
    tkc.cluster_sync()                        # the peer's barrier is initialised
    x = load(rt(f32, 16, 64), a, (0, r, w, 0))
    store(mine, x, (w, 0))
    tkc.fence_async()                         # the writes, before the copy engine reads them
    tkc.sync()
    with tkc.if_(w == 0):
        tma.expect(got, theirs)               # the peer's tile lands here
        tma.store_cta(theirs, mine, 1 - r, got)
    tkc.wait(got, 0)
    store(o, x + load(rt(f32, 16, 64), theirs, (w, 0)), (0, r, w, 0))
    tkc.cluster_sync()                        # nobody leaves while the peer may still copy


def make_cluster_gemm(release_peer: bool = True):
    @tkc.kernel(warps=CONSUMERS + 1, grid=lambda a, b, c: (c.c // BN, c.r // BM), cluster=(2, 1, 1),
                name="cluster_gemm" if release_peer else "cluster_gemm_no_release")
    def cluster_gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(f32, 1, 1, "M", "N")):
        n, m, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpid()
        r = tkc.cluster_ctarank()
        a_s = [st(bf16, BM, BK) for _ in range(2)]
        b_s = [st(bf16, BK, BN) for _ in range(2)]
        full = [tkc.barrier(1) for _ in range(2)]
        empty = [tkc.barrier(2 * CONSUMERS) for _ in range(2)]   # both CTAs' consumers
        tkc.cluster_sync()
        acc = zero(rt(f32, 32, BN))
        with tkc.if_(w == CONSUMERS):
            for i in tkc.range(a.c // (2 * BK)):
                for s in range(2):
                    k = i * 2 + s
                    tkc.wait(empty[s], (i + 1) % 2)       # free in both CTAs
                    tma.expect(full[s], a_s[s], b_s[s])
                    tma.load_async(subtile(a_s[s], BM // 2, BK, (r, 0)), a, (0, 0, m * 2 + r, k),
                                   full[s], multicast=0b11)
                    tma.load_async(b_s[s], b, (0, 0, k, n), full[s])
        with tkc.else_():
            for i in tkc.range(a.c // (2 * BK)):
                for s in range(2):
                    tkc.wait(full[s], i % 2)
                    mma_AB(acc, load(rt(bf16, 32, BK), a_s[s], (w, 0)),
                           load(rt(bf16, BK, BN, "col"), b_s[s], (0, 0)), acc)
                    tkc.arrive(empty[s])
                    if release_peer:
                        tkc.arrive(empty[s], cta=1 - r)
            store(c, acc, (0, 0, m * 4 + w, n))
        tkc.cluster_sync()    # no CTA leaves while a peer may still arrive on its barriers
    return cluster_gemm


cluster_gemm = make_cluster_gemm()


def _staged_gemm(a, b, c, b_follows_y=False, sliced=False):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    a_s, b_s = st(bf16, 128, 64), st(bf16, 64, 128)
    acc = zero(rt(f32, 16, 128))
    if sliced:   # the block's rows of A and columns of B as slices, loaded at coordinates 0 in each
        a, b = a.slice("r", bm * 128, 128), b.slice("c", bn * 128, 128)
    for k in tkc.range(tkc.cdiv(a.c, 64), stages=3):
        tma.load(a_s, a, (0, 0, 0 if sliced else bm, k))        # the same tile in both CTAs of a cluster
        # (b_follows_y: B's column written through block_idx.y, 0 all the same, which the
        # staging cannot prove the same down a cluster's column)
        tma.load(b_s, b, (0, 0, k, 0 if sliced else bn + bm % 1 if b_follows_y else bn))
        warpgroup.mma_AB(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    store(c, acc, (0, 0, bm * 8 + tkc.warpid(), bn), clip=True)   # 16 rows a warp


A, B, C = gl(bf16, 1, 1, "M", "K"), gl(bf16, 1, 1, "K", "N"), gl(f32, 1, 1, "M", "N")


@tkc.kernel(warps=8, cluster=(2, 1, 1),
            grid=lambda a, b, c: (tkc.cdiv(c.c, 2 * 128) * 2, tkc.cdiv(c.r, 128)))
def staged_cluster_gemm(a: A, b: B, c: C):
    _staged_gemm(a, b, c)


# persistent: tk-grid-ordering deals each cluster one item of (X / 2, Y), CTA r taking x * 2 + r
@tkc.kernel(warps=8, cluster=(2, 1, 1), persistent=True,
            grid=lambda a, b, c: (tkc.cdiv(c.c, 2 * 128) * 2, tkc.cdiv(c.r, 128)))
def persistent_cluster_gemm(a: A, b: B, c: C):
    _staged_gemm(a, b, c)


# (1, 4, 1) clusters: four row blocks of C in a column share B's tile
@tkc.kernel(warps=8, cluster=(1, 4, 1),
            grid=lambda a, b, c: (tkc.cdiv(c.c, 128), tkc.cdiv(c.r, 4 * 128) * 4))
def column_cluster_gemm(a: A, b: B, c: C):
    _staged_gemm(a, b, c)


def _grid_cluster(name: str, **options):
    """_staged_gemm(**options) in (2, 2, 1) clusters: two CTAs along x (C's
    columns), two along y (its rows)."""
    @tkc.kernel(name=name, warps=8, cluster=(2, 2, 1),
                grid=lambda a, b, c: (tkc.cdiv(c.c, 2 * 128) * 2, tkc.cdiv(c.r, 2 * 128) * 2))
    def gemm(a: A, b: B, c: C):
        _staged_gemm(a, b, c, **options)
    return gemm


# B's load written through block_idx.y: A shared along x only, so a slot passes between the
# CTAs of a cluster's row
row_cluster_gemm = _grid_cluster("row_cluster_gemm", b_follows_y=True)
# A shared along x, B along y
grid_cluster_gemm = _grid_cluster("grid_cluster_gemm")
# A and B loaded through slices at the block's row and column: A's slice follows y (shared
# along x only), B's follows x (shared along y only), whatever the coordinates
sliced_grid_gemm = _grid_cluster("sliced_grid_gemm", sliced=True)
