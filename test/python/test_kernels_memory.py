"""The memory-bound kernels on the CPU: rotary embedding (half-split and
interleaved) and fused dropout + residual + LayerNorm (forward, backward),
against numpy references through the interpreter, LayerNorm also lowered and
simulated lane by lane (lanesim: the real global accesses), and their SASS:
TMA for rotary, 128-bit global accesses only for LayerNorm, no local memory."""
from __future__ import annotations

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.kernels import layernorm_bwd, layernorm_fwd, reference, rotary
from tkc.kernels.reference import round_bf16 as bf

from lanesim import run_traced
from helpers import rng_of

pytest.importorskip("mlir")
RNG = None  # each test's: _inputs_by_test


@pytest.fixture(autouse=True)
def _inputs_by_test(request):
    """RNG seeded by the test (helpers.rng_of): the same inputs in any order."""
    global RNG
    RNG = rng_of(request)


def _rope_inputs(B, T, H, D):
    x = bf(RNG.standard_normal((B, T, H, D)))
    theta = np.outer(np.arange(T), 1 / 10000 ** (np.arange(D // 2) * 2 / D))
    return x, bf(np.cos(theta)), bf(np.sin(theta))


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape, config", [((2, 37, 3, 128), {}), ((1, 16, 1, 64), {}),
                                           ((1, 40, 5, 128), {"warps": 2, "heads": 2}),
                                           ((1, 19, 5, 96), {}), ((2, 16, 3, 32), {})])
def test_rotary_interpreted(shape, config, interleaved):
    B, T, H, D = shape
    x, cos, sin = _rope_inputs(*shape)
    o = np.full_like(x, np.nan)
    rotary(D, interleaved, **config).interpret(x.reshape(B, 1, T, H * D), cos, sin, o.reshape(B, 1, T, H * D))
    np.testing.assert_allclose(o, reference.rotary(x, cos, sin, interleaved), rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_inverse_interpreted(interleaved):
    """inverse=True (tkc.rotary_embedding's backward) rotates by -theta: the
    forward's rotation with -sin."""
    B, T, H, D = 1, 21, 2, 64
    x, cos, sin = _rope_inputs(B, T, H, D)
    o = np.full_like(x, np.nan)
    rotary(D, interleaved, inverse=True).interpret(x.reshape(B, 1, T, H * D), cos, sin,
                                                   o.reshape(B, 1, T, H * D))
    np.testing.assert_allclose(o, reference.rotary(x, cos, -sin, interleaved), rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_on_a_packed_projections_view(interleaved):
    """x and o are strided gls: q of a packed [B, T, 3H, D] projection (its
    positions 3H*D apart) is rotated where it lies, k and v untouched."""
    B, T, H, D = 2, 21, 2, 64
    qkv, cos, sin = _rope_inputs(B, T, 3 * H, D)
    want = reference.rotary(qkv[:, :, :H], cos, sin, interleaved)
    rest = qkv[:, :, H:].copy()
    q = qkv[:, :, :H].reshape(B, T, 1, H * D).transpose(0, 2, 1, 3)     # a view: [B, 1, T, H*D]
    rotary(D, interleaved).interpret(q, cos, sin, q)
    np.testing.assert_allclose(qkv[:, :, :H], want, rtol=2 ** -7, atol=1e-6)
    np.testing.assert_array_equal(qkv[:, :, H:], rest)


def test_rotary_in_place():
    B, T, H, D = 1, 16, 2, 128
    x, cos, sin = _rope_inputs(B, T, H, D)
    want = reference.rotary(x, cos, sin)
    rotary(D).interpret(x.reshape(B, 1, T, H * D), cos, sin, x.reshape(B, 1, T, H * D))
    np.testing.assert_allclose(x, want, rtol=2 ** -7, atol=1e-6)


def _ln_inputs(N, D):
    return (bf(RNG.standard_normal((N, D))), bf(RNG.standard_normal((N, D))),
            bf(RNG.standard_normal((1, D))), bf(RNG.standard_normal((1, D))))


def _ln_forward(run, N, D, p, residual=True, seed=7, offset=12):
    """Run a forward (residual: x, res, w, b -> y, h, mean, rstd; else x, w,
    b -> y, mean, rstd) and check it; returns what the backward needs (h: the
    kernel's, rounded to bf16, or without a residual the reference's
    dropout(x), which the backward recomputes)."""
    x, res, w, b = _ln_inputs(N, D)
    y, h = np.full((N, D), np.nan, np.float32), np.full((N, D), np.nan, np.float32)
    mean, rstd = np.full((1, N), np.nan, np.float32), np.full((1, N), np.nan, np.float32)
    philox = np.array([[seed, offset]], np.int32)   # the dropout's seed and offset, read on the device
    run([x, res, w, b, y, h, mean, rstd, philox] if residual else [x, w, b, y, mean, rstd, philox], (p, 1e-5))
    keep = reference.dropout_mask(seed, offset, (N, D), p) if p else None
    ry, rh, rmean, rrstd = reference.layernorm(x, res if residual else None, w, b, 1e-5, keep, p)
    if residual:
        np.testing.assert_allclose(h, bf(rh), rtol=2 ** -7, atol=1e-6)
    else:
        assert np.isnan(h).all()  # not an argument: nothing written
        h = rh
    np.testing.assert_allclose(y, ry, rtol=2 ** -6, atol=2e-2)
    np.testing.assert_allclose(mean[0], rmean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rstd[0], rrstd, rtol=1e-4)
    return x, w, h, mean, rstd, keep


def _ln_backward(run, x, w, h, mean, rstd, keep, p, residual, blocks):
    """Run a backward (dx, dres only with dropout: without, dres = dx; no
    residual: dy, x, ... -> dx) and check dx, dres and the per-block partial
    sums of dw, db."""
    N, D = x.shape
    dy, dhn = bf(RNG.standard_normal((N, D))), bf(RNG.standard_normal((N, D)))
    dx, dres = np.full((N, D), np.nan, np.float32), np.full((N, D), np.nan, np.float32)
    dw, db = np.full((blocks, D), np.nan, np.float32), np.full((blocks, D), np.nan, np.float32)
    if residual:
        args = [dy, dhn, h, w, mean, rstd, dx] + ([dres] if p else []) + [dw, db]
    else:
        args = [dy, x, w, mean, rstd, dx, dw, db]
    run(args + [np.array([[7, 12]], np.int32)], (p,))
    rdx, rdres, rdw, rdb = reference.layernorm_bwd(dy, dhn if residual else None, h, w[0], mean[0],
                                                   rstd[0], keep, p)
    np.testing.assert_allclose(dx, rdx, rtol=2 ** -6, atol=4e-2)
    if residual and p:
        np.testing.assert_allclose(dres, rdres, rtol=2 ** -6, atol=3e-2)
    np.testing.assert_allclose(dw.sum(0), rdw, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(db.sum(0), rdb, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("p", [0.0, 0.25])
def test_layernorm_forward_and_backward_interpreted(p, residual):
    N, D = 37, 512  # N ragged for 4 warps a block; 2 blocks of 4 warps in the backward
    fwd = layernorm_fwd(D, dropout=p > 0, residual=residual)
    bwd = layernorm_bwd(D, dropout=p > 0, residual=residual)
    got = _ln_forward(lambda a, s: fwd.interpret(*a, *s), N, D, p, residual)
    _ln_backward(lambda a, s: bwd.interpret(*a, *s), *got, p, residual, blocks=2)


@pytest.mark.parametrize("residual", [True, False])
def test_layernorm_simulated(residual):
    """One warp a block, lowered: forward with dropout (tk.rand), then backward."""
    N, D, p = 3, 256, 0.5
    fwd = layernorm_fwd(D, dropout=True, warps=1, residual=residual)
    bwd = layernorm_bwd(D, dropout=True, warps=1, residual=residual)
    got = _ln_forward(lambda a, s: run_traced(fwd, a, blocks=N, scalars=s), N, D, p, residual)
    _ln_backward(lambda a, s: run_traced(bwd, a, blocks=2, scalars=s), *got, p, residual, blocks=2)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_sass_moves_x_by_tma(interleaved, artifact_cache):
    """x, cos and sin come in by TMA (8 boxes of x's 128-byte panels, one each
    of cos and sin) and the result goes out by TMA: no LDG/STG, whose 16-row
    tiles made the L1 the bottleneck; 128-bit shared accesses (ldmatrix and
    stmatrix half-split, LDS/STS.128 pairs interleaved); no local memory."""
    from tkc.sass import cuobjdump, disassemble
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    art = rotary(128, interleaved).build()
    sass = [ln for ln in disassemble(art.cubin).splitlines() if "/*" in ln]
    count = lambda op: sum(f" {op}" in ln for ln in sass)  # noqa: E731
    assert (count("UTMALDG"), count("UTMASTG")) == (10, 8)
    assert count("LDG") == count("STG") == count("LDL") == count("STL") == 0
    plain = [ln for ln in sass if " LDS." in ln or " STS." in ln or " LDS " in ln or " STS " in ln]
    if interleaved:
        assert len(plain) == 24 and all(".128" in ln for ln in plain), plain
    else:
        assert (count("LDSM"), count("STSM"), len(plain)) == (16, 8, 0)
    assert art.manifest["resources"]["spill_stores"] == 0


@pytest.mark.parametrize("kernel", [layernorm_fwd(1024),
                                    layernorm_fwd(1024, dropout=True), layernorm_fwd(1024, residual=False),
                                    layernorm_bwd(1024), layernorm_bwd(1024, dropout=True),
                                    layernorm_bwd(1024, residual=False)],
                         ids=lambda k: k.name)
def test_sass_has_only_128_bit_global_accesses(kernel, artifact_cache):
    """Every LDG/STG of x-sized data is .128: the f32 scalars (mean, rstd), and
    with dropout its seed and offset, are the only 32-bit accesses; no local
    memory (spills)."""
    from tkc.sass import cuobjdump, disassemble
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    art = kernel.build()
    sass = disassemble(art.cubin)
    wide = [ln for ln in sass.splitlines() if ("LDG.E" in ln or "STG.E" in ln)]
    narrow = [ln for ln in wide if ".128" not in ln]
    scalars = (2 if "layernorm" in kernel.name else 0) + (2 if "dropout" in kernel.name else 0)
    assert len(wide) > scalars and len(narrow) <= scalars, narrow
    assert "LDL" not in sass and "STL" not in sass
    assert art.manifest["resources"]["spill_stores"] == 0


def test_bad_sizes_are_refused():
    with pytest.raises(TkcError, match="multiple of 32"):
        rotary(80)
    with pytest.raises(TkcError, match="multiple of 256"):
        layernorm_fwd(384)


def test_rotary_splits_are_the_h200_tables_picks(monkeypatch):
    """tkc.rotary_embedding's heads a block (warps x heads a warp) are tuned
    data: at every common head dim the H200's table has a pick for a few
    positions and for many, each one of kernels/rotary.py's splits(D) that fits
    the SMs' shared memory, every split picked somewhere (none kept on
    speculation, at each dim), and the library prebuilds the picks, forward
    and inverse, both layouts; a GPU without a table reads the H200's."""
    import json

    from tkc.kernels import library
    from tkc.kernels.attention_hopper import HEAD_DIMS
    from tkc.kernels.rotary import fits, splits
    from tkc.torchops import rotary as op
    from tkc.tune import tables
    rows = json.loads((tables.PACKAGE_DIR / "nvidia-h200.json").read_text())["entries"]
    names = {k.name for k in library()}
    monkeypatch.setenv("TKC_DEVICE_NAME", "NVIDIA A100-SXM4-80GB")
    for D in HEAD_DIMS:
        entries = rows[f"tkc.rotary_embedding.d{D}"]
        assert sorted(entries) == ["'few'", "'many'"]
        picked = set()
        for key, row in entries.items():
            split = (row["config"]["warps"], row["config"]["heads"])
            assert split in splits(D) and fits(D, *split)
            picked.add(split)
            op.space(D).forget()
            for interleaved in (False, True):
                for inverse in (False, True):
                    k = op.picked(D, interleaved, inverse, key.strip("'"))
                    assert k.name in names and k.name == rotary(D, interleaved, *split, inverse=inverse).name
        assert picked == set(splits(D))


def test_a_block_too_small_for_a_register_split_gets_none():
    """Eight 2-warpgroup blocks an SM launch with 32 registers a thread, less
    than the producer's 40: tk-pipeline-staging splits no registers there
    (setmaxnreg.dec to 40 failed in ptxas before), so the kernel compiles,
    and runs right in the interpreter."""
    k = rotary(128, False, 4, 1, blocks_per_sm=8)
    art = k.build()
    assert art.manifest["resources"]["registers"] <= 32
    B, T, H, D = 1, 20, 4, 128
    x, cos, sin = _rope_inputs(B, T, H, D)
    o = np.full_like(x, np.nan)
    k.interpret(x.reshape(B, 1, T, H * D), cos, sin, o.reshape(B, 1, T, H * D))
    np.testing.assert_allclose(o, reference.rotary(x, cos, sin, False), rtol=2 ** -7, atol=1e-6)
