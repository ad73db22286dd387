"""mbarriers and TMA in the interpreter (docs/tile-ir.md, "Hopper ops").

A barrier is a `BarrierState` in the block's shared memory. It follows the
hardware: a phase completes when all its expected arrivals happened and its
transaction count (bytes expected by expect_bytes minus bytes delivered by
TMA loads, in either order) is back to zero; the barrier then moves to the
next phase. `tk.wait(bar, p)` is satisfied when the current phase's parity
differs from `p % 2` (PTX's try_wait.parity): right after init, the phase of
parity 1 counts as completed, which is what lets a producer wait on an
"empty" barrier before anyone arrived.

A warp blocked in tk.wait yields a `Waiting` to the scheduler (machine.py),
which runs other warps until it is satisfied, or reports a deadlock when no
warp can move. TMA copies happen when issued and deliver their bytes at once;
out-of-bounds elements read as zero and are not written, as with TMA. A TMA
store's read of its tile lasts, for the race detector, until the
tk.tma_store_wait that retires it. tk.init_barrier of a ring (`tk.alloc
{stages}`) initialises every slot.

For race detection (races.py) a barrier carries a `PhaseClock`: arrivals and
TMA deliveries release into the current phase, a passed tk.wait acquires
what the completed phases released.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import error
from ..dialect.types import GL, Barrier, view
from ..dtypes import itemsize
from ..dialect.attrs import ring_stages
from .gl import whole
from .program import Step, handler
from .syncs import block_sync
from .values import ROUND

F32 = np.float32


class BarrierState:
    """One mbarrier: per phase `count` arrivals and a transaction count."""

    def __init__(self, clock=None):
        self.count = 0        # arrivals per phase (0: not initialised)
        self.pending = 0      # arrivals still missing in the current phase
        self.tx = 0           # bytes expected minus bytes delivered, this phase
        self.phase = 0        # phases completed so far
        self.clock = clock    # races.PhaseClock, or None without race checks
        self.synced = 0       # the cluster_syncs its block had passed at init (cluster.py)

    def init(self, count: int, synced: int = 0) -> None:
        self.count = self.pending = count
        self.tx = self.phase = 0
        self.synced = synced
        if self.clock is not None:
            self.clock.acc[:] = 0

    def check(self, op) -> None:
        if not self.count:
            raise error(op, f"{op.name}: the barrier is used before tk.init_barrier")

    def arrive(self, op, n: int) -> None:
        self.check(op)
        if n > self.pending:
            raise error(op, f"{op.name}: {n} arrival(s) on a barrier whose phase {self.phase} "
                            f"expects only {self.pending} more (of {self.count} per phase)")
        self.pending -= n
        self._maybe_complete()

    def expect(self, op, nbytes: int) -> None:
        self.check(op)
        self.tx += nbytes
        self.arrive(op, 1)

    def deliver(self, op, nbytes: int) -> None:
        self.check(op)
        self.tx -= nbytes
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            if self.clock is not None:
                self.clock.complete()

    def passed(self, parity: int) -> bool:
        """try_wait.parity: the phase of this parity has completed."""
        return self.phase % 2 != parity % 2

    def describe(self) -> str:
        arrivals = f"phase {self.phase}: {self.count - self.pending} of {self.count} arrivals"
        if self.tx >= 0:
            return f"{arrivals}, {self.tx} bytes still expected"
        return (f"{arrivals}; TMA delivered {-self.tx} bytes more than any expect announced: "
                f"each TMA load into this barrier needs tma.expect(bar, ...) before the wait")


class Waiting:
    """What a warp blocked in tk.wait yields to the scheduler."""
    __slots__ = ("op", "bar", "parity")

    def __init__(self, op, bar: BarrierState, parity: int):
        self.op, self.bar, self.parity = op, bar, parity

    def ready(self) -> bool:
        return self.bar.passed(self.parity)

    def describe(self) -> str:
        return f"the phase of parity {self.parity} ({self.bar.describe()})"


def _attr(op, name: str) -> int:
    return op.attributes[name].value


def _expect(cond: bool, op, message: str) -> None:
    if not cond:
        raise error(op, f"{op.name}: {message}")


# ---- barriers (tk.alloc of a !tk.barrier, or a ring of them: shared.py)

@handler("tk.init_barrier")
def _init_barrier(c, op):
    bar, count = c.slot(op.operands[0]), _attr(op, "count")
    _expect(count > 0, op, f"count must be positive, got {count}")
    ring = ring_stages(op.operands[0]) is not None  # a ring: every slot
    point = block_sync(c, op)

    def step(env, w):
        if w.warpid == 0:  # thread 0 initialises ...
            synced = w.block.cluster.generation if w.block.cluster is not None else 0
            for state in (w.block.shared[bar] if ring else [env[bar]]):
                state.init(count, synced)
        yield point        # ... then the block synchronises
    return Step(step, op, gen=True)


@handler("tk.arrive")
def _arrive(c, op):
    bar, count = c.slot(op.operands[0]), _attr(op, "count")
    _expect(count > 0, op, f"count must be positive, got {count}")

    def step(env, w):
        _release(w, env[bar])
        env[bar].arrive(op, count)
    return step


def _release(w, bar: BarrierState) -> None:
    """The arrival releases the warp's history into the barrier's phase (before
    the arrival, which may complete the phase)."""
    if w.block.races is not None and bar.clock is not None:
        w.block.races.release(w.warpid, bar.clock)


@handler("tk.expect_bytes")
def _expect_bytes(c, op):
    bar, nbytes = c.slot(op.operands[0]), _attr(op, "bytes")
    _expect(nbytes > 0, op, f"bytes must be positive, got {nbytes}")

    def step(env, w):
        _release(w, env[bar])
        env[bar].expect(op, nbytes)
    return step


@handler("tk.wait")
def _wait(c, op):
    bar, phase = c.slot(op.operands[0]), c.slot(op.operands[1])

    def step(env, w):
        state = env[bar]
        state.check(op)
        waiting = Waiting(op, state, env[phase] % 2)
        while not waiting.ready():
            yield waiting
        if w.block.races is not None and state.clock is not None:
            w.block.races.acquire(w.warpid, state.clock)
    return Step(step, op, gen=True)


@handler("tk.fence_async")
def _fence(c, op):
    # Proxy fences are not modelled (races.py): nothing to do.
    def step(env, w):
        pass
    return step


@handler("tk.tma_store_wait")
def _tma_store_wait(c, op):
    pending = _attr(op, "pending")
    _expect(pending >= 0, op, f"pending must be >= 0, got {pending}")

    writes = "writes" in op.attributes

    def step(env, w):
        # The copies were done at issue; what ends here is their reads of
        # shared memory (all but the warp's `pending` most recent stores),
        # with `writes` their global writes too (what tk.atomic_add checks).
        if w.block.races is not None:
            w.block.races.retire(w.warpid, "tma_store", pending, op)
        if writes:  # completed here, at this warp's epoch (what an atomic_add must be ordered after)
            mine = w.block.tma_writes.get(w.warpid, [])
            n = max(len(mine) - pending, 0)
            epoch = None if w.block.races is None else int(w.block.races.clock[w.warpid, w.warpid])
            w.block.tma_written += [(store, arr, w.warpid, epoch) for store, arr in mine[:n]]
            del mine[:n]
    return step


# ---- TMA

def tma_types(op, st_value, gl_value):
    from ..hopper.tma import shared_kinds  # the rule the lowering applies
    st, gl = view(st_value.type), view(gl_value.type)
    _expect(isinstance(st, shared_kinds(op.name)) and isinstance(gl, GL), op,
            f"moves between an st (or, loading, an sv) and a gl, got {st_value.type} and {gl_value.type}")
    _expect(st.dtype == gl.dtype, op, f"st and gl must have one dtype, got {st.dtype} and {gl.dtype}")
    return st, gl


def load_box(op, arr, coords, st):
    """What a TMA load of st (an sv: its one row) at tile coordinates
    `coords` of gl `arr` reads: the in-bounds part, zeros elsewhere (past a
    slice's end: the argument's elements), as float32 in st's shape."""
    root, origin = whole(arr)
    box_origin(op, origin, st.dtype)
    tile = np.zeros((st.rows, st.cols), F32)
    parts = clipped(root.shape, coords, st.rows, st.cols, origin)
    if parts is not None:
        tile[parts[1]] = root[parts[0]].astype(F32)
    return tile.reshape(st.shape)


