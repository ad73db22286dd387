"""torch.compile (and torch.export) see every tkc op whole: a function of op
calls traces as one graph (fullgraph=True: a graph break is an error), and
the compiled function launches what the eager one does, forward and
backward. On the CPU through the fake driver (tkc.bench.fake_driver): the
ops' Python and torch.compile's tracing are real, the launches stubs that
are counted. A graph break inside an op (a pointer read, a Python cache)
splits a user's model into pieces that dynamo compiles one by one,
recompiling tkc's public wrapper for each op: on an H200 the transformer
block below, fwd+bwd, ran 6.3 ms compiled against 5.1 eager before
rotary_embedding stopped reading x's pointer while tracing."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from fp8_blocks import contiguous_rows, counts_rows, experts, masked_rows, quantised  # noqa: E402
from tkc.bench import model  # noqa: E402
from tkc.bench.fake_driver import fake_driver  # noqa: E402

BF, E4M3 = torch.bfloat16, torch.float8_e4m3fn


def _rnd(*shape, grad=False, dtype=BF, scale=1.0):
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to(dtype).requires_grad_(grad)


def _launches(fn, backward: bool) -> int:
    """Kernel launches of one call of fn (and of its output's backward), warm."""
    def call():
        out = fn()
        if backward:
            first = out[0] if isinstance(out, tuple) else out
            first.float().sum().backward()
    with fake_driver() as cuda:
        call()
        before = cuda.state.launches
        call()
        return cuda.state.launches - before


def _same_launches(fn, backward: bool = False) -> int:
    torch._dynamo.reset()
    eager = _launches(fn, backward)
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    assert _launches(compiled, backward) == eager
    return eager


def test_a_transformer_block_compiles_to_one_graph():
    """tkc.bench.model's block: layer_norm (with the residual, prenorm), linear
    with bias and GELU, rotary on the packed projection's strided q and k,
    attention on their [B, L, H, D] memory."""
    p, (cos, sin) = model.parameters(256, "cpu"), model.rope_tables(64, 128, "cpu")
    x = _rnd(2, 64, 256, grad=True)
    launches = _same_launches(lambda: model.tkc_block(x, p, cos, sin, 2), backward=True)
    assert launches >= 20   # the forward's 9 calls and their backwards ran kernels, not stubs of none


def test_a_block_exports_with_its_tkc_ops():
    """torch.export sees the block's nine op calls as tkc's custom ops, and the
    exported program launches what eager does."""
    p, (cos, sin) = model.parameters(256, "cpu"), model.rope_tables(64, 128, "cpu")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach()) for k, v in p.items()})

        def forward(self, x):
            return model.tkc_block(x, dict(self.p), cos, sin, 2)

    x = _rnd(2, 64, 256)
    with fake_driver():
        program = torch.export.export(Block(), (x,))
    ops = [str(n.target) for n in program.graph.nodes if str(n.target).startswith("tkc.")]
    assert len(ops) == 9 and "tkc.attention_fwd.default" in ops, ops
    assert _launches(lambda: program.module()(x), False) == 9


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_block_under_activation_checkpointing(reentrant):
    """torch.utils.checkpoint: the backward re-runs the block's forward (its
    nine launches) and then what an unchecked backward launches."""
    from torch.utils.checkpoint import checkpoint
    p, (cos, sin) = model.parameters(256, "cpu"), model.rope_tables(64, 128, "cpu")
    x = _rnd(2, 64, 256, grad=True)
    plain = _launches(lambda: model.tkc_block(x, p, cos, sin, 2), True)
    checked = _launches(lambda: checkpoint(model.tkc_block, x, p, cos, sin, 2, use_reentrant=reentrant), True)
    assert checked == plain + 9


def test_a_converted_model_compiles_to_one_graph():
    """tkc.nn.convert's modules (Linear with bias, LayerNorm, RMSNorm) in a compiled graph."""
    torch.manual_seed(14)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.LayerNorm(256), torch.nn.Linear(256, 256),
                              torch.nn.RMSNorm(256, eps=1e-6)).to(BF)
    tkc.nn.convert(net)
    x = _rnd(4, 64, grad=True)
    assert _same_launches(lambda: net(x), backward=True) >= 8


def test_a_llama_block_compiles_to_one_graph():
    """RMSNorm (with the residual, prenorm), GQA attention, linear's SiLU epilogue."""
    p = model.llama_parameters(512, 4, "cpu", kv_heads=2, ffn=768)
    cos, sin = model.rope_tables(64, 128, "cpu")
    x = _rnd(1, 64, 512, grad=True)
    assert _same_launches(lambda: model.tkc_llama_block(x, p, cos, sin, 4), backward=True) >= 20


def test_a_mixed_precision_block_compiles_to_one_graph():
    """float32 weights and input in a bf16 autocast region (the ops' device is the
    CPU under the fake driver): the casts trace into the graph, the gradients
    reach the float32 weights."""
    p = {k: v.detach().float().requires_grad_() for k, v in model.parameters(256, "cpu").items()}
    cos, sin = model.rope_tables(64, 128, "cpu")
    x = torch.randn(2, 64, 256, requires_grad=True)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model.tkc_block(x, p, cos, sin, 2)
    assert _same_launches(step, backward=True) >= 20
    assert p["w1"].grad.dtype == torch.float32 and p["w1"].grad.shape == p["w1"].shape


