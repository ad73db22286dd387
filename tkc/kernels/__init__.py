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
from .attention_bwd import attention_bwd, attention_prep  # (*)
from .attention_fp8_v import fp8_v_layout_kernel, loads_for
from .attention_hopper import HEAD_DIMS, attention_hopper, decode_kernels
from .attention_merge import attention_merge
from .attention_schedule import backward_space, forward_space, fp8_forward_space
from .collective_gemm import all_gather_gemm, gemm_reduce_scatter, rs_barrier
from .fftconv import fftconv
from .gemm import gemm
from .gemm_hopper import gemm_hopper, tile_rows
from .gemm_space import GATED_SCHEDULES, SCHEDULES as GEMM_SCHEDULES  # tkc.matmul's schedules (gemm_hopper's keywords)
from .hedgehog import hedgehog
from .layernorm import lane_choices, layernorm_bwd, layernorm_fwd, split_args
from .linear_attention import based, linear_attention, library_kernels as linear_library
from .norm_grads import norm_grads
from .rmsnorm import rmsnorm_bwd, rmsnorm_fwd
from .quantize_fp8 import quantize_fp8
from .rotary import rotary, splits as rotary_splits
from .scaled_mm_blockwise import scaled_mm_blockwise
from .scaled_mm_grouped import grouped_contiguous, grouped_counts, grouped_masked
from .scaled_mm_hopper import FAST_WIDTHS, HEIGHTS, PROMOTED_BN, scaled_mm_hopper


NORMS = (layernorm_fwd, layernorm_bwd, rmsnorm_fwd, rmsnorm_bwd)
NORM_WIDTHS = (1024, 2048, 4096, 8192, 16384)   # the norms' prebuilt widths, which their spaces tune at


def _gemm_ops():
    """The GEMMs tkc.matmul, tkc.linear and tkc.swiglu launch (forward and backward), at each schedule."""
    pairs = ((False, False), (False, True), (True, False))  # (transpose_a, transpose_b)
    # (BM 16 with A transposed takes BM 64: tile_rows; a schedule's kernel once)
    products = {tuple(sorted(dict(s, BM=s["BM"] if s["swap"] else tile_rows(s["BM"], ta),
                                  transpose_a=ta, transpose_b=tb).items())): None
                for s in GEMM_SCHEDULES for ta, tb in pairs}
    plain = [gemm_hopper("bf16", **dict(p)) for p in products]
    batched = [gemm_hopper("bf16", batched=True, **dict(p)) for p in products]
    linear = [gemm_hopper("bf16", True, bias=bias, activation=act, preact=preact, **s)
              for s in GEMM_SCHEDULES for bias in (False, True)
              for act in (None, "gelu", "silu") for preact in ((False, True) if act else (False,))
              if bias or act]
    gated = [gemm_hopper("bf16", True, activation="swiglu", preact=preact, **s)
             for s in GATED_SCHEDULES for preact in (False, True)]
    return plain + batched + linear + gated


GEMM_OPS = _gemm_ops()

# tkc.attention's common shapes: head dims 64, 96, 128 and 256, causal and not,
# in the strided bhld kernels (which take SDPA's layout and FlashAttention's
# alike). The library builds every schedule their tables may pick
# (attention_schedule's spaces, which hold nothing else) and the backward's
# prep; varlen compiles at its first call, or ahead with `tkc build
# tkc/kernels/attention_tuned.py` (every space's candidates: what tuning
# offline needs), which the GPU tests' build includes.
ATTENTION_COMMON = [(D, causal, "bhld") for D in HEAD_DIMS for causal in (False, True)]


def _attention_ops():
    """The kernels tkc.attention may launch for the common shapes."""
    out = [attention_prep(D, layout) for D, causal, layout in ATTENTION_COMMON if not causal]
    for D, causal, layout in ATTENTION_COMMON:
        out += [attention_hopper(D, causal, layout, s) for s in forward_space(D, causal, layout)]
        out += [attention_bwd(D, causal, layout, s) for s in backward_space(D, causal, layout)]
    # tkc.attention_fp8 (bhld, D 64 and 128, causal and not): every schedule of its spaces (D 256, as
    # bf16's, compiles at its first call or with `tkc build tkc/kernels/attention_tuned.py`)
    out += [attention_hopper(D, causal, "bhld", s, dtype="f8e4m3") for D in (64, 128)
            for causal in (False, True) for s in fp8_forward_space(D, causal)]
    out += [fp8_v_layout_kernel(D, n) for D in (64, 128) for n in loads_for(D)]   # ... its V^T's
    for D in HEAD_DIMS:   # the decode path: split-KV, its merge, unsplit (torchops/attn_decode.py)
        out += decode_kernels(D)
    return out


