"""tkc's PyTorch ops as a model author calls them, on the CPU: the eager path
that skips torch.library's wrapper (and the custom op that tracing sees),
plans per argument signature, zero-size inputs, argument errors at the
caller's line, tkc.matmul / tkc.linear and tkc.rms_norm with the interpreter
standing in for the GPU, and the host path through the fake driver."""
from __future__ import annotations

import copy
import json

import pytest
from helpers import grads_match
from helpers import interpreted as _interpreted
from tkc.kernels.norm_grads import norm_grads

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402
from tkc.kernels.layernorm import layernorm_bwd, layernorm_fwd  # noqa: E402
from tkc.kernels.rmsnorm import rmsnorm_bwd, rmsnorm_fwd  # noqa: E402
from tkc.torchops import checks, gemm, norm_plans, norms, rotary  # noqa: E402
from tkc.torchops.eager import Op, tracing  # noqa: E402

BF = torch.bfloat16


@pytest.fixture
def cpu_ops(monkeypatch):
    """CPU tensors pass the ops' device checks; kernels run in the interpreter."""
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    build = gemm._kernel
    monkeypatch.setattr(gemm, "_kernel", lambda *key, **kw: _interpreted(build(*key, **kw)))
    monkeypatch.setattr(gemm, "_schedule", lambda *args: {"BN": 64, "cluster": 1, "persistent": True,
                                                          "split": 1})  # the small tiles interpret faster
    monkeypatch.setattr(norm_plans, "rms_kernels", lambda D, dropout, residual: tuple(
        _interpreted(k) for k in (rmsnorm_fwd(D, dropout, 4, residual),
                                  rmsnorm_bwd(D, dropout, 4, residual))))
    monkeypatch.setattr(norm_plans, "ln_kernels", lambda D, dropout, residual=True: tuple(
        _interpreted(k) for k in (layernorm_fwd(D, dropout, 4, residual),
                                  layernorm_bwd(D, dropout, 4, residual))))
    monkeypatch.setattr(norm_plans, "sms", lambda device: 2)
    monkeypatch.setattr(norm_plans, "resident", lambda kernel, device: 2)   # blocks an SM holds
    monkeypatch.setattr(norm_plans, "norm_grads", lambda planes: _interpreted(norm_grads(planes)))
    monkeypatch.setattr(rotary, "_kernel", lambda D, interleaved, inverse, key: _interpreted(
        rotary.picked(D, interleaved, inverse, key)))


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


# ---------------------------------------------------------------- the eager path

def _counting_op(name):
    calls = {"impl": 0}

    def impl(x: torch.Tensor) -> torch.Tensor:
        calls["impl"] += 1
        return x * 2

    def backward(ctx, g):
        return g * 2

    op = Op(f"tkc_test::{name}", impl, lambda x: torch.empty_like(x), lambda ctx, i, o: None,
            backward)
    return op, calls


def test_eager_calls_skip_the_custom_op(monkeypatch):
    """No tracing: the implementation runs without torch.library's wrapper,
    and with a gradient wanted through a plain autograd.Function; both give
    the custom op's values and gradients."""
    op, calls = _counting_op("eager")
    through = []
    real = op.custom_op
    monkeypatch.setattr(op, "custom_op", lambda *a: through.append(1) or real(*a))
    x = torch.randn(5, requires_grad=True)
    y = op(x)
    y.sum().backward()
    assert through == [] and calls["impl"] == 1
    assert torch.equal(y.detach(), x.detach() * 2) and torch.equal(x.grad, torch.full((5,), 2.0))
    with torch.no_grad():
        assert torch.equal(op(x), x.detach() * 2) and through == []


def test_tracing_goes_through_the_custom_op():
    """torch.compile (fullgraph), fake tensors and vmap see the custom op."""
    op, calls = _counting_op("traced")
    x = torch.randn(4, 3)
    out = torch.compile(lambda t: op(t) + 1, backend="aot_eager", fullgraph=True)(x)
    assert torch.equal(out, x * 2 + 1)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(x)
        assert tracing((fake,)) and op(fake).shape == (4, 3)
    assert not tracing((x, 1.0))
    assert torch.equal(torch.vmap(op)(x), x * 2)


# ---------------------------------------------------------------- edges and errors

def test_zero_size_inputs_give_empty_outputs(monkeypatch, cpu_ops):
    q = torch.zeros(0, 2, 64, 64, dtype=BF)
    assert tkc.attention(q, q, q).shape == (0, 2, 64, 64)
    q, k = torch.zeros(1, 2, 5, 64, dtype=BF), torch.zeros(1, 2, 0, 64, dtype=BF)
    o, lse = tkc.attention(q, k, k, return_lse=True)
    assert o.shape == (1, 2, 5, 64) and not o.any()   # no key: 0, as FlashAttention
    assert torch.isposinf(lse).all()                  # and lse +inf, as the kernel's rows with no key
    t = torch.zeros(0, 2, 64, dtype=BF)
    cu = torch.zeros(3, dtype=torch.int32)
    assert tkc.attention_varlen(t, t, t, cu, cu, 0, 0).shape == (0, 2, 64)
    x = torch.zeros(0, 256, dtype=BF, requires_grad=True)
    w = torch.ones(256, dtype=BF, requires_grad=True)
    y = tkc.rms_norm(x, w)
    y.sum().backward()
    assert y.shape == (0, 256) and not w.grad.any()
    a = torch.zeros(0, 64, dtype=BF)
    assert tkc.matmul(a, torch.zeros(64, 8, dtype=BF)).shape == (0, 8)
    c = tkc.matmul(torch.ones(3, 0, dtype=BF), torch.ones(0, 8, dtype=BF))
    assert c.shape == (3, 8) and not c.any()          # K = 0: a sum of nothing
    y = tkc.linear(torch.ones(2, 3, 0, dtype=BF), torch.ones(8, 0, dtype=BF), torch.ones(8, dtype=BF))
    assert y.shape == (2, 3, 8) and (y == 1).all()    # ... and the bias


def _refused(match, fn, *args, **kw):
    with pytest.raises(TkcError, match=match) as e:
        fn(*args, **kw)
    assert "test_torchops.py" in str(e.value)  # the caller's line, not tkc's or torch's


def test_bad_arguments_are_refused_at_the_callers_line(cpu_ops):
    x = torch.zeros(4, 512, dtype=BF)
    w, b = torch.ones(512, dtype=BF), torch.zeros(512, dtype=BF)
    _refused(r"weight must be a float tensor \[512\]", tkc.layer_norm, x, w[:256], b)
    _refused(r"bias must be \[512\]", tkc.layer_norm, x, w, b[None])
    _refused(r"residual must be a float tensor of x's shape", tkc.layer_norm, x, w, b,
             residual=x[:2])
    _refused(r"multiple of 256 in 256..16384", tkc.layer_norm, torch.zeros(4, 300, dtype=BF), w, b)
    _refused(r"multiple of 256 in 256..16384", tkc.rms_norm, torch.zeros(2, 16640, dtype=BF),
             torch.ones(16640, dtype=BF))
    _refused(r"x must be bfloat16", tkc.rms_norm, x.float(), w)
    _refused(r"K = 12 must be a multiple of 8", tkc.matmul, torch.zeros(4, 12, dtype=BF),
             torch.zeros(12, 8, dtype=BF))
    _refused(r"a's last dim \(K = 16\) must be b's second to last", tkc.matmul,
             torch.zeros(4, 16, dtype=BF), torch.zeros(8, 8, dtype=BF))
    _refused(r"activation must be one of", tkc.linear, torch.zeros(2, 8, dtype=BF),
             torch.zeros(8, 8, dtype=BF), None, "relu")
    _refused(r"bias must be \[8\]", tkc.linear, torch.zeros(2, 8, dtype=BF),
             torch.zeros(8, 8, dtype=BF), torch.zeros(16, dtype=BF))
    xr, cs = torch.zeros(1, 4, 2, 64, dtype=BF), torch.zeros(4, 32)
    _refused(r"sin must be a float tensor \[4, 32\]", tkc.rotary_embedding, xr, cs, cs[:3])
    _refused(r"D = 80 must be a multiple of 32", tkc.rotary_embedding,
             torch.zeros(1, 4, 2, 80, dtype=BF), cs, cs)
    _refused(r"x must be bfloat16", tkc.rotary_embedding, xr.float(), cs, cs)
    q0, k0 = torch.zeros(1, 2, 4, 64, dtype=BF), torch.zeros(1, 0, 4, 64, dtype=BF)
    _refused(r"must be a multiple of the key/value heads \(0\), which must be at least 1",
             tkc.attention, q0, k0, k0)


