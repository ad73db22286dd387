"""Thread-block clusters in the interpreter (docs/tile-ir.md, "Clusters").

machine.py runs the CTAs of one cluster together, interleaved round by
round as ranks.py interleaves blocks of several ranks: each block's warps
move to their next stop, block after block, and when no warp of the cluster
can move that is a deadlock, reported at the op the first blocked warp waits
at. Each block knows its `ClusterState` (`block.cluster`) and its rank there
(`block.cta`: x fastest, as %cluster_ctarank).

- A multicast TMA load writes its box into the tile at dst's place in every
  CTA of the mask (the same alloc, ring slot and subtile offset) and
  delivers its bytes to the barrier at bar's place in each.
- tk.arrive_cta arrives on the barrier at bar's place in CTA `cta`.
- tk.tma_store_cta copies this CTA's tile into dst's place in CTA `cta` and
  delivers its bytes to the barrier at bar's place there; it reads src at
  issue (a later write to src before the receiver's barrier completes is
  not checked: cross-CTA order is not modelled).
- tk.cluster_sync waits until every warp of every CTA of the cluster arrived;
  it orders each block's warps as a tk.sync does.

Another CTA's barrier may be signalled only once it was initialised and a
tk.cluster_sync has passed since (on the GPU the peer may not have run its
init yet); a mask bit or cta outside the cluster is an error at the op.
"""
from __future__ import annotations

from ..diagnostics import TkcError, error
from ..dialect.types import Barrier, view
from ..dtypes import itemsize
from .hopper import BarrierState, Waiting, deliver_box, load_box, tma_types
from .operands import expect
from .program import Step, handler
from .values import ROUND


class ClusterState:
    """The CTAs of one cluster, by rank, and their cluster barrier."""

    def __init__(self, blocks: list, shape: tuple, warps: int):
        self.blocks, self.shape, self.warps = blocks, shape, warps
        self.arrived = 0      # warps waiting at the cluster barrier now
        self.generation = 0   # cluster barriers completed
        for r, b in enumerate(blocks):
            b.cluster, b.cta = self, r

    def sync_arrive(self) -> int:
        """A warp arrives at the cluster barrier; the generation it waits to pass."""
        gen = self.generation
        self.arrived += 1
        if self.arrived == len(self.blocks) * self.warps:
            self.arrived, self.generation = 0, gen + 1
            for b in self.blocks:   # each block's warps all met here: a block sync for the races
                b.sync(list(range(self.warps)), None)
        return gen


class ClusterWaiting(Waiting):
    """A warp at tk.cluster_sync, until its generation completes."""
    __slots__ = ("cluster", "gen")

    def __init__(self, op, cluster: ClusterState, gen: int):
        self.op, self.cluster, self.gen = op, cluster, gen

    def ready(self) -> bool:
        return self.cluster.generation > self.gen

    def describe(self) -> str:
        c = self.cluster
        return (f"the cluster barrier (tk.cluster_sync): {c.arrived} of {len(c.blocks) * c.warps} "
                f"warps of the cluster's {len(c.blocks)} CTAs arrived")


def cluster_of(op, block) -> ClusterState:
    cl = block.cluster
    if cl is None:
        raise error(op, f"{op.name}: the kernel has no cluster (tk.cluster)")
    return cl


def peer(op, block, cta: int):
    """The block of rank `cta` in this block's cluster."""
    cl = cluster_of(op, block)
    if not 0 <= cta < len(cl.blocks):
        raise error(op, f"{op.name}: CTA {cta} is outside the cluster's CTAs 0..{len(cl.blocks) - 1}")
    return cl.blocks[cta]


def remote(op, block, other, x):
    """What x (a barrier or shared tile of `block`) is in `other`: the same
    alloc's slot (and a tile's same rows and columns); a barrier must have
    been initialised there, with a cluster_sync since."""
    for slot, ring in block.shared.items():
        for i, mine in enumerate(ring):
            if mine is x or getattr(x, "base", None) is mine:   # it, or a subtile view of it
                theirs = other.shared.get(slot)
                if theirs is None:
                    raise error(op, f"{op.name}: CTA {other.cta} has not allocated this "
                                    f"{'barrier' if isinstance(x, BarrierState) else 'tile'} yet: "
                                    "call tkc.cluster_sync() after the allocations and barrier inits")
                return _same_place(theirs[i], mine, x) if mine is not x else _checked(op, other, theirs[i])
    raise error(op, f"{op.name}: the operand is not in this CTA's shared memory")


def _checked(op, other, x):
    if isinstance(x, BarrierState):
        x.check(op)
        if x.synced >= other.cluster.generation:
            raise error(op, f"{op.name}: CTA {other.cta}'s barrier was initialised with no "
                            "tkc.cluster_sync() since: a peer may signal it only after one")
    return x


