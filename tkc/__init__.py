"""tkc: a compiler for ThunderKittens-style GPU kernels.

`import tkc` never imports MLIR: the GPU machine runs prebuilt artifacts
through `tkc.runtime` alone. The kernel-author API (tkc.kernel, tkc.gl, tk
ops) comes from tkc.frontend, which imports MLIR only when a kernel is traced.
"""
__version__ = "0.1.0"

from .frontend import *  # noqa: F401,F403  (kernel, gl, rt, rv, st, sv, range, if_, ...)


def __getattr__(name):
    """The PyTorch ops tkc.attention, tkc.attention_varlen, tkc.linear_attention,
    tkc.based, tkc.hedgehog, tkc.fftconv and tkc.fftconv_filter: imported on
    first use (they need torch, which `import tkc` does not)."""
    if name in ("attention", "attention_varlen"):
        from .kernels import attention_ops
        return getattr(attention_ops, name)
    if name in ("linear_attention", "based", "hedgehog"):
        from .kernels import linear_ops
        return getattr(linear_ops, name)
    if name in ("fftconv", "fftconv_filter"):
        from .kernels import fftconv_ops
        return getattr(fftconv_ops, name)
    raise AttributeError(f"module 'tkc' has no attribute {name!r}")