def test_autocast_casts_float32_inputs_to_bf16(cpu_ops):
    """In a bf16 autocast region (AMP: float32 weights and residual stream) the
    ops take float32 tensors as bf16 casts of them, as torch casts F.linear's,
    and the gradients reach the float32 leaves; outside one, float32 is refused
    with the hint; a float16 region is refused. (cpu_ops: the ops' device is the CPU.)"""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 24, 64, generator=g).requires_grad_()
    w = (torch.randn(32, 64, generator=g) * 0.2).requires_grad_()
    b = torch.randn(32, generator=g).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = tkc.linear(x, w, b, "gelu")
        m = tkc.matmul(x, w.t())
    assert y.dtype == m.dtype == BF
    assert torch.equal(y, tkc.linear(x.to(BF), w.to(BF), b.to(BF), "gelu"))
    assert torch.equal(m, tkc.matmul(x.to(BF), w.to(BF).t()))
    (y.float().sum() + m.float().sum()).backward()
    assert x.grad.dtype == w.grad.dtype == b.grad.dtype == torch.float32
    assert _rel(b.grad, torch.autograd.grad(tkc.linear(x.to(BF), w.to(BF), b.to(BF), "gelu").float().sum(),
                                            b)[0]) == 0
    h, wn = torch.randn(8, 256, generator=g), torch.randn(256, generator=g)
    xr, ang = torch.randn(1, 16, 2, 64, generator=g), torch.rand(16, 32, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(tkc.layer_norm(h, wn, wn, residual=h), tkc.layer_norm(h.to(BF), wn, wn, h.to(BF)))
        assert torch.equal(tkc.rms_norm(h, wn), tkc.rms_norm(h.to(BF), wn))
        assert torch.equal(tkc.rotary_embedding(xr, ang.cos(), ang.sin()),
                           tkc.rotary_embedding(xr.to(BF), ang.cos(), ang.sin()))
    _refused(r"x must be bfloat16, got float32 \(8, 256\) \(or call the op in torch.autocast",
             tkc.rms_norm, h, wn)
    with torch.autocast("cpu", dtype=torch.float16):
        _refused(r"compute in bf16: under torch.autocast use dtype=torch.bfloat16", tkc.matmul, x, w.t())


def test_autocast_other_ops_under_the_fake_driver():
    """attention, attention_varlen and the forward-only ops in a bf16 region
    take float32 inputs as bf16 (the launches of a bf16 call; the fake driver
    stubs them), the f32 ones they need (linear_attention's g, hedgehog's
    alpha and beta) as they are."""
    from tkc.bench.fake_driver import fake_driver
    q, g = torch.randn(1, 2, 64, 64), -torch.rand(1, 2, 64)
    qv, cu = torch.randn(64, 2, 64), torch.tensor([0, 30, 64], dtype=torch.int32)
    qb, vb = torch.randn(1, 2, 64, 16), torch.randn(1, 2, 64, 64)
    qh, maps, ab = torch.randn(1, 2, 64, 128), torch.randn(2, 128, 64), torch.ones(2)
    u, kf = torch.randn(2, 8, 1024), tkc.fftconv_filter(torch.randn(8, 1024), 1024)
    calls = [lambda: tkc.attention(q, q, q, causal=True), lambda: tkc.attention_varlen(qv, qv, qv, cu, cu, 34, 34),
             lambda: tkc.linear_attention(q, q, q, g), lambda: tkc.based(qb, qb, vb),
             lambda: tkc.hedgehog(qh, qh, qh, maps, maps, ab, ab), lambda: tkc.fftconv(u, kf)]
    with fake_driver() as cuda:
        for call in calls:
            n = cuda.state.launches
            with torch.autocast("cpu", dtype=torch.bfloat16):
                assert call().dtype == BF
            assert cuda.state.launches > n


def test_forward_only_ops_refuse_a_call_that_wants_a_gradient():
    """The ops without a backward (linear_attention, based, hedgehog,
    fftconv, quantize_fp8) refuse inputs that require grad in grad mode, at
    the caller's line: their outputs carried no gradient, so a loss that also
    reached the inputs another way got a wrong one silently. Under no_grad,
    or on detached inputs, they are served."""
    from tkc.bench.fake_driver import fake_driver
    q, g = torch.randn(1, 2, 64, 64).to(BF), -torch.rand(1, 2, 64)
    qb, vb = torch.randn(1, 2, 64, 16).to(BF), torch.randn(1, 2, 64, 64).to(BF)
    qh, maps, ab = torch.randn(1, 2, 64, 128).to(BF), torch.randn(2, 128, 64).to(BF), torch.ones(2)
    u, kf = torch.randn(2, 8, 1024).to(BF), tkc.fftconv_filter(torch.randn(8, 1024), 1024)
    x = torch.randn(4, 256).to(BF)
    calls = {"linear_attention": lambda t: tkc.linear_attention(t, q, q, g),
             "based": lambda t: tkc.based(qb, t, vb), "hedgehog": lambda t: tkc.hedgehog(qh, qh, t, maps, maps, ab, ab),
             "fftconv": lambda t: tkc.fftconv(t, kf), "quantize_fp8": lambda t: tkc.quantize_fp8(t)}
    args = {"linear_attention": q, "based": qb, "hedgehog": qh, "fftconv": u, "quantize_fp8": x}
    with fake_driver():
        for name, call in calls.items():
            wanting = args[name].clone().requires_grad_()
            with pytest.raises(TkcError, match=f"{name}: no gradient flows") as e:
                call(wanting)
            assert e.value.where.startswith(__file__)
            with torch.no_grad():
                call(wanting)
            call(wanting.detach())


def test_dropout_seed_is_drawn_on_the_device_at_each_call():
    """The norms' dropout seed and offset are an i32 [1, 2] tensor the kernels
    read, drawn by torch's generator (so a captured CUDA graph's replays and
    a compiled graph's calls each get new ones, not the values of the call
    that recorded them); without dropout one zero pair a device, kept."""
    x = torch.randn(4, 256).to(BF)
    a, b = norms._philox(x, 0.1), norms._philox(x, 0.1)
    assert a.dtype == torch.int32 and a.shape == (1, 2) and not torch.equal(a, b)
    assert norms._philox(x, 0.0) is norms._philox(x, 0.0) and not norms._philox(x, 0.0).any()


def test_nn_convert_refuses_what_is_not_a_module():
    """tkc.nn.convert(None) raised AttributeError ('NoneType' object has no
    attribute 'named_modules') from inside tkc; it is tkc's error at the
    caller's line."""
    import tkc.nn
    for bad in (None, "model", [torch.nn.Linear(8, 8)]):
        with pytest.raises(TkcError, match="convert: model must be a torch.nn.Module, got ") as e:
            tkc.nn.convert(bad)
        assert "test_torchops.py" in e.value.where


def test_nn_convert_swaps_what_tkc_serves_in_place(cpu_ops):
    """tkc.nn.convert: nn.Linear / LayerNorm / RMSNorm that tkc serves become
    tkc.nn's (the same objects and parameters: the state dict and an optimizer
    see nothing change), the rest stay; the converted model computes what the
    original did, forward and backward."""
    g = torch.Generator().manual_seed(12)
    torch.manual_seed(12)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.LayerNorm(256), torch.nn.GELU(),
                                torch.nn.Linear(256, 512, bias=False), torch.nn.RMSNorm(512, eps=1e-5),
                                torch.nn.Linear(512, 12), torch.nn.LayerNorm(12)).to(BF)
    ref = copy.deepcopy(model)
    params, keys = list(model.parameters()), list(model.state_dict())
    x = torch.randn(2, 9, 64, generator=g).to(BF)
    assert tkc.nn.convert(model) is model and model.tkc_converted == ["0", "1", "3", "4"]
    assert set(model.tkc_skipped) == {"5", "6"} and "multiples of 8" in model.tkc_skipped["5"] \
        and "multiple of 256" in model.tkc_skipped["6"]
    assert [type(m) for m in model] == [tkc.nn.Linear, tkc.nn.LayerNorm, torch.nn.GELU, tkc.nn.Linear,
                                        tkc.nn.RMSNorm, torch.nn.Linear, torch.nn.LayerNorm]
    assert list(model.parameters()) == params and list(model.state_dict()) == keys
    y, want = model(x), ref(x)
    assert _rel(y, want) < 2e-2
    y.float().square().sum().backward()
    want.float().square().sum().backward()
    assert all(_rel(p.grad, q.grad) < 3e-2 for p, q in zip(model.parameters(), ref.parameters()))


