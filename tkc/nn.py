"""torch.nn modules computed by tkc's ops: drop-in subclasses of nn.Linear,
nn.LayerNorm and nn.RMSNorm (same parameters, state dicts and init); a
gated MLP (GatedMLP: Llama's gate_proj, up_proj, down_proj, SiLU);
`convert`, which swaps them into an existing model; and
`scaled_dot_product_attention`, F.scaled_dot_product_attention's drop-in.

    model = tkc.nn.convert(model)          # its Linear / LayerNorm / RMSNorm layers and gated MLPs
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()

The kernels are bf16: call the modules on bf16 tensors, or in a bf16
autocast region (float32 weights and inputs are then cast, as autocast casts
nn.Linear's). Linear takes a fused activation ("gelu", "silu") that
nn.Linear has not.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.attention import bias as _bias

from .diagnostics import TkcError
from .kernels.attention_hopper import HEAD_DIMS
from .runtime.callsite import caller
from .torchops import checks
from .torchops.attn import attention
from .torchops.gated import swiglu
from .torchops.gemm import ACTIVATIONS, linear
from .torchops.norms import MAX_D, layer_norm, rms_norm

__all__ = ["GatedMLP", "LayerNorm", "Linear", "RMSNorm", "convert", "register_transformers", "scaled_dot_product_attention",
           "transformers_attention"]


class Linear(nn.Linear):
    """nn.Linear as tkc.linear: act(x W^T + b), act None, "gelu" (erf) or "silu" fused
    in the GEMM's epilogue. in_features and out_features multiples of 8."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation: str | None = None, device=None, dtype=None):
        if activation not in ACTIVATIONS:
            raise ValueError(f"tkc.nn.Linear: activation must be one of {ACTIVATIONS}, got {activation!r}")
        super().__init__(in_features, out_features, bias, device, dtype)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", activation={self.activation!r}" if self.activation else "")


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm as tkc.layer_norm: one normalized dim, a multiple of 256 up to 16384,
    with its weight and bias or without them."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, eps=self.eps)


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm as tkc.rms_norm: one normalized dim, a multiple of 256 up to 16384, with
    its weight or without. eps=None is nn.RMSNorm's: the input dtype's machine epsilon."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        return rms_norm(x, self.weight, eps=eps)


class GatedMLP(nn.Module):
    """A Llama / Mistral / Qwen MLP, down_proj(silu(gate_proj(x)) * up_proj(x)),
    with the gate and up projections in one GEMM (tkc.swiglu) and down_proj a
    tkc.nn.Linear; the submodules' names are Hugging Face's (LlamaMLP's), so
    its state dict loads theirs. Widths multiples of 8."""

    def __init__(self, hidden_size: int, intermediate_size: int, device=None, dtype=None):
        super().__init__()
        kw = dict(bias=False, device=device, dtype=dtype)
        self.gate_proj = Linear(hidden_size, intermediate_size, **kw)
        self.up_proj = Linear(hidden_size, intermediate_size, **kw)
        self.down_proj = Linear(intermediate_size, hidden_size, **kw)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated_forward(self, x)


