"""Strided gls (gl(..., strided=True)): the argument may be any view whose
last dim is unit-stride, its b, d, r strides run-time parameters. One kernel
then serves a permuted tensor (q.transpose(1, 2) of a [B, L, H, D] one) or a
slice of wider rows without a copy. Checked in the interpreter, lane by lane
through the lowering (lanesim: register loads and stores, slices), in the
manifest and PTX parameters, at launch (the frame's strides and the tensor
maps'), and its refusals."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma
from tkc.diagnostics import TkcError
from tkc.kernels.reference import round_bf16
from tkc.ops import group_load, group_store, load, store

from helpers import recording_driver
from lanesim import run_traced

pytest.importorskip("mlir")

X = gl(bf16, "B", "H", "L", 64, strided=True)


@tkc.kernel(warps=1, grid=lambda x, o: (x.r // 16, x.d, x.b))
def doubled(x: X, o: X):
    """o = 2 x, in by TMA, out by register stores."""
    t, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    s = st(bf16, 16, 64)
    tma.load(s, x, (b, h, t, 0))
    store(o, (load(rt(f32, 16, 64), s, (0, 0)) * 2.0).to(bf16), (b, h, t, 0))


@tkc.kernel(warps=1, grid=lambda x, o: (tkc.cdiv(x.r, 16), x.d, x.b))
def plus_one(x: X, o: X):
    """o = x + 1 through registers, rows from 8 on (a slice), ragged."""
    t, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    xs, os = x.slice("r", 8, x.r - 8), o.slice("r", 8, o.r - 8)
    store(os, (load(rt(f32, 16, 64), xs, (b, h, t, 0), fill=0.0) + 1.0).to(bf16), (b, h, t, 0), clip=True)


def _blhd(shape=(2, 40, 3, 64), seed=0):
    """A [B, L, H, D] array and its [B, H, L, D] view (a permuted, strided one)."""
    x = round_bf16(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return x, x.transpose(0, 2, 1, 3)


def test_permuted_views_interpreted():
    x, xv = _blhd((2, 48, 3, 64))
    o = np.full_like(x, np.nan)
    doubled.interpret(xv, o.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(o, 2 * x)


def test_a_slice_of_wider_rows_interpreted():
    """Every row's first 64 of 192 columns: rows 384 bytes apart."""
    wide = round_bf16(np.random.default_rng(1).standard_normal((1, 2, 32, 192)).astype(np.float32))
    o = np.full((1, 2, 32, 64), np.nan, np.float32)
    doubled.interpret(wide[..., 64:128], o)
    np.testing.assert_array_equal(o, 2 * wide[..., 64:128])


def test_strided_addresses_lane_by_lane():
    """The lowering's addresses (b, d, r strides; a slice's origin and
    bounds through them), simulated lane by lane on permuted views."""
    x, xv = _blhd((2, 40, 3, 64))
    o = np.full(x.shape, np.nan, np.float32)
    run_traced(plus_one, [xv, o.transpose(0, 2, 1, 3)], blocks=(2, 3, 2))
    np.testing.assert_array_equal(o[:, 8:], round_bf16(x[:, 8:] + 1))
    assert np.isnan(o[:, :8]).all()          # before the slice: untouched


F = gl(f32, "B", "H", "L", 64, strided=True)


