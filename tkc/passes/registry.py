"""The pass registry: tk passes by name, so pipelines mix them with upstream ones.

A pass is a Python function `run(module_op: ir.Operation) -> None` that raises
TkcError (located) on failure. `register` records it with a one-line
description; `tkc --list-passes` prints them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

PASSES: dict[str, "PassInfo"] = {}


@dataclass(frozen=True)
class PassInfo:
    name: str
    description: str
    run: Callable


def register(name: str, description: str):
    def deco(fn):
        PASSES[name] = PassInfo(name, description, fn)
        return fn
    return deco


def all_passes() -> dict[str, PassInfo]:
    """Every registered tk pass (importing the modules that define them)."""
    from .. import passes  # noqa: F401  (registers verify, layout selection, ...)
    from . import grid_ordering, pipeline_staging  # noqa: F401  (need MLIR: imported here)
    from .. import lowering  # noqa: F401  (registers tk-lower-to-nvvm)
    return dict(sorted(PASSES.items()))