def _gated_forward(self, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(swiglu(x, self.gate_proj.weight, self.up_proj.weight))


def _fused_gated_forward(self, x: torch.Tensor) -> torch.Tensor:
    """Phi-3's MLP: gate_up_proj's weight is [gate; up], each [F, K]: two views of it
    (unbind's backward stacks their gradients into one [2, F, K] for the weight)."""
    w = self.gate_up_proj.weight
    gate, up = w.view(2, w.shape[0] // 2, w.shape[1]).unbind(0)
    return self.down_proj(swiglu(x, gate, up))


_GATED = {GatedMLP: GatedMLP}   # a converted gated MLP's class -> its tkc twin (made once per class)


def _gated_why(m: nn.Module) -> str | None:
    """Whether m is a gated MLP tkc serves: None when it is, else why not ("" for a
    module that is not one: gate_proj, up_proj, down_proj nn.Linear and a SiLU act_fn,
    Llama's; or gate_up_proj ([gate; up] in one weight) and down_proj nn.Linear and a SiLU
    activation_fn, Phi-3's)."""
    if isinstance(getattr(m, "gate_up_proj", None), nn.Linear):
        return _fused_gated_why(m)
    parts = [getattr(m, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    if not all(isinstance(p, nn.Linear) for p in parts) or not _is_silu(getattr(m, "act_fn", None)):
        return ""
    gate, up, down = parts
    if gate.bias is not None or up.bias is not None:
        return "gate_proj / up_proj with a bias: tkc.swiglu takes none"
    if gate.weight.shape != up.weight.shape or gate.in_features % 8 or gate.out_features % 8:
        return (f"gate_proj {tuple(gate.weight.shape)}, up_proj {tuple(up.weight.shape)}: tkc.swiglu "
                f"takes one [F, K] shape, F and K multiples of 8")
    return None


def _fused_gated_why(m: nn.Module) -> str | None:
    fused = m.gate_up_proj
    if not isinstance(getattr(m, "down_proj", None), nn.Linear) or not _is_silu(getattr(m, "activation_fn", None)):
        return ""
    if fused.bias is not None:
        return "gate_up_proj with a bias: tkc.swiglu takes none"
    if fused.out_features % 16 or fused.in_features % 8:
        return (f"gate_up_proj {tuple(fused.weight.shape)}: tkc.swiglu takes [gate; up] of [F, K] each, F and K "
                f"multiples of 8")
    return None


def _is_silu(act) -> bool:
    """act is a module computing SiLU: nn.SiLU, or another class of it (Hugging Face's
    SiLUActivation, ACT2FN["silu"]), told by its values on a few points."""
    if type(act) is nn.SiLU:
        return True
    if not isinstance(act, nn.Module) or list(act.parameters()):
        return False
    x = torch.linspace(-4, 4, 17)
    try:
        with torch.no_grad():
            y = act(x.clone())
    except Exception:  # noqa: BLE001  (an activation that cannot run on a CPU probe: not served)
        return False
    return isinstance(y, torch.Tensor) and y.shape == x.shape and torch.allclose(
        y, torch.nn.functional.silu(x), atol=1e-6)


def _served_width(shape) -> bool:
    return len(shape) == 1 and shape[0] % 256 == 0 and 256 <= shape[0] <= MAX_D


def _swap(m: nn.Module) -> str | None:
    """Make m its tkc twin sharing its parameters (its class changed in place: state
    dict, hooks and references stay): None when done, else why tkc cannot serve it
    ("" for a module that is none of the three)."""
    kind = type(m)
    gated = "" if kind in _GATED.values() else _gated_why(m)
    if gated:
        return gated
    if gated is None:
        if kind not in _GATED:   # the model's own class, its forward replaced by the fused one
            fused = isinstance(getattr(m, "gate_up_proj", None), nn.Linear)
            _GATED[kind] = type(f"Tkc{kind.__name__}", (kind,), {"forward": _fused_gated_forward if fused
                                                                 else _gated_forward,
                                                                 "__module__": __name__})
        m.__class__ = _GATED[kind]
    elif kind is nn.Linear:
        if m.in_features % 8 or m.out_features % 8:
            return f"features {m.in_features} -> {m.out_features}: tkc.linear needs multiples of 8"
        m.__class__, m.activation = Linear, None
    elif kind in (nn.LayerNorm, nn.RMSNorm):
        if not _served_width(m.normalized_shape):
            return (f"normalized_shape {tuple(m.normalized_shape)}: tkc's norms take one dim, a "
                    f"multiple of 256 up to {MAX_D}")
        m.__class__ = LayerNorm if kind is nn.LayerNorm else RMSNorm
    else:
        return ""
    return None


def convert(model: nn.Module) -> nn.Module:
    """model with each nn.Linear, nn.LayerNorm and nn.RMSNorm that tkc serves (Linear:
    features multiples of 8; the norms: one dim, a multiple of 256 up to 16384, with or
    without weight and bias) computed by tkc's ops, and each gated MLP (a module with
    nn.Linear gate_proj, up_proj, down_proj and a SiLU act_fn, Hugging Face's
    LlamaMLP, MistralMLP, Qwen2MLP; or with gate_up_proj, down_proj and a SiLU
    activation_fn, Phi3MLP: its forward taken to be theirs) by tkc.swiglu, in
    place: the same module objects and parameters, so optimizers, state dicts and hooks
    keep working. A Hugging Face transformers model on SDPA attention takes
    attn_implementation="tkc" (register_transformers; listed as "attention").
    The others stay as they are: `model.tkc_converted` lists the converted
    modules' names and `model.tkc_skipped` maps the others of these kinds to why."""
    if not isinstance(model, nn.Module):
        raise TkcError(f"convert: model must be a torch.nn.Module, got {type(model).__name__}", caller())
    converted, skipped = [], {}
    for name, m in model.named_modules():
        why = _swap(m)
        if why is None:
            converted.append(name)
        elif why:
            skipped[name] = why
    attn = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if attn is not None and hasattr(model, "set_attn_implementation"):
        if attn in ("sdpa", "tkc"):
            model.set_attn_implementation(register_transformers())
            converted.append("attention")
        else:   # (a choice of the user's: eager for attention weights, a FlashAttention build ...)
            skipped["attention"] = f"attn_implementation {attn!r} kept (tkc replaces 'sdpa')"
    model.tkc_converted, model.tkc_skipped = converted, skipped
    return model


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False):
    """F.scaled_dot_product_attention's signature and meaning, computed by
    tkc.attention where that serves the call: no mask, no dropout, [B, H, L,
    D] with D 64, 96, 128 or 256 on the GPU, bf16 (or float in a bf16 autocast
    region), GQA with enable_gqa, and is_causal with as many keys as queries
    or more (SDPA aligns its mask to the top left: query i sees keys 0..i,
    which is tkc.attention's bottom-right mask over the first Lq keys), or at
    any lengths with attn_mask = torch.nn.attention.bias.causal_lower_right(Lq,
    Lk) (a speculative decoding step's draft tokens against a KV cache). Any
    other call is PyTorch's. A model that calls F.scaled_dot_product_attention
    can be pointed here, a transformers model by attn_implementation="tkc"
    (register_transformers)."""
    lower_right = attn_mask is not None and not is_causal and _lower_right(attn_mask, query, key)
    if (attn_mask is None or lower_right) and not dropout_p \
            and _served(query, key, value, is_causal, enable_gqa):
        return _attend(query, key, value, is_causal, lower_right, scale)
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def _attend(q, k, v, top_left: bool, lower_right: bool, scale):
    """tkc.attention of a call _served takes: SDPA's top-left causal mask
    (query i sees keys 0..i) as its bottom-right one over the first Lq keys."""
    if top_left and k.shape[2] > q.shape[2]:
        k, v = k[:, :, :q.shape[2]], v[:, :, :q.shape[2]]
    return attention(q, k, v, causal=top_left or lower_right, scale=scale)


def register_transformers(name: str = "tkc") -> str:
    """Register tkc as a Hugging Face transformers attention implementation:
    then `AutoModelForCausalLM.from_pretrained(..., attn_implementation="tkc")`
    (or `model.set_attn_implementation("tkc")`) runs tkc.attention wherever
    transformers' SDPA path would call SDPA without a mask (no padding:
    training, prefill, decode steps on the decode path) and SDPA otherwise,
    with SDPA's masks (transformers' sdpa_mask). Returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(name, transformers_attention)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def transformers_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                           scaling: float | None = None, is_causal: bool | None = None, **kwargs):
    """transformers' attention interface (sdpa_attention_forward's arguments
    and result: the output [B, L, H, D] and no weights): without a mask,
    dropout, softcap, sinks, a sliding window or a position bias,
    tkc.attention as scaled_dot_product_attention above computes it, with
    transformers' causal choice (a mask it could drop: causal over several
    queries, none for one); else transformers' SDPA path itself."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    extras = any(kwargs.get(k) is not None for k in ("softcap", "s_aux", "sliding_window", "position_bias"))
    causal = query.shape[2] > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True))
    if attention_mask is None and not dropout and not extras and _served(query, key, value, causal, True):
        return _attend(query, key, value, causal, False, scaling).transpose(1, 2), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  is_causal=is_causal, **kwargs)


