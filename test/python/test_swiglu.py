"""tkc.swiglu, a gated MLP's gate and up projections in one GEMM, on the CPU:
values and gradients against float64 with the interpreter standing in for
the GPU (each schedule kind forced), the plain and autograd paths, AMP,
torch.compile, argument errors at the caller's line, and the schedules: its
space, its key, every one prebuilt."""
from __future__ import annotations

import pytest
from helpers import grads_match, interpreted, refused_here

torch = pytest.importorskip("torch")
pytest.importorskip("mlir")

import tkc  # noqa: E402
from tkc.kernels import GATED_SCHEDULES  # noqa: E402
from tkc.torchops import checks, gated, gemm  # noqa: E402

BF = torch.bfloat16
SMALL = {"BN": 64, "cluster": 1, "persistent": True, "split": 1, "BM": 128, "swap": False, "cluster_m": 1,
         "sliced": False}


@pytest.fixture
def cpu_ops(monkeypatch):
    """CPU tensors pass the device checks; kernels run in the interpreter,
    at small tiles (they interpret faster) unless a test forces others."""
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    for mod in (gemm, gated):
        build = mod._kernel
        monkeypatch.setattr(mod, "_kernel", lambda *key, _b=build, **kw: interpreted(_b(*key, **kw)))
    monkeypatch.setattr(gemm, "_schedule", lambda *args: dict(SMALL, swap=False))
    monkeypatch.setattr(gated.TILE, "choose", lambda key, args=None: SMALL)


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def _operands(seed, *shape, F=72, grad=True):
    g = torch.Generator().manual_seed(seed)
    K = shape[-1]
    x = torch.randn(*shape, generator=g).to(BF)
    wg, wu = ((torch.randn(F, K, generator=g) / K ** 0.5).to(BF) for _ in "gu")
    if grad:
        for t in (x, wg, wu):
            t.requires_grad_()
    return x, wg, wu, g


def _ref(x, wg, wu):
    xd = x.double()
    return torch.nn.functional.silu(xd @ wg.double().t()) * (xd @ wu.double().t())


@pytest.mark.parametrize("shape", [(70, 64), (2, 9, 136)], ids=["2d", "3d-ragged-k"])
def test_values_and_gradients(cpu_ops, shape):
    """Forward and every gradient (x, both weights) within bf16's tolerance of
    float64; F = 72 is past one 32-column tile of C (a ragged second)."""
    x, wg, wu, g = _operands(1, *shape)
    h = tkc.swiglu(x, wg, wu)
    ref = _ref(x, wg, wu)
    assert h.shape == (*shape[:-1], 72) and _rel(h, ref) < 1e-2
    assert grads_match(h, ref, torch.randn(ref.shape, generator=g).to(BF), (x, wg, wu), 2e-2)


@pytest.mark.parametrize("schedule", [
    dict(BN=128, persistent=False, BM=64), dict(BN=64, persistent=False, BM=16, split=2),
    dict(BN=64, persistent=False, BM=64, split=4), dict(BN=192, cluster=2),
], ids=["bm64", "bm16-split2", "split4", "bn192-cluster2"])
def test_each_schedule_kind(cpu_ops, monkeypatch, schedule):
    """The tiles a tuned table may pick: 64- and 16-row tiles, split-K 2 and 4,
    a 192-wide tile (96 gated columns) in a 2-CTA cluster sharing x."""
    monkeypatch.setattr(gated.TILE, "choose", lambda key, args=None: dict(SMALL, **schedule))
    x, wg, wu, _ = _operands(2, 40, 136, F=200, grad=False)
    assert _rel(tkc.swiglu(x, wg, wu), _ref(x, wg, wu)) < 1e-2


