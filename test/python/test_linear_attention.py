"""The linear-attention kernels on the CPU (tkc/kernels/linear_attention.py):
plain, decaying (Mamba-2's SSD / simple GLA) and Based, through the
interpreter after the block passes (the staged producer/consumer form, its
races and deadlocks checked), against numpy's float64 references on ragged
lengths; the torch ops with the interpreter standing in for the GPU; what the
compiled kernels are made of; and refusals."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import Launch

from tkc.diagnostics import TkcError
from tkc.kernels import reference
from tkc.kernels.linear_attention import based, linear_attention
from tkc.kernels.reference import round_bf16

pytest.importorskip("mlir")


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def _inputs(B, H, L, F, DV, seed, qk_scale=0.3):
    rng = np.random.default_rng(seed)
    q, k = (round_bf16(rng.standard_normal((B, H, L, F)) * qk_scale) for _ in range(2))
    v = round_bf16(rng.standard_normal((B, H, L, DV)))
    g = -rng.uniform(0.0, 0.03, (B, H, 1, L)).astype(np.float32)  # the state matters
    return q, k, v, g


@pytest.mark.parametrize("F,DV,decay,L", [
    (64, 64, False, 64), (64, 64, False, 200), (128, 128, False, 130),
    (64, 64, True, 100), (128, 128, True, 300), (128, 64, True, 64), (64, 128, False, 77),
])
def test_linear_attention(F, DV, decay, L):
    q, k, v, g = _inputs(2, 2, L, F, DV, seed=L + F)
    o = np.full(v.shape, np.nan, np.float32)
    scale = F ** -0.5
    kernel = linear_attention(F, DV, decay)
    kernel.interpret(q, k, v, *((g,) if decay else ()), o, scale)
    ref = reference.linear_attention(q, k, v, scale, g[:, :, 0] if decay else None)
    assert not np.isnan(o).any()
    assert rel_err(o, ref) < 1e-2    # bf16 P and state for the tensor cores, bf16 out


def test_decay_forgets():
    """A strong decay keeps only the last few steps: the reference and the
    kernel agree where exp(G_t - G_s) spans many orders of magnitude."""
    q, k, v, _ = _inputs(1, 1, 192, 64, 64, seed=3)
    g = np.full((1, 1, 1, 192), -2.0, np.float32)
    o = np.full(v.shape, np.nan, np.float32)
    linear_attention(64, 64, True).interpret(q, k, v, g, o, 0.125)
    ref = reference.linear_attention(q, k, v, 0.125, g[:, :, 0])
    assert rel_err(o, ref) < 1e-2


@pytest.mark.parametrize("L", [64, 130, 257])
def test_based(L):
    q, k, v, _ = _inputs(1, 2, L, 16, 64, seed=L, qk_scale=1.0)
    o = np.full(v.shape, np.nan, np.float32)
    based().interpret(q, k, v, o, 0.25)
    ref = reference.based(q, k, v, 0.25)
    assert not np.isnan(o).any()
    assert rel_err(o, ref) < 1e-2


def test_each_tuned_schedule_matches_the_reference():
    """Every schedule of the library's shapes (default_schedule and the H200's
    picks: one or two consumer warpgroups, one or two blocks an SM, the ring
    two stages or as deep as fits), a ragged L, by the interpreter."""
    from tkc.kernels.linear_attention import PICKED, schedules
    for F, DV, decay in PICKED:
        q, k, v, g = _inputs(1, 2, 130, F, DV, seed=F + DV)
        ref = reference.linear_attention(q, k, v, F ** -0.5, g[:, :, 0] if decay else None)
        for c in schedules(F, DV, decay):
            o = np.full(v.shape, np.nan, np.float32)
            linear_attention(F, DV, decay, c["stages"], c["consumers"], c["blocks_per_sm"]).interpret(
                q, k, v, *((g,) if decay else ()), o, F ** -0.5)
            assert rel_err(o, ref) < 1e-2, (F, DV, decay, c)


def test_schedules_are_tuned_data(monkeypatch, tmp_path):
    """A shape's space is default_schedule then its H200 picks; the shipped
    table's pick runs for a tuned key (F = DV = 128 at 256 sequences: one
    consumer warpgroup, not the H100's two), the nearest tuned key's for
    another B x H, default_schedule on a GPU of other SMs."""
    from tkc.kernels.linear_attention import default_schedule
    from tkc.torchops import linear_attn
    from tkc.tune import tables
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TKC_DEVICE_NAME", raising=False)
    monkeypatch.setattr(tables, "device_name", lambda: tables.REFERENCE_GPU)
    t = linear_attn.schedule(128, 128, False)
    t.forget()
    assert t.name == "tkc.linear_attention.f128.v128" and t.default == default_schedule(128, 128, False)
    assert t.default["consumers"] == 2 and len(t.configs) == 3
    one = {"consumers": 1, "blocks_per_sm": 1}
    assert t.choose((256, 132)) == {**one, "stages": "auto"}
    assert t.choose((128, 132)) == {**one, "stages": 2}
    assert t.choose((512, 132)) == t.choose((256, 132))       # nearest: 256 (a tie with 1024: the fewer)
    assert t.choose((4096, 132)) == tables.lookup(t.name, (1024, 132))
    assert t.choose((256, 114)) == t.default
    q = torch.zeros(16, 16, 8, 128)
    monkeypatch.setattr(linear_attn, "sms", lambda device: 132)
    assert linear_attn._la_kernel(128, 128, False, q).name == "linear_attn_f128_v128_c1b1"
    t.forget()


def test_refusals():
    with pytest.raises(TkcError, match="feature dim F = 96"):
        linear_attention(96, 64)
    with pytest.raises(TkcError, match="value dim DV = 32"):
        linear_attention(64, 32)
    q, k, v, g = _inputs(1, 1, 64, 64, 64, seed=0)
    o = np.zeros_like(v)
    with pytest.raises(TkcError, match="k"):   # k's feature dim differs from the kernel's
        linear_attention(64, 64).interpret(q, k[..., :32].copy(), v, o, 0.1)


def test_compiled():
    """HGMMA from shared and registers, TMA loads and stores, the mbarrier
    ring; registers and spills within what the kernels declare."""
    from tkc import sass
    if sass.cuobjdump() is None:
        pytest.skip("no cuobjdump")
    for kernel in (linear_attention(128, 128, True), based()):
        art = kernel.build()
        ops = sass.opcodes(sass.disassemble(art.cubin))
        assert ops.get("HGMMA", 0) > 0 and ops.get("UTMALDG", 0) > 0 and ops.get("UTMASTG", 0) > 0
        assert "mbarrier" in art.ptx and "setmaxnreg" in art.ptx


# ---------------------------------------------------------------- the torch ops

torch = pytest.importorskip("torch")


def _interpreted(kernel):
    def run(*args):
        arrays = [a.detach().float().contiguous().numpy().copy() if isinstance(a, torch.Tensor)
                  else a for a in args]
        kernel.interpret(*arrays)
        with torch.no_grad():
            for a, arr in zip(args, arrays):
                if isinstance(a, torch.Tensor):
                    a.copy_(torch.from_numpy(arr).view(a.shape))
    return Launch(run)


@pytest.fixture
def ops(monkeypatch):
    from tkc.torchops import linear_attn as linear_ops
    monkeypatch.setattr(linear_ops, "sms", lambda device: 132)   # (the key's SMs: an H200's)
    picked = linear_ops._la_kernel   # the tuned pick's kernel, run by the interpreter
    monkeypatch.setattr(linear_ops, "_la_kernel", lambda *key: _interpreted(picked(*key)))
    monkeypatch.setattr(linear_ops, "_based_kernel", lambda: _interpreted(based()))
    return linear_ops


def test_ops(ops):
    """The custom ops (their views and argument order) and their fake
    implementations (torch.library.opcheck), on CPU tensors."""
    q, k, v, g = (torch.from_numpy(x) for x in _inputs(1, 2, 100, 64, 64, seed=5))
    q, k, v, g = q.bfloat16(), k.bfloat16(), v.bfloat16(), g[:, :, 0].contiguous()
    o = ops._la(q, k, v, g, 0.125)
    ref = reference.linear_attention(q.float().numpy(), k.float().numpy(), v.float().numpy(),
                                     0.125, g.numpy())
    assert rel_err(o.float().numpy(), ref) < 1e-2
    torch.library.opcheck(ops._la.custom_op, (q, k, v, None, 0.125), test_utils=("test_schema", "test_faketensor"))
    qb, kb = (torch.randn(1, 2, 64, 16).bfloat16() for _ in range(2))
    ob = ops._based(qb, kb, v[:, :, :64].contiguous(), 0.25)
    ref = reference.based(qb.float().numpy(), kb.float().numpy(), v[:, :, :64].float().numpy(), 0.25)
    assert rel_err(ob.float().numpy(), ref) < 1e-2


@pytest.mark.parametrize("F,DV,decay,L", [(256, 256, True, 67), (192, 256, False, 33), (128, 256, True, 64),
                                          (192, 64, True, 65)])
def test_wide_values_run_in_slices_and_odd_lengths_with_decay(ops, F, DV, decay, L):
    """A v wider than a kernel's shared memory holds runs in column slices
    (linear_attn.WIDEST), and a decaying call of odd L pads g with one zero
    log decay (the kernel reads g in pairs): both matched the reference
    (tkc fuzz --ops found them refused by the compiler, 2026-12-01)."""
    assert len(ops.widths(F, DV, decay)) > 1 or L % 2
    q, k, v, g = (torch.from_numpy(x) for x in _inputs(1, 1, L, F, DV, seed=L))
    q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
    g = g[:, :, 0].contiguous() if decay else None
    o = ops._la(q, k, v, g, F ** -0.5)
    ref = reference.linear_attention(q.float().numpy(), k.float().numpy(), v.float().numpy(), F ** -0.5,
                                     None if g is None else g.numpy())
    assert o.shape == v.shape and rel_err(o.float().numpy(), ref) < 1e-2


def test_the_widest_values_each_kernel_serves():
    """linear_attn.WIDEST: the (F, WIDEST, decay) kernel (its default
    schedule) compiles without spills or serialised wgmmas; one 64 wider
    spills, serialises or does not fit an SM's shared memory."""
    from tkc.torchops.linear_attn import WIDEST

    def clean(kernel):
        try:
            r = kernel.build().manifest["resources"]
        except TkcError as e:
            assert "shared memory" in str(e)
            return False
        return r["spill_stores"] == 0 and not r["wgmma_serialized"]
    for (F, decay), DV in WIDEST.items():
        assert clean(linear_attention(F, DV, decay)), (F, DV, decay)
        assert DV == 256 or not clean(linear_attention(F, DV + 64, decay)), (F, DV + 64, decay)


