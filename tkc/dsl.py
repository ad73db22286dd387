"""The kernel-author DSL: the names `import tkc` gives a kernel's author, without
the PyTorch ops (tkc.attention, ...), which stay on the package root.

    import tkc.dsl as tkc            # below the package root (tkc/kernels/)
    from tkc.dsl import bf16, f32, gl, rt, st
    from tkc.ops import *

    @tkc.kernel(warps=4, grid=lambda a, b, c: (c.c // 64, c.r // 64))
    def gemm(a: gl(bf16, 1, 1, None, None), ...): ...

Users write `import tkc` and get these same names (tkc/__init__.py re-exports
them). Code inside the package imports them from here, never from the root:
the root reaches the kernel library through the PyTorch ops (tkc.torchops
imports tkc.kernels), so a kernel importing the root would close an import
cycle. The names are tkc.frontend's package exports (its __all__: kernel, gl,
rt, rv, st, sv, range, if_, block_idx, ...); like tkc.frontend, this module
imports MLIR only when a kernel is traced.
"""
from .frontend import *  # noqa: F401,F403
from .frontend import __all__  # noqa: F401
