"""TMA from the DSL: interpreted numbers (zero fill, clipped stores, store-add),
tk-verify rules, tensor-map planning and the manifest."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, st, tma
from tkc.diagnostics import TkcError
from tkc.dialect.types import ST
from tkc.hopper.tma import box

from helpers import ref_bf16


@tkc.kernel(warps=2, grid=lambda a, o: (tkc.cdiv(a.c, 64), tkc.cdiv(a.r, 32)))
def tma_copy(a: gl(bf16, 1, 1, None, None), o: gl(bf16, 1, 1, None, None)):
    x, y = tkc.block_idx.x, tkc.block_idx.y
    s = st(bf16, 32, 64)
    bar = tkc.barrier()
    with tkc.if_(tkc.warpid() == 0):
        tma.expect(bar, s)
        tma.load_async(s, a, (0, 0, y, x), bar)
    tkc.wait(bar, 0)
    with tkc.if_(tkc.warpid() == 1):
        tma.store_async(o, s, (0, 0, y, x))
        tma.store_add_async(o, s, (0, 0, y, x))
        tma.store_async_wait()


def test_copy_with_ragged_edges_zero_fills_and_clips():
    """48 x 80 is not a multiple of the 32 x 64 tile: the edge tiles read zeros
    past the end, and their stores write only what is in bounds."""
    a = ref_bf16(np.random.default_rng(1).standard_normal((48, 80)).astype(np.float32))
    o = np.full((48, 80), 0.25, np.float32)
    tma_copy.interpret(a, o)
    np.testing.assert_array_equal(o, ref_bf16(a + a))  # store, then store-add


def test_load_past_the_end_reads_zeros():
    @tkc.kernel(warps=1)
    def edge(a: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 32, 32)):
        s = st(f32, 32, 32)
        bar = tkc.barrier()
        tma.expect(bar, s)
        tma.load_async(s, a, (0, 0, 0, 0), bar)
        tkc.wait(bar, 0)
        tma.store_async(o, s, (0, 0, 0, 0))
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    o = np.full((32, 32), np.nan, np.float32)
    edge.interpret(a, o)
    want = np.zeros((32, 32), np.float32)
    want[:16, :16] = a
    np.testing.assert_array_equal(o, want)


def test_tensor_maps_in_the_manifest():
    from tkc.compiler import compile_to
    module = tma_copy.trace()
    text = compile_to(module, "nvvm")
    manifest = _manifest(text)
    assert manifest["tensor_maps"] == [
        {"param": 0, "name": "a", "dtype": "bf16", "box": [32, 64], "swizzle": "128b"},
        {"param": 1, "name": "o", "dtype": "bf16", "box": [32, 64], "swizzle": "128b"}]


def _manifest(nvvm_text: str) -> dict:
    raw = nvvm_text.split('tkc.manifest = "', 1)[1]
    raw = raw[:raw.index('"}')]
    return json.loads(raw.replace("\\22", '"'))


@pytest.mark.parametrize("t, want", [
    (ST("bf16", 64, 128, "128b"), (64, 64, "128b", 2, 8192)),   # two 128-byte panels
    (ST("bf16", 64, 64, "auto"), (64, 64, "128b", 1, 8192)),    # auto: the widest swizzle
    (ST("f32", 32, 32, "64b"), (32, 16, "64b", 2, 2048)),
    (ST("f16", 16, 16, "none"), (16, 16, "none", 1, 512)),
])
def test_box_is_one_swizzle_panel(t, want):
    b = box(t)
    assert (b.rows, b.cols, b.swizzle, b.panels, b.panel_bytes) == want


def _verify_errors(kernel_fn) -> list[str]:
    from tkc.passes.verify import verify
    return [m for _, m in verify(kernel_fn.trace().operation)]


def test_verify_refuses_what_tma_cannot_do():
    @tkc.kernel
    def bad(a: gl(bf16, 1, 1, None, 20)):
        big = st(bf16, 512, 64)
        bar = tkc.barrier()
        tma.load_async(big, a, (0, 0, 0, 0), bar)
    errors = _verify_errors(bad)
    assert any("a TMA box is at most 256 x 256 elements" in e for e in errors)
    assert any("dim c = 20 gives 40" in e for e in errors)


def test_dtype_mismatch_is_a_located_frontend_error():
    @tkc.kernel
    def k(a: gl(bf16, 1, 1, None, None)):
        s = st(f32, 16, 16)
        bar = tkc.barrier()
        tma.load_async(s, a, (0, 0, 0, 0), bar)
    with pytest.raises(TkcError, match="TMA copies without converting") as info:
        k.trace()
    assert info.value.where.startswith(__file__)


def test_coordinates_must_be_four():
    @tkc.kernel
    def k(a: gl(f32, 1, 1, None, None)):
        s = st(f32, 16, 16)
        tma.store_async(a, s, (0, 0))
    with pytest.raises(TkcError, match=r"coordinates are \(b, d, r, c\)"):
        k.trace()