def _same_place(theirs, mine, view_):
    """The view of `theirs` that `view_` is of `mine` (a subtile: an offset)."""
    off = (view_.__array_interface__["data"][0] - mine.__array_interface__["data"][0]) // view_.itemsize
    if mine.ndim == 1:
        return theirs[off:off + view_.shape[0]]
    r, c = divmod(off, mine.shape[1])
    return theirs[r:r + view_.shape[0], c:c + view_.shape[1]]


# ---- handlers

@handler("tk.cluster_ctarank")
def _ctarank(c, op):
    out = c.result_slot(op)

    def step(env, w):
        cluster_of(op, w.block)
        env[out] = w.block.cta
    return step


@handler("tk.cluster_idx")
def _cluster_idx(c, op):
    out, axis = c.result_slot(op), "xyz".index(op.attributes["dim"].value)

    def step(env, w):
        env[out] = w.block.idx[axis] // cluster_of(op, w.block).shape[axis]
    return step


@handler("tk.cluster_sync")
def _cluster_sync(c, op):
    def step(env, w):
        cl = cluster_of(op, w.block)
        waiting = ClusterWaiting(op, cl, cl.sync_arrive())
        while not waiting.ready():
            yield waiting
    return Step(step, op, gen=True)


@handler("tk.arrive_cta")
def _arrive_cta(c, op):
    expect(len(op.operands) == 2, op, "takes a barrier and a CTA")
    bar, cta, count = c.slot(op.operands[0]), c.slot(op.operands[1]), op.attributes["count"].value
    expect(count > 0, op, f"count must be positive, got {count}")

    def step(env, w):
        other = peer(op, w.block, int(env[cta]))
        if other is w.block:  # its own barrier: an ordinary arrival
            if w.block.races is not None and env[bar].clock is not None:
                w.block.races.release(w.warpid, env[bar].clock)
            env[bar].arrive(op, count)
        else:
            remote(op, w.block, other, env[bar]).arrive(op, count)
    return step


@handler("tk.tma_load_multicast")
def _multicast(c, op):
    expect(len(op.operands) == 8, op, f"takes 4 coordinates, a barrier and a mask, got "
                                      f"{len(op.operands)} operands")
    expect(isinstance(view(op.operands[6].type), Barrier), op, "operand 6 must be a barrier")
    st, _ = tma_types(op, op.operands[0], op.operands[1])
    dst, src, bar, mask = (c.slot(op.operands[i]) for i in (0, 1, 6, 7))
    idx = [c.slot(v) for v in op.operands[2:6]]
    rnd, nbytes = ROUND[st.dtype], st.rows * st.cols * itemsize(st.dtype)

    def step(env, w):
        cl, m = cluster_of(op, w.block), int(env[mask])
        n = len(cl.blocks)
        if not 1 <= m < (1 << n):
            raise error(op, f"{op.name}: mask {m:#x} names CTAs outside the cluster's 0..{n - 1}")
        tile = rnd(load_box(op, env[src], [env[i] for i in idx], st))
        for r in (r for r in range(n) if m >> r & 1):
            other = cl.blocks[r]
            if other is w.block:
                deliver_box(other, w.warpid, env[dst], env[bar], tile, nbytes, op)
            else:
                barrier = remote(op, w.block, other, env[bar])
                deliver_box(other, w.warpid, remote(op, w.block, other, env[dst]), barrier,
                            tile, nbytes, op, remote=True)
    return step


@handler("tk.tma_store_cta")
def _store_cta(c, op):
    expect(len(op.operands) == 4, op, "takes dst, src, a CTA and a barrier")
    expect(isinstance(view(op.operands[3].type), Barrier), op, "operand 3 must be a barrier")
    st = view(op.operands[1].type)
    dst, src, cta, bar = (c.slot(v) for v in op.operands)
    nbytes = st.rows * st.cols * itemsize(st.dtype)

    def step(env, w):
        other = peer(op, w.block, int(env[cta]))
        tile = env[src]
        if w.block.races is not None:
            w.block.races.read(w.warpid, tile, (slice(None), slice(None)), op)
        if other is w.block:
            deliver_box(other, w.warpid, env[dst], env[bar], tile.copy(), nbytes, op)
        else:
            deliver_box(other, w.warpid, remote(op, w.block, other, env[dst]),
                        remote(op, w.block, other, env[bar]), tile.copy(), nbytes, op, remote=True)
    return step


def schedule(runs: list) -> None:
    """Run the blocks of one cluster (name, machine.BlockRun) to the end,
    round by round; when none can move, report the first blocked warp."""
    live = list(runs)
    while live:
        moved = False
        for name, run in live:
            try:
                moved |= run.step()
            except TkcError as e:
                raise TkcError(f"{e.message} (in block {name})", e.where) from e
            if not run.stopped:
                run.block.check_groups()
        live = [(n, r) for n, r in live if r.stopped]
        if live and not moved:
            name, run = next(((n, r) for n, r in live
                              if any(isinstance(a, Waiting) for a in r.stopped.values())), live[0])
            e = run.deadlock()
            raise TkcError(f"{e.message} (in block {name} of a cluster of {len(runs)})", e.where)
