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
  ...; "at least epoch" needs no reset). The kernel only computes and
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
  it, the op hung.)

gemm_reduce_scatter: out [M / world, N] = this rank's rows of the sum over
  ranks of A @ B (A [M, K_local], B [K_local, N]). The items start with the
  next rank's rows and end with the rank's own (a rank's rows: `per` row
  tiles, an owner's chunk: `chunk` of them). A tile of a peer's rows is a
  partial: stored into this rank's `part` (slot q = the owner's distance -
  1), then warp 0 adds 1 to the chunk's count in `counts`. The op's copy
  engines wait for a chunk's count to reach its tiles (cuStreamWaitValue32)
  and take it back to 0 (the next call may chunk otherwise), push the
  chunk into the owner's `slots` (half
  epoch % 2, the slot of this rank's distance to it - 1) and raise the
  owner's flag for it := epoch. A tile of the rank's own rows adds each
  peer's partial, read from its slots after that peer's flag, to its f32
  accumulator in the finish, and is stored into `out`: no reduce-add over
  NVLink, no barrier, no copy out or zeroing. Where a tile goes is chosen
  without a branch: the other store's row lies past its gl's end, which
  TMA clips to nothing. Only an own tile waits, and only for peers' tiles
  that never wait (the own rows come last everywhere), so no order of
  blocks deadlocks.
"""

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, i32, pgl, rt, st, tma, warpgroup
from tkc.ops import add, copy, load, subtile, zero

BM, BN, BK, EPI = 128, 256, 64, 64
FLAGS = 1024          # ag's flags: one per pushed chunk, at most one per 128-row tile of M


def _finish(acc, wg, c_s, put):
    """The 128 x 256 tile in 64-column chunks through two shared tiles, each
    put(shared tile, chunk j) by a TMA store."""
    for j in range(BN // EPI):
        out = c_s[j % 2]
        warpgroup.store(out, subtile(acc, 16, EPI, (0, j)).to(bf16), (wg, 0))
        put(out, j)


def _ag_gemm(ag: pgl(bf16, 1, 2, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(bf16, 1, 1, "M", "N"),
             flags: pgl(i32, 1, 1, 1, FLAGS), epoch: i32, chunk: i32):
    bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
    me, n = tkc.rank(), tkc.world_size()
    tiles = c.r // BM
    per = tiles // n
    row = (bm + me * per) % tiles
    remote = ((row // per + n - me) % n + n - 1) // n       # 0: my shard, 1: a peer's
    par = epoch % 2
    tkc.wait_signal(flags, at=(0, 0, 0, row // chunk), value=epoch * remote)
    a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
    c_s = [st(bf16, BM, EPI) for _ in range(2)]
    acc = zero(rt(f32, 16, BN))
    for k in tkc.range(tkc.cdiv(ag.c, BK), stages="auto"):
        tma.load(a_s, ag, (0, par, row, k))
        tma.load(b_s, b, (0, 0, k, bn))
        warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    _finish(acc, wg, c_s, lambda out, j: tma.store(c, out, (0, 0, row, bn * (BN // EPI) + j)))


# arguments ag, b, c, flags, epoch, chunk (module doc); one kernel for 2 to 8 ranks
all_gather_gemm = tkc.kernel(name="all_gather_gemm", warps=8, persistent=True,
                             grid=lambda ag, b, c, flags, epoch, chunk: (tkc.cdiv(c.c, BN), c.r // BM))(_ag_gemm)


SOURCES = 8           # the reduce-scatter's counts and flags: a row per slot (at most 7 peers)


def _rs_gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), part: pgl(bf16, 1, "W1", "Ms", "N"),
             slots: pgl(bf16, 1, "D2", "Ms", "N"), counts: pgl(i32, 1, 1, SOURCES, FLAGS),
             flags: pgl(i32, 1, 1, SOURCES, FLAGS), out: gl(bf16, 1, 1, "Ms", "N"), epoch: i32, chunk: i32):
    bn, bm, wg, w = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid(), tkc.warpid()
    me, n = tkc.rank(), tkc.world_size()
    tiles, per = a.r // BM, out.r // BM
    row = (bm + (me + 1) * per) % tiles       # the next rank's rows first, the own last
    owner = row // per
    q = (owner + n - me - 1) % n              # the owner's distance - 1 (n - 1: the own rows)
    own = (q + 1) // n                        # 1: the own rows, 0: a peer's
    lrow = row - owner * per                  # the row tile among the owner's
    a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
    c_s = [st(bf16, BM, EPI) for _ in range(2)]
    acc = zero(rt(f32, 16, BN))
    for k in tkc.range(tkc.cdiv(a.c, BK), stages="auto"):
        tma.load(a_s, a, (0, 0, row, k))
        tma.load(b_s, b, (0, 0, k, bn))
        warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
    r0 = lrow * BM + w * 16                   # this warp's rows
    sources = (n - 1) * own                   # the own rows: every peer's partial, once it is here
    for s in tkc.range(sources):
        tkc.wait_signal(flags, at=(0, 0, s, lrow // chunk), value=epoch)
    for j in range(BN // EPI):
        y = copy(rt(f32, 16, EPI), subtile(acc, 16, EPI, (0, j)))
        for s in tkc.range(sources):
            x = load(rt(bf16, 16, EPI), slots, at=(0, (epoch % 2) * (n - 1) + s, r0, bn * BN + j * EPI),
                     fill=0.0)
            y = add(y, copy(rt(f32, 16, EPI), x))
        o = c_s[j % 2]
        warpgroup.store(o, y.to(bf16), (wg, 0))
        col = bn * (BN // EPI) + j
        tma.store(out, o, (0, 0, lrow + (1 - own) * per, col))        # clipped unless own
        tma.store(part, o, (0, q * (1 - own), lrow + own * per, col))  # clipped if own
    with tkc.if_((own == 0) & (w == 0)):      # (after its stores' writes: the pass waits for them)
        tkc.signal(counts, at=(0, 0, q, lrow // chunk), value=1)


# arguments a, b, part, slots, counts, flags, out, epoch, chunk (module doc); 2 to 8 ranks. The
# items in grid order, row tile by row tile ("xyz"): every block's own-row items, which wait, come
# after all of its peer-row items, which the peers wait for (a grouped order could leave a peer
# item behind a waiting one: a deadlock across ranks)
gemm_reduce_scatter = tkc.kernel(
    name="gemm_reduce_scatter", warps=8, persistent=True, order="xyz",
    grid=lambda a, b, part, slots, counts, flags, out, epoch, chunk: (tkc.cdiv(b.c, BN), a.r // BM))(_rs_gemm)
