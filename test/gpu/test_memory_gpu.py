"""The memory-bound kernels on the GPU through their torch.library ops:
rotary (both layouts, in place, autograd) and dropout + residual + LayerNorm
(forward, backward, the dropout mask against tkc.philox), against PyTorch."""
import numpy as np
import pytest

from tkc.kernels import rotary

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

# rotary's block shapes beside the op's (bench/memory_bound.py times them): 4 warps of one head,
# 2 blocks an SM; 8 heads a block (a 32 KB tile), 2 blocks an SM
ROTARY_CONFIGURATIONS = [rotary(128, il, **cfg) for cfg in (dict(blocks_per_sm=2), dict(warps=8, blocks_per_sm=2))
                         for il in (False, True)]
KERNELS = ROTARY_CONFIGURATIONS   # for `tkc build`


def ops():
    """The norms' and rotary's public ops and their custom ops, in one namespace."""
    from types import SimpleNamespace

    from tkc.torchops import norms, rotary
    return SimpleNamespace(**{**vars(norms), **vars(rotary)})


def rel_err(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def rope_ref(x, cos, sin, interleaved):
    x, c, s = x.float(), cos.float()[None, :, None, :], sin.float()[None, :, None, :]
    D = x.shape[-1]
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :D // 2], x[..., D // 2:])
    o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    return torch.stack([o1, o2], -1).flatten(-2) if interleaved else torch.cat([o1, o2], -1)


def rope_inputs(B, T, H, D, grad=False):
    x = torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    theta = torch.outer(torch.arange(T, device="cuda").float(),
                        1 / 10000 ** (torch.arange(D // 2, device="cuda").float() * 2 / D))
    return x, theta.cos().bfloat16(), theta.sin().bfloat16()


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape", [(2, 1000, 3, 128), (16, 1024, 16, 128), (1, 17, 1, 128), (2, 333, 32, 96)])
def test_rotary(shape, interleaved):
    x, cos, sin = rope_inputs(*shape)
    out = ops().rotary_embedding(x, cos, sin, interleaved)
    assert rel_err(out, rope_ref(x, cos, sin, interleaved)) < 1e-2


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_tables_offset_into_a_longer_one(interleaved):
    """cos and sin as rows 5.. of a longer table (decoding at an offset): their
    TMA descriptors start inside the table's memory."""
    x, cos, sin = rope_inputs(3, 50, 5, 128)
    _, cos_all, sin_all = rope_inputs(1, 80, 1, 128)
    cos, sin = cos_all[5:55], sin_all[5:55]
    out = ops().rotary_embedding(x, cos, sin, interleaved)
    assert rel_err(out, rope_ref(x, cos, sin, interleaved)) < 1e-2


def test_rotary_grad_and_opcheck():
    x, cos, sin = rope_inputs(2, 100, 4, 128, grad=True)
    g = torch.randn_like(x)
    ops().rotary_embedding(x, cos, sin).backward(g)
    xr = x.detach().clone().requires_grad_()
    rope_ref(xr, cos, sin, False).backward(g.float())
    assert rel_err(x.grad, xr.grad) < 1e-2
    torch.library.opcheck(ops()._rotary.custom_op, (x.detach(), cos, sin, False))


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_grad_repeated(interleaved):
    """The backward (the inverse kernel, both layouts) of a first call and of
    repeated ones (eager.grad_key's kept run, Op.fast) against autograd
    through the reference."""
    x, cos, sin = rope_inputs(2, 100, 4, 128)
    g = torch.randn_like(x)
    xr = x.clone().requires_grad_()
    rope_ref(xr, cos, sin, interleaved).backward(g.float())
    for _ in range(3):
        xg = x.clone().requires_grad_()
        out = ops().rotary_embedding(xg, cos, sin, interleaved)
        out.backward(g)
        assert rel_err(out, rope_ref(x, cos, sin, interleaved)) < 1e-2
        assert rel_err(xg.grad, xr.grad) < 1e-2


def test_layer_norm_grad_repeated_and_graph_captured():
    """Repeated calls that want gradients (kept runs, with and without weight
    gradients: the unwanted dw/db partial sums go to scratch memory) match
    autograd through the reference; forward and backward captured in a CUDA
    graph and replayed on new inputs match too."""
    N, D = 1000, 1024
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(D, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(w)
    gy = torch.randn_like(x)

    def reference(x, params):
        leaves = [t.detach().clone().requires_grad_(n == 0 or params) for n, t in enumerate((x, w, b))]
        ry, _ = ln_ref(leaves[0], leaves[1], leaves[2], torch.zeros_like(leaves[0]), 1e-5)
        ry.backward(gy.float())
        return [t.grad for t in leaves]

    for params in (False, True, False):
        want = reference(x, params)
        for _ in range(2):
            xg, wg, bg = (t.clone().requires_grad_(n == 0 or params) for n, t in enumerate((x, w, b)))
            ops().layer_norm(xg, wg, bg).backward(gy)
            for got, ref in zip((xg.grad, wg.grad, bg.grad), want):
                assert (got is None) == (ref is None) and (got is None or rel_err(got, ref) < 2e-2)
    xs = x.clone().requires_grad_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: module loads happen outside the capture
        ops().layer_norm(xs, w, b).backward(gy)
    torch.cuda.current_stream().wait_stream(side)
    xs.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops().layer_norm(xs, w, b)
        out.backward(gy)
    with torch.no_grad():
        xs.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(xs.grad, reference(xs.detach(), False)[0]) < 2e-2


def test_layer_norm_repeated_with_conversions():
    """Kept runs that convert as the full path does (x transposed, f32 weights
    as under autocast) give the reference's values and gradients each time."""
    N, D = 256, 1024
    x = torch.randn(N // 4, 4, D, device="cuda", dtype=torch.bfloat16)
    w, b = torch.randn(D, device="cuda"), torch.randn(D, device="cuda")
    gy = torch.randn(4, N // 4, D, device="cuda", dtype=torch.bfloat16)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    ry, _ = ln_ref(leaves[0].transpose(0, 1), leaves[1], leaves[2], torch.zeros(4, N // 4, D, device="cuda"),
                   1e-5)
    ry.backward(gy.float())
    for _ in range(3):
        xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
        y = ops().layer_norm(xg.transpose(0, 1), wg, bg)
        y.backward(gy)
        assert rel_err(y, ry) < 1e-2
        for got, ref in zip((xg, wg, bg), leaves):
            assert rel_err(got.grad, ref.grad) < 2e-2


def test_rotary_kernel_in_place():
    from tkc.kernels import rotary
    from tkc.kernels.rotary import splits
    x, cos, sin = rope_inputs(2, 64, 4, 128)
    want = rope_ref(x, cos, sin, False)
    v = x.view(2, 1, 64, 4 * 128)
    rotary(128, False, *splits(128)[0])(v, cos, sin, v)  # (a prebuilt split) declared inplace={"o": "x"}
    torch.cuda.synchronize()
    assert rel_err(x, want) < 1e-2


def ln_ref(x, w, b, res, eps, keep=None, p=0.0):
    h = (torch.where(keep, x.float() / (1 - p), 0) if keep is not None else x.float()) + res.float()
    return torch.nn.functional.layer_norm(h, (h.shape[-1],), w.float(), b.float(), eps), h


@pytest.mark.parametrize("shape", [(16384, 1024), (1000, 1024), (3, 1024)])
def test_layer_norm_forward_backward(shape):
    N, D = shape
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    res = torch.randn_like(x, requires_grad=True)
    w = torch.randn(D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn_like(w, requires_grad=True)
    y, h = ops().layer_norm(x, w, b, residual=res, prenorm=True)
    leaves = [t.detach().clone().requires_grad_() for t in (x, res, w, b)]
    ry, rh = ln_ref(leaves[0], leaves[2], leaves[3], leaves[1], 1e-5)
    assert rel_err(y, ry) < 1e-2 and rel_err(h, rh) < 1e-2
    gy, gh = torch.randn_like(y), torch.randn_like(h)
    torch.autograd.backward([y, h], [gy, gh])
    torch.autograd.backward([ry, rh], [gy.float(), gh.float()])
    for got, ref in zip((x, res, w, b), leaves):
        assert rel_err(got.grad, ref.grad) < 2e-2, (got.shape, rel_err(got.grad, ref.grad))


def test_layer_norm_dropout_mask_is_tkc_philox():
    from tkc import philox
    N, D, p = 64, 1024, 0.3
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16)
    res = torch.zeros_like(x)
    w, b = torch.ones(D, device="cuda", dtype=torch.bfloat16), torch.zeros(D, device="cuda", dtype=torch.bfloat16)
    pair = torch.tensor([[1234, 77]], device="cuda", dtype=torch.int32)   # seed, offset: read on the device
    y, h, mean, rstd = ops()._ln_fwd(x, res, w, b, 1e-5, p, pair)
    keep = philox.uniform(1234, 77, np.arange(N * D).reshape(N, D)) >= p
    want = torch.where(torch.from_numpy(keep).cuda(), x.float() / (1 - p), 0)
    assert rel_err(h, want) < 1e-2
    assert abs((h == 0).float().mean().item() - p) < 0.01
    torch.library.opcheck(ops()._ln_fwd.custom_op, (x, res, w, b, 1e-5, p, pair))


@pytest.mark.parametrize("prenorm", [False, True])
@pytest.mark.parametrize("shape", [(16384, 1024), (1000, 1024), (3, 1024)])
def test_layer_norm_without_residual(shape, prenorm):
    """residual=None, no dropout: the x-only kernels (h = x itself)."""
    N, D = shape
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn_like(w, requires_grad=True)
    out = ops().layer_norm(x, w, b, prenorm=prenorm)
    y, h = out if prenorm else (out, None)
    assert h is None or h is x
    leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    ry, _ = ln_ref(leaves[0], leaves[1], leaves[2], torch.zeros_like(leaves[0]), 1e-5)
    assert rel_err(y, ry) < 1e-2
    gy = torch.randn_like(y)
    y.backward(gy)
    ry.backward(gy.float())
    for got, ref in zip((x, w, b), leaves):
        assert rel_err(got.grad, ref.grad) < 2e-2, (got.shape, rel_err(got.grad, ref.grad))


def _philox_keep(N, D, p, seed, offset):
    from tkc import philox
    return torch.from_numpy(philox.uniform(seed, offset, np.arange(N * D).reshape(N, D)) >= p).cuda()


@pytest.mark.parametrize("residual", [True, False])
def test_layer_norm_dropout_gradients(residual):
    """With dropout, through the ops (fixed seed and offset), against PyTorch with
    tkc.philox's mask: values and every gradient (dres differs from dx)."""
    N, D, p, seed, offset = 1000, 1024, 0.25, 1234, 77
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16)
    res = torch.randn_like(x)
    w = torch.randn(D, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(w)
    keep = _philox_keep(N, D, p, seed, offset)
    philox = torch.tensor([[seed, offset]], device="cuda", dtype=torch.int32)   # read by the kernels
    leaves = [t.float().requires_grad_() for t in (x, res, w, b)]
    ry, rh = ln_ref(leaves[0], leaves[2], leaves[3], leaves[1] if residual else torch.zeros_like(leaves[1]),
                    1e-5, keep, p)
    gy, gh = torch.randn_like(x), torch.randn_like(x)
    if residual:
        y, h, mean, rstd = ops()._ln_fwd(x, res, w, b, 1e-5, p, philox)
        dx, dres, dwb = ops()._ln_bwd(gy, gh, h, w, mean, rstd, p, philox, True)
        torch.autograd.backward([ry, rh], [gy.float(), gh.float()])
        assert rel_err(h, rh) < 1e-2 and rel_err(dres, leaves[1].grad) < 2e-2
        torch.library.opcheck(ops()._ln_bwd.custom_op, (gy, gh, h, w, mean, rstd, p, philox, True))
    else:
        y, mean, rstd = ops()._ln_fwd_nores(x, w, b, 1e-5, p, philox)
        dx, dwb = ops()._ln_bwd_nores(gy, x, w, mean, rstd, p, philox, True)
        ry.backward(gy.float())
        torch.library.opcheck(ops()._ln_fwd_nores.custom_op, (x, w, b, 1e-5, p, philox))
        torch.library.opcheck(ops()._ln_bwd_nores.custom_op, (gy, x, w, mean, rstd, p, philox, True))
    assert rel_err(y, ry) < 1e-2
    assert rel_err(dx, leaves[0].grad) < 2e-2
    assert rel_err(dwb[0], leaves[2].grad) < 2e-2 and rel_err(dwb[1], leaves[3].grad) < 2e-2


def test_layer_norm_backward_without_dropout_shares_dx():
    """p = 0: the backward writes dx only; dres comes back empty and autograd
    gives the residual dx itself."""
    N, D = 64, 1024
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16)
    w, b = torch.randn(D, device="cuda", dtype=torch.bfloat16), torch.randn(D, device="cuda", dtype=torch.bfloat16)
    from tkc.torchops.norm_plans import no_dropout
    none = no_dropout(x.device)   # no dropout: no seed read
    y, h, mean, rstd = ops()._ln_fwd(x, torch.randn_like(x), w, b, 1e-5, 0.0, none)
    dx, dres, dwb = ops()._ln_bwd(torch.randn_like(x), torch.randn_like(x), h, w, mean, rstd, 0.0, none,
                                  True)
    assert dres.numel() == 0 and dx.shape == x.shape and dwb.shape == (2, D)
    for params in (True, False):  # without params: no weight or bias gradient
        torch.library.opcheck(ops()._ln_bwd.custom_op, (torch.randn_like(x), torch.randn_like(x), h, w, mean,
                                                        rstd, 0.0, none, params))
    dx2, _, dwb = ops()._ln_bwd(torch.ones_like(x), torch.zeros_like(x), h, w, mean, rstd, 0.0, none, False)
    assert dwb.numel() == 0 and torch.isfinite(dx2.float()).all()


@pytest.mark.parametrize("kernel", ROTARY_CONFIGURATIONS, ids=lambda k: k.name)
def test_rotary_configurations(kernel):
    """The benchmark's other block shapes (bench/memory_bound.py times them)."""
    B, T, H, D = 2, 1000, 6, 128  # H not a multiple of the block's heads
    interleaved = "_interleaved" in kernel.name
    x, cos, sin = rope_inputs(B, T, H, D)
    out = torch.empty_like(x)
    kernel(x.view(B, 1, T, H * D), cos, sin, out.view(B, 1, T, H * D))
    torch.cuda.synchronize()
    assert rel_err(out, rope_ref(x, cos, sin, interleaved)) < 1e-2


def test_dropout_draws_a_new_mask_at_each_replay_and_compiled_call():
    """The dropout seed is drawn on the device (norms._philox): a captured
    graph's replays and a compiled function's calls each get a new mask,
    of about p of the elements, and y is the norm of that call's own h."""
    import torch.nn.functional as F

    import tkc
    N, D, p = 512, 1024, 0.5
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16)
    w, b = torch.rand(D, device="cuda", dtype=torch.bfloat16) + 0.5, torch.zeros(D, device="cuda", dtype=torch.bfloat16)
    r = torch.zeros_like(x)   # h = dropout(x): a dropped element is 0

    def call():
        return tkc.layer_norm(x, w, b, residual=r, dropout_p=p, prenorm=True)

    def kept(y, h):
        assert rel_err(y, F.layer_norm(h.float(), (D,), w.float(), b.float())) < 1e-2
        mask = h != 0
        assert abs(mask.float().mean().item() - (1 - p)) < 0.01
        return mask
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y, h = call()
    masks = []
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        masks.append(kept(y, h))
    assert not torch.equal(masks[0], masks[1])
    torch._dynamo.reset()
    compiled = torch.compile(call, fullgraph=True)
    first, second = (kept(*compiled()) for _ in range(2))
    assert not torch.equal(first, second)
