"""load_split/store_join with a shared tile (the interleaved pairs of a TMA-fed
kernel): the lowering's lane accesses simulated in every register layout, the
interpreter, the bank-conflict model that picks the wide layout for them, and
the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, rt, st
from tkc.diagnostics import TkcError
from tkc.ops import group_load, group_store, load, load_split, store, store_join, swap_layout

from lanesim import round_to, run_traced

pytest.importorskip("mlir")


def _swapper(layout: str, dtype):
    """Block i: rows 16i.. of x through a 16x128 st, where the pair tile
    (0, 1) (cols 64..127) has its even and odd columns swapped and the odd
    ones doubled; the rest is copied through. layout "row" is kept by a use that needs
    the fragment layout (swap_layout); "col" is the author's."""
    @tkc.kernel(warps=1, name=f"pairs_{layout}_{dtype}", grid=lambda x, y: (2, 1))
    def swap(x: gl(dtype, 1, 1, 32, 128), y: gl(dtype, 1, 1, 32, 128)):
        i = tkc.block_idx.x
        x_s = st(dtype, 16, 128)
        group_load(x_s, x, (0, 0, i, 0))
        tkc.sync()
        even, odd = load_split(rt(f32, 16, 32, "col" if layout == "col" else "row"), x_s, (0, 1))
        if layout == "row":
            even = swap_layout(swap_layout(even))
        store_join(x_s, odd * 2.0, even, (0, 1))
        tkc.sync()
        group_store(y, x_s, (0, 0, i, 0))
    return swap


def _expected(x, dtype):
    y = x.copy()
    for i in range(2):
        part = x[16 * i:16 * i + 16, 64:]
        y[16 * i:16 * i + 16, 64::2] = round_to(part[:, 1::2] * 2.0, dtype)
        y[16 * i:16 * i + 16, 65::2] = part[:, 0::2]
    return y


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("layout", ["wide", "row", "col"])
def test_pairs_through_shared_simulated(layout, dtype):
    """The lowered lane accesses (_st_pairs), one warp in numpy (lanesim holds
    shared memory as f32 words: f32 only; bf16 runs on the GPU in the rotary
    tests), and the interpreter agree with the pairs' meaning."""
    rng = np.random.default_rng(0)
    x = round_to(rng.standard_normal((32, 128)), dtype)
    kernel = _swapper(layout, dtype)
    assert f'"{layout}"' in _tile_ir(kernel)
    if dtype == "f32":
        y = np.full_like(x, np.nan)
        run_traced(kernel, [x, y], blocks=2)
        np.testing.assert_array_equal(y, _expected(x, dtype))
    y = np.full_like(x, np.nan)
    kernel.interpret(x, y)
    np.testing.assert_array_equal(y, _expected(x, dtype))


def _tile_ir(kernel) -> str:
    from tkc.compiler import compile_to
    module = kernel.trace()
    with module.context:
        return compile_to(module, "tile")


def test_wide_pairs_have_no_bank_conflicts():
    """A lane's pairs are 8 bytes of 4 rows in the row layout (rows 0 and 1 of
    a 128-byte swizzle share chunks: 2-way), 32 bytes of one row wide (1-way);
    the layout selection picks the wide one."""
    from tkc.passes.banks import Access, degree
    from tkc.dialect.types import RT, ST
    s = ST("bf16", 16, 512, "128b")
    assert degree(Access("pairs", s, RT("f32", 16, 32, "row"))) == 2
    assert degree(Access("pairs", s, RT("f32", 16, 32, "wide"))) == 1


@pytest.mark.parametrize("body, message", [
    (lambda x, s: load_split(rt(f32, 16, 48), s, (0, 0)), "pairs of rt<f32, 16, 48"),
    (lambda x, s: load_split(rt(f32, 16, 32), s, (0, 0), fill=0.0), "fill is for a gl"),
    (lambda x, s: load_split(rt(f32, 16, 32), s, (0, 0, 0, 0)), "a st takes 2 coordinates"),
    (lambda x, s: store_join(s, *(2 * [load(rt(f32, 16, 32), x, (0, 0, 0, 0))]), (0, 0), clip=True),
     "clip is for a gl"),
    (lambda x, s: load_split(rt(f32, 16, 32), tkc.sv(bf16, 64)), "reads a gl or st"),
])
def test_refusals(body, message):
    @tkc.kernel(warps=1, grid=lambda x: (1, 1))
    def bad(x: gl(bf16, 1, 1, 16, 128)):
        body(x, st(bf16, 16, 128))
    with pytest.raises(TkcError, match=message):
        bad.trace()
