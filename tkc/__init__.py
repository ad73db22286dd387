"""tkc: a compiler for ThunderKittens-style GPU kernels.

`import tkc` never imports MLIR: the GPU machine runs prebuilt artifacts
through `tkc.runtime` alone. The kernel-author API (tkc.kernel, tkc.gl, tk
ops) comes from tkc.dsl (tkc.frontend's exports), which imports MLIR only when a
kernel is traced; the PyTorch ops (tkc.attention, ...) come from tkc.torchops.
"""
__version__ = "0.1.0"

from .dsl import *  # noqa: F401,F403  (kernel, gl, rt, rv, st, sv, range, if_, ...)
from .tune import autotune  # noqa: F401  (tkc/tune: a builder's space, tuned per GPU)


_TORCH_OPS = ("attention", "attention_varlen", "attention_fp8", "attention_fp8_vt", "fp8_v_layout",
              "linear_attention", "based", "hedgehog", "fftconv", "fftconv_filter", "layer_norm",
              "rms_norm", "rotary_embedding", "matmul",
              "linear", "swiglu", "scaled_mm", "quantize_fp8", "grouped_scaled_mm", "all_gather_matmul",
              "matmul_reduce_scatter", "ring_attention")


def __getattr__(name):
    """The PyTorch ops (tkc.torchops: tkc.attention, tkc.layer_norm, ...):
    imported on first use (they need torch, which `import tkc` does not)."""
    if name in _TORCH_OPS:
        from . import torchops  # here, not at the top: torch is needed only for these
        op = globals()[name] = getattr(torchops, name)  # later lookups skip this hook
        return op
    if name == "nn":  # tkc.nn: nn.Linear / LayerNorm / RMSNorm and SDPA by the ops (torch too)
        import importlib
        return importlib.import_module(".nn", __name__)   # (`from . import nn` would ask this hook)
    raise AttributeError(f"module 'tkc' has no attribute {name!r}")
