"""The machine: every block of the grid, the warps of a block, and tk.sync.

Each warp runs the kernel body as a Python generator over its own registers
(a list of slot values); the block's shared memory is one dict of arrays,
shared by its warps. A warp's generator yields at every tk.sync: the
scheduler steps each warp, in warp order, to its next barrier, checks that
they all stopped at the same one (else a deadlock on the GPU), and only then
lets them continue. Deterministic, no threads.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..diagnostics import TkcError, error, where
from . import ops, structured  # noqa: F401  (register the op handlers)
from .args import bind, find_kernel, signature
from .program import Compiler, execute


class BlockState:
    """What the warps of one block share."""

    def __init__(self, idx: tuple, grid: tuple):
        self.idx, self.grid = idx, grid
        self.shared: dict[int, np.ndarray] = {}  # alloc slot -> buffer
        self.groups: dict = {}  # (group op run) -> ops.GroupArrival

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


def run(module, args: list, *, kernel: str | None = None, grid: tuple | None = None) -> None:
    """Interpret the tk kernel of `module` on numpy `args` (updated in place).

    module: tile IR (tk + arith + scf + func), before or after
    tk-layout-selection. args: one per kernel argument (see args.py).
    grid: blocks in (x, y, z) (1 to 3 ints); default: the kernel's tk.grid.
    """
    sig = signature(find_kernel(module, kernel))
    values, env = bind(sig, list(args))
    grid = _grid(sig, env) if grid is None else _check_grid(sig, grid)
    program = Program(sig)
    with np.errstate(all="ignore"):  # inf/NaN are values here, as on the GPU
        for z, y, x in itertools.product(*(range(n) for n in reversed(grid))):
            run_block(program, values, (x, y, z), grid)


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


def run_block(program: Program, values: list, idx: tuple, grid: tuple) -> None:
    block = BlockState(idx, grid)
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
    """Step every live warp to its next tk.sync, barrier after barrier."""
    live = list(range(len(warps)))
    while live:
        waiting, done = {}, []
        for w in live:
            try:
                waiting[w] = next(warps[w])
            except StopIteration:
                done.append(w)
            except TkcError as e:
                raise TkcError(f"{e.message} (warp {w})", e.where) from e
        if waiting:
            _check_barrier(waiting, done)
        block.check_groups()
        live = list(waiting)


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
