"""LayerNorm and RMSNorm (fused dropout + residual) at every shape of kernel:
one warp a row (small D) and a row split over warps (large D, ragged pieces
too), forward and backward through the interpreter against float64 numpy
references; the switch point; the one-warp kernels unchanged by the split."""
from __future__ import annotations

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.kernels import reference
from tkc.kernels.layernorm import SPLIT_AT, layernorm_bwd, layernorm_fwd, row_split
from tkc.kernels.reference import round_bf16 as bf
from tkc.kernels.rmsnorm import rmsnorm_bwd, rmsnorm_fwd

pytest.importorskip("mlir")
EPS = 1e-5


def rms_ref(x, residual, w, eps, keep=None, p=0.0):
    """(y, h, rstd) of RMSNorm(dropout(x) + residual), float64."""
    x = x.astype(np.float64)
    h = (np.where(keep, x / (1 - p), 0) if keep is not None else x) + \
        (0.0 if residual is None else residual.astype(np.float64))
    rstd = 1 / np.sqrt((h * h).mean(-1, keepdims=True) + eps)
    return h * rstd * w, h, rstd[..., 0]


def rms_bwd_ref(dy, dh_next, h, w, rstd, keep=None, p=0.0):
    """(dx, dresidual, dw) of RMSNorm given h and rstd, float64."""
    dy, h = dy.astype(np.float64), h.astype(np.float64)
    xhat = h * rstd[..., None]
    g = dy * w
    dh = (g - xhat * (g * xhat).mean(-1, keepdims=True)) * rstd[..., None]
    dh = dh + (0.0 if dh_next is None else dh_next)
    dx = np.where(keep, dh / (1 - p), 0) if keep is not None else dh
    return dx, dh, (dy * xhat).sum(0)


def nan(*shape):
    return np.full(shape, np.nan, np.float32)


def check(rms, D, N, p, residual, blocks=2, seed=7, offset=12, ref_seed=None, **split):
    """Forward then backward of one configuration, each output against the
    float64 reference (bf16 outputs to bf16 tolerance)."""
    rng = np.random.default_rng(D + N)
    x, res = bf(rng.standard_normal((N, D)) + 0.5), bf(rng.standard_normal((N, D)))
    w, b = bf(rng.standard_normal((1, D))), bf(rng.standard_normal((1, D)))
    keep = reference.dropout_mask(seed if ref_seed is None else ref_seed, offset, (N, D), p) if p else None
    y, h, mean, rstd = nan(N, D), nan(N, D), nan(1, N), nan(1, N)
    build = rmsnorm_fwd if rms else layernorm_fwd
    fwd = build(D, dropout=p > 0, residual=residual, **split)
    args = [x] + ([res] if residual else []) + [w] + ([] if rms else [b]) + [y] + \
        ([h] if residual else []) + ([] if rms else [mean]) + [rstd]
    fwd.interpret(*args, np.array([[seed, offset]], np.int32), p, EPS)
    if rms:
        ry, rh, rrstd = rms_ref(x, res if residual else None, w, EPS, keep, p)
    else:
        ry, rh, rmean, rrstd = reference.layernorm(x, res if residual else None, w, b, EPS, keep, p)
        np.testing.assert_allclose(mean[0], rmean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rstd[0], rrstd, rtol=1e-4)
    np.testing.assert_allclose(y, ry, rtol=2 ** -6, atol=2e-2)
    if residual:
        np.testing.assert_allclose(h, bf(rh), rtol=2 ** -7, atol=1e-6)
        hin = h
    else:
        assert np.isnan(h).all()
        hin = rh  # the backward recomputes dropout(x) from x

    dy, dhn = bf(rng.standard_normal((N, D))), bf(rng.standard_normal((N, D)))
    dx, dres, dw, db = nan(N, D), nan(N, D), nan(blocks, D), nan(blocks, D)
    bwd = (rmsnorm_bwd if rms else layernorm_bwd)(D, dropout=p > 0, residual=residual, **split)
    stats = [rstd] if rms else [mean, rstd]
    if residual:
        args = [dy, dhn, h, w] + stats + [dx] + ([dres] if p else [])
    else:
        args = [dy, x, w] + stats + [dx]
    args += [dw] if rms else [dw, db]
    bwd.interpret(*args, np.array([[seed, offset]], np.int32), p)
    if rms:
        rdx, rdres, rdw = rms_bwd_ref(dy, dhn if residual else None, hin, w[0], rstd[0], keep, p)
    else:
        rdx, rdres, rdw, rdb = reference.layernorm_bwd(dy, dhn if residual else None, hin, w[0],
                                                       mean[0], rstd[0], keep, p)
        np.testing.assert_allclose(db.sum(0), rdb, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dx, rdx, rtol=2 ** -6, atol=4e-2)
    if residual and p:
        np.testing.assert_allclose(dres, rdres, rtol=2 ** -6, atol=3e-2)
    np.testing.assert_allclose(dw.sum(0), rdw, rtol=1e-4, atol=1e-3)
    return fwd, bwd


SIZES = [(256, 37), (1024, 9), (4096, 5), (8192, 3), (16384, 3)]  # (D, N): N ragged


