"""tkc's PyTorch ops: what model authors call.

    tkc.attention, tkc.attention_varlen      softmax attention (forward and backward)
    tkc.attention_fp8 (_vt, fp8_v_layout)    FP8 attention forward (e4m3 q, k, v, per-head scales)
    tkc.linear_attention, tkc.based, tkc.hedgehog   linear attention (forward)
    tkc.fftconv, tkc.fftconv_filter          FFT long convolution (forward)
    tkc.layer_norm, tkc.rms_norm             dropout + residual + LayerNorm / RMSNorm
    tkc.rotary_embedding                     RoPE
    tkc.matmul, tkc.linear                   GEMM (forward and backward), nn.Linear's epilogue
    tkc.swiglu                               a gated MLP's gate and up projections in one GEMM
    tkc.scaled_mm                            FP8 GEMM with per-tensor, row-wise or block scales
    tkc.quantize_fp8                         bf16 -> e4m3 with 1x128 scales (for tkc.scaled_mm)
    tkc.grouped_scaled_mm                    block-scaled FP8 GEMM of MoE experts (contiguous, masked)
    tkc.all_gather_matmul, tkc.matmul_reduce_scatter   GEMMs fused with NVLink collectives
    tkc.ring_attention                       context-parallel attention (forward and backward)

Each is a torch.library custom op (torch.compile, export, fake tensors and
autograd see it) that an eager call with nothing tracing skips for the
kernels themselves (eager.py). The kernels are bf16; in a torch.autocast region to
bf16 the ops take float32 inputs as bf16 (checks.autocast; FP8 ops excepted). This package
imports torch, never MLIR.
"""
from .attn import attention, attention_varlen
from .attn_fp8 import attention_fp8, attention_fp8_vt, fp8_v_layout
from .collective import all_gather_matmul, matmul_reduce_scatter
from .long_conv import fftconv, fftconv_filter
from .gemm import linear, matmul
from .grouped import grouped_scaled_mm
from .linear_attn import based, hedgehog, linear_attention
from .norms import layer_norm, rms_norm
from .ring import ring_attention
from .rotary import rotary_embedding
from .quantize import quantize_fp8
from .scaled import scaled_mm
from .gated import swiglu

__all__ = ["all_gather_matmul", "matmul_reduce_scatter", "attention", "attention_varlen", "attention_fp8",
           "attention_fp8_vt", "fp8_v_layout", "based", "fftconv",
           "fftconv_filter", "grouped_scaled_mm", "hedgehog", "layer_norm", "linear", "linear_attention", "matmul",
           "quantize_fp8", "ring_attention", "rms_norm", "rotary_embedding", "scaled_mm", "swiglu"]
