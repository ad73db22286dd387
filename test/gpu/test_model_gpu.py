"""Transformer blocks built from tkc's ops (tkc.bench.model) on the GPU:
against the same blocks in PyTorch, forward and backward; under torch.compile
(inductor, and its CUDA graphs: mode="reduce-overhead"); captured whole in a
CUDA graph. The block's shapes are the prebuilt ones (D 1024, head dim 128)."""
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

from tkc.bench import model  # noqa: E402

B, L, D, H = 2, 512, 1024, 8


def rel(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    p, (cos, sin) = model.parameters(D), model.rope_tables(L, D // H)
    x = torch.randn(B, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    return p, cos, sin, x, torch.randn(B, L, D, device="cuda", dtype=torch.bfloat16)


def run(fn, p, cos, sin, x, dy):
    """(y, dx, each weight's gradient) of one block's forward and backward."""
    return run_grads(lambda: fn(x, p, cos, sin, H), (x, *p.values()), dy)


def run_grads(fn, leaves, do):
    """(fn's output, each leaf's gradient) of fn() and its backward from do."""
    for t in leaves:
        t.grad = None
    out = fn()
    out.backward(do)
    return [out.detach().clone(), *(t.grad.clone() for t in leaves)]


def test_block_matches_pytorch(block):
    mine, ref = run(model.tkc_block, *block), run(model.torch_block, *block)
    errors = [rel(a, b) for a, b in zip(mine, ref) if b.norm() > 0]
    assert max(errors) < 2e-2, errors


def test_llama_block_matches_pytorch():
    """RMSNorm, GQA (8 heads on 2), SwiGLU through linear's SiLU epilogue."""
    torch.manual_seed(2)
    p, (cos, sin) = model.llama_parameters(D, H, kv_heads=2, ffn=2816), model.rope_tables(L, D // H)
    x = torch.randn(B, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    mine = run(model.tkc_llama_block, p, cos, sin, x, dy)
    ref = run(model.torch_llama_block, p, cos, sin, x, dy)
    errors = [rel(a, b) for a, b in zip(mine, ref)]
    assert max(errors) < 2e-2, errors


def test_block_in_mixed_precision(block):
    """float32 weights and x in torch.autocast(bf16): tkc's block against PyTorch's,
    gradients float32 on both sides."""
    p, cos, sin, x, dy = block
    p = {n: t.detach().float().requires_grad_() for n, t in p.items()}
    x = x.detach().float().requires_grad_()
    got = run(model._autocast(model.tkc_block), p, cos, sin, x, dy)
    ref = run(model._autocast(model.torch_block), p, cos, sin, x, dy)
    assert all(g.dtype == torch.float32 for g in got[1:])
    errors = [rel(a, b) for a, b in zip(got, ref) if b.norm() > 0]
    assert max(errors) < 2e-2, errors


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_block_compiled(block, mode):
    torch._dynamo.reset()
    compiled = torch.compile(model.tkc_block, mode=mode, fullgraph=True)
    eager = run(model.tkc_block, *block)
    for _ in range(3):   # reduce-overhead records its CUDA graphs on the later calls
        got = run(compiled, *block)
    errors = [rel(a, b) for a, b in zip(got, eager) if b.norm() > 0]
    assert max(errors) < 1e-2, errors


def test_block_captured_in_a_cuda_graph():
    """Forward and backward, every launch of tkc's ops captured at once (torch's
    recipe: warm-up on a side stream, the leaves' gradients unset) and replayed
    on new values of x."""
    torch.manual_seed(1)
    p, (cos, sin) = model.parameters(D), model.rope_tables(L, D // H)
    x = torch.randn(B, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(B, L, D, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):   # plans made, kernels loaded, the leaves' gradient nodes on this side
            first = run(model.tkc_block, p, cos, sin, x, dy)
    torch.cuda.current_stream().wait_stream(stream)
    x.grad = None
    for t in p.values():
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = model.tkc_block(x, p, cos, sin, H)
        y.backward(dy)
    with torch.no_grad():
        x.mul_(0.5)
    graph.replay()
    got = [y.detach().clone(), x.grad.clone(), *(t.grad.clone() for t in p.values())]
    want = run(model.tkc_block, p, cos, sin, x, dy)
    errors = [rel(a, b) for a, b in zip(got, want) if b.norm() > 0]
    assert max(errors) < 1e-3, errors
    assert rel(want[0], first[0]) > 1e-2   # x changed: the replay computed on the new values


@pytest.mark.parametrize("causal, kv_heads", [(False, 8), (True, 8), (True, 2)])
def test_nn_sdpa_matches_torchs(causal, kv_heads):
    """tkc.nn.scaled_dot_product_attention where tkc serves the call: SDPA's values and gradients."""
    import tkc
    torch.manual_seed(3)
    q = torch.randn(B, H, L, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(B, kv_heads, L, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    do = torch.randn_like(q)
    got = run_grads(lambda: tkc.nn.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
                    (q, k, v), do)
    want = run_grads(lambda: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=causal, enable_gqa=True), (q, k, v), do)
    assert max(rel(a, b) for a, b in zip(got, want)) < 2e-2