@pytest.mark.parametrize("shape", [(33, 64), (3, 11, 64)])
def test_plain_and_autograd_paths_agree(cpu_ops, shape):
    """No gradient wanted: the kernel writes h alone, and later calls take the
    kept plan (which makes h [..., F] itself); with one, it also stores gate
    and up. Both give the same h."""
    x, wg, wu, _ = _operands(3, *shape, grad=False)
    plain = tkc.swiglu(x, wg, wu)
    kept = tkc.swiglu(x, wg, wu)   # the kept plan's run
    assert kept.shape == (*shape[:-1], 72) and kept.is_contiguous() and kept.equal(plain)
    graded = tkc.swiglu(x, wg, wu.requires_grad_())
    assert graded.requires_grad and graded.detach().equal(plain)
    with torch.no_grad():
        assert tkc.swiglu(x, wg, wu).equal(plain)


def test_autocast_takes_float32(cpu_ops):
    """In a bf16 autocast region float32 x and weights are cast, as F.linear's."""
    x, wg, wu, _ = _operands(4, 20, 64, grad=False)
    with torch.autocast("cpu", torch.bfloat16):
        h = tkc.swiglu(x.float(), wg.float(), wu.float())
    assert h.dtype == BF and h.equal(tkc.swiglu(x, wg, wu))


def test_empty_inputs(cpu_ops):
    x, wg, wu, _ = _operands(5, 0, 64, grad=False)
    assert tkc.swiglu(x, wg, wu).shape == (0, 72)
    x = torch.randn(3, 4, 0).to(BF)
    assert tkc.swiglu(x, *(torch.empty(8, 0, dtype=BF) for _ in "gu")).equal(torch.zeros(3, 4, 8, dtype=BF))


def test_compiles_without_graph_breaks(cpu_ops):
    """torch.compile (fullgraph) traces the custom op; its backward runs the formula."""
    x, wg, wu, g = _operands(6, 24, 64)

    def mlp(x, wg, wu):
        return tkc.matmul(tkc.swiglu(x, wg, wu), wg)

    y = torch.compile(mlp, backend="aot_eager", fullgraph=True)(x, wg, wu)
    ref = _ref(x, wg, wu) @ wg.double()
    assert _rel(y, ref) < 2e-2
    assert grads_match(y, ref, torch.randn(ref.shape, generator=g).to(BF), (x, wg, wu), 3e-2)


def test_bad_arguments_are_refused_at_the_callers_line(cpu_ops):
    x, wg, wu, _ = _operands(7, 8, 64, grad=False)
    here = __file__
    refused_here(lambda: tkc.swiglu(x, wg, wu[:64]), "must have one shape", here)
    refused_here(lambda: tkc.swiglu(x[:, :32], wg, wu), "x's last dim must be the weights' K", here)
    refused_here(lambda: tkc.swiglu(x, wg.float(), wu), "w_gate", here)
    refused_here(lambda: tkc.swiglu(x, wg[:, None], wu), "w_gate", here)
    w = torch.randn(12, 64).to(BF)
    refused_here(lambda: tkc.swiglu(x, w, w), "F = 12 must be a multiple of 8", here)
    with torch.autocast("cpu", torch.float16):
        refused_here(lambda: tkc.swiglu(x.float(), wg, wu), "dtype=torch.bfloat16", here)


def test_schedules_space_and_key():
    """The tuned space is matmul's unswapped tiles whose halves are 16-row
    multiples (BN % 32), each one the library builds with and without the
    stored gate and up; a key's candidates narrow with C's rows; keys
    bucket C's rows (16, 64, then powers of four) and F (powers of two to
    4096, multiples of 2048 to 16384), and every tuning example is a key."""
    from tkc.kernels import library
    kept = gated.TILE.candidates()
    assert kept == list(GATED_SCHEDULES) and len(kept) == 25
    assert all(not s["swap"] and not s["sliced"] and s["BN"] % 32 == 0 for s in kept)
    built = {k.artifact_key() for k in library()}
    for s in kept:
        for preact in (False, True):
            assert gated._kernel(preact, **s).artifact_key() in built
    assert [gated._key(m, f) for m, f in ((1, 14336), (17, 11008), (65, 4096), (300, 4000), (4096, 14336),
                                          (5000, 1000), (16384, 28672))] \
        == [(16, 14336), (64, 12288), (256, 4096), (1024, 4096), (4096, 14336), (16384, 1024), (16384, 32768)]
    assert len({gated._key(m, f) for m in gated.ROWS for f in gated.WIDTHS}) == 36
    sizes = [len(gated.TILE.candidates((rows, 4096))) for rows in (16, 64, 256, 1024, 4096)]
    assert sizes == [25, 25, 12, 12, 10]
    assert all(c["BM"] == 128 and c["split"] == 1 for c in gated.TILE.candidates((4096, 4096)))


