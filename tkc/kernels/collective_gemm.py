"""GEMMs fused with the collective of a tensor-parallel layer (docs/multi-gpu.md):
each is one persistent launch in which NVLink traffic overlaps the GEMM's
main loop. The library GEMM's structure (gemm_hopper.py: 128 x 256 tiles, two
consumer warpgroups, the TMA ring tk-pipeline-staging builds, TMA-store
finish); a kernel per world size (the pushes to peers are unrolled in the
loop body, where compiler-synchronised stores must stand).

all_gather_gemm(world): C [M, N] = all_gather(A) @ B, A's shards [M / world, K].
  ag is the symmetric gather buffer, two of them (d = the call's parity, so
  a fast peer's next call never overwrites rows this call still reads); the
  op copies this rank's shard into its own ag before the launch. Work items
  rotate the rows so each rank starts with its own chunk: item (bn, bm)
  computes row tile (bm + rank * per) % tiles (per: the row tiles of a
  rank). The items of column 0 of the own chunk also push: each A tile they
  load is TMA-stored into every peer's ag (at a row past the end, clipped to
  nothing, for every other item: a pipelined store stands in the loop body
  unconditionally); after the loop warp 0 waits for the writes
  (tk-pipeline-staging puts that wait before a signal) and signals the row
  tile's flag at every peer (after the loop: the finish then stays at the
  item's end, not under the next item's loop, since a signal must not wait
  for the next item, and the registers it would carry spill). An item of a peer's chunk waits on that flag
  before its loop: the producer warp runs the wait before loading (flags.py
  of tk-pipeline-staging). Flags count calls (`epoch`, 1, 2, ...): "at least
  epoch" needs no reset. No deadlock: in the grouped block order every
  item of a rank's own chunk precedes every item of another chunk on its
  block, so the push an item waits for never waits itself.

gemm_reduce_scatter(world): out [M / world, N] = reduce_scatter(A @ B), A
  [M, K_local], B [K_local, N]. Each finished tile is TMA-reduce-added
  (bf16) into the owning rank's rs buffer (two, by parity, as ag); the
  items start with the next rank's rows and end with their own. Every
  block waits for its adds' writes before it exits, and `rs_barrier` (a
  one-block launch right after, tkc.barrier_all) tells each rank that all
  adds into its buffer have landed; the op then copies the result out and
  zeroes the buffer for the call after next.
"""

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, i32, pgl, rt, st, tma, warpgroup
from tkc.ops import subtile, zero

BM, BN, BK, EPI = 128, 256, 64, 64
FLAGS = 1024          # ag's flags: one per 128-row tile of M (up to 131072 rows)
ONE = 1 << 24         # bn // ONE-style tests of zero (bn < ONE): with tkc.min(bn, 1)
                      # instead, ptxas spills 8 bytes at 4 ranks


def _finish(acc, wg, c_s, put):
    """The 128 x 256 tile in 64-column chunks through two shared tiles, each
    put(shared tile, chunk j) by a TMA store."""
    for j in range(BN // EPI):
        out = c_s[j % 2]
        warpgroup.store(out, subtile(acc, 16, EPI, (0, j)).to(bf16), (wg, 0))
        put(out, j)


def all_gather_gemm(world: int):
    """The kernel for `world` ranks; arguments ag, b, c, flags, epoch (module doc)."""
    if not 2 <= world <= 8:
        raise ValueError(f"all_gather_gemm: 2 to 8 ranks, got {world}")

    def ag_gemm(ag: pgl(bf16, 1, 2, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(bf16, 1, 1, "M", "N"),
                flags: pgl(i32, 1, 1, 1, FLAGS), epoch: i32):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        me, n = tkc.rank(), tkc.world_size()
        tiles = c.r // BM
        per = tiles // n
        row = (bm + me * per) % tiles
        remote = ((row // per + n - me) % n + n - 1) // n       # 0: my chunk, 1: a peer's
        push = (1 - remote) * (1 - (bn + ONE - 1) // ONE)        # my chunk, column 0
        par = epoch % 2
        to = row + (1 - push) * tiles                            # past M's end: clipped to nothing
        tkc.wait_signal(flags, at=(0, 0, 0, row), value=epoch * remote)
        a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
        c_s = [st(bf16, BM, EPI) for _ in range(2)]
        acc = zero(rt(f32, 16, BN))
        steps = tkc.cdiv(ag.c, BK)
        # the peers' gls picked once before the loop up to 4 ranks, in it past
        # that (what ptxas fits in the launch's 168 registers without spilling)
        hoisted = [ag.peer((me + d) % n) for d in range(1, world)] if world <= 4 else None
        for k in tkc.range(steps, stages="auto"):
            tma.load(a_s, ag, (0, par, row, k))
            tma.load(b_s, b, (0, 0, k, bn))
            for d in range(1, world):
                tma.store(hoisted[d - 1] if hoisted else ag.peer((me + d) % n), a_s, (0, par, to, k))
            warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        with tkc.if_((push == 1) & (tkc.warpid() == 0)):
            for d in range(1, world):
                tkc.signal(flags.peer((me + d) % n), at=(0, 0, 0, row), value=1)
        _finish(acc, wg, c_s, lambda out, j: tma.store(c, out, (0, 0, row, bn * (BN // EPI) + j)))

    return tkc.kernel(name=f"all_gather_gemm_w{world}", warps=8, persistent=True,
                      grid=lambda ag, b, c, flags, epoch: (tkc.cdiv(c.c, BN), c.r // BM))(ag_gemm)


def gemm_reduce_scatter(world: int):
    """The kernel for `world` ranks; arguments a, b, rs, epoch (module doc)."""
    if not 2 <= world <= 8:
        raise ValueError(f"gemm_reduce_scatter: 2 to 8 ranks, got {world}")

    def rs_gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), rs: pgl(bf16, 1, 2, "Ms", "N"),
                epoch: i32):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        me = tkc.rank()
        tiles, per = a.r // BM, rs.r // BM
        row = (bm + (me + 1) * per) % tiles                       # the next rank's rows first
        owner = row // per
        a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
        c_s = [st(bf16, BM, EPI) for _ in range(2)]
        acc = zero(rt(f32, 16, BN))
        for k in tkc.range(tkc.cdiv(a.c, BK), stages="auto"):
            tma.load(a_s, a, (0, 0, row, k))
            tma.load(b_s, b, (0, 0, k, bn))
            warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        _finish(acc, wg, c_s, lambda out, j: tma.store_add(
            rs.peer(owner), out, (0, epoch % 2, row - owner * per, bn * (BN // EPI) + j)))

    return tkc.kernel(name=f"gemm_reduce_scatter_w{world}", warps=8, persistent=True,
                      grid=lambda a, b, rs, epoch: (tkc.cdiv(b.c, BN), a.r // BM))(rs_gemm)


@tkc.kernel(warps=1, grid=lambda flags: (1,))
def rs_barrier(flags: pgl(i32, 1, 1, 1, 16)):
    """Every rank's gemm_reduce_scatter has finished (its adds written) once
    this returns on any rank: a barrier across ranks after it on the stream."""
    tkc.barrier_all(flags, at=(0, 0, 0, 0))