def _norm_ops():
    """The norms' kernels at common model widths, with a residual or without,
    with dropout or without, each row split every way its tuned table may
    pick (tkc/torchops/norm_tuned.py's spaces hold lane_choices, nothing
    else); a choice that makes the rule's split is the rule's kernel."""
    out = {}
    for build in NORMS:
        kind = "bwd" if build in (layernorm_bwd, rmsnorm_bwd) else "fwd"
        for D in NORM_WIDTHS:
            for dropout in (False, True):
                for residual in (True, False):
                    for v in lane_choices(kind, D, dropout):
                        k = build(D, dropout, 4, residual, **split_args(v))
                        out.setdefault(k.name, k)
    return list(out.values()) + [norm_grads(1), norm_grads(2)]   # (and the weights' gradients)


def library():
    return [
        gemm("bf16"),
        gemm("f32"),
        gemm("bf16", BM=64, BN=64, BK=32, WM=2, WN=2),
        gemm_hopper("bf16"),
        gemm_hopper("f32"),
        gemm_hopper("bf16", transpose_b=True),
        gemm_hopper("f32", transpose_b=True),
        # tkc.attention: forwards, prep and backwards of the common shapes; tkc.attention_fp8
        *_attention_ops(),
        # tkc.matmul and tkc.linear (forward and backward; tkc/torchops/gemm.py)
        *GEMM_OPS,
        # tkc.scaled_mm: per-tensor and row-wise scales, bf16 and f32 out; promoted
        # (128 wide, 128 or 192 rows) and use_fast_accum at each tile width it tunes over
        *(scaled_mm_hopper(out, rowwise, BN=bn, fast_accum=fast, BM=bm) for out in ("bf16", "f32")
          for rowwise in (False, True)
          for bn, fast, bm in [(PROMOTED_BN, False, h) for h in HEIGHTS] + [(w, True, 128) for w in FAST_WIDTHS]),
        # ... with block scales (1x128 and 128x128), and tkc.quantize_fp8 that makes the 1x128 ones
        *(scaled_mm_blockwise(out, BM=bm) for out in ("bf16", "f32") for bm in HEIGHTS),
        # tkc.grouped_scaled_mm: MoE experts, contiguous (by row blocks or by counts) and masked
        # layouts (the counts and masked ones at each height they tune over)
        *(grouped_contiguous(out) for out in ("bf16", "f32")),
        *(k(out, BM=bm) for k in (grouped_counts, grouped_masked) for out in ("bf16", "f32") for bm in HEIGHTS),
        quantize_fp8,
        # tkc.rotary_embedding at the common head dims, forward and backward (inverse), each
        # split of a block's heads its space holds (what its tuned table picks)
        *(rotary(D, i, w, h, inverse=inv) for D in HEAD_DIMS for w, h in rotary_splits(D)
          for i in (False, True) for inv in (False, True)),
        # tkc.layer_norm / tkc.rms_norm at common model widths
        *_norm_ops(),
        # tkc.linear_attention (Hedgehog-sized, Mamba-2-sized, with decay and without: each tuned schedule) and tkc.based
        *linear_library(),
        based(),
        hedgehog(),                             # tkc.hedgehog
        # tkc.fftconv: circular at N 1024, 2048, 4096 and causal (L = N / 2)
        *(fftconv(N, L) for N in (1024, 2048, 4096) for L in (N, N // 2)),
        # ... and with one consumer warpgroup fewer, where a block still has two
        # (tkc.fftconv's tuned pick where that fills the SMs better: D 768 at N 1024)
        *(fftconv(N, L, consumers=3) for N in (1024, 2048) for L in (N, N // 2)),
        # tkc.all_gather_matmul (any rank count) / tkc.matmul_reduce_scatter at 2 to 5 ranks
        all_gather_gemm,
        *(gemm_reduce_scatter(world) for world in range(2, 6)),
        rs_barrier,
        # tkc.ring_attention's merges of its steps' outputs (bf16 or an f32 accumulator, in and out)
        *(attention_merge(D, acc, out) for D in HEAD_DIMS for acc in ("bf16", "f32")
          for out in ("bf16", "f32")),
    ]