@pytest.mark.parametrize("residual", [True, False], ids=["res", "nores"])
@pytest.mark.parametrize("p", [0.0, 0.25], ids=["p0", "p25"])
@pytest.mark.parametrize("D, N", SIZES, ids=[f"D{d}" for d, _ in SIZES])
@pytest.mark.parametrize("rms", [False, True], ids=["layernorm", "rmsnorm"])
def test_norm_interpreted(rms, D, N, p, residual):
    fwd, bwd = check(rms, D, N, p, residual, blocks=2 if D < 4096 else 5 if D == 4096 else 2)
    S_fwd, S_bwd = row_split(D, "fwd", dropout=p > 0)[0], row_split(D, "bwd", dropout=p > 0)[0]
    assert fwd.warps == (S_fwd or 4) and bwd.warps == (S_bwd or 4)
    assert ("_split" in fwd.name) == (D > SPLIT_AT["fwd"]) and ("_split" in bwd.name) == (D > SPLIT_AT["bwd"])


@pytest.mark.parametrize("rms", [False, True], ids=["layernorm", "rmsnorm"])
@pytest.mark.parametrize("D, split", [(1280, {}), (15616, {}), (2304, dict(split_at=256, lane_values=16))],
                         ids=["D1280", "D15616", "D2304"])
def test_ragged_split_rows(rms, D, split):
    """256 * S does not divide D: the last warps' pieces stop at the row's end."""
    S, L = row_split(D, "bwd", split.get("split_at"), split.get("lane_values"))
    assert S * L > D
    check(rms, D, 3, 0.25, True, blocks=3, **split)
    check(rms, D, 2, 0.0, False, blocks=1, **split)


@pytest.mark.parametrize("rms", [False, True], ids=["layernorm", "rmsnorm"])
def test_switch_point_is_a_parameter(rms):
    """split_at moves the switch: a 2048 backward on one warp a row, a 512
    row split over 2 warps (lane_values 8), both right."""
    fwd, bwd = check(rms, 2048, 5, 0.25, True, split_at=2048)
    assert "_split" not in bwd.name and bwd.warps == 4
    fwd, bwd = check(rms, 512, 7, 0.25, False, split_at=256, lane_values=8)
    assert fwd.name.endswith("_split2") and bwd.warps == 2


def test_split_plan():
    assert row_split(1024, "bwd") == (0, 1024) and row_split(2048, "fwd") == (0, 2048)
    assert row_split(4096, "bwd") == (4, 1024) and row_split(8192, "fwd") == (4, 2048)
    assert row_split(4096, "bwd", dropout=True) == (8, 512)
    assert row_split(8192, "fwd", dropout=True) == (16, 512)
    assert row_split(16384, "bwd") == (16, 1024) == row_split(16384, "bwd", dropout=True)
    assert row_split(16384, "fwd") == (8, 2048)
    with pytest.raises(TkcError, match="at most 32"):
        row_split(16384, "bwd", lane_values=8)
    with pytest.raises(TkcError, match="multiple of 256"):
        rmsnorm_fwd(1000)


def test_the_checks_catch_a_wrong_mask():
    """The comparison is strict enough to see another dropout mask."""
    with pytest.raises(AssertionError):
        check(False, 4096, 3, 0.25, True, ref_seed=8)
    with pytest.raises(AssertionError):
        check(True, 1024, 3, 0.25, False, ref_seed=8)


@pytest.mark.parametrize("make", [lambda: layernorm_fwd(8192, dropout=True),
                                  lambda: layernorm_bwd(8192, dropout=True),
                                  lambda: layernorm_bwd(1280, dropout=True, residual=False),
                                  lambda: rmsnorm_fwd(16384), lambda: rmsnorm_bwd(16384, dropout=True)],
                         ids=["ln_fwd_8192", "ln_bwd_8192", "ln_bwd_1280_ragged", "rms_fwd_16384",
                              "rms_bwd_16384"])
def test_split_sass_is_128_bit_and_spill_free(make, artifact_cache):
    """A split row keeps 16-byte global accesses (the f32 statistics, and
    with dropout its seed and offset, are the only 32-bit ones) and no local
    memory."""
    from tkc.sass import cuobjdump, disassemble
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    kernel = make()
    art = kernel.build()
    sass = disassemble(art.cubin)
    wide = [ln for ln in sass.splitlines() if "LDG.E" in ln or "STG.E" in ln]
    narrow = [ln for ln in wide if ".128" not in ln]
    assert len(wide) > 2 and len(narrow) <= 2 + 2 * ("dropout" in kernel.name), narrow
    assert "LDL" not in sass and "STL" not in sass
    assert art.manifest["resources"]["spill_stores"] == 0


@pytest.mark.parametrize("planes, P, D", [(2, 264, 1024), (1, 37, 320), (2, 5, 64), (1, 16, 8192)])
def test_norm_grads_interpreted(planes, P, D):
    """norm_grads sums the backward's per-block partials per plane into bf16
    (dw, and db): ragged row counts (loads past P read 0) and widths that are
    not whole blocks (stores past D clipped), against float64."""
    from tkc.kernels.norm_grads import norm_grads
    rng = np.random.default_rng(P + D)
    part = rng.standard_normal((planes, P, D)).astype(np.float32)
    out = np.full((planes, D), np.nan, np.float32)
    norm_grads(planes).interpret(part, out)
    ref = part.astype(np.float64).sum(1)
    np.testing.assert_allclose(out, ref, rtol=2 ** -8, atol=1e-4 * np.abs(ref).max())
    assert (out == bf(out)).all()   # bf16 values


def test_norm_grads_refuses_other_planes():
    from tkc.kernels.norm_grads import norm_grads
    with pytest.raises(TkcError, match="planes must be 1"):
        norm_grads(3)