def test_op_errors(ops):
    import tkc
    q = torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16)
    with pytest.raises(TkcError, match=r"test_linear_attention.py:\d+.*must be bf16"):
        tkc.linear_attention(q.float(), q, q)
    with pytest.raises(TkcError, match="must be \\[B, H, L, D\\]"):
        tkc.linear_attention(q[0], q, q)
    with pytest.raises(TkcError, match="CUDA device"):
        tkc.linear_attention(q, q, q)
    with pytest.raises(TkcError, match="feature dim 64 is not supported"):
        tkc.based(q, q, q)


@pytest.mark.parametrize("g_max", [0.02, 0.2])
def test_positive_log_decays_grow_as_written(g_max):
    """g > 0 (weights exp(G_t - G_s) above 1, growing with t - s) is computed
    as the formula says, until the values leave f32's range (a sum of g past
    ~88): the docstring's promise."""
    q, k, v, _ = _inputs(1, 2, 200, 64, 64, seed=11)
    g = np.random.default_rng(3).uniform(0.0, g_max, (1, 2, 1, 200)).astype(np.float32)
    o = np.full(v.shape, np.nan, np.float32)
    linear_attention(64, 64, True).interpret(q, k, v, g, o, np.float32(0.125))
    ref = reference.linear_attention(q, k, v, 0.125, g[:, :, 0])
    flat = reference.linear_attention(q, k, v, 0.125, np.zeros_like(g[:, :, 0]))
    assert np.abs(ref).max() > 1.5 * np.abs(flat).max()   # the weights did grow
    assert rel_err(o, ref) < 1e-2