def _lower_right(mask, q, k) -> bool:
    """Whether mask is torch's bottom-right causal bias for q's and k's lengths
    (tkc.attention's causal mask at any lengths)."""
    return isinstance(mask, _bias.CausalBias) and mask.variant == _bias.CausalVariant.LOWER_RIGHT \
        and isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == 4 and k.dim() == 4 \
        and (mask.seq_len_q, mask.seq_len_kv) == (q.shape[2], k.shape[2])


def _served(q, k, v, top_left: bool, gqa: bool) -> bool:
    """tkc.attention serves q, k, v (top_left: SDPA's is_causal, which it
    serves with as many keys as queries or more: their first Lq, bottom-right)."""
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 and t.device.type == checks.DEVICE_TYPE
               for t in (q, k, v)):
        return False
    amp = torch.is_autocast_enabled(checks.DEVICE_TYPE) and \
        torch.get_autocast_dtype(checks.DEVICE_TYPE) == torch.bfloat16
    if not all(t.dtype == torch.bfloat16 or amp and t.dtype in (torch.float32, torch.float16)
               for t in (q, k, v)):
        return False
    (B, H, L, D), (Bk, Hk, Lk, Dk) = q.shape, k.shape
    return D in HEAD_DIMS and Dk == D and v.shape == k.shape and Bk == B \
        and (Hk == H or gqa and Hk and H % Hk == 0) and (not top_left or L <= Lk)