def box_origin(op, origin, dtype: str) -> None:
    """A TMA box's first column must lie on a 16-byte boundary of its row:
    the GPU stops at an illegal instruction otherwise (H200, 12-01: an f32
    box at column 1, 2 or 3 of the argument; 4 and 8 ran). A box's columns
    are a multiple of 16 bytes, so only a column slice's start can break it."""
    n = origin[3] * itemsize(dtype)
    _expect(n % 16 == 0, op, f"a TMA box starts at column {origin[3]} of a column slice ({n} bytes into the "
            "row): TMA needs its first column on a 16-byte boundary (the slice's start a multiple of "
            f"{16 // itemsize(dtype)} {dtype} elements)")


def clipped(shape4, coords, rows: int, cols: int, origin=(0, 0, 0, 0)):
    """(gl index, tile index) of the in-bounds part of the rows x cols tile at
    tile coordinates (b, d, r, c) (from element `origin`: a slice's place in
    its argument); None when nothing of it is in bounds."""
    b, d, r, c = coords
    B, D, R, C = shape4
    if not (0 <= b < B and 0 <= d < D):
        return None
    r0, c0 = r * rows + origin[2], c * cols + origin[3]
    r_lo, r_hi = max(r0, 0), min(r0 + rows, R)
    c_lo, c_hi = max(c0, 0), min(c0 + cols, C)
    if r_lo >= r_hi or c_lo >= c_hi:
        return None
    return ((b, d, slice(r_lo, r_hi), slice(c_lo, c_hi)),
            (slice(r_lo - r0, r_hi - r0), slice(c_lo - c0, c_hi - c0)))