def test_untuned_keys_take_the_nearest_tuned_width(monkeypatch, tmp_path):
    """A key no table holds takes its rows' pick at the nearest F tuned
    (tkc/tune/tables), else the default tile."""
    import json

    from tkc.tune import tables
    monkeypatch.setattr(tables, "PACKAGE_DIR", tmp_path)
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TKC_DEVICE_NAME", "Some GPU")
    S = lambda bn, persistent=True: dict(SMALL, BN=bn, persistent=persistent)  # noqa: E731
    tables.package_path(tables.REFERENCE_GPU).write_text(json.dumps({"entries": {"tkc.swiglu.tile": {
        repr((4096, 14336)): {"config": S(256)}, repr((4096, 8192)): {"config": S(192, False)},
        repr((256, 4096)): {"config": S(128, False)}}}}))
    gated.TILE.forget()
    try:
        assert [gated.TILE.choose(k)["BN"] for k in ((4096, 14336), (4096, 16384), (4096, 10240),
                                                     (4096, 1024), (256, 32768), (16, 4096))] == \
            [256, 256, 192, 192, 128, 256]
        assert gated.TILE.choose((16, 4096)) == gated.TILE.default
    finally:
        gated.TILE.forget()


class _SiLUActivation(torch.nn.Module):
    """Hugging Face's ACT2FN["silu"] (transformers 5): F.silu in a module of its own class."""

    def forward(self, x):
        return torch.nn.functional.silu(x)


class _LlamaMLP(torch.nn.Module):
    """Hugging Face's LlamaMLP, as its source has it."""

    def __init__(self, hidden, inter, bias=False, act=torch.nn.SiLU):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, inter, bias=bias)
        self.up_proj = torch.nn.Linear(hidden, inter, bias=bias)
        self.down_proj = torch.nn.Linear(inter, hidden, bias=bias)
        self.act_fn = act()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def _values_and_gradients_match(model, ref, x):
    """model(x) and its parameters' gradients (of the output's square sum) are ref's."""
    y, want = model(x), ref(x)
    assert _rel(y, want) < 2e-2
    y.float().square().sum().backward()
    want.float().square().sum().backward()
    assert all(_rel(p.grad, q.grad) < 3e-2 for p, q in zip(model.parameters(), ref.parameters()))


def test_nn_convert_fuses_gated_mlps(cpu_ops):
    """tkc.nn.convert: a gated MLP (LlamaMLP's shape, its act_fn nn.SiLU or
    another module computing SiLU, as Hugging Face's) runs tkc.swiglu, still
    an instance of its own class with its parameters and state dict; one with
    biased projections is skipped with the reason (its Linears converted), one
    with another activation is no gated MLP (its Linears converted); values
    and gradients are the original model's."""
    import copy
    torch.manual_seed(14)
    model = torch.nn.Sequential(_LlamaMLP(64, 72), _LlamaMLP(64, 72, bias=True),
                                _LlamaMLP(64, 72, act=torch.nn.GELU), _LlamaMLP(64, 72, act=_SiLUActivation)).to(BF)
    ref = copy.deepcopy(model)
    params, keys = list(model.parameters()), list(model.state_dict())
    tkc.nn.convert(model)
    assert isinstance(model[0], _LlamaMLP) and type(model[0]).__name__ == "Tkc_LlamaMLP"
    assert type(model[1]) is type(model[2]) is _LlamaMLP and type(model[3]) is type(model[0])
    assert "0" in model.tkc_converted and "1" not in model.tkc_converted and "bias" in model.tkc_skipped["1"]
    assert {"1.gate_proj", "2.gate_proj", "2.down_proj"} <= set(model.tkc_converted)
    assert list(model.parameters()) == params and list(model.state_dict()) == keys
    x = torch.randn(3, 5, 64).to(BF)
    _values_and_gradients_match(model, ref, x)
    tkc.nn.convert(model)   # converting again changes nothing
    assert type(model[0]).__name__ == "Tkc_LlamaMLP"


