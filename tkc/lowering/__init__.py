"""tk -> NVVM lowering: tiles become per-thread fragments (tkc/hopper/fragments.py).

The framework is core.py; compute.py, reduce.py and mma.py hold the register
tile rules, memory.py / workers.py / shared.py the memory and worker rules.
The Hopper facts the rules share with the passes and the interpreter
(fragments, lane maps, the shared layout, TMA boxes) are in tkc/hopper/.
This package imports MLIR only when `lower_module` runs; tkc.pass_pipeline
registers it as the `tk-lower-to-nvvm` pass.
"""
from __future__ import annotations


def lower_module(module) -> None:
    """In place: every func.func with tk.kernel becomes an llvm.func with
    nvvm.kernel inside `gpu.module @tkc` (sm_90a target); the module gets
    gpu.container_module."""
    from .walker import lower_module as lower
    lower(module)
