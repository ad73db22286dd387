"""tkc.matmul, tkc.linear, tkc.rms_norm and the wide tkc.layer_norm on the
GPU, against PyTorch in float32/float64; zero-size inputs; CUDA-graph capture
of the eager path; the eager path and the custom op agree."""
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tkc  # noqa: E402
from tkc.kernels import GEMM_SCHEDULES  # noqa: E402
from tkc.kernels.gemm_space import label  # noqa: E402

BF = torch.bfloat16


def rel(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def grads_match(y, ref, dy, tensors, tol):
    """y.backward(dy) and ref.backward(dy in float64) give each tensor one gradient."""
    y.backward(dy)
    got = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    ref.backward(dy.double())
    return all(rel(g, t.grad) < tol for g, t in zip(got, tensors))


def rnd(*shape, grad=False, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(BF).requires_grad_(grad)


@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (777, 4096, 4096), (8000, 8008, 4000),
                                   (77, 136, 200), (1, 8, 64)])
def test_matmul(shape):
    m, n, k = shape
    a, b = rnd(m, k), rnd(k, n)
    assert rel(tkc.matmul(a, b), a.double() @ b.double()) < 1e-2
    bt = rnd(n, k)
    assert rel(tkc.matmul(a, bt.t()), a.double() @ bt.double().t()) < 1e-2


@pytest.mark.parametrize("schedule", GEMM_SCHEDULES, ids=label)
def test_matmul_every_schedule(monkeypatch, schedule):
    """Each schedule the table may pick (2-CTA clusters sharing A, blocks not
    persistent, split-K, swapped tiles of each height, clusters along C's
    rows sharing B and sliced-K included), forced, on misaligned rows (a cluster's second CTA
    past N), batched, and through a linear layer's forward and backward
    (A Bt, At B)."""
    from tkc.torchops import gemm
    monkeypatch.setattr(gemm, "_schedule", lambda *args: schedule)
    a, b = rnd(300, 1000), rnd(1000, 200 + schedule["BN"])
    assert rel(tkc.matmul(a, b), a.double() @ b.double()) < 1e-2
    a3, b3 = rnd(2, 130, 264), rnd(2, 264, 520)
    assert rel(tkc.matmul(a3, b3), a3.double() @ b3.double()) < 1e-2
    x, w, bias = rnd(333, 520, grad=True), rnd(264, 520, grad=True, scale=0.05), rnd(264, grad=True)
    y = tkc.linear(x, w, bias, "gelu")
    ref = F.gelu(x.double() @ w.double().t() + bias.double())
    assert rel(y, ref) < 1e-2
    assert grads_match(y, ref, rnd(*y.shape), (x, w, bias), 2e-2)


@pytest.mark.parametrize("batch_b", [3, 1, None])
def test_matmul_batched_and_gradients(batch_b):
    a = rnd(3, 200, 136, grad=True)
    b = rnd(*((batch_b,) if batch_b else ()), 136, 72, grad=True, scale=0.1)
    c = tkc.matmul(a, b)
    ref = a.double() @ b.double()
    assert rel(c, ref) < 1e-2
    dc = rnd(*c.shape)
    assert grads_match(c, ref, dc, (a, b), 2e-2)


@pytest.mark.parametrize("activation", [None, "gelu", "silu"])
@pytest.mark.parametrize("bias", [False, True])
def test_linear(activation, bias):
    x = rnd(4, 333, 512, grad=True)
    w = rnd(264, 512, grad=True, scale=0.05)
    b = rnd(264, grad=True) if bias else None
    y = tkc.linear(x, w, b, activation)
    act = {None: lambda t: t, "gelu": F.gelu, "silu": F.silu}[activation]
    ref = act(F.linear(x.double(), w.double(), None if b is None else b.double()))
    assert rel(y, ref) < 1e-2
    dy = rnd(*y.shape)
    ts = [t for t in (x, w, b) if t is not None]
    assert grads_match(y, ref, dy, ts, 2e-2)


@pytest.mark.parametrize("D", [1024, 2048, 4096, 8192])
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_wide_norms(D, norm):
    x = rnd(37, D, grad=True)
    r = rnd(37, D, grad=True)
    w = (1 + 0.1 * torch.randn(D, device="cuda")).to(BF).requires_grad_()
    b = rnd(D, grad=True) if norm == "layer" else None
    if norm == "layer":
        y = tkc.layer_norm(x, w, b, residual=r)
        ref = F.layer_norm(x.double() + r.double(), (D,), w.double(), b.double())
    else:
        y = tkc.rms_norm(x, w, residual=r)
        h = x.double() + r.double()
        ref = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + 1e-6) * w.double()
    assert rel(y, ref) < 1e-2
    dy = rnd(37, D)
    ts = [t for t in (x, r, w, b) if t is not None]
    assert grads_match(y, ref, dy, ts, 3e-2)


