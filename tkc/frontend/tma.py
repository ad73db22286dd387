"""Hopper mbarriers and TMA for kernel authors (docs/tile-ir.md, "Hopper ops").

    bar = tkc.barrier(count=1)                 # at the kernel's top level
    with tkc.if_(tkc.warpid() == 0):
        tma.expect(bar, a_s, b_s)              # this phase waits for both tiles' bytes
        tma.load_async(a_s, a, (0, 0, m, k), bar)
        tma.load_async(b_s, b, (0, 0, k, n), bar)
    tkc.wait(bar, k % 2)                       # every warp: the phase of parity k % 2
    ...
    tkc.fence_async(); tkc.sync()              # shared writes before a TMA store reads them
    tma.store_async(c, c_s, (0, 0, m, n)); tma.store_async_wait()

Block-level copies synchronised by the compiler (no barrier to write): in a
pipelined loop `tma.load(a_s, a, (0, 0, m, k))` runs ahead in the producer
warpgroup that tk-pipeline-staging makes, and `tma.store(c, c_s, coords)`
after the loop goes out while the next work item starts (docs/pipelining.md).

Arrival counts are counted in warps (lane 0 of a warp arrives). TMA copies are
issued by lane 0 of the calling warp; coordinates are in units of the st's
shape, like group_load. Loads also fill an sv<L>: one row of L elements at
(b, d, r, c * L) (16-byte aligned rows: L * itemsize a multiple of 16).
`barrier`, `wait`, `arrive` and `fence_async` are also `tkc.<name>`.
"""
from __future__ import annotations

from ..dialect import ops as tk
from ..dialect.types import ST, SV, Barrier
from ..dtypes import itemsize
from .cluster import cta_index
from .complex import Complex, partwise
from .tiles import GLHandle, Shared
from .trace import current, emitting, fail
from .values import Traced, as_index

__all__ = ["barrier", "wait", "arrive", "fence_async",
           "expect", "expect_bytes", "load_async", "store_async", "store_add_async",
           "store_async_wait", "store_cta", "load", "store", "store_add", "prefetch"]

TX_LIMIT = 2**20 - 1  # an mbarrier's transaction count is 20 bits


class BarrierHandle(Traced):
    """An mbarrier in shared memory (tkc.barrier)."""

    _what = "a barrier"

    def __init__(self, value, count: int):
        self._value, self.count = value, count

    def value(self):
        return self._value

    def __repr__(self):
        return f"<barrier count={self.count}>"