def test_nn_modules_are_the_ops(cpu_ops):
    """tkc.nn.Linear's fused activation; RMSNorm's eps=None is the input dtype's epsilon (nn.RMSNorm's)."""
    torch.manual_seed(13)
    lin = tkc.nn.Linear(64, 128, activation="silu").to(BF)
    x = torch.randn(5, 64).to(BF)
    assert torch.equal(lin(x), tkc.linear(x, lin.weight, lin.bias, "silu"))
    assert "activation='silu'" in repr(lin)
    norm = tkc.nn.RMSNorm(256).to(BF)
    h = torch.randn(3, 256).to(BF)
    assert torch.equal(norm(h), tkc.rms_norm(h, norm.weight, eps=torch.finfo(BF).eps))
    with pytest.raises(ValueError, match="activation must be one of"):
        tkc.nn.Linear(8, 8, activation="relu")


def test_nn_sdpa_routes_what_tkc_serves():
    """tkc.nn.scaled_dot_product_attention: tkc.attention (one launch, through the
    fake driver) where it serves the call, F.scaled_dot_product_attention (the
    same values, no launch) for a mask, dropout, a head dim it lacks, GQA without
    enable_gqa, causal with more queries than keys (SDPA's mask is top-left:
    with fewer, tkc.attention's over the first Lq keys) or float32 outside
    autocast. torch's bottom-right causal bias (causal_lower_right) is
    tkc.attention's causal mask at any lengths."""
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left
    from tkc.bench.fake_driver import fake_driver
    F = torch.nn.functional
    sdpa = tkc.nn.scaled_dot_product_attention
    q, k = torch.randn(1, 4, 64, 64).to(BF), torch.randn(1, 2, 64, 64).to(BF)
    q32, qs, q80 = q.float(), q[:, :, :16], torch.randn(1, 4, 64, 80).to(BF)
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    with fake_driver() as cuda:
        def launches(call):
            n = cuda.state.launches
            out = call()
            return cuda.state.launches - n, out
        assert launches(lambda: sdpa(q, q, q, is_causal=True))[0] == 1
        assert launches(lambda: sdpa(q, k, k, enable_gqa=True, scale=0.3))[0] == 1
        assert launches(lambda: sdpa(qs, q, q, causal_lower_right(16, 64)))[0] == 1   # 16 queries, 64 keys
        assert launches(lambda: sdpa(qs, q, q, is_causal=True))[0] == 1   # top-left: the first 16 keys
        with torch.autocast("cpu", dtype=BF):
            n, out = launches(lambda: sdpa(q32, q32, q32))
            assert n == 1 and out.dtype == BF
        for args, kw in [((q, q, q, mask), {}), ((q, q, q), {"dropout_p": 0.5}), ((q80, q80, q80), {}),
                         ((q, qs, qs), {"is_causal": True}), ((q32, q32, q32), {}),
                         ((qs, q, q, causal_upper_left(16, 64)), {}),
                         ((qs, q, q, causal_lower_right(16, 64)), {"dropout_p": 0.5})]:
            n, out = launches(lambda: sdpa(*args, **kw))
            assert n == 0
            if not kw.get("dropout_p"):
                assert torch.equal(out, F.scaled_dot_product_attention(*args, **kw))


def test_errors_inside_a_compiled_graph_name_the_callers_line():
    """An op reached through torch.compile (its custom op) still reports the
    caller's file, not torch's machinery."""
    x = torch.zeros(4, 512, dtype=BF)
    w, b = torch.ones(256, dtype=BF), torch.zeros(512, dtype=BF)
    with pytest.raises(Exception, match="test_torchops.py") as e:
        torch.compile(lambda x: tkc.layer_norm(x, w, b), backend="eager")(x)
    assert "weight must be a float tensor" in str(e.value)


# ---------------------------------------------------------------- matmul, linear, rms_norm

@pytest.mark.parametrize("case", ["ab", "a_bt", "batched", "batched_shared_b", "vector_a", "vector_b",
                                  "batched_vector_b", "vector_a_batched_b"])
def test_matmul_values_and_gradients(cpu_ops, case):
    """Against float64 autograd: a ragged 2-D product, b given as a transpose
    (x @ w.t(): the A B^T kernel, no copy), a batch of products, a batch
    against one shared b (flattened into one product), and torch.matmul's
    vectors: a [K] a row, b [K] a column (a batch of matrices times one)."""
    g = torch.Generator().manual_seed(1)
    rnd = lambda *s: torch.randn(*s, generator=g).to(BF).requires_grad_()  # noqa: E731
    a, b = {"ab": lambda: (rnd(40, 72), rnd(72, 136)),
            "a_bt": lambda: (rnd(40, 72), rnd(136, 72)),
            "batched": lambda: (rnd(2, 40, 72), rnd(2, 72, 24)),
            "batched_shared_b": lambda: (rnd(2, 20, 72), rnd(72, 24)),
            "vector_a": lambda: (rnd(72), rnd(72, 136)),
            "vector_b": lambda: (rnd(40, 72), rnd(72)),
            "batched_vector_b": lambda: (rnd(2, 24, 72), rnd(72)),
            "vector_a_batched_b": lambda: (rnd(72), rnd(2, 72, 24))}[case]()
    bb = b.t() if case == "a_bt" else b
    c = tkc.matmul(a, bb)
    ref = a.double() @ bb.double()
    assert c.dtype == BF and c.shape == ref.shape and _rel(c, ref) < 1e-2
    dc = torch.randn(ref.shape, generator=g).to(BF)
    assert grads_match(c, ref, dc, (a, b), 2e-2)


def test_matmul_vector_refusals(cpu_ops):
    """Two vectors (a dot product), and a vector b beside a matrix of rows
    that are not a multiple of 8 (it runs as b a^T): refused at the caller."""
    v = torch.zeros(64, dtype=BF)
    with pytest.raises(TkcError, match=r"a and b must not both be vectors \(a dot product: torch.dot\)") as e:
        tkc.matmul(v, v)
    assert e.value.where.startswith(__file__)
    with pytest.raises(TkcError, match="a matrix times a vector b \\[K\\] runs as b a\\^T, whose rows are a's: "
                                       "M = 5 must be a multiple of 8"):
        tkc.matmul(torch.zeros(5, 64, dtype=BF), v)


