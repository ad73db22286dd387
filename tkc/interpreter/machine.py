"""The machine: every block of the grid, the warps of a block, and barriers.

Each warp runs the kernel body as a Python generator over its own registers
(a list of slot values); the block's shared memory is one dict of buffers,
shared by its warps. A warp's generator yields where it must wait: at a
tk.sync (or another op that synchronises the block) it yields a
syncs.SyncPoint, and the scheduler holds it until that named barrier has its
warps (checking they all stopped at the same op, else a deadlock on the
GPU); blocked on an mbarrier (tk.wait) it yields a hopper.Waiting and is
resumed once the phase completes. Warps run in warp order, each to its next
stop. Deterministic, no threads. Since that order hides missing barriers,
shared-memory accesses go through a race detector (races.py) that checks
them against happens-before instead.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..diagnostics import TkcError, error, where
from ..dialect.kernel import cluster_shape, group_warps, kernel_blocks
from . import block, cluster, ops, peers, pipeline, shared, structured  # noqa: F401  (register the op handlers)
from .args import bind, find_kernel, signature
from .hopper import Waiting
from .program import Compiler, execute
from .races import RaceTracker
from .syncs import NamedBarriers, SyncPoint
from .workers import group_heights


class BlockState:
    """What the warps of one block share."""

    def __init__(self, idx: tuple, grid: tuple, warps: int = 1, races: bool = True):
        self.idx, self.grid = idx, grid
        # several GPUs (peers.py): this block's rank, the world's size, and its
        # agent number in the ranks' peer-memory race check (None: one GPU)
        self.rank, self.world, self.agent, self.peers = 0, 1, 0, None
        # a cluster kernel's (cluster.py): the ClusterState of its CTAs, this one's rank there
        self.cluster, self.cta = None, 0
        self.current_op = None   # the op a warp runs now (program.execute)
        self.shared: dict[int, list] = {}  # alloc slot -> its slots (a ring's N, else one)
        self.groups: dict = {}  # (group op run) -> ops.GroupArrival
        self.barriers = NamedBarriers()
        self.races = RaceTracker(warps) if races else None
        # per warp, its TMA stores whose global writes may not have completed:
        # (op, the gl's whole array), oldest first (tk.atomic_add checks them)
        self.tma_writes: dict[int, list] = {}
        self.tma_written: list = []  # (op, array, warp, its epoch then) once completed
        self.atomic_old: dict = {}  # tk.atomic_add's scratch (id) -> the old value its adder read
        self.reductions: dict = {}  # a block reduction's run -> {warp: its value} (block.py)

    def sync(self, warps: list[int], barrier: int) -> None:
        """`warps` waited at named barrier `barrier` and completed it (with the
        warps that only arrived on it)."""
        self.check_groups(set(warps))
        if self.races is not None:
            self.races.sync(warps, barrier)

    def finish(self, w: int) -> None:
        """Warp w returned."""
        if self.races is not None:
            self.races.finish(w)

    def check_groups(self, warps: set | None = None) -> None:
        """Every group op run since the last barrier was reached by its whole
        group; at a named barrier, only the groups made of its warps."""
        for token, arrival in list(self.groups.items()):
            if warps is None or arrival.members(token) <= warps:
                arrival.check()
                del self.groups[token]


class Warp:
    __slots__ = ("warpid", "block", "counts")

    def __init__(self, warpid: int, block: BlockState):
        self.warpid, self.block = warpid, block
        self.counts: dict = {}  # group op -> runs so far (pairs runs across warps)


class Program:
    """A kernel compiled to closures: body, slots, warps. It keeps no state
    between runs (a run's is its blocks' and warps'), so one Program runs on
    any arguments (prepare(), Kernel.interpret's cache)."""

    def __init__(self, sig):
        self.sig = sig
        c = Compiler(sig.warps, kernel_blocks(sig.func), group_warps(sig.func))
        self.body = c.block(sig.func.regions[0].blocks[0])
        self.nslots = c.nslots


def prepare(module, kernel: str | None = None) -> Program:
    """The tk kernel of `module` (named `kernel`, default the only one)
    compiled once, for run()s on any arguments."""
    return Program(signature(find_kernel(module, kernel)))


def run(module, args: list, *, kernel: str | None = None, grid: tuple | None = None,
        races: bool = True, sms: int = 4) -> None:
    """Interpret the tk kernel of `module` on numpy `args` (updated in place).

    module: tile IR (tk + arith + scf + func), before or after
    tk-layout-selection, or a Program from prepare() (`kernel` unused).
    args: one per kernel argument (see args.py).
    grid: blocks in (x, y, z) (1 to 3 ints); default: the kernel's tk.grid.
    races: check shared-memory accesses for races (races.py).
    sms: the SM count the grid language's `sms` stands for (a persistent
    kernel's grid is min(sms, work items)).
    """
    prepared = module if isinstance(module, Program) else None
    sig = prepared.sig if prepared is not None else signature(find_kernel(module, kernel))
    values, env = bind(sig, list(args))
    if isinstance(sms, bool) or not isinstance(sms, (int, np.integer)) or sms < 1:
        raise error(sig.func, f"sms must be a positive int, got {sms!r}")
    grid = _grid(sig, {"sms": int(sms), **env}) if grid is None else _check_grid(sig, grid)
    program = prepared if prepared is not None else Program(sig)
    live = _live_rows(sig, args, grid)
    shape = cluster_shape(sig.func)
    if shape != (1, 1, 1):
        with np.errstate(all="ignore"):
            return run_clusters(program, values, grid, shape, races)
    with np.errstate(all="ignore"):  # inf/NaN are values here, as on the GPU
        for z, y, x in itertools.product(*(range(n) for n in reversed(grid))):
            if live is None or y < live[z]:
                run_block(program, values, (x, y, z), grid, races)


def _live_rows(sig, args, grid) -> list | None:
    """Over ragged groups (tk.ragged) before tk-grid-ordering wrote the item
    loop (no tk.work yet), the grid is the work-item space, of which only the
    live items run (docs/tile-ir.md): group z's y values below h_z =
    min(max(ceil(count[z] / R), 0), Y), count[z] 0 past the gl's end. Else
    None: every block runs. (Without this the traced IR ran the dead items
    too, and tk-grid-ordering changed the kernel's outputs.)"""
    fn = sig.func
    if "tk.ragged" not in fn.attributes or "tk.work" in fn.attributes:
        return None
    from ..dialect.kernel import ragged_of
    arg, rows = ragged_of(fn)
    return group_heights(args[arg.arg_number], rows, grid[2], grid[1])


def _grid(sig, env) -> tuple:
    from ..runtime.grid import evaluate
    try:
        return _check_grid(sig, evaluate(sig.grid, env))
    except TkcError as e:
        raise error(sig.func, f"tk.grid {sig.grid}: {e.message}") from e


def _check_grid(sig, grid) -> tuple:
    grid = tuple(int(n) for n in grid)
    if not 1 <= len(grid) <= 3 or any(n < 1 for n in grid):
        raise error(sig.func, f"grid must be 1 to 3 positive sizes, got {grid}")
    return grid + (1,) * (3 - len(grid))


def run_block(program: Program, values: list, idx: tuple, grid: tuple,
              races: bool = True) -> None:
    block = BlockState(idx, grid, program.sig.warps, races)
    try:
        schedule(_warps(program, values, block), block)
    except TkcError as e:
        raise TkcError(f"{e.message} (in block {idx})", e.where) from e


def run_clusters(program: Program, values: list, grid: tuple, shape: tuple, races: bool) -> None:
    """The grid in clusters of `shape`: each cluster's blocks run together
    (cluster.py), one cluster after another."""
    if any(g % c for g, c in zip(grid, shape)):
        raise error(program.sig.func, f"grid {grid} is not a multiple of the kernel's cluster {shape}")
    cx, cy, cz = shape
    for z, y, x in itertools.product(*(range(0, g, c) for g, c in zip(reversed(grid), reversed(shape)))):
        runs = []
        for k, j, i in itertools.product(range(cz), range(cy), range(cx)):   # x fastest: the CTA rank
            idx = (x + i, y + j, z + k)
            block = BlockState(idx, grid, program.sig.warps, races)
            runs.append((idx, BlockRun(_warps(program, values, block), block)))
        cluster.ClusterState([r.block for _, r in runs], shape, program.sig.warps)
        cluster.schedule(runs)


def _warps(program: Program, values: list, block: BlockState) -> list:
    """The block's warps, each a generator running the kernel's body."""
    out = []
    for w in range(program.sig.warps):
        env = [None] * program.nslots
        for s, v in zip(program.body.arg_slots, values):
            env[s] = v
        out.append(execute(program.body, env, Warp(w, block)))
    return out


def schedule(warps: list, block: BlockState) -> None:
    """Run the warps of a block to the end, barrier after barrier (BlockRun);
    when no warp can move, that is a deadlock."""
    run = BlockRun(warps, block)
    while run.stopped:
        if not run.step():
            raise _deadlock(run.stopped, run.done, block)
    block.check_groups()


class BlockRun:
    """The warps of one block, run round by round (ranks.py interleaves the
    blocks of several ranks this way).

    A warp runs until it yields: at a SyncPoint it waits until its named
    barrier completes (the arrival that completes it releases every warp of
    it); blocked in tk.wait (a hopper.Waiting, or a wait on a flag) it is
    skipped until the wait can pass. Warps run in warp order, so the
    interleaving is deterministic.
    """

    def __init__(self, warps: list, block: BlockState):
        self.warps, self.block = warps, block
        self.stopped = {w: None for w in range(len(warps))}  # live warp -> where it waits (None: runs)
        self.done: list[int] = []

    def step(self) -> bool:
        """Every warp that can move runs to its next stop; whether any moved."""
        stopped, block, moved = self.stopped, self.block, False
        for w in list(stopped):
            at = stopped[w]
            if at is not None and not (isinstance(at, Waiting) and at.ready()):
                continue
            moved = True
            try:
                at = stopped[w] = next(self.warps[w])
            except StopIteration:
                del stopped[w]
                self.done.append(w)
                block.finish(w)
                continue
            except TkcError as e:
                raise TkcError(f"{e.message} (warp {w})", e.where) from e
            if isinstance(at, SyncPoint):
                _arrive(block, stopped, w, at)
                if at.arrive:           # bar.arrive: the warp goes on
                    stopped[w] = None
        return moved

    def deadlock(self) -> TkcError:
        return _deadlock(self.stopped, self.done, self.block)


def _arrive(block: BlockState, stopped: dict, w: int, point: SyncPoint) -> None:
    """Warp w reached a barrier; if that completes it, its waiting warps go on."""
    if point.arrive and block.races is not None:
        block.races.release_named(w, point.id)
    released = block.barriers.arrive(w, point)
    if released is not None:
        block.sync(released, point.id)
        for v in released:
            stopped[v] = None


def _stop(at) -> str:
    """Where a warp is stopped: 'tk.wait (f:l)' or its SyncPoint's description."""
    return f"tk.wait ({where(at.op)})" if isinstance(at, Waiting) else at.describe()


def _deadlock(stopped: dict, done: list, block: BlockState) -> TkcError:
    """No warp can move: name the first warp blocked on an mbarrier, and the
    rest; with none, the first barrier that cannot complete."""
    waiting = [(w, at) for w, at in stopped.items() if isinstance(at, Waiting)]
    if not waiting:
        return block.barriers.deadlock(stopped, done)
    w, at = waiting[0]
    others = [f"warp {v} waits at {_stop(p)}" for v, p in stopped.items() if v != w]
    if done:
        others.append(f"warps {done} returned")
    return error(at.op, f"deadlock: warp {w} waits for {at.describe()}, which no "
                        f"warp can complete" + (f"; {'; '.join(others)}" if others else ""))