def test_backward_on_the_calling_thread():
    """torch.autograd.set_multithreading_enabled(False), the backward on the
    calling thread (docs/torch-ops.md: what a host-bound loop can do), gives
    the ops' gradients as autograd's device thread does, on the first call
    and on the kept run of the second."""
    x, q, k, v = rnd(64, 1024, grad=True), rnd(2, 4, 256, 64, grad=True), rnd(2, 4, 256, 64, grad=True), \
        rnd(2, 4, 256, 64, grad=True)
    w, b = (1 + 0.1 * torch.randn(1024, device="cuda")).to(BF).requires_grad_(), rnd(1024, grad=True)
    dy, do = rnd(64, 1024), rnd(2, 4, 256, 64)
    leaves = (x, w, b, q, k, v)

    def grads(threads: bool) -> list:
        out = []
        with torch.autograd.set_multithreading_enabled(threads):
            for _ in range(2):
                for t in leaves:
                    t.grad = None
                tkc.layer_norm(x, w, b).backward(dy)
                tkc.attention(q, k, v, causal=True).backward(do)
                out += [t.grad.clone() for t in leaves]
        return out
    for got, ref in zip(grads(False), grads(True)):
        assert rel(got, ref) < 1e-3


def _off(*shape, grad=False):
    """A [..., n] view starting one element past a 16-byte boundary."""
    buf = rnd(*shape[:-1], shape[-1] + 8, grad=grad)
    return buf[..., 1:1 + shape[-1]]


def test_operands_tma_cannot_read_as_stored():
    """What tkc fuzz --ops found refused (2026-12-01), served and matching:
    a.t() of an odd M (rows of M elements) forward and backward, operands
    starting off a 16-byte boundary (a slice of a row, a one-row view), a
    batch of empty products."""
    a, b = rnd(1016, 2, grad=True), rnd(248, 1016, grad=True, scale=0.1)
    c = tkc.matmul(a.t(), b.t())
    ref = a.double().t() @ b.double().t()
    assert rel(c, ref) < 1e-2 and grads_match(c, ref, rnd(*c.shape), (a, b), 2e-2)
    x, w, bias = _off(333, 520, grad=True), rnd(264, 520, scale=0.05), _off(264)
    y = tkc.linear(x, w, bias, "silu")
    ref = F.silu(F.linear(x.double(), w.double(), bias.double()))
    assert rel(y, ref) < 1e-2
    dy = rnd(*y.shape)
    (gx,), (gref,) = torch.autograd.grad(y, [x], dy), torch.autograd.grad(ref, [x], dy.double())
    assert rel(gx, gref) < 2e-2
    x1 = _off(1, 1024)
    w1, b1 = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    assert rel(tkc.layer_norm(x1, w1, b1), F.layer_norm(x1.double(), (1024,), w1.double(), b1.double())) < 1e-2
    q, k, v = rnd(1, 2, 1, 64), rnd(1, 2, 1, 64), _off(1, 2, 1, 64)
    assert rel(tkc.attention(q, k, v, causal=True), v.double()) < 1e-2   # one key: o = v
    e = tkc.matmul(rnd(2, 3, 0, 1280, grad=True), rnd(2, 3, 1280, 32))
    assert e.shape == (2, 3, 0, 32) and e.requires_grad


def test_zero_size_inputs():
    q = torch.zeros(0, 2, 64, 64, device="cuda", dtype=BF)
    assert tkc.attention(q, q, q).shape == q.shape
    assert tkc.layer_norm(torch.zeros(0, 1024, device="cuda", dtype=BF),
                          torch.ones(1024, device="cuda", dtype=BF),
                          torch.zeros(1024, device="cuda", dtype=BF)).shape == (0, 1024)
    assert tkc.matmul(torch.zeros(0, 64, device="cuda", dtype=BF),
                      torch.zeros(64, 64, device="cuda", dtype=BF)).shape == (0, 64)


def test_eager_path_and_custom_op_agree_and_capture():
    """The eager path (direct launches) and the custom op give the same bits;
    the eager path captures into a CUDA graph and replays."""
    from tkc.torchops import attn, gemm
    q, k, v = (rnd(2, 4, 300, 128) for _ in range(3))
    o1, lse1 = attn._fwd(q, k, v, True, 0.1)
    o2, lse2 = attn._fwd.custom_op(q, k, v, True, 0.1)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    a, b = rnd(300, 256), rnd(256, 512)
    assert torch.equal(gemm._matmul(a, b), gemm._matmul.custom_op(a, b))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            tkc.attention(q, k, v), tkc.matmul(a, b)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o, c = tkc.attention(q, k, v), tkc.matmul(a, b)
    q.copy_(rnd(2, 4, 300, 128))
    a.copy_(rnd(300, 256))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, tkc.attention(q, k, v)) and torch.equal(c, tkc.matmul(a, b))