def test_matmul_schedules_are_tuned_data(monkeypatch, tmp_path):
    """tkc.matmul's schedule is the tuned table's for C's shape (per 128 rows,
    with the height of a swapped tile that fits them, and 256 columns up to
    4096, 1024 up to 16384, then power-of-two buckets) and for whether both
    operands' rows miss 128-byte alignment; the reference GPU's table where
    this GPU has none; a key of 1024 columns no table holds takes (if
    misaligned) the aligned key's, else its power-of-two bucket's, and of more
    than 16384 (an LM head's) its rows' at the most columns below its own a
    table holds (of 32k, 64k, 128k, else 16384); else the widest tile
    without a cluster (the default)."""
    from tkc.tune import tables
    monkeypatch.setattr(tables, "PACKAGE_DIR", tmp_path)
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TKC_DEVICE_NAME", "Some GPU")
    gemm.TILE.forget()
    S = lambda bn, cluster=1, persistent=True, split=1, bm=128, swap=False: {  # noqa: E731
        "BN": bn, "cluster": cluster, "persistent": persistent, "split": split, "BM": bm, "swap": swap,
        "cluster_m": 1, "sliced": False}
    tables.package_path(tables.REFERENCE_GPU).write_text(json.dumps({"entries": {"tkc.matmul.tile": {
        repr((1024, 256, 1024, False)): {"config": S(64, 1, False)},
        repr((896, 208, 4096, False)): {"config": S(128, 1, True, 1, 208, True)},
        repr((896, 224, 4096, False)): {"config": S(192)},
        repr((128, 112, 4096, False)): {"config": S(64, 1, False, 2)},
        repr((64, 4096, False)): {"config": S(32, 1, False, 1, 64)},
        repr((16, 4096, False)): {"config": S(64, 1, False, 2, 16)},
        repr((3072, 256, 3072, True)): {"config": S(192, 2)}, repr((8192, 16384, False)): {"config": S(128)},
        repr((1024, 256, 6144, False)): {"config": S(192)}, repr((1024, 256, 16384, False)): {"config": S(128, 2)}}}}))
    t = lambda m, n, k: gemm._schedule(m, n, torch.empty(m, k, dtype=BF), torch.empty(k, n, dtype=BF))  # noqa: E731
    try:
        assert [t(1000, 1000, 1024), t(777, 4096, 4096), t(833, 4096, 4096), t(5000, 9000, 64),
                t(4096, 4096, 64), t(3000, 3000, 3000), t(3000, 3008, 3000), t(3000, 3000, 3008),
                t(100, 4000, 4096), t(65, 4000, 4096), t(64, 4096, 4096), t(17, 3900, 512),
                t(1, 4096, 64), t(16, 3900, 4096)] == [
            S(64, 1, False), S(128, 1, True, 1, 208, True), S(192),  # 777 rows: four of 208; 833: of 224
            S(128), S(256), S(192, 2),
            S(256), S(256),  # one aligned operand: the default
            S(64, 1, False, 2), S(256),  # 100 rows: one tile of 112; 65: of 80, untuned
            S(32, 1, False, 1, 64), S(32, 1, False, 1, 64),  # 17-64 rows: one key
            S(64, 1, False, 2, 16), S(64, 1, False, 2, 16)]  # and up to 16
        # wide C: its own key per 1024 columns, else its power-of-two bucket's, else the default; beyond
        # 16384 its rows' at 16384 (a vocabulary's LM head: 20000, 128256), else the default;
        # misaligned (K 4000, N not a multiple of 64): the aligned key's of its columns first
        assert [t(1000, 6000, 4096), t(1000, 11000, 4096), t(1000, 7000, 4096)] == [S(192), S(128, 2), S(256)]
        assert [t(1000, 20000, 4096), t(1000, 128256, 4096), t(8192, 128256, 4096), t(16, 32000, 4096)] == [
            S(128, 2), S(128, 2), S(128), S(256)]
        # ... and its rows' at the widest of HEADS a table holds below its own (Gemma's 256000: 131072's)
        gemm.TILE.forget()
        table = json.loads(tables.package_path(tables.REFERENCE_GPU).read_text())
        table["entries"]["tkc.matmul.tile"][repr((1024, 256, 65536, False))] = {"config": S(192, 1, False)}
        tables.package_path(tables.REFERENCE_GPU).write_text(json.dumps(table))
        assert [t(1000, 128256, 4096), t(1000, 256000, 4096), t(1000, 20000, 4096), t(1000, 65536, 4096)] == [
            S(192, 1, False), S(192, 1, False), S(128, 2), S(192, 1, False)]
        # (11000: no aligned 11264 key, nor a misaligned 16384 one: that one's aligned twin)
        assert [t(1000, 6000, 4000), t(1000, 11000, 4000)] == [S(192), S(128, 2)]
        assert gemm._key(200, 11000, False) == (256, 208, 11264, False)
        # the LM heads `tkc tune --library` tunes (HEAD_ROWS x HEADS): a key each, the vocabularies' among them
        heads = {gemm._key(m, n, False) for m in gemm.HEAD_ROWS for n in gemm.HEADS}
        assert len(heads) == 21 and {gemm._key(16, 128256, False), gemm._key(2048, 32000, False)} <= heads
        # batched C: the rows of all batches, the swapped tile fitting one batch's M
        assert gemm._key(8 * 100, 4096, False, 100) == (896, 112, 4096, False)
    finally:
        gemm.TILE.forget()


def test_matmul_swapped_tiles_fit_their_key():
    """A key's candidates hold the swapped tiles of its height alone (two
    widths, the narrow one also split 4: 208 rows are past split 2's
    height), every kernel schedule else; each key up to 4096 rows has its
    tuning example, whose rows give that key."""
    key = gemm._key(777, 4096, False)
    swapped = [(c["BN"], c["BM"], c["persistent"], c["split"]) for c in gemm.TILE.candidates(key) if c["swap"]]
    assert swapped == [(128, 208, True, 1), (64, 208, False, 1), (64, 208, False, 4)]
    assert len(gemm.TILE.candidates(key)) == sum(not c["swap"] for c in gemm.TILE.candidates()) + 3
    assert not any(c["swap"] for c in gemm.TILE.candidates(gemm._key(40, 4096, False)))
    # 1000 rows: four tiles of 256, what 128-row tiles waste: no swapped tile (nor at 128)
    assert not any(c["swap"] for c in gemm.TILE.candidates(gemm._key(1000, 4096, False)))
    assert not any(c["swap"] for c in gemm.TILE.candidates(gemm._key(8192, 4096, False)))
    rows = gemm._example_rows()
    assert len({gemm._key(m, 256, False) for m in rows}) == len(rows)
    assert {gemm._key(m, 256, False) for m in rows} == {gemm._key(m, 256, False) for m in range(1, 4097)}


@pytest.mark.parametrize("bn", [128, 64])
def test_matmul_and_linear_on_swapped_tiles(cpu_ops, monkeypatch, bn):
    """The swapped tiles (C's rows on wgmma's N, swap_rows(M) high) in the
    op, forced, in the interpreter: A B and A B^T (as stored) of ragged M,
    batched (each batch's M in its own tiles), and a linear layer with bias
    and gelu, forward and backward (dX = dZ W, dW = dZ^T X on the same
    tiles)."""
    monkeypatch.setattr(gemm, "_schedule", lambda rows, cols, a, b, m=None: {
        "BN": bn, "cluster": 1, "persistent": bn == 128, "split": 1, "BM": gemm.swap_rows(m or rows),
        "swap": True, "cluster_m": 1, "sliced": False})
    g = torch.Generator().manual_seed(bn)
    rnd = lambda *s, scale=1.0: (torch.randn(*s, generator=g) * scale).to(BF)  # noqa: E731
    a, b = rnd(90, 64), rnd(64, 136, scale=0.1)
    assert _rel(tkc.matmul(a, b), a.double() @ b.double()) < 1e-2
    assert _rel(tkc.matmul(a, b.t().contiguous().t()), a.double() @ b.double()) < 1e-2
    a3 = rnd(2, 40, 64)
    assert _rel(tkc.matmul(a3, b), a3.double() @ b.double()) < 1e-2
    x, w, bias = rnd(70, 64).requires_grad_(), rnd(72, 64, scale=0.1).requires_grad_(), \
        rnd(72).requires_grad_()
    y = tkc.linear(x, w, bias, "gelu")
    ref = torch.nn.functional.gelu(x.double() @ w.double().t() + bias.double())
    assert _rel(y, ref) < 1e-2
    assert grads_match(y, ref, rnd(*y.shape), (x, w, bias), 2e-2)


def test_matmul_schedules_are_prebuilt():
    """Every schedule tkc.matmul's space keeps (pruned: the narrow tiles'
    clusters; swapped tiles but at their two widths) is one the library
    builds, for every product and linear epilogue: an offline call never
    meets a pick it cannot run."""
    from tkc.kernels import GEMM_SCHEDULES, library
    kept = gemm.TILE.candidates()
    assert kept == list(GEMM_SCHEDULES)
    named = [tuple(c[p] for p in ("BN", "cluster", "persistent", "split", "BM", "swap")) for c in kept]
    assert {n for n, c in zip(named, kept) if c["cluster_m"] > 1} == {(128, 1, False, 1, 64, False),
                                                                   (128, 1, False, 2, 64, False)}
    assert {n for n, c in zip(named, kept) if c["sliced"]} == {(128, 1, False, 1, 64, False),
                                                              (64, 1, False, 1, 64, False)}
    assert {(128, 2, True, 1, 128, False), (256, 2, False, 1, 128, False), (256, 1, False, 2, 128, False),
            (64, 1, True, 2, 128, False), (32, 1, False, 1, 128, False), (64, 1, True, 1, 64, False),
            (256, 1, False, 1, 64, False), (16, 1, False, 1, 64, False), (16, 1, False, 1, 128, False),
            (256, 1, True, 1, 208, True), (128, 2, True, 1, 208, True), (64, 1, False, 1, 208, False),
            (64, 1, False, 1, 64, True), (128, 1, True, 1, 256, True), (64, 1, False, 1, 128, True)}.isdisjoint(named)
    built = {k.artifact_key() for k in library()}
    for s in kept:
        for ta, tb, batched in ((False, False, False), (False, True, True), (True, False, False)):
            assert gemm._kernel(ta, tb, batched, **s).artifact_key() in built
        assert gemm._kernel(False, True, False, True, "gelu", True, **s).artifact_key() in built


@pytest.mark.parametrize("bn, cluster, persistent, split, bm",
                         [(256, 1, True, 1, 128), (64, 1, False, 1, 128), (192, 2, True, 1, 128),
                          (64, 1, False, 2, 128), (32, 1, False, 1, 64), (128, 1, False, 2, 64),
                          (64, 1, False, 2, 16)])