@handler("tk.tma_load")
def _tma_load(c, op):
    _expect(len(op.operands) == 7, op, f"takes 4 coordinates, got {len(op.operands) - 3}")
    _expect(isinstance(view(op.operands[6].type), Barrier), op, "the last operand must be a barrier")
    st, _ = tma_types(op, op.operands[0], op.operands[1])
    dst, src, bar = (c.slot(op.operands[i]) for i in (0, 1, 6))
    idx = [c.slot(v) for v in op.operands[2:6]]
    rnd, nbytes = ROUND[st.dtype], st.rows * st.cols * itemsize(st.dtype)

    def step(env, w):
        tile = rnd(load_box(op, env[src], [env[i] for i in idx], st))
        deliver_box(w.block, w.warpid, env[dst], env[bar], tile, nbytes, op)
    return step


def deliver_box(block, warpid: int, dst, barrier: BarrierState, tile, nbytes: int, op,
                remote: bool = False) -> None:
    """A TMA load's box lands in `dst` of `block` and its bytes complete on
    `barrier` there. remote: issued by warp `warpid` of another CTA of the
    cluster (a multicast, cluster.py), which this block's clocks do not order."""
    races = block.races
    if races is not None:  # written by the warp's TMA agent, seen through the barrier
        if remote:
            races.remote_tma_write(warpid, dst, op)
        else:
            races.tma_write(warpid, dst, op)
        if barrier.clock is not None:
            races.deliver(warpid, barrier.clock)
    dst[...] = tile
    barrier.deliver(op, nbytes)  # the whole box counts, zero fill included


@handler("tk.tma_prefetch")
def _tma_prefetch(c, op):
    """A hint to L2: no value changes; its operands are checked as a load's."""
    _expect(len(op.operands) == 6, op, f"takes 4 coordinates, got {len(op.operands) - 2}")
    tma_types(op, op.operands[0], op.operands[1])

    def step(env, w):
        pass
    return step


@handler("tk.tma_store", "tk.tma_store_add")
def _tma_store(c, op):
    _expect(len(op.operands) == 6, op, f"takes 4 coordinates, got {len(op.operands) - 2}")
    st, gl = tma_types(op, op.operands[1], op.operands[0])
    dst, src = c.slot(op.operands[0]), c.slot(op.operands[1])
    idx = [c.slot(v) for v in op.operands[2:6]]
    rnd, add = ROUND[gl.dtype], op.name == "tk.tma_store_add"

    def step(env, w):
        if w.block.races is not None:  # reads st until a tk.tma_store_wait retires it
            w.block.races.issue(w.warpid, "tma_store", [env[src]], op)
        w.block.tma_writes.setdefault(w.warpid, []).append((op, whole(env[dst])[0]))
        store_box(op, env[dst], env[src], [env[i] for i in idx], rnd, add, gl.dtype)
    return step


def store_box(op, arr, tile, coords, rnd, add: bool, dtype: str) -> None:
    """A TMA store (add: reduce-add) of `tile` at tile coordinates `coords`
    of gl `arr`, clipped at the argument's edges only: through a slice it
    writes its whole box, so (whoever owns the argument's rows past the
    slice sees them) a store's part inside the argument must lie inside the
    slice, and an add must add exact zeros past it, both checked."""
    rows, cols = tile.shape
    root, origin = whole(arr)
    box_origin(op, origin, dtype)
    parts = clipped(root.shape, coords, rows, cols, origin)
    if parts is None:
        return
    if root is not arr:
        mine = clipped(arr.shape, coords, rows, cols)
        outside = np.ones(tile.shape, bool)
        if mine is not None:
            outside[mine[1]] = False
        if not add:
            _expect(not outside[parts[1]].any(), op, "a TMA store through a gl slice writes its whole box: "
                    f"the box at {tuple(coords)} ({rows}x{cols}) must lie inside the slice ({arr.shape[2]}x"
                    f"{arr.shape[3]}) or wholly past the argument's end")
        spill = tile[parts[1]][outside[parts[1]]]
        _expect(not spill.any(), op, "a TMA add through a gl slice adds its whole box: past the "
                f"slice's end it must add zeros, but adds {spill[spill != 0][:4].tolist()}...")
    piece = tile[parts[1]]
    if add and hasattr(root, "reduce_add"):   # peer memory: an atomic reduction (peers.py)
        root.reduce_add(parts[0], lambda old: rnd(old.astype(F32) + piece))
        return
    root[parts[0]] = rnd(root[parts[0]].astype(F32) + piece if add else piece)