def _fp8(*shape):
    return _rnd(*shape, dtype=torch.float32).to(E4M3)


CALLS = {
    "attention": (lambda q=_rnd(1, 2, 64, 64, grad=True): tkc.attention(q, q, q, causal=True), True),
    "attention [B, L, H, D] memory": (
        lambda x=_rnd(1, 64, 2, 64, grad=True): tkc.attention(*(x.transpose(1, 2),) * 3), True),
    "attention return_lse": (lambda q=_rnd(1, 2, 64, 64): tkc.attention(q, q, q, return_lse=True), False),
    "attention_varlen": (lambda q=_rnd(70, 2, 64, grad=True), cu=torch.tensor([0, 30, 70], dtype=torch.int32):
                         tkc.attention_varlen(q, q, q, cu, cu, 40, 40), True),
    "rotary_embedding (packed q)": (
        lambda qkv=_rnd(1, 64, 3, 2, 64, grad=True), t=_rnd(64, 32):
        tkc.rotary_embedding(qkv[:, :, 0], t, t), True),
    "layer_norm": (lambda x=_rnd(64, 256, grad=True), w=_rnd(256, grad=True):
                   tkc.layer_norm(x, w, w), True),
    "layer_norm residual prenorm": (lambda x=_rnd(2, 32, 256, grad=True), w=_rnd(256):
                                    tkc.layer_norm(x, w, w, residual=x, prenorm=True), True),
    "rms_norm": (lambda x=_rnd(64, 256, grad=True), w=_rnd(256, grad=True): tkc.rms_norm(x, w), True),
    "matmul batched": (lambda a=_rnd(2, 64, 64, grad=True), b=_rnd(64, 128, grad=True): tkc.matmul(a, b), True),
    "linear gelu": (lambda x=_rnd(64, 64, grad=True), w=_rnd(128, 64, grad=True), b=_rnd(128, grad=True):
                    tkc.linear(x, w, b, "gelu"), True),
    "fftconv": (lambda u=_rnd(2, 8, 1024), k=tkc.fftconv_filter(torch.randn(8, 1024), 1024):
                tkc.fftconv(u, k), False),
    "linear_attention": (lambda q=_rnd(1, 2, 64, 64): tkc.linear_attention(q, q, q), False),
    "based": (lambda q=_rnd(1, 2, 64, 16), v=_rnd(1, 2, 64, 64): tkc.based(q, q, v), False),
    "quantize_fp8": (lambda x=_rnd(128, 256): tkc.quantize_fp8(x), False),
    "scaled_mm per-tensor": (lambda a=_fp8(128, 128), b=_fp8(128, 128), s=torch.ones(()):
                             tkc.scaled_mm(a, b.t(), s, s), False),
    "scaled_mm block scales": (lambda ops=quantised(torch.randn(64, 256), torch.randn(128, 256)):
                               tkc.scaled_mm(*ops), False),
    "grouped_scaled_mm contiguous": (lambda w=experts(2, 128, 256), x=contiguous_rows([100, 30], 256):
                                     tkc.grouped_scaled_mm(x[0], w[0], x[1], w[1], x[2]), False),
    "grouped_scaled_mm by counts": (lambda w=experts(2, 128, 256), x=counts_rows([96, 32], 256):
                                    tkc.grouped_scaled_mm(x[0], w[0], x[1], w[1], counts=x[2]), False),
    "grouped_scaled_mm masked": (lambda w=experts(2, 128, 256), x=masked_rows([100, 0], 128, 256):
                                 tkc.grouped_scaled_mm(x[0], w[0], x[1], w[1], x[2]), False),
    "hedgehog": (lambda q=_rnd(1, 2, 64, 128), m=_rnd(2, 128, 64), a=torch.ones(2):
                 tkc.hedgehog(q, q, q, m, m, a, a), False),
    "rms_norm residual prenorm": (lambda x=_rnd(2, 32, 256, grad=True), w=_rnd(256):
                                  tkc.rms_norm(x, w, residual=x, prenorm=True), True),
    # dropout: the seed is a tensor torch's generator draws in the graph (one graph, a new mask a call)
    "layer_norm dropout": (lambda x=_rnd(64, 256, grad=True), r=_rnd(64, 256, grad=True), w=_rnd(256):
                           tkc.layer_norm(x, w, w, residual=r, dropout_p=0.1), True),
    "rms_norm dropout prenorm": (lambda x=_rnd(64, 256, grad=True), w=_rnd(256):
                                 tkc.rms_norm(x, w, dropout_p=0.1, prenorm=True), True),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_each_op_compiles_without_graph_breaks(name):
    fn, backward = CALLS[name]
    assert _same_launches(fn, backward) >= 1


def test_the_block_compiles_with_dynamic_shapes():
    """dynamic=True: the sequence length a symbol, the ops' checks and fake
    implementations on symbolic sizes; one graph serves two lengths."""
    p = model.parameters(256, "cpu")
    torch._dynamo.reset()
    compiled = torch.compile(model.tkc_block, backend="aot_eager", fullgraph=True, dynamic=True)
    for L in (64, 192):
        cos, sin = model.rope_tables(L, 128, "cpu")
        x = _rnd(2, L, 256, grad=True)
        assert _launches(lambda: compiled(x, p, cos, sin, 2), True) == \
            _launches(lambda: model.tkc_block(x, p, cos, sin, 2), True)