def test_matmul_wide_and_narrow_tiles(cpu_ops, monkeypatch, bn, cluster, persistent, split, bm):
    """The 256-wide persistent and 64-wide one-block-a-tile schedules, a
    2-CTA cluster sharing A (of C's 200 columns the second CTA holds 8),
    split-K (K's one step: the second CTA sums nothing) and 64- and 16-row
    tiles (two and five row tiles, the last ragged), for one ragged product."""
    monkeypatch.setattr(gemm, "_schedule", lambda *args: {"BN": bn, "cluster": cluster,
                                                          "persistent": persistent, "split": split,
                                                          "BM": bm})
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(72, 64, generator=g).to(BF), torch.randn(64, 200, generator=g).to(BF)
    assert _rel(tkc.matmul(a, b), a.double() @ b.double()) < 1e-2


def test_matmul_and_linear_compile_without_graph_breaks(cpu_ops):
    """torch.compile (fullgraph) traces tkc.matmul and tkc.linear as their custom
    ops, and the compiled backward runs through their autograd formulas."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(24, 64, generator=g).to(BF).requires_grad_()
    w = (torch.randn(40, 64, generator=g) * 0.2).to(BF).requires_grad_()
    b = torch.randn(64, 16, generator=g).to(BF).requires_grad_()

    def model(x, w, b):
        return tkc.matmul(tkc.linear(x, w, None, "silu"), w) @ b.float().to(BF)

    y = torch.compile(model, backend="aot_eager", fullgraph=True)(x, w, b)
    ref = torch.nn.functional.silu(x.double() @ w.double().t()) @ w.double() @ b.double()
    assert _rel(y, ref) < 2e-2
    y.float().square().sum().backward()
    assert all(t.grad is not None and t.grad.isfinite().all() for t in (x, w, b))


@pytest.mark.parametrize("activation", [None, "gelu", "silu"])
def test_linear_values_and_gradients(cpu_ops, activation):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 11, 64, generator=g).to(BF).requires_grad_()
    w = (torch.randn(40, 64, generator=g) * 0.2).to(BF).requires_grad_()
    b = torch.randn(40, generator=g).to(BF).requires_grad_()
    y = tkc.linear(x, w, b, activation)
    act = {None: lambda t: t, "gelu": torch.nn.functional.gelu,
           "silu": torch.nn.functional.silu}[activation]
    ref = act(x.double() @ w.double().t() + b.double())
    assert y.shape == (3, 11, 40) and _rel(y, ref) < 1e-2
    dy = torch.randn(ref.shape, generator=g).to(BF)
    assert grads_match(y, ref, dy, (x, w, b), 2e-2)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_values_and_gradients(cpu_ops, interleaved):
    """RoPE by cos, sin (f32 in: used as bf16) against float64, and its
    gradient (the rotation by -theta)."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 20, 3, 64, generator=g).to(BF).requires_grad_()
    ang = torch.rand(20, 32, generator=g) * 6
    cos, sin = ang.cos(), ang.sin()
    y = tkc.rotary_embedding(x, cos, sin, interleaved)
    xd, c, s_ = x.double(), cos.bfloat16().double()[None, :, None], sin.bfloat16().double()[None, :, None]
    x1, x2 = (xd[..., 0::2], xd[..., 1::2]) if interleaved else (xd[..., :32], xd[..., 32:])
    o1, o2 = x1 * c - x2 * s_, x2 * c + x1 * s_
    ref = torch.stack([o1, o2], -1).flatten(-2) if interleaved else torch.cat([o1, o2], -1)
    assert _rel(y, ref) < 1e-2
    assert grads_match(y, ref, torch.randn(ref.shape, generator=g).to(BF), (x,), 2e-2)


def test_rotary_takes_a_packed_projections_view(cpu_ops, monkeypatch):
    """q split from a packed [B, T, 3H, D] projection goes to the kernel as it
    is (a strided gl: no copy); the output is contiguous and right."""
    from tkc.torchops import rotary
    seen = []
    kernel = rotary._kernel
    monkeypatch.setattr(rotary, "_kernel", lambda *key: _recording(kernel(*key), seen))
    g = torch.Generator().manual_seed(7)
    qkv = torch.randn(2, 20, 9, 64, generator=g).to(BF)
    q = qkv[:, :, :3]
    ang = torch.rand(20, 32, generator=g) * 6
    y = tkc.rotary_embedding(q, ang.cos(), ang.sin())
    assert seen[0].untyped_storage().data_ptr() == qkv.untyped_storage().data_ptr()
    assert y.is_contiguous()
    assert _rel(y, tkc.rotary_embedding(q.contiguous(), ang.cos(), ang.sin())) == 0


def test_rotary_custom_op_takes_any_layout(cpu_ops):
    """The custom op (what a compiled graph calls) takes x as the graph hands
    it: a packed projection's view as it is, a view the kernel cannot take
    (D not adjacent) copied by its plan; both as the eager op gives them."""
    from tkc.torchops import rotary
    g = torch.Generator().manual_seed(9)
    ang = torch.rand(20, 32, generator=g) * 6
    cos, sin = ang.cos().to(BF), ang.sin().to(BF)
    qkv = torch.randn(2, 20, 9, 64, generator=g).to(BF)
    odd = torch.randn(2, 20, 64, 3, generator=g).to(BF).transpose(2, 3)   # [2, 20, 3, 64], D strided
    for x in (qkv[:, :, :3], odd):
        want = tkc.rotary_embedding(x.contiguous(), cos, sin)
        assert torch.equal(rotary._rotary.custom_op(x, cos, sin, False), want)


def _recording(launch, seen):
    """launch, noting the first argument of every run."""
    run = launch.run
    launch.run = lambda *args: seen.append(args[0]) or run(*args)
    return launch


@pytest.mark.parametrize("residual", [False, True])
def test_layer_norm_values_and_gradients(cpu_ops, residual):
    """Both kernel families (with a residual: h written and read back; without:
    x read), a ragged row count, weight and bias gradients from the partials."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 256, generator=g).to(BF).requires_grad_()
    r = torch.randn(2, 3, 256, generator=g).to(BF).requires_grad_() if residual else None
    w = (1 + 0.1 * torch.randn(256, generator=g)).to(BF).requires_grad_()
    b = (0.1 * torch.randn(256, generator=g)).to(BF).requires_grad_()
    y, h = tkc.layer_norm(x, w, b, residual=r, prenorm=True)
    hr = x.double() + (r.double() if residual else 0)
    ref = torch.nn.functional.layer_norm(hr, (256,), w.double(), b.double())
    assert _rel(y, ref) < 1e-2 and _rel(h, hr) < 1e-2
    dy = torch.randn(2, 3, 256, generator=g).to(BF)
    assert grads_match(y, ref, dy, (x, w, b, r) if residual else (x, w, b), 2e-2)


@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm_values_and_gradients(cpu_ops, residual):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 256, generator=g).to(BF).requires_grad_()
    r = torch.randn(5, 256, generator=g).to(BF).requires_grad_() if residual else None
    w = (1 + 0.1 * torch.randn(256, generator=g)).to(BF).requires_grad_()
    y, h = tkc.rms_norm(x, w, residual=r, prenorm=True)
    hr = x.double() + (r.double() if residual else 0)
    ref = hr * torch.rsqrt(hr.square().mean(-1, keepdim=True) + 1e-6) * w.double()
    assert _rel(y, ref) < 1e-2 and _rel(h, hr) < 1e-2
    dy = torch.randn(5, 256, generator=g).to(BF)
    assert grads_match(y, ref, dy, (x, w, r) if residual else (x, w), 2e-2)


def test_norms_without_weight_or_bias(cpu_ops):
    """weight or bias None (nn.LayerNorm(elementwise_affine=False), bias=False;
    nn.RMSNorm(elementwise_affine=False)): ones and zeros, values and the
    gradients of what there is; the ones and zeros kept per width and device
    (not a meta call's); nn.convert takes such norms too."""
    from tkc import nn as tnn
    from tkc.torchops import norms
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 256, generator=g).to(BF).requires_grad_()
    w = (1 + 0.1 * torch.randn(256, generator=g)).to(BF).requires_grad_()
    dy = torch.randn(3, 256, generator=g).to(BF)
    y = tkc.layer_norm(x, None, None)
    ref = torch.nn.functional.layer_norm(x.double(), (256,))
    assert _rel(y, ref) < 1e-2 and grads_match(y, ref, dy, (x,), 2e-2)
    x.grad = None   # (grads_match leaves the reference's)
    y = tkc.layer_norm(x, w, None)   # bias=False
    ref = torch.nn.functional.layer_norm(x.double(), (256,), w.double())
    assert _rel(y, ref) < 1e-2 and grads_match(y, ref, dy, (x, w), 2e-2)
    x.grad = None
    y = tkc.rms_norm(x, None)
    ref = x.double() * torch.rsqrt(x.double().square().mean(-1, keepdim=True) + 1e-6)
    assert _rel(y, ref) < 1e-2 and grads_match(y, ref, dy, (x,), 2e-2)
    ones = norms._UNITS[256, x.device, 1.0]
    assert torch.equal(ones, torch.ones(256, dtype=BF)) and norms._unit(x, None, 1.0) is ones
    tkc.layer_norm(torch.zeros(2, 512, dtype=BF, device="meta"), None, None)   # traced: made, not kept
    assert all(not t.is_meta for t in norms._UNITS.values())
    model = tnn.convert(torch.nn.Sequential(torch.nn.LayerNorm(256, elementwise_affine=False),
                                            torch.nn.LayerNorm(256, bias=False)))
    assert model.tkc_converted == ["0", "1"] and not model.tkc_skipped
    assert _rel(model(x), torch.nn.functional.layer_norm(x.double(), (256,))) < 1e-2


