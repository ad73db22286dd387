"""GEMMs fused with the collective of a tensor-parallel layer (docs/multi-gpu.md):
each is one persistent launch whose main loop the NVLink traffic overlaps.
The library GEMM's structure (gemm_hopper.py: 128 x 256 tiles, two consumer
warpgroups, the TMA ring tk-pipeline-staging builds, TMA-store finish); the
reduce-scatter a kernel per world size (its adds to peers are unrolled in
the loop body, where compiler-synchronised stores must stand).

all_gather_gemm: C [M, N] = all_gather(A) @ B, A's shards [M / world, K].
  ag is the symmetric gather buffer, two of them (d = the call's parity, so
  a fast peer's next call never overwrites rows this call still reads). The
  op, not the kernel, moves the shards (tkc/torchops/collective.py): it
  copies this rank's shard into its own ag before the launch, and the copy
  engines push it into every peer's ag over NVLink, chunk by chunk, each
  chunk followed by its flag in that peer's flags (the call's epoch: 1, 2,
  ...; "at least epoch" needs no reset; the kernel reads it from `epoch`,
  one i32 the op writes on the stream before the launch, so that every
  call of a shape launches with the same values: one kept frame, where an
  epoch argument packed a new one each call). The kernel only computes and
  waits: work items rotate the rows so each rank starts with its own shard
  (item (bn, bm) computes row tile (bm + rank * per) % tiles, per: the row
  tiles of a rank), and an item of a peer's rows waits on its chunk's flag
  (`chunk` row tiles a flag) before its loop (the producer warp runs the
  wait before loading: flags.py of tk-pipeline-staging). The pushes take no
  SM and reach the links' speed (2 H200s: ~360 GB/s a direction, against
  ~175 for NCCL's all-gather and less for the SMs' TMA stores that did it
  before), so the peers' rows are in place by the time the own rows are
  done. No kernel waits for another's progress, so no order of blocks
  deadlocks. (The own shard is not the copy engines' too: a copy within one
  GPU takes SMs, which the spinning kernel holds; with its rows waiting on
  it, the op hung.) keep = 1: the items of column 0 also store each A tile
  they load into a_out [M, K] (TMA stores from the ring slot: the gathered
  A the op returns, written under the GEMM instead of copied after it);
  keep = 0: those stores land past a_out's end, which TMA clips to nothing
  (a_out then any tensor apart from the others: the op passes one tile).

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
from tkc.ops import load, subtile, zero

BM, BN, BK, EPI = 128, 256, 64, 64
FLAGS = 1024          # ag's flags: one per pushed chunk, at most one per 128-row tile of M
ONE = 1 << 24         # (bn + ONE - 1) // ONE: 0 for column 0, else 1 (bn < ONE; tkc.min(bn, 1)
                      # spilled 8 bytes at 4 ranks in the all-gather that pushed by the SMs)


def _finish(acc, wg, c_s, put):
    """The 128 x 256 tile in 64-column chunks through two shared tiles, each
    put(shared tile, chunk j) by a TMA store."""
    for j in range(BN // EPI):
        out = c_s[j % 2]
        warpgroup.store(out, subtile(acc, 16, EPI, (0, j)).to(bf16), (wg, 0))
        put(out, j)


def _ag_gemm(ag: pgl(bf16, 1, 2, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(bf16, 1, 1, "M", "N"),
             a_out: gl(bf16, 1, 1, "MA", "KA"), flags: pgl(i32, 1, 1, 1, FLAGS), epoch: gl(i32, 1, 1, 1, 1),
             chunk: i32, keep: i32):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    me, n = tkc.rank(), tkc.world_size()
    tiles = c.r // BM
    per = tiles // n
    row = (bm + me * per) % tiles
    remote = ((row // per + n - me) % n + n - 1) // n       # 0: my shard, 1: a peer's
    e = load(i32, epoch, at=(0, 0, 0, 0), fill=0)   # the call's epoch, in memory: the launch's
    par = e % 2                                      # values, and so its frame, repeat
    to = row + (1 - keep * (1 - (bn + ONE - 1) // ONE)) * tiles   # A kept, column 0: its row; else past M
    tkc.wait_signal(flags, at=(0, 0, 0, row // chunk), value=e * remote)
    a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
    c_s = [st(bf16, BM, EPI) for _ in range(2)]
    acc = zero(rt(f32, 16, BN))
    for k in tkc.range(tkc.cdiv(ag.c, BK), stages="auto"):
        tma.load(a_s, ag, (0, par, row, k))
        tma.load(b_s, b, (0, 0, k, bn))
        tma.store(a_out, a_s, (0, 0, to, k))
        warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    _finish(acc, wg, c_s, lambda out, j: tma.store(c, out, (0, 0, row, bn * (BN // EPI) + j)))


# arguments ag, b, c, a_out, flags, epoch, chunk, keep (module doc); one kernel for 2 to 8 ranks
all_gather_gemm = tkc.kernel(
    name="all_gather_gemm", warps=8, persistent=True,
    grid=lambda ag, b, c, a_out, flags, epoch, chunk, keep: (tkc.cdiv(c.c, BN), c.r // BM))(_ag_gemm)


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
