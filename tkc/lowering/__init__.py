"""tk -> NVVM lowering: tiles become per-thread fragments (fragments.py).

The framework is core.py; compute.py, reduce.py and mma.py hold the register
tile rules, memory.py / workers.py / shared.py the memory and worker rules.
This package imports MLIR only when `lower_module` runs, so pure-Python
modules (fragments.py) stay importable without it.
"""
from __future__ import annotations

from ..passes.registry import register


def lower_module(module) -> None:
    """In place: every func.func with tk.kernel becomes an llvm.func with
    nvvm.kernel inside `gpu.module @tkc` (sm_90a target); the module gets
    gpu.container_module."""
    from .core import lower_module as lower
    lower(module)


@register("tk-lower-to-nvvm", "lower tk kernels to per-thread NVVM/LLVM in gpu.module @tkc")
def _run(module_op) -> None:
    lower_module(module_op)