# ---------------------------------------------------------------- the host path

def test_host_path_through_the_fake_driver(tmp_path, monkeypatch):
    """A repeated eager call launches once per call, reuses its plan (one per
    signature) and the launcher's, and never enters torch.library's wrapper."""
    from tkc.bench.fake_driver import fake_driver
    from tkc.torchops import rotary
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    x = torch.randn(1, 32, 2, 64).to(BF)
    ang = torch.rand(32, 32)
    cos, sin = ang.cos().to(BF), ang.sin().to(BF)
    monkeypatch.setattr(rotary._rotary, "custom_op", None)  # would fail if called
    with fake_driver() as cuda:
        for _ in range(5):
            tkc.rotary_embedding(x, cos, sin)
        tkc.rotary_embedding(torch.randn(2, 32, 2, 64).to(BF), cos, sin)
        assert len(rotary._plans.plans) == 2
    assert cuda.state.launches == 6
    assert not rotary._plans.plans  # made with the fake driver: forgotten after it


def test_a_models_call_sites_keep_their_packed_frames(tmp_path, monkeypatch):
    """One kernel launched at 100 call sites a step (a model's layers: each its
    own weights and outputs) packs each site's parameters once, not at every
    call: the per-kernel cache of packed frames holds a step's sites (a limit
    of 64 forgot them every step, and every launch packed and encoded anew)."""
    import importlib

    from tkc.bench.fake_driver import fake_driver
    from tkc.kernels import gemm_hopper
    frame = importlib.import_module("tkc.runtime.frame")
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    packs = []
    real = frame.Frame.pack
    monkeypatch.setattr(frame.Frame, "pack", lambda self, *a: (packs.append(1), real(self, *a))[1])
    kernel = gemm_hopper("bf16", BN=128)
    with fake_driver():
        a = torch.randn(64, 256).to(BF)
        sites = [(torch.randn(256, 128).to(BF), torch.empty(64, 128, dtype=BF)) for _ in range(100)]
        for step in range(3):
            packs.clear()
            for w, c in sites:
                kernel(a.view(1, 1, 64, 256), w.view(1, 1, 256, 128), c.view(1, 1, 64, 128))
            assert len(packs) == (100 if step == 0 else 0)


@pytest.mark.parametrize("m", [1, 16, 17, 64, 65])
def test_matmul_of_few_rows_with_the_shipped_picks(monkeypatch, m):
    """C of few rows (a decode step's) through the H200 table's own picks
    (16- and 64-row tiles, split-K) in the interpreter, A B and A Bt: each pick
    the table holds for these keys runs and is right."""
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setenv("TKC_DEVICE_NAME", "NVIDIA H200")
    gemm.TILE.forget()
    build, picked = gemm._kernel, []

    def interpreted(*key, **kw):
        picked.append(kw["BM"])
        return _interpreted(build(*key, **kw))
    monkeypatch.setattr(gemm, "_kernel", interpreted)
    try:
        g = torch.Generator().manual_seed(m)
        a, b = torch.randn(m, 128, generator=g).to(BF), torch.randn(128, 256, generator=g).to(BF)
        assert _rel(tkc.matmul(a, b), a.double() @ b.double()) < 1e-2
        assert _rel(tkc.matmul(a, b.t().contiguous().t()), a.double() @ b.double()) < 1e-2
    finally:
        gemm.TILE.forget()
    assert picked and set(picked) == {gemm.TILE.choose(gemm._key(m, 256, False))["BM"]}


@pytest.mark.parametrize("schedule", [(192, 2, True, 1, 128), (64, 1, False, 2, 16)])
def test_cluster_launches_through_the_fake_driver(tmp_path, monkeypatch, schedule):
    """tkc.matmul's cluster schedules (2-CTA clusters sharing A, split-K) launch
    through cuLaunchKernelEx, which the fake driver stubs with its config
    structs (the host benchmark's --fake once crashed there), whole clusters
    along x."""
    from tkc.bench.fake_driver import fake_driver
    from tkc.torchops import gemm
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    bn, cluster, persistent, split, bm = schedule
    monkeypatch.setattr(gemm, "_schedule", lambda *args: {"BN": bn, "cluster": cluster,
                                                          "persistent": persistent, "split": split,
                                                          "BM": bm})
    a, b = torch.randn(40, 64).to(BF), torch.randn(64, 200).to(BF)
    with fake_driver() as cuda:
        for _ in range(3):
            tkc.matmul(a, b)
        config = cuda.state.last[0]
    assert cuda.state.launches == 3
    assert config.gridDimX % 2 == 0 and config.attrs[0].value.clusterDim.x == 2


# ---------------------------------------------------------------- building what a call needs

def test_describe_writes_calls_in_the_build_language():
    from tkc.torchops.calls import describe
    x = torch.zeros(2, 8, 4, 64, dtype=BF).transpose(1, 2)   # [2, 4, 8, 64] in [2, 8, 4, 64] memory
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    assert describe("attention", (x, x), {"causal": True, "cu": cu}) == (
        "attention(bf16[2, 8, 4, 64].permute(0, 2, 1, 3), bf16[2, 8, 4, 64].permute(0, 2, 1, 3), "
        "causal=True, cu=i32([0, 3, 8]))")


def test_offline_miss_names_the_build_command_for_this_call(tmp_path, monkeypatch):
    """A missing artifact, offline: the op's error names `tkc build --call`
    for the call made, at the caller's line; that command builds what the call
    launches (forward and backward) and nothing else (with --library, the
    library too), after which the call finds everything."""
    from tkc.bench.fake_driver import fake_driver
    from tkc.cli import build_all as cli_build_all
    from tkc.cli import main
    from tkc.runtime.cache import MissingArtifact
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TKC_OFFLINE", "1")
    x, w = torch.zeros(3, 256, dtype=BF), torch.ones(256, dtype=BF)
    norm_plans.rms_kernels.cache_clear()   # kernels another test of this process loaded hold their artifacts
    with fake_driver(), pytest.raises(MissingArtifact) as e:
        tkc.rms_norm(x, w)
    assert "test_torchops.py" in e.value.where
    call = "rms_norm(bf16[3, 256], bf16[256])"
    assert e.value.command == f"TKC_CACHE_DIR={tmp_path} tkc build --call '{call}'"
    monkeypatch.delenv("TKC_OFFLINE")
    from tkc import cli
    built = []
    monkeypatch.setattr(cli, "build_all", lambda kernels, *a: built.extend(kernels) or cli_build_all(kernels, *a))
    assert main(["build", "--call", call]) == 0
    # the call's kernels alone (forward and backward, with their norm_grads), not the library's
    assert sorted(k.name for k in built) == ["norm_grads_1", "rmsnorm_bwd_256_nores", "rmsnorm_fwd_256_nores"], \
        [k.name for k in built]
    built.clear()   # --library: the library's too (its norm_grads_2 here)
    assert main(["build", "--call", call, "--library", "--filter", "norm_grads"]) == 0
    assert sorted(k.name for k in built) == ["norm_grads_1", "norm_grads_2"]
    monkeypatch.setenv("TKC_OFFLINE", "1")
    with fake_driver():
        x.requires_grad_()
        tkc.rms_norm(x, w).sum().backward()   # forward and backward kernels are there
        with torch.autocast("cpu", dtype=BF), pytest.raises(MissingArtifact) as e:
            tkc.rms_norm(torch.zeros(5, 512), torch.ones(512))   # float32 in autocast: its bf16 call is named
    assert "rms_norm(bf16[5, 512], f32[512]" in e.value.command, e.value.command


