"""The machine: every block of the grid, the warps of a block, and tk.sync.

Each warp runs the kernel body as a Python generator over its own registers
(a list of slot values); the block's shared memory is one dict of arrays,
shared by its warps. A warp's generator yields at every tk.sync: the
scheduler steps each warp, in warp order, to its next barrier, checks that
they all stopped at the same one (else a deadlock on the GPU), and only then
lets them continue. A warp blocked on an mbarrier (tk.wait) yields too and
is resumed once the phase completes (hopper.py). Deterministic, no threads.
Since that order hides missing barriers, shared-memory accesses go through a
race detector (races.py) that checks them against happens-before instead.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..diagnostics import TkcError, error, where
from . import ops, structured  # noqa: F401  (register the op handlers)
from .args import bind, find_kernel, signature
from .hopper import Waiting
from .program import Compiler, execute
from .races import RaceTracker


class BlockState:
    """What the warps of one block share."""

    def __init__(self, idx: tuple, grid: tuple, warps: int = 1, races: bool = True):
        self.idx, self.grid = idx, grid
        self.shared: dict[int, np.ndarray] = {}  # alloc slot -> buffer
        self.groups: dict = {}  # (group op run) -> ops.GroupArrival
        self.races = RaceTracker(warps) if races else None

    def sync(self) -> None:
        """Every live warp passed one tk.sync."""
        self.check_groups()
        if self.races is not None:
            self.races.sync()

    def check_groups(self) -> None:
        """Every group op run since the last barrier was reached by its whole group."""
        for arrival in self.groups.values():
            arrival.check()
        self.groups.clear()


class Warp:
    __slots__ = ("warpid", "block", "counts")

    def __init__(self, warpid: int, block: BlockState):
        self.warpid, self.block = warpid, block
        self.counts: dict = {}  # group op -> runs so far (pairs runs across warps)


class Program:
    """A kernel compiled to closures: body, slots, warps."""

    def __init__(self, sig):
        self.sig = sig
        c = Compiler(sig.warps)
        self.body = c.block(sig.func.regions[0].blocks[0])
        self.nslots = c.nslots


def run(module, args: list, *, kernel: str | None = None, grid: tuple | None = None,
        races: bool = True) -> None:
    """Interpret the tk kernel of `module` on numpy `args` (updated in place).

    module: tile IR (tk + arith + scf + func), before or after
    tk-layout-selection. args: one per kernel argument (see args.py).
    grid: blocks in (x, y, z) (1 to 3 ints); default: the kernel's tk.grid.
    races: check shared-memory accesses for races (races.py).
    """
    sig = signature(find_kernel(module, kernel))
    values, env = bind(sig, list(args))
    grid = _grid(sig, env) if grid is None else _check_grid(sig, grid)
    program = Program(sig)
    with np.errstate(all="ignore"):  # inf/NaN are values here, as on the GPU
        for z, y, x in itertools.product(*(range(n) for n in reversed(grid))):
            run_block(program, values, (x, y, z), grid, races)


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
    warps = []
    for w in range(program.sig.warps):
        env = [None] * program.nslots
        for s, v in zip(program.body.arg_slots, values):
            env[s] = v
        warps.append(execute(program.body, env, Warp(w, block)))
    try:
        schedule(warps, block)
    except TkcError as e:
        raise TkcError(f"{e.message} (in block {idx})", e.where) from e


def schedule(warps: list, block: BlockState) -> None:
    """Run the warps of a block to the end, tk.sync after tk.sync.

    A warp runs until it yields: at a tk.sync (an op) it waits for every live
    warp to reach one; blocked in tk.wait (a hopper.Waiting) it is skipped
    until the barrier phase completes. Warps run in warp order, so the
    interleaving is deterministic; when no warp can move, that is a deadlock.
    """
    stopped = {w: None for w in range(len(warps))}  # live warp -> where it waits
    done: list[int] = []
    while stopped:
        moved = False
        for w, at in list(stopped.items()):
            if at is not None and not (isinstance(at, Waiting) and at.ready()):
                continue
            moved = True
            try:
                stopped[w] = next(warps[w])
            except StopIteration:
                del stopped[w]
                done.append(w)
            except TkcError as e:
                raise TkcError(f"{e.message} (warp {w})", e.where) from e
        syncs = {w: at for w, at in stopped.items() if not isinstance(at, Waiting)}
        if stopped and len(syncs) == len(stopped):
            _check_barrier(syncs, done)
            block.sync()
            stopped = dict.fromkeys(stopped)
        elif stopped and not moved:
            raise _deadlock(stopped, done)
    block.check_groups()


def _deadlock(stopped: dict, done: list) -> TkcError:
    """No warp can move: name the first warp blocked on a barrier, and the rest."""
    w, waiting = next((w, at) for w, at in stopped.items() if isinstance(at, Waiting))
    others = [f"warp {v} waits at {'tk.sync' if not isinstance(at, Waiting) else 'tk.wait'} "
              f"({where(at if not isinstance(at, Waiting) else at.op)})"
              for v, at in stopped.items() if v != w]
    if done:
        others.append(f"warps {done} returned")
    return error(waiting.op, f"deadlock: warp {w} waits for {waiting.describe()}, which no "
                             f"warp can complete" + (f"; {'; '.join(others)}" if others else ""))


def _check_barrier(waiting: dict, done: list) -> None:
    """All live warps stopped at one tk.sync; any other state is a deadlock."""
    first_warp, sync = next(iter(waiting.items()))
    if done:
        raise error(sync, f"deadlock at sync: warps {sorted(waiting)} wait here but "
                          f"warps {done} returned without reaching it")
    others = {w: op for w, op in waiting.items() if op is not sync}
    if others:
        w, op = next(iter(others.items()))
        raise error(sync, f"deadlock at sync: warp {first_warp} waits here but warp {w} "
                          f"waits at another tk.sync ({where(op) or op.location})")
