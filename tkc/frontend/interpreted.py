"""Kernel.interpret's kernels, prepared once a process: the traced tile IR
after the tile pipeline (legal layouts, verified, staged, as compiled),
compiled to the interpreter's closures (tkc.interpreter.prepare).

The CPU tests and the torch ops' CPU stand-ins interpret one kernel many
times (a parametrized test's shapes, each call of an op); tracing and the
passes cost as much as a run, so each call paid them again. A prepared
kernel is kept by its cache key: its source and specialisation, what the
artifact cache keys a build by (everything the traced IR depends on, in a
process whose compiler does not change). A kernel refused by the passes is
not kept (each call raises again); the passes' warnings are once a process
anyway. The few most recently used kernels are kept (a module and its
closures hold megabytes).
"""
from __future__ import annotations

from collections import OrderedDict

KEEP = 16
_PREPARED: OrderedDict = OrderedDict()   # cache key -> (module, Program)


def prepared(kernel):
    """The interpreter's Program of `kernel` after the tile pipeline."""
    key = kernel.cache_key()
    kept = _PREPARED.get(key)
    if kept is None:
        from ..compiler import TILE_PIPELINE
        from ..interpreter import prepare
        from ..pass_pipeline import run_pipeline
        module = kernel.trace()
        run_pipeline(module, TILE_PIPELINE)
        kept = _PREPARED[key] = (module, prepare(module))  # the module: its ops outlive the Program's uses
        if len(_PREPARED) > KEEP:
            _PREPARED.popitem(last=False)
    _PREPARED.move_to_end(key)
    return kept[1]


def forget() -> None:
    """Drop every prepared kernel (tests that patch the frontend or the
    passes, whose kernels must be traced and passed again)."""
    _PREPARED.clear()