def test_build_call_of_a_forward_only_op(monkeypatch):
    """`tkc build --call` of an op without a backward builds its forward (the
    pass with gradients, which such an op refuses, is left out: it refused
    the command the op's own offline error names)."""
    from tkc import cli
    from tkc.cli import build_all as cli_build_all
    built = []
    monkeypatch.setattr(cli, "build_all", lambda kernels, *a: built.extend(kernels) or cli_build_all(kernels, *a))
    assert cli.main(["build", "--call", "fftconv(bf16[2, 8, 1024], bf16[2, 8, 32, 32])"]) == 0
    assert [k.name for k in built] == ["fftconv_1024"]


def test_a_refused_build_call_is_located_at_the_command(capsys):
    """`tkc build --call` makes the call for the user, who has no line of
    theirs in it: an argument the op refuses is reported at the command (as
    it can be pasted again), not at the console script's frame."""
    from tkc.cli import main
    from tkc.runtime.callsite import caller
    call = "layer_norm(bf16[4, 1000], bf16[1000], bf16[1000])"
    assert main(["build", "--call", call]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tkc build --call '{call}': error: layer_norm: x's last dim must be a multiple "
                          f"of 256"), err
    assert "test_torchops.py" in caller()   # after the command, callers are located by their frames again


def test_build_call_mistakes_are_the_command_s(capsys):
    """`tkc build --call` with arguments the op's signature does not take is
    a located error of the command (was "internal error: TypeError"); a call
    of zero-size tensors launches nothing and builds nothing (was "no library
    kernel matches 'None'")."""
    from tkc.cli import main
    assert main(["build", "--call", "matmul(bf16[64, 64], bf16[64, 64], bogus=1)"]) == 1
    assert "--call 'matmul(bf16[64, 64], bf16[64, 64], bogus=1)': got an unexpected keyword argument " \
        "'bogus'" in capsys.readouterr().err
    assert main(["build", "--call", "matmul(bf16[64, 64])"]) == 1
    assert "missing a required argument: 'b'" in capsys.readouterr().err
    empty = "attention(bf16[1, 2, 0, 64], bf16[1, 2, 0, 64], bf16[1, 2, 0, 64])"
    assert main(["build", "--call", empty]) == 0
    assert f"no kernel to build: '{empty}' launches none" in capsys.readouterr().out


def test_miss_without_mlir_names_the_build_command(tmp_path, monkeypatch):
    """A missing artifact where compiling would need MLIR's bindings and they
    do not import (a GPU machine without them, TKC_OFFLINE unset): tkc's
    error at the caller's line, naming the import's failure and `tkc build
    --call` for this call, not a ModuleNotFoundError from inside the tracer."""
    import sys

    from tkc.bench.fake_driver import fake_driver
    from tkc.runtime.cache import MissingArtifact
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TKC_OFFLINE", raising=False)
    monkeypatch.setitem(sys.modules, "mlir.ir", None)   # `import mlir.ir` raises ImportError
    x, w = torch.zeros(3, 256, dtype=BF), torch.ones(256, dtype=BF)
    norm_plans.rms_kernels.cache_clear()   # kernels another test of this process loaded hold their artifacts
    with fake_driver(), pytest.raises(MissingArtifact) as e:
        tkc.rms_norm(x, w)
    norm_plans.rms_kernels.cache_clear()
    assert "test_torchops.py" in e.value.where
    assert "MLIR's Python bindings, which do not import here (import of mlir.ir halted" in e.value.reason
    assert e.value.command == f"TKC_CACHE_DIR={tmp_path} tkc build --call 'rms_norm(bf16[3, 256], bf16[256])'"


def test_inference_calls_leave_the_statistics_in_scratch(cpu_ops):
    """Without gradients, tkc.layer_norm allocates y alone (mean and rstd go to
    the per-device scratch) and gives the values of the full op."""
    from tkc.torchops import plans
    x = torch.randn(4, 256).to(BF)
    w, b = torch.ones(256, dtype=BF), torch.zeros(256, dtype=BF)
    y = tkc.layer_norm(x, w, b)
    full = norms._ln_fwd_nores(x, w, b, 1e-5, 0.0, torch.zeros(1, 2, dtype=torch.int32))
    assert torch.equal(y, full[0])
    assert (x.device, "norm mean") in plans._scratch and (x.device, "norm rstd") in plans._scratch
    assert torch.allclose(plans._scratch[x.device, "norm rstd"][:4], full[2])


