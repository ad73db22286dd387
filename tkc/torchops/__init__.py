"""tkc's PyTorch ops: what model authors call.

    tkc.attention, tkc.attention_varlen      softmax attention (forward and backward)
    tkc.linear_attention, tkc.based, tkc.hedgehog   linear attention (forward)
    tkc.fftconv, tkc.fftconv_filter          FFT long convolution (forward)
    tkc.layer_norm                           dropout + residual + LayerNorm
    tkc.rotary_embedding                     RoPE

Each is a torch.library custom op (torch.compile, export, fake tensors and
autograd see it) that an eager call with nothing tracing skips for the
kernels themselves (eager.py). This package imports torch, never MLIR.
"""
from .attn import attention, attention_varlen
from .long_conv import fftconv, fftconv_filter
from .linear_attn import based, hedgehog, linear_attention
from .norms import layer_norm
from .rotary import rotary_embedding

__all__ = ["attention", "attention_varlen", "based", "fftconv", "fftconv_filter", "hedgehog",
           "layer_norm", "linear_attention", "rotary_embedding"]
