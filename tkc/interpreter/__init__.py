"""A CPU interpreter for tile IR (numpy), so kernels and passes are tested
for numbers where there is no GPU.

    from tkc.interpreter import run
    run(module, [a, b, c], grid=(2, 2))   # a, b, c: numpy arrays, updated in place

Semantics are those of docs/tile-ir.md: every block of the grid runs; the
warps of a block each run the body on their own registers and share the
block's shared memory; tk.sync is a (named) barrier (machine.py, syncs.py).
Shared-memory accesses not ordered by a tk.sync or an mbarrier, including
writes while a wgmma or TMA store may still read, are located errors
(races.py), since the sequential warp order would otherwise hide them.
Register values are float32 arrays rounded to bf16/f16 when their type says
so; shared memory starts as NaN so that reads of unwritten memory show.
"""
from __future__ import annotations


def prepare(module, kernel: str | None = None):
    """The tk kernel of `module` compiled once (machine.Program), to pass to
    run or run_ranks in place of the module: runs on many arguments compile
    it once."""
    from .machine import prepare as _prepare
    return _prepare(module, kernel)


def run(module, args: list, *, kernel: str | None = None, grid: tuple | None = None,
        races: bool = True, sms: int = 4) -> None:
    """Interpret the tk kernel of `module` (or of a prepare()d Program) on
    numpy `args` (see machine.run); `sms` is the SM count a grid
    expression's `sms` reads."""
    from .machine import run as _run  # imports MLIR-facing modules lazily
    _run(module, args, kernel=kernel, grid=grid, races=races, sms=sms)


def run_ranks(module, rank_args: list, *, kernel: str | None = None, grid: tuple | None = None,
              races: bool = True, sms: int = 4, engines=None) -> None:
    """Interpret the kernel as len(rank_args) ranks sharing their pgl
    arguments' buffers, copy engines beside them (ranks.run_ranks;
    docs/multi-gpu.md)."""
    from .ranks import run_ranks as _run
    _run(module, rank_args, kernel=kernel, grid=grid, races=races, sms=sms, engines=engines)


__all__ = ["prepare", "run", "run_ranks"]