def test_plain_calls_go_straight_to_their_plan(cpu_ops, monkeypatch):
    """A plain call (no tracing, no gradient wanted) keeps its run under its
    key: the next call with that key skips the checks and gives the same
    values; a call that wants a gradient, or a new layout, takes the full
    path (and its own checks) again."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 256, generator=g).to(BF)
    w, b = (1 + 0.1 * torch.randn(256, generator=g)).to(BF), torch.randn(256, generator=g).to(BF)
    a, m = torch.randn(40, 64, generator=g).to(BF), torch.randn(64, 48, generator=g).to(BF)
    calls = [lambda x: tkc.layer_norm(x, w, b), lambda x: tkc.rms_norm(x, w),
             lambda x: tkc.layer_norm(x, w, b, residual=x, prenorm=True)[1],
             lambda x: tkc.layer_norm(x.transpose(0, 1), w.float(), b),  # kept, converting
             lambda x: tkc.matmul(x.view(-1, 256)[:, :64].contiguous(), m),
             lambda x: tkc.linear(x, w.view(1, 256).expand(16, 256).contiguous())]
    first = [f(x) for f in calls]
    checked = []
    for name in ("_check", "_explain"):
        monkeypatch.setattr(norms, name, lambda *args: checked.append(args))
    monkeypatch.setattr(gemm, "check_tensor", lambda *args, **kw: checked.append(args))
    again = [f(x.clone()) for f in calls]
    assert checked == []
    assert all(torch.equal(u, v) for u, v in zip(first, again))
    tkc.layer_norm(x.clone().requires_grad_(), w, b)   # a gradient wanted: the full path
    tkc.layer_norm(x.transpose(0, 1), w.half(), b)      # another layout: the full path
    assert len(checked) == 2
    with torch.no_grad():   # no gradient wanted (grad mode off): plain again
        assert torch.equal(tkc.layer_norm(x.clone().requires_grad_(), w, b), first[0])
    assert len(checked) == 2 and tkc.matmul(a, m).shape == (40, 48)


def test_repeated_grad_calls_go_straight_to_their_run(cpu_ops, monkeypatch):
    """A call that wants a gradient keeps its run (eager.grad_key, Op.fast and,
    where only y is kept, Op.fast_main):
    the next call with its key skips the checks and gives the first's values
    and gradients (rotary's backward: the inverse kernel), also where the
    run converts (rows of a transposed x, f32 weights)."""
    g = torch.Generator().manual_seed(8)
    x, dy = torch.randn(2, 16, 256, generator=g).to(BF), torch.randn(2, 16, 256, generator=g).to(BF)
    w, b = (1 + 0.1 * torch.randn(256, generator=g)).to(BF), torch.randn(256, generator=g).to(BF)
    ang = torch.rand(16, 32, generator=g)
    cos, sin = ang.cos().to(BF), ang.sin().to(BF)
    calls = [lambda x, w: tkc.layer_norm(x[0], w, b),
             lambda x, w: tkc.layer_norm(x[0], w, b, residual=x[1], prenorm=True)[1] * 2,
             lambda x, w: tkc.layer_norm(x[0], w, b, residual=x[1]),       # y alone: Op.fast_main
             lambda x, w: tkc.layer_norm(x[0], w, b, prenorm=True)[0] + x[1],  # (y, x itself)
             lambda x, w: tkc.rms_norm(x[0], w),
             lambda x, w: tkc.layer_norm(x.transpose(0, 1), w.float(), b).transpose(0, 1),  # copies
             lambda x, w: tkc.rms_norm(x, w.float(), residual=x.flip(0), prenorm=True)[1],
             lambda x, w: tkc.rotary_embedding(x.view(2, 16, 4, 64), cos, sin).view(2, 16, 256),
             lambda x, w: tkc.rotary_embedding(x.view(2, 4, 16, 64).transpose(1, 2), cos.float(),
                                               sin).reshape(2, 16, 256)]
    results = []
    for attempt in range(3):  # the first call, a kept run's first backward, its kept backward
        for f in calls:
            xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
            y = f(xg, wg)
            y.backward(dy[0] if y.dim() == 2 else dy)
            results.append((y.detach(), xg.grad, wg.grad))
        for name in ("_check", "_explain"):
            monkeypatch.setattr(norms, name, lambda *a: pytest.fail("checked again"))
        monkeypatch.setattr(rotary, "_fits", lambda *a: pytest.fail("checked again"))
    for n, again in enumerate(results[len(calls):]):
        first = results[n % len(calls)]
        assert all(u is None and v is None or torch.equal(u, v) for u, v in zip(first, again))
    from tkc.kernels import reference
    ref = reference.rotary(dy.view(2, 16, 4, 64).float().numpy(), cos.float().numpy(),
                           -sin.float().numpy())  # the backward: the rotation by -theta
    assert _rel(results[7][1], torch.from_numpy(ref).view(2, 16, 256)) < 1e-2
    xg = x.view(2, 16, 4, 64).clone().requires_grad_()   # a double backward sees the op:
    dx, = torch.autograd.grad(tkc.rotary_embedding(xg, cos, sin), xg,  # the kept run's
                              dy.view(2, 16, 4, 64).requires_grad_(), create_graph=True)
    assert dx.grad_fn is not None  # backward skips to its plan only outside grad mode


def test_the_norm_backward_grid_is_what_the_sms_hold(cpu_ops, monkeypatch):
    """The backward's blocks loop over the rows, one partial-sum row a block:
    as many blocks as the SMs hold at once (plans.resident, the driver's
    occupancy calculator: here 3 on each of 2 SMs), and the gradients are
    right at that grid."""
    monkeypatch.setattr(norm_plans, "resident", lambda kernel, device: 3)
    made = norm_plans.norm_grads
    rows = []

    class Seen:   # norm_grads(planes) whose prepare records the partials' shape
        def __init__(self, planes):
            self.kernel = made(planes)

        def prepare(self, part, out):
            rows.append(tuple(part.shape))
            return self.kernel.prepare(part, out)
    monkeypatch.setattr(norm_plans, "norm_grads", Seen)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(13, 256, generator=g).to(BF).requires_grad_()
    w, b = (1 + 0.1 * torch.randn(256, generator=g)).to(BF).requires_grad_(), torch.randn(256, generator=g).to(BF)
    b.requires_grad_()
    y = tkc.layer_norm(x, w, b)
    ref = torch.nn.functional.layer_norm(x.double(), (256,), w.double(), b.double())
    assert grads_match(y, ref, torch.randn(13, 256, generator=g).to(BF), (x, w, b), 2e-2)
    assert rows == [(2, 6, 256)]


def test_resident_blocks_asks_the_driver():
    """Kernel.resident_blocks: the occupancy calculator's answer for the loaded function
    (the fake driver's: 2), kept per device."""
    from tkc.bench.fake_driver import fake_driver
    from tkc.kernels.norm_grads import norm_grads as build
    with fake_driver():
        k = build(2)
        assert k.resident_blocks(0) == 2 and k._launcher.residents == {0: 2}


@pytest.mark.parametrize("wanted", ["x", "w", "b", "xwb"])
def test_norm_parameter_gradients_only_when_wanted(cpu_ops, wanted):
    """The backward reduces the weight and bias partial sums only for what
    wants a gradient; what it gives is right either way."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(6, 256, generator=g).to(BF)
    w, b = (1 + 0.1 * torch.randn(256, generator=g)).to(BF), (0.1 * torch.randn(256, generator=g)).to(BF)
    leaves = {"x": x, "w": w, "b": b}
    for name in wanted:
        leaves[name].requires_grad_()
    y = tkc.layer_norm(x, w, b)
    ref = torch.nn.functional.layer_norm(x.double(), (256,), w.double(), b.double())
    dy = torch.randn(6, 256, generator=g).to(BF)
    assert grads_match(y, ref, dy, [leaves[n] for n in wanted], 2e-2)
    assert all(leaves[n].grad is None for n in "xwb" if n not in wanted)


def test_norms_compile_with_and_without_parameter_gradients(cpu_ops):
    """torch.compile (fullgraph) traces the norms' custom ops; the compiled
    backward asks the backward op for the weight/bias gradients only when
    they are wanted, and its gradients are eager's."""
    g = torch.Generator().manual_seed(9)
    x0 = torch.randn(4, 256, generator=g).to(BF)
    w0, b0 = (1 + 0.1 * torch.randn(256, generator=g)).to(BF), torch.randn(256, generator=g).to(BF)
    dy = torch.randn(4, 256, generator=g).to(BF)

    def model(x, w, b):
        return tkc.layer_norm(x, w, b) + tkc.rms_norm(x, w)

    for params in (False, True):
        grads = []
        for run in (model, torch.compile(model, backend="aot_eager", fullgraph=True)):
            x, w, b = x0.clone().requires_grad_(), w0.clone().requires_grad_(params), b0.clone()
            run(x, w, b).backward(dy)
            grads.append((x.grad, w.grad))
        (ex, ew), (cx, cw) = grads
        assert torch.equal(ex, cx) and (torch.equal(ew, cw) if params else ew is cw is None)

    def bare(x):   # norms without weight or bias: their ones and zeros made in the traced graph
        return tkc.layer_norm(x, None, None) + tkc.rms_norm(x, None)
    grads = []
    for run in (bare, torch.compile(bare, backend="aot_eager", fullgraph=True)):
        x = x0.clone().requires_grad_()
        run(x).backward(dy)
        grads.append(x.grad)
    assert torch.equal(*grads)


def _scalar_calls():
    """(op, option, a value it must refuse, the call) for the ops' scalar options."""
    import math
    q, qv = torch.zeros(1, 2, 128, 64, dtype=BF), torch.zeros(256, 2, 64, dtype=BF)
    cu = torch.tensor([0, 128, 256], dtype=torch.int32)
    x, w, b = torch.zeros(4, 256, dtype=BF), torch.ones(256, dtype=BF), torch.zeros(256, dtype=BF)
    xr, cs = torch.zeros(1, 64, 2, 128, dtype=BF), torch.zeros(64, 64, dtype=BF)
    lq, f8 = torch.zeros(1, 2, 64, 64, dtype=BF), torch.zeros(128, 128).to(torch.float8_e4m3fn)
    q8 = torch.zeros(1, 2, 128, 64).to(torch.float8_e4m3fn)
    calls = {"attention": lambda **o: tkc.attention(q, q, q, **o),
             "attention_varlen": lambda **o: tkc.attention_varlen(qv, qv, qv, cu, cu, 128, 128, **o),
             "layer_norm": lambda **o: tkc.layer_norm(x, w, b, **o),
             "rms_norm": lambda **o: tkc.rms_norm(x, w, **o),
             "rotary_embedding": lambda **o: tkc.rotary_embedding(xr, cs, cs, **o),
             "linear_attention": lambda **o: tkc.linear_attention(lq, lq, lq, **o),
             "based": lambda **o: tkc.based(lq[..., :16], lq[..., :16], lq, **o),
             "scaled_mm": lambda **o: tkc.scaled_mm(f8, f8.T, torch.ones(()), torch.ones(()), **o),
             "attention_fp8": lambda **o: tkc.attention_fp8(q8, q8, q8, *(torch.ones(1, 2),) * 3, **o)}
    bad = {"attention": {"causal": ["yes", None, 1], "scale": ["x", math.nan, math.inf], "return_lse": ["x"]},
           "attention_varlen": {"causal": ["no"], "scale": ["x", math.nan], "return_lse": [None]},
           "layer_norm": {"eps": ["x", None, math.nan], "dropout_p": ["a", math.inf], "prenorm": ["x"]},
           "rms_norm": {"eps": ["x", math.inf], "dropout_p": ["a"], "prenorm": [0]},
           "rotary_embedding": {"interleaved": ["x"]},
           "linear_attention": {"scale": ["x", math.nan]},
           "based": {"scale": [True]},
           "scaled_mm": {"use_fast_accum": ["x", None]},
           "attention_fp8": {"causal": ["no"], "scale": [float("nan")], "return_lse": ["x"]}}
    return [(op, name, v, calls[op]) for op, opts in bad.items() for name, vals in opts.items() for v in vals]


@pytest.mark.parametrize("op, name, value, call", _scalar_calls(),
                         ids=lambda p: p if isinstance(p, str) else repr(p) if not callable(p) else "")
def test_a_scalar_option_of_the_wrong_kind_is_refused_at_the_caller(op, name, value, call):
    """An option that is not what it names (causal="no", which is true; a
    string, None or a non-finite scale or eps) is tkc's error at the
    caller's line, never torch's or struct's from inside the op, nor a
    kernel picked by the option's truth (12-02: causal="yes" raised a
    KeyError from the tables, eps="x" struct.error from the launch frame)."""
    from tkc.bench.fake_driver import fake_driver
    with fake_driver(), pytest.raises(TkcError, match=f"{op}: {name} must be ") as e:
        call(**{name: value})
    assert "test_torchops.py" in e.value.where
