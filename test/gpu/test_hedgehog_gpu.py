"""Hedgehog attention on the GPU through its torch op (tkc.hedgehog), against
a float64 PyTorch reference written from the definition (dense, masked) on
ragged lengths; refusals; torch.compile without a graph break and
torch.library.opcheck."""
import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def rel_err(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def features(x, fmap):
    """concat(softmax(x map), softmax(-x map)), clamped below at 1e-6."""
    y = torch.einsum("bhld,hdp->bhlp", x.double(), fmap.double())
    return torch.cat([y.softmax(-1), (-y).softmax(-1)], -1).clamp(min=1e-6)


def reference(q, k, v, qmap, kmap, alpha, beta, scale):
    """float64 Hedgehog over [B, H, L, D]: the window of query t is its chunk
    of 64 causally and the chunk before (beta exp((q.k - m) scale), m its
    largest q.k), the chunks before that linear (alpha phi(q).phi(k))."""
    t = torch.arange(q.shape[-2], device=q.device)
    c = t // 64
    window = (t[None, :] <= t[:, None]) & (c[None, :] >= c[:, None] - 1)
    linear = c[None, :] <= c[:, None] - 2
    x = q.double() @ k.double().transpose(-1, -2)
    m = x.masked_fill(~window, -math.inf).amax(-1, keepdim=True)
    a = torch.exp((x - m) * scale).masked_fill(~window, 0) * beta.double()[:, None, None]
    lin = features(q, qmap) @ features(k, kmap).transpose(-1, -2)
    a = a + lin.masked_fill(~linear, 0) * alpha.double()[:, None, None]
    return (a @ v.double()) / (a.sum(-1, keepdim=True) + 1e-6)


def inputs(B, H, L, maps=1.0):
    """As ThunderKittens' generator: randn q, k, v and maps, alpha in [0, 3),
    beta in [0, 1) per head."""
    q, k, v = (torch.randn(B, H, L, 128, device="cuda").bfloat16() for _ in range(3))
    qmap, kmap = ((torch.randn(H, 128, 64, device="cuda") * maps).bfloat16() for _ in range(2))
    alpha = torch.rand(H, device="cuda") * 3
    beta = torch.rand(H, device="cuda")
    return q, k, v, qmap, kmap, alpha, beta


@pytest.mark.parametrize("maps", [1.0, 0.1])
@pytest.mark.parametrize("L", [64, 1000, 2048])
def test_hedgehog(L, maps):
    import tkc
    args = inputs(2, 3, L, maps)
    o = tkc.hedgehog(*args)
    assert o.shape == args[2].shape and o.dtype == torch.bfloat16
    assert rel_err(o, reference(*args, 128 ** -0.5)) < 2e-2


def test_refusals():
    import tkc
    from tkc.diagnostics import TkcError
    q, k, v, qmap, kmap, alpha, beta = inputs(1, 2, 64)
    with pytest.raises(TkcError, match="value dim 64"):
        tkc.hedgehog(q, k, v[..., :64], qmap, kmap, alpha, beta)
    with pytest.raises(TkcError, match=r"qmap must be a bfloat16 tensor \[2, 128, 64\]"):
        tkc.hedgehog(q, k, v, qmap[:1], kmap, alpha, beta)
    with pytest.raises(TkcError, match="alpha must be on cuda"):
        tkc.hedgehog(q, k, v, qmap, kmap, alpha.cpu(), beta)


def test_compile_and_opcheck():
    import tkc
    from tkc.torchops import linear_attn as linear_ops
    args = inputs(1, 2, 200, maps=0.1)
    f = torch.compile(lambda *a: tkc.hedgehog(*a, scale=0.1) * 2, fullgraph=True)
    assert rel_err(f(*args), 2 * reference(*args, 0.1)) < 2e-2
    torch.library.opcheck(linear_ops._hedgehog.custom_op, (*args, 0.1))
