"""tkc.swiglu on the GPU: against float64 PyTorch at the tuned picks' shapes
(a decode step's rows to a training step's, ragged M, F and K), forward and
every gradient; each schedule its table may pick, forced; AMP; inductor
(fullgraph) and opcheck; a CUDA-graph capture of the eager path."""
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tkc  # noqa: E402
from tkc.kernels import GATED_SCHEDULES  # noqa: E402
from tkc.kernels.gemm_space import label  # noqa: E402

BF = torch.bfloat16


def rel(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def operands(m, k, f, grad=False):
    x = torch.randn(m, k, device="cuda").to(BF).requires_grad_(grad)
    wg, wu = ((torch.randn(f, k, device="cuda") / k ** 0.5).to(BF).requires_grad_(grad) for _ in "gu")
    return x, wg, wu


def ref(x, wg, wu):
    x = x.double()
    return F.silu(x @ wg.double().t()) * (x @ wu.double().t())


def check_grads(h, r, tensors, tol=2e-2):
    dh = torch.randn_like(h)
    got = torch.autograd.grad(h, tensors, dh)
    want = torch.autograd.grad(r, tensors, dh.double())
    errs = [rel(g, w) for g, w in zip(got, want)]
    assert max(errs) < tol, errs


@pytest.mark.parametrize("m,k,f", [(1, 4096, 14336), (16, 4096, 1000), (40, 1024, 4096), (300, 4000, 2056),
                                   (777, 4096, 4096), (4096, 4096, 14336), (2, 64, 8)])
def test_values_and_gradients(m, k, f):
    x, wg, wu = operands(m, k, f, grad=True)
    h = tkc.swiglu(x, wg, wu)
    r = ref(x, wg, wu)
    assert rel(h, r) < 1e-2
    check_grads(h, r, (x, wg, wu))
    with torch.no_grad():   # the plain path: h alone written
        assert tkc.swiglu(x, wg, wu).equal(h.detach())


@pytest.mark.parametrize("schedule", GATED_SCHEDULES, ids=label)
def test_every_schedule(monkeypatch, schedule):
    """Each schedule the table may pick, forced, on ragged rows and F (a
    cluster's second CTA past F), forward and backward."""
    from tkc.torchops import gated
    monkeypatch.setattr(gated.TILE, "choose", lambda key, args=None: schedule)
    x, wg, wu = operands(333, 520, 8 + schedule["BN"], grad=True)
    h = tkc.swiglu(x, wg, wu)
    r = ref(x, wg, wu)
    assert rel(h, r) < 1e-2
    check_grads(h, r, (x, wg, wu))


def test_amp_compile_opcheck_and_graph_capture():
    from tkc.torchops import gated
    x, wg, wu = operands(200, 512, 1024)
    with torch.autocast("cuda", torch.bfloat16):
        assert tkc.swiglu(x.float(), wg.float(), wu.float()).equal(tkc.swiglu(x, wg, wu))
    f = torch.compile(lambda x: tkc.swiglu(x, wg, wu) * 2, fullgraph=True)
    assert rel(f(x), 2 * ref(x, wg, wu)) < 1e-2
    torch.library.opcheck(gated._swiglu.custom_op, (x, wg, wu, False))
    torch.library.opcheck(gated._swiglu.custom_op, (x, wg, wu.requires_grad_(), True))
    wu.requires_grad_(False)
    h = tkc.swiglu(x, wg, wu)
    graph, out = torch.cuda.CUDAGraph(), None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        tkc.swiglu(x, wg, wu)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        out = tkc.swiglu(x, wg, wu)
    x.copy_(torch.randn_like(x))
    graph.replay()
    assert rel(out, ref(x, wg, wu)) < 1e-2 and not out.equal(h)


def _converted_matches(ref):
    """tkc.nn.convert of a copy of ref converts the module itself (tkc.swiglu in its
    forward), and its values and gradients are ref's."""
    import copy
    mine = tkc.nn.convert(copy.deepcopy(ref))
    assert mine.tkc_converted[0] == ""
    x = torch.randn(3, 300, 1024, device="cuda").to(BF)
    y, want = mine(x), ref(x)
    assert rel(y, want) < 2e-2
    y.float().square().sum().backward()
    want.float().square().sum().backward()
    assert all(rel(p.grad, q.grad) < 3e-2 for p, q in zip(mine.parameters(), ref.parameters()))


def test_converted_llama_mlp():
    """tkc.nn.convert on a LlamaMLP-shaped module: tkc.swiglu in its forward, its
    values and gradients PyTorch's."""
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj = (torch.nn.Linear(1024, 2816, bias=False) for _ in "gu")
            self.down_proj, self.act_fn = torch.nn.Linear(2816, 1024, bias=False), torch.nn.SiLU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    _converted_matches(MLP().cuda().to(BF))


def test_converted_phi3_mlp():
    """tkc.nn.convert on a Phi3MLP-shaped module (gate and up in one weight): tkc.swiglu on
    the weight's halves, values and the fused weight's gradient PyTorch's."""
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up_proj = torch.nn.Linear(1024, 2 * 2816, bias=False)
            self.down_proj, self.activation_fn = torch.nn.Linear(2816, 1024, bias=False), torch.nn.SiLU()

        def forward(self, x):
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down_proj(up * self.activation_fn(gate))

    _converted_matches(MLP().cuda().to(BF))