class _Phi3MLP(torch.nn.Module):
    """Hugging Face's Phi3MLP, as its source has it: gate and up in one weight."""

    def __init__(self, hidden, inter, bias=False, act=torch.nn.SiLU):
        super().__init__()
        self.gate_up_proj = torch.nn.Linear(hidden, 2 * inter, bias=bias)
        self.down_proj = torch.nn.Linear(inter, hidden, bias=False)
        self.activation_fn = act()

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(up * self.activation_fn(gate))


def test_nn_convert_fuses_phi3_mlps(cpu_ops):
    """A Phi-3 MLP (gate_up_proj's weight [gate; up]) runs tkc.swiglu on the
    weight's two halves: values and gradients (the fused weight's, one
    tensor) are the original's; a biased one is skipped with the reason, one
    with GELU is no gated MLP (its Linears converted); transformers' own
    Phi3MLP is converted too."""
    import copy
    torch.manual_seed(16)
    model = torch.nn.Sequential(_Phi3MLP(64, 72), _Phi3MLP(64, 72, bias=True),
                                _Phi3MLP(64, 72, act=torch.nn.GELU)).to(BF)
    ref = copy.deepcopy(model)
    params = list(model.parameters())
    tkc.nn.convert(model)
    assert type(model[0]).__name__ == "Tkc_Phi3MLP" and type(model[1]) is type(model[2]) is _Phi3MLP
    assert "0" in model.tkc_converted and "bias" in model.tkc_skipped["1"]
    assert {"1.down_proj", "2.gate_up_proj", "2.down_proj"} <= set(model.tkc_converted)
    assert list(model.parameters()) == params
    x = torch.randn(3, 5, 64).to(BF)
    _values_and_gradients_match(model, ref, x)
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Phi3Config(hidden_size=64, intermediate_size=72, hidden_act="silu")
    phi3 = transformers.models.phi3.modeling_phi3.Phi3MLP(cfg).to(BF)
    theirs = copy.deepcopy(phi3)
    tkc.nn.convert(phi3)
    assert phi3.tkc_converted[0] == "" and _rel(phi3(x), theirs(x)) < 2e-2


def test_nn_gated_mlp_loads_a_llama_mlps_state(cpu_ops):
    torch.manual_seed(15)
    theirs = _LlamaMLP(64, 72).to(BF)
    mine = tkc.nn.GatedMLP(64, 72, dtype=BF)
    mine.load_state_dict(theirs.state_dict())
    x = torch.randn(7, 64).to(BF)
    assert _rel(mine(x), theirs(x)) < 2e-2
    assert torch.equal(mine(x), tkc.linear(tkc.swiglu(x, mine.gate_proj.weight, mine.up_proj.weight),
                                           mine.down_proj.weight))


def test_any_layout_and_rank(cpu_ops):
    """x of one row ([K]), x a strided view, weights stored transposed (a
    copy the op makes): values as contiguous operands give."""
    x, wg, wu, _ = _operands(16, 6, 128, grad=False)
    want = _ref(x, wg, wu)
    assert tkc.swiglu(x[0], wg, wu).shape == (72,) and _rel(tkc.swiglu(x[0], wg, wu), want[0]) < 1e-2
    strided = torch.zeros(6, 256, dtype=BF)[:, ::2]
    strided.copy_(x)
    assert _rel(tkc.swiglu(strided, wg, wu), want) < 1e-2
    wg_t, wu_t = wg.t().contiguous().t(), wu.t().contiguous().t()
    assert not wg_t.is_contiguous() and _rel(tkc.swiglu(x, wg_t, wu_t), want) < 1e-2
    wg.requires_grad_()   # a gradient wanted for a weight alone
    h = tkc.swiglu(x, wg, wu)
    h.float().sum().backward()
    assert wg.grad is not None and wg.grad.shape == wg.shape and x.grad is None
