"""tkc: a compiler for ThunderKittens-style GPU kernels.

`import tkc` never imports MLIR: the GPU machine runs prebuilt artifacts
through `tkc.runtime` alone. The kernel-author API (tkc.kernel, tkc.gl, tk
ops) comes from tkc.frontend, which imports MLIR only when a kernel is traced.
"""
__version__ = "0.1.0"

from .frontend import *  # noqa: F401,F403  (kernel, gl, rt, rv, st, sv, range, if_, ...)
