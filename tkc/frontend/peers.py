"""Several GPUs in a kernel (docs/multi-gpu.md): the rank, flags and a barrier
across ranks, ThunderKittens' `device<N>::signal / wait / barrier_all`
without multicast.

    @tkc.kernel(warps=4, grid=...)
    def k(x: pgl(bf16, 1, 1, "M", "K"), flags: pgl(i32, 1, 1, 1, 64), ...):
        me, n = tkc.rank(), tkc.world_size()
        with tkc.if_(tkc.warpid() == 0):
            for p in tkc.range(n):
                tma.store_async(x.peer(p), s, (0, 0, me, 0))   # my tile into every rank's x
            tma.store_async_wait(writes=True)                 # their writes done ...
            for p in tkc.range(n):
                tkc.signal(flags.peer(p), at=(0, 0, 0, me))   # ... then released to rank p
        tkc.wait_signal(flags, at=(0, 0, 0, src), value=1)    # rank src's tile is here

A flag is one element of an i32 gl, usually a pgl's (`flags.peer(p)`: rank
p's). `signal` and `wait_signal` are warp-level (lane 0 of the calling warp
acts, like tkc.arrive); `barrier_all` is block-level. Flags count up and are
never reset by signal: compare with a target that grows per launch (an epoch
argument), or let barrier_all take its arrivals back.
"""
from __future__ import annotations

from ..dialect import ops as tk
from .tiles import GLHandle, PGLSpec
from .trace import current, emitting, fail
from .values import Index, as_index


def rank() -> Index:
    """This process's rank among the ranks of the kernel's pgl arguments."""
    _need_pgl("rank")
    with emitting():
        return Index(tk.rank())


def world_size() -> Index:
    """The number of ranks (each holding one buffer of every pgl argument)."""
    _need_pgl("world_size")
    with emitting():
        return Index(tk.world_size())


def _need_pgl(op: str) -> None:
    if not current().has_pgl:
        raise fail(f"{op}: the kernel has no pgl argument; ranks belong to the parallel "
                   "gls a launch passes (annotate one with tkc.pgl(...))")


def _flag(op: str, flags, at) -> list:
    if not (isinstance(flags, GLHandle) and flags.dtype == "i32"):
        raise fail(f"{op}: flags must be an i32 gl (a pgl's, or its .peer(r)), got "
                   f"{getattr(flags, 'name', type(flags).__name__)}")
    if at is None:
        raise fail(f"{op}: give the flag's element as at=(b, d, row, col)")
    if not isinstance(at, (tuple, list)) or len(at) != 4:
        raise fail(f"{op}: at= takes 4 element coordinates (b, d, row, col), got {at!r}")
    return [as_index(c, f"{op} coordinate").ir() for c in at]


def signal(flags, at=None, value=1) -> None:
    """Lane 0 of the calling warp adds `value` (an int or Index) to the flag
    flags[at] with system-scope release (red.release.sys.global.add): what
    this warp wrote before (and what it acquired) is visible to a warp whose
    wait_signal sees the new value. A TMA store's writes count once the warp
    waited for them: tma.store_async_wait(writes=True) first."""
    idx = _flag("signal", flags, at)
    v = as_index(value, "signal value")
    with emitting():
        tk.signal(flags.value(), idx, v.ir())


def wait_signal(flags, at=None, value=1) -> None:
    """The calling warp waits until the flag flags[at] is at least `value`
    (lane 0 spins on ld.acquire.sys), then reads what the signallers
    released, TMA loads included."""
    idx = _flag("wait_signal", flags, at)
    v = as_index(value, "wait_signal value")
    with emitting():
        tk.wait_signal(flags.value(), idx, v.ir())


def barrier_all(flags, at=None) -> None:
    """Every block that calls it waits until every rank's block called it with
    the same flag (at the kernel's top level, the whole block takes part):
    the block meets, warp 0 signals flag `at` of every rank, waits for the
    world's arrivals on its own, and takes them back (so the flag is ready
    for the next barrier); the block meets again. `flags` is a pgl of i32."""
    if not (isinstance(flags, GLHandle) and flags.peer_of is None and flags.dtype == "i32"
            and isinstance(flags.spec, PGLSpec)):
        raise fail(f"barrier_all: flags must be an i32 pgl argument (every rank's flag), got "
                   f"{getattr(flags, 'name', type(flags).__name__)}")
    current().require_top_level("barrier_all", "the whole block takes part")
    from .control import if_, range as trange
    from .workers import sync, warpid
    n = world_size()
    sync()
    with if_(warpid() == 0):
        for p in trange(n):
            signal(flags.peer(p), at, 1)
        wait_signal(flags, at, n)
        signal(flags, at, 0 - n)
    sync()
