"""The linear-attention kernels on the GPU through their torch ops
(tkc.linear_attention with and without decay, tkc.based), against a float64
PyTorch reference and, where flash-linear-attention is importable, against
its kernels of the same semantics; refusals; torch.compile without a graph
break."""
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def rel_err(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def reference(q, k, v, scale, g=None, based=False):
    """float64 causal linear attention over [B, H, L, D] (Based: 1 + x + x^2/2)."""
    q, k, v = (t.double() for t in (q, k, v))
    a = q @ k.transpose(-1, -2) * scale
    if based:
        a = 1 + a + a * a / 2
    if g is not None:
        G = g.double().cumsum(-1)
        a = a * torch.exp((G[..., :, None] - G[..., None, :]).clamp(max=0))
    L = a.shape[-1]
    return a.masked_fill(~torch.ones(L, L, dtype=torch.bool, device=a.device).tril(), 0) @ v


def inputs(B, H, L, F, DV, decay=False, qk=0.3):
    q, k = (torch.randn(B, H, L, F, device="cuda") * qk for _ in range(2))
    v = torch.randn(B, H, L, DV, device="cuda")
    g = -torch.rand(B, H, L, device="cuda") * 0.05 if decay else None
    return q.bfloat16(), k.bfloat16(), v.bfloat16(), g


def _slice_kernels():
    """The kernels tkc.linear_attention runs for every F x DV, decay or not:
    each width v is sliced into (their default schedules; `tkc build` of this
    file prebuilds them for an offline run)."""
    from tkc.kernels.linear_attention import linear_attention
    from tkc.torchops.linear_attn import DIMS, widths
    shapes = {(F, w, d) for F in DIMS for DV in DIMS for d in (False, True) for w in widths(F, DV, d)}
    return [linear_attention(*shape) for shape in sorted(shapes)]


KERNELS = _slice_kernels()


@pytest.mark.parametrize("F", [64, 128, 192, 256])
@pytest.mark.parametrize("DV", [64, 128, 192, 256])
@pytest.mark.parametrize("decay", [False, True])
def test_every_dim_and_an_odd_length(F, DV, decay):
    """Every F and DV the op accepts, with decay and without, at an odd L:
    wide values in column slices, g padded to even (linear_attn.WIDEST)."""
    import tkc
    q, k, v, g = inputs(2, 3, 333, F, DV, decay, qk=0.2)
    o = tkc.linear_attention(q, k, v, g=g)
    assert o.shape == v.shape and rel_err(o, reference(q, k, v, F ** -0.5, g)) < 2e-2


@pytest.mark.parametrize("F,DV", [(64, 64), (128, 128), (128, 64)])
@pytest.mark.parametrize("decay", [False, True])
@pytest.mark.parametrize("L", [64, 1000, 2048])
def test_linear_attention(F, DV, decay, L):
    import tkc
    q, k, v, g = inputs(2, 3, L, F, DV, decay)
    o = tkc.linear_attention(q, k, v, g=g)
    assert o.shape == v.shape and o.dtype == torch.bfloat16
    assert rel_err(o, reference(q, k, v, F ** -0.5, g)) < 2e-2


@pytest.mark.parametrize("L", [64, 1000, 4096])
def test_based(L):
    import tkc
    q, k, v, _ = inputs(2, 3, L, 16, 64, qk=1.0)
    o = tkc.based(q, k, v)
    assert rel_err(o, reference(q, k, v, 0.25, based=True)) < 2e-2


def _fla():
    try:
        import fla.ops  # noqa: F401
    except Exception as e:  # noqa: BLE001  (missing, or a Triton it cannot use)
        pytest.skip(f"flash-linear-attention is not importable: {e}")


def test_against_fla():
    """The same semantics as FLA's kernels (their [B, T, H, D] layout)."""
    _fla()
    from fla.ops.based import parallel_based
    from fla.ops.linear_attn import chunk_linear_attn
    from fla.ops.simple_gla import chunk_simple_gla

    import tkc
    t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
    q, k, v, g = inputs(2, 4, 1024, 128, 128, decay=True)
    want = t(chunk_linear_attn(t(q), t(k), t(v), normalize=False)[0])
    assert rel_err(tkc.linear_attention(q, k, v), want.float()) < 2e-2
    want = t(chunk_simple_gla(t(q), t(k), t(v), g=t(g))[0])
    assert rel_err(tkc.linear_attention(q, k, v, g=g), want.float()) < 2e-2
    q, k, v, _ = inputs(2, 4, 1024, 16, 64, qk=1.0)
    want = t(parallel_based(t(q), t(k), t(v), use_norm=False))
    assert rel_err(tkc.based(q, k, v), want.float()) < 2e-2


def test_refusals():
    import tkc
    from tkc.diagnostics import TkcError
    q, k, v, _ = inputs(1, 2, 64, 64, 64)
    with pytest.raises(TkcError, match="value dim 48"):
        tkc.linear_attention(q, k, v[..., :48])
    with pytest.raises(TkcError, match="g must be an f32 tensor"):
        tkc.linear_attention(q, k, v, g=torch.zeros(1, 2, 64, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(TkcError, match="feature dim 64"):
        tkc.based(q, k, v)


def test_compile_and_opcheck():
    import tkc
    from tkc.torchops import linear_attn as linear_ops
    q, k, v, g = inputs(1, 2, 200, 64, 64, decay=True)
    f = torch.compile(lambda q, k, v, g: tkc.linear_attention(q, k, v, g=g) * 2, fullgraph=True)
    assert rel_err(f(q, k, v, g), 2 * reference(q, k, v, 0.125, g)) < 2e-2
    torch.library.opcheck(linear_ops._la.custom_op, (q, k, v, g, 0.125))
    qb, kb, vb, _ = inputs(1, 2, 128, 16, 64)
    torch.library.opcheck(linear_ops._based.custom_op, (qb, kb, vb, 0.25))