@tkc.kernel(warps=1, grid=lambda x, o, s, p: (x.r // 16, x.d, x.b))
def accesses(x: X, o: F, s: F, p: F):
    """Each access kind through strides: a col-layout tile (one element an
    access), a group copy gl -> shared -> gl (16-byte chunks), a packed
    reduce-add of an f32 tile, in pairs (red.global.add.v2) and packed (.v4)."""
    t, h, b = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
    store(o, load(rt(f32, 16, 64, "col"), x, (b, h, t, 0)) * 3.0, (b, h, t, 0))
    sh = st(f32, 16, 64)
    group_load(sh, o, (b, h, t, 0))
    group_store(s, sh, (b, h, t, 0))
    store(s, load(rt(f32, 16, 64), x, (b, h, t, 0)), (b, h, t, 0), add=True)
    store(p, load(rt(f32, 16, 64), x, (b, h, t, 0)), (b, h, t, 0), add=True, packed=True)


def test_every_access_kind_lane_by_lane():
    x, xv = _blhd((1, 32, 3, 64))
    o, s, p = (np.full((1, 32, 3, 64), np.nan, np.float32).transpose(0, 2, 1, 3) for _ in range(3))
    p[:] = 0
    run_traced(accesses, [xv, o, s, p], blocks=(2, 3, 1))
    np.testing.assert_array_equal(o, xv * 3)
    np.testing.assert_array_equal(s, xv * 4)
    # packed: of each 16 columns, 2t, 2t + 1, 2t + 8, 2t + 9 at 4t .. 4t + 3 (dq_result's order)
    natural = p.reshape(1, 3, 32, -1, 4, 2, 2).swapaxes(-3, -2).reshape(p.shape)
    np.testing.assert_array_equal(natural, xv)


def test_manifest_and_parameters():
    """A strided gl's parameters: pointer, runtime dims, then 3 u64 strides."""
    from tkc.compiler import compile_to
    from tkc.lowering.requirements import params
    module = doubled.trace()
    fn = module.body.operations[0]
    assert [p.get("strided") for p in params(fn, ["x", "o"])] == [True, True]
    with module.context:
        ptx = compile_to(module, "ptx")
    kinds = [line.split()[1] for line in ptx.splitlines() if line.strip().startswith(".param")]
    assert kinds[:7] == [".u64", ".u32", ".u32", ".u32", ".u64", ".u64", ".u64"]


def test_a_launch_passes_the_views_strides(monkeypatch):
    """At launch (a recording driver): each strided gl's element strides after
    its dims, and its tensor map over the view's byte strides."""
    from tkc.compiler import compile_kernel
    from tkc.runtime import launch
    from tkc.runtime.tensors import TensorView
    launches, encoded = recording_driver(monkeypatch)
    B, L, H, D = 2, 48, 3, 64          # [B, L, H, D] tensors viewed as [B, H, L, D]
    x, o = (TensorView("bf16", (B, H, L, D), (L * H * D * 2, D * 2, H * D * 2, 2), 2, p, "cuda", 0)
            for p in (0x10000, 0x80000))
    launch(compile_kernel(doubled.trace()), [x, o])
    (grid, values), = launches
    assert grid == (L // 16, H, B)
    assert values[:7] == [0x10000, B, H, L, L * H * D, D, H * D]
    assert values[7:14] == [0x80000, B, H, L, L * H * D, D, H * D]
    (tmap,) = encoded
    assert tmap.global_dim == (D, L, H, B) and tmap.global_strides == (H * D * 2, D * 2, L * H * D * 2)


def _view(shape, strides, ptr=0x10000, dtype="bf16"):
    from tkc.runtime.tensors import TensorView
    e = 4 if dtype == "f32" else 2
    return TensorView(dtype, shape, tuple(s * e for s in strides), e, ptr, "cuda", 0)


@pytest.mark.parametrize("x, message", [
    (_view((2, 3, 16, 64), (3 * 16 * 128, 16 * 128, 128, 2)), "the last dim's elements must be adjacent"),
    (_view((2, 3, 16, 64), (3 * 16 * 68, 16 * 68, 68, 1)), "must be positive multiples of 16 bytes"),
    (_view((2, 3, 16, 64), (3 * 16 * 64, 16 * 64, 64, 1), ptr=0x10008), "not 16-byte aligned"),
])
def test_strides_the_kernel_cannot_take_are_refused(x, message):
    from tkc.compiler import compile_kernel
    from tkc.runtime.args import Signature
    sig = Signature(compile_kernel(doubled.trace()).manifest)
    o = _view((2, 3, 16, 64), (3 * 16 * 64, 16 * 64, 64, 1), ptr=0x100000)
    with pytest.raises(TkcError, match=message):
        sig.bind([x, o])


def test_a_plain_gl_still_wants_a_contiguous_tensor():
    @tkc.kernel(warps=1)
    def plain(x: gl(f32, 1, 1, 16, 64)):
        store(x, load(rt(f32, 16, 64), x, (0, 0, 0, 0)) + 1.0, (0, 0, 0, 0))
    wide = np.zeros((16, 128), np.float32)
    with pytest.raises(TkcError, match="expected a contiguous row-major tensor"):
        plain.interpret(wide[:, :64])


def test_a_written_strided_view_may_not_overlap_an_input():
    """Its reach (holes included) is what the aliasing check compares."""
    x, xv = _blhd((1, 32, 2, 64))
    with pytest.raises(TkcError, match="overlaps"):
        doubled.interpret(xv[:, :1], xv[:, 1:])


def test_strided_must_be_a_bool():
    with pytest.raises(TkcError, match="strided must be True or False"):
        gl(f32, 1, 1, 16, 64, strided=1)