def _count(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise fail(f"{what} must be a positive int, got {n!r}")
    return n


def _bar(b, op: str) -> BarrierHandle:
    if not isinstance(b, BarrierHandle):
        raise fail(f"{op}: expected a barrier from tkc.barrier(...), got {type(b).__name__}")
    return b


# ------------------------------------------------------------ barriers

def barrier(count: int = 1) -> BarrierHandle:
    """Allocate and initialise an mbarrier expecting `count` warp arrivals per
    phase. Block-collective: at the kernel's top level, where every warp runs it."""
    count = _count(count, "barrier count")
    current().require_top_level("tkc.barrier", "it is allocated once and initialised by "
                                "the whole block")
    with emitting():
        value = tk.alloc(Barrier().mlir())
        tk.init_barrier(value, count)
    return BarrierHandle(value, count)


def wait(bar: BarrierHandle, phase) -> None:
    """Every lane of the warp waits until the barrier's phase of parity
    `phase % 2` has completed (phase: an int or index value)."""
    _bar(bar, "wait")
    p = as_index(phase, "wait phase")
    with emitting():
        tk.wait(bar.value(), p.ir())


def arrive(bar: BarrierHandle, count: int = 1, cta=None) -> None:
    """The calling warp arrives `count` times (its lane 0 does); cta=r (an
    int or index value, in a cluster kernel): on the barrier at bar's place
    in the shared memory of CTA r of the cluster (a consumer telling the
    peer's producer that a slot is free)."""
    _bar(bar, "arrive")
    n = _count(count, "arrive count")
    r = None if cta is None else cta_index(cta, "arrive", "cta")
    with emitting():
        if r is None:
            tk.arrive(bar.value(), n)
        else:
            tk.arrive_cta(bar.value(), r.ir(), n)


def fence_async() -> None:
    """Order this thread's shared-memory writes before later async-proxy reads
    (TMA stores, wgmma operands): write, fence_async, sync, then issue."""
    with emitting():
        tk.fence_async()


# ------------------------------------------------------------ TMA

def _st(x, op: str, role: str, vector: bool = False) -> Shared:
    """x, an st (or, vector=True, an sv: what TMA loads take)."""
    kinds = (ST, SV) if vector else (ST,)
    if not (isinstance(x, Shared) and isinstance(x.view, kinds)):
        what = "a shared tile or vector (st, sv)" if vector else "a shared tile (st)"
        raise fail(f"{op}: {role} must be {what}, got {_name(x)}")
    return x


def _name(x) -> str:
    return x.view.text() if isinstance(x, Shared) else type(x).__name__


def expect_bytes(bar: BarrierHandle, nbytes: int) -> None:
    """The calling warp arrives once and the phase also waits for `nbytes`
    bytes of TMA loads."""
    _bar(bar, "expect_bytes")
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 1 <= nbytes <= TX_LIMIT:
        raise fail(f"expect_bytes: bytes must be an int in 1..{TX_LIMIT}, got {nbytes!r}")
    with emitting():
        tk.expect_bytes(bar.value(), nbytes)


def expect(bar: BarrierHandle, *tiles) -> None:
    """expect_bytes with the total size of the given shared tiles."""
    if not tiles:
        raise fail("expect: give the shared tiles the phase's TMA loads fill")
    total = 0
    for t in (p for x in tiles for p in ((x.re, x.im) if isinstance(x, Complex) else (x,))):
        s = _st(t, "expect", "every tile", vector=True).view
        total += s.rows * s.cols * itemsize(s.dtype)
    expect_bytes(bar, total)


def _tma_args(op: str, s, g, coords, vector: bool = False):
    _st(s, op, "the shared side", vector)
    if not isinstance(g, GLHandle):
        raise fail(f"{op}: the global side must be a gl argument, got {type(g).__name__}")
    if s.dtype != g.dtype:
        raise fail(f"{op}: TMA copies without converting: {s.view.text()} and gl {g.name} "
                   f"({g.dtype}) must have one dtype")
    if not isinstance(coords, (tuple, list)) or len(coords) != 4:
        raise fail(f"{op}: coordinates are (b, d, r, c) in units of the shared side's shape, "
                   f"got {coords!r}")
    return [as_index(c, f"{op} coordinate") for c in coords]


def load_async(dst: Shared, src: GLHandle, coords, bar: BarrierHandle, multicast=None) -> Shared:
    """Copy the tile of src at coords into dst by TMA; its bytes complete on
    `bar` (expect them for that phase). Out-of-bounds elements read as zero.
    multicast=mask (an int or index value, in a cluster kernel): the tile
    lands at dst's place in every CTA of the cluster whose bit is set in
    mask, its bytes completing on the barrier at bar's place in each."""
    idx = _tma_args("load_async", dst, src, coords, vector=True)
    _bar(bar, "load_async")
    mask = None if multicast is None else cta_index(multicast, "load_async", "multicast", bits=True)
    with emitting():
        if mask is None:
            tk.tma_load(dst.value(), src.value(), [i.ir() for i in idx], bar.value())
        else:
            tk.tma_load_multicast(dst.value(), src.value(), [i.ir() for i in idx], bar.value(), mask.ir())
    return dst


def _store(op: str, dst, src, coords, add: bool) -> None:
    idx = _tma_args(op, src, dst, coords)
    with emitting():
        tk.tma_store(dst.value(), src.value(), [i.ir() for i in idx], add=add)


def store_async(dst: GLHandle, src: Shared, coords) -> None:
    """Copy st src into the tile of dst at coords by TMA (asynchronous: call
    store_async_wait before overwriting src). Out-of-bounds parts are skipped."""
    _store("store_async", dst, src, coords, add=False)


def store_add_async(dst: GLHandle, src: Shared, coords) -> None:
    """Like store_async, adding into dst's values (dst += src)."""
    _store("store_add_async", dst, src, coords, add=True)


def store_async_wait(pending: int = 0, writes: bool = False) -> None:
    """Wait until at most `pending` of this warp's TMA stores still read shared
    memory; writes=True: until at most `pending` have not completed their
    global writes (before a tkc.ops.atomic_add that publishes them to other blocks)."""
    if isinstance(pending, bool) or not isinstance(pending, int) or pending < 0:
        raise fail(f"store_async_wait: pending must be an int >= 0, got {pending!r}")
    with emitting():
        tk.tma_store_wait(pending, writes=bool(writes))


def store_cta(dst: Shared, src: Shared, cta, bar: BarrierHandle) -> None:
    """Copy this CTA's shared tile src into dst's place in the shared memory
    of CTA `cta` of the cluster (an int or index value), by the copy engine
    (distributed shared memory); its bytes complete on the barrier at bar's
    place there, whose phase expects them (tma.expect(bar, dst) in that
    CTA). dst and src are whole tiles (st, not subtiles) of one type. Write
    src, tkc.fence_async(), sync the writers, then issue; src is read until
    that barrier's phase completes, which only the receiver sees."""
    for x, role in ((dst, "dst"), (src, "src")):
        _st(x, "store_cta", role)
    if dst.view != src.view:
        raise fail(f"store_cta: dst and src must be tiles of one type, got {dst.view.text()} "
                   f"and {src.view.text()}")
    _bar(bar, "store_cta")
    r = cta_index(cta, "store_cta", "cta")
    with emitting():
        tk.tma_store_cta(dst.value(), src.value(), r.ir(), bar.value())


# ------------------------------------------------------------ compiler-synchronised

def load(dst: Shared, src: GLHandle, coords) -> Shared:
    """Block-level TMA load of the tile of src at coords into dst; every warp
    may read dst afterwards. The compiler owns the synchronisation: in a
    pipelined loop (tkc.range(n, stages=...)) the load runs ahead into a ring."""
    idx = _tma_args("tma.load", dst, src, coords, vector=True)
    with emitting():
        tk.pipeline_load(dst.value(), src.value(), [i.ir() for i in idx])
    return dst


def prefetch(box: Shared, src: GLHandle, coords) -> None:
    """Bring the tile of src at coords (box's shape: box itself is not
    written) into L2 ahead of a later load, by lane 0 of each calling warp
    (cp.async.bulk.prefetch.tensor): a hint, with nothing to wait for.
    Out-of-bounds parts are ignored."""
    idx = _tma_args("tma.prefetch", box, src, coords, vector=True)
    with emitting():
        tk.tma_prefetch(box.value(), src.value(), [i.ir() for i in idx])


def _pipeline_store(op: str, dst, src, coords, add: bool) -> None:
    idx = _tma_args(op, src, dst, coords)
    with emitting():
        tk.pipeline_store(dst.value(), src.value(), [i.ir() for i in idx], add=add)


def store(dst: GLHandle, src: Shared, coords) -> None:
    """Block-level TMA store of st src into the tile of dst at coords, once
    every warp's writes to src are done. The compiler owns the
    synchronisation (and waits for the store's read before src is written again)."""
    _pipeline_store("tma.store", dst, src, coords, add=False)


def store_add(dst: GLHandle, src: Shared, coords) -> None:
    """tma.store adding into dst's values (dst += src, a reduce-add done by
    the TMA unit: accumulating partial sums from many blocks, e.g. dQ)."""
    _pipeline_store("tma.store_add", dst, src, coords, add=True)


# complex tiles (tkc.cst, tkc.cgl): one copy per part
load_async, store_async, store_add_async, load, store, store_add = (
    partwise(f) for f in (load_async, store_async, store_add_async, load, store, store_add))
