"""The kernel library, written in the tkc DSL.

`library()` lists every specialisation that `tkc build` compiles ahead of
time (and that the GPU tests and benchmarks run from the cache).

The kernels import the DSL as `import tkc.dsl as tkc` and `from tkc.dsl
import ...`, never from the package root: `import tkc` reaches this library
through the PyTorch ops (tkc.attention, ...), so a kernel importing the root
would close an import cycle.

(*) Through attention_bwd.py, which gathers the attention backward's modules
under their old name: loading it here keeps tkc.kernels.attention_bwd the
function, not that module.
"""
from __future__ import annotations

from .attention import attention_fwd
from .attention_bwd import attention_bwd, attention_kernels, attention_prep  # (*)
from .attention_hopper import HEAD_DIMS, attention_hopper
from .collective_gemm import all_gather_gemm, gemm_reduce_scatter, rs_barrier
from .fftconv import fftconv
from .gemm import gemm
from .gemm_hopper import gemm_hopper
from .hedgehog import hedgehog
from .layernorm import layernorm_bwd, layernorm_fwd
from .linear_attention import based, linear_attention
from .rmsnorm import rmsnorm_bwd, rmsnorm_fwd
from .rotary import rotary
from .scaled_mm_hopper import scaled_mm_hopper


NORMS = (layernorm_fwd, layernorm_bwd, rmsnorm_fwd, rmsnorm_bwd)
NORM_WIDTHS = (1024, 2048, 4096, 8192)


GEMM_TILES = (64, 128, 192, 256)  # BN: tkc.matmul's tuned pick per shape (tkc/torchops/gemm.py)


def _gemm_ops():
    """The GEMMs tkc.matmul and tkc.linear launch (forward and backward), at each tile width."""
    pairs = ((False, False), (False, True), (True, False))  # (transpose_a, transpose_b)
    plain = [gemm_hopper("bf16", tb, BN=bn, transpose_a=ta) for bn in GEMM_TILES for ta, tb in pairs]
    batched = [gemm_hopper("bf16", tb, BN=bn, transpose_a=ta, batched=True)
               for bn in GEMM_TILES for ta, tb in pairs]
    linear = [gemm_hopper("bf16", True, BN=bn, bias=bias, activation=act, preact=preact)
              for bn in GEMM_TILES for bias in (False, True) for act in (None, "gelu", "silu")
              for preact in ((False, True) if act else (False,)) if bias or act]
    return plain + batched + linear


GEMM_OPS = _gemm_ops()


def library():
    return [
        gemm("bf16"),
        gemm("f32"),
        gemm("bf16", BM=64, BN=64, BK=32, WM=2, WN=2),
        gemm_hopper("bf16"),
        gemm_hopper("f32"),
        gemm_hopper("bf16", transpose_b=True),
        gemm_hopper("f32", transpose_b=True),
        attention_fwd(64),
        attention_fwd(128, KV_SUB=16),
        # tkc.attention: forwards, prep and backward per head dim, mask and layout
        *dict.fromkeys(k for D in HEAD_DIMS for causal in (False, True)
                       for layout in ("bhld", "blhd", "varlen") for k in attention_kernels(D, causal, layout)),
        # tkc.matmul and tkc.linear (forward and backward; tkc/torchops/gemm.py)
        *GEMM_OPS,
        # tkc.scaled_mm: per-tensor and row-wise scales, bf16 and f32 out, both tile widths
        *(scaled_mm_hopper(out, rowwise, BN=bn) for out in ("bf16", "f32") for rowwise in (False, True)
          for bn in (128, 256)),
        # tkc.rotary_embedding at the common head dims
        *(rotary(D, interleaved=i) for D in (64, 128, 256) for i in (False, True)),
        # tkc.layer_norm / tkc.rms_norm at common model widths: with a residual or
        # without, with dropout or without
        *(build(D, dropout=dropout, residual=residual) for build in NORMS
          for D in NORM_WIDTHS for dropout in (False, True) for residual in (True, False)),
        # tkc.linear_attention (Hedgehog-sized, Mamba-2-sized, with decay and without) and tkc.based
        *(linear_attention(F, DV, decay) for F, DV in ((64, 64), (128, 128), (128, 64))
          for decay in (False, True)),
        based(),
        hedgehog(),                             # tkc.hedgehog
        # tkc.fftconv: circular at N 1024, 2048, 4096 and causal (L = N / 2)
        *(fftconv(N, L) for N in (1024, 2048, 4096) for L in (N, N // 2)),
        # ... and with one consumer warpgroup fewer, where a block still has two
        # (tkc.fftconv's pick when that fills the SMs better: D 768 at N 1024)
        *(fftconv(N, L, consumers=3) for N in (1024, 2048) for L in (N, N // 2)),
        # tkc.all_gather_matmul / tkc.matmul_reduce_scatter at 2 to 5 ranks (all_gather_gemm
        # spills 4 bytes at 6 to 8: not prebuilt until it does not)
        *(k(world) for world in range(2, 6) for k in (all_gather_gemm, gemm_reduce_scatter)),
        rs_barrier,
    ]
