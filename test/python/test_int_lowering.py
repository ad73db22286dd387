"""The lowering of i32 register tiles, checked below the interpreter: the
nvvm-stage IR of the argmax's pieces run by lanesim (signed i32 as the PTX
ISA has it) against numpy, and the cubin ptxas makes of a negation feeding
an i32 max (ptxas 12.9 and 13.0 dropped it on sm_90a: compiler.py's
avoid_ptxas_bugs), checked through the SASS, since the IR was right.
The GPU runs the whole argmax in test/gpu/test_int_gpu.py."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

import tkc
from tkc import f32, gl, i32, rt, rv
from tkc.compiler import compile_to
from tkc.ops import iota, load, max, min, neg_infty, row_max, store, sub_row, where, zero

from lanesim import run_traced

pytest.importorskip("mlir")

I32_MAX = 2 ** 31 - 1


@tkc.kernel(warps=1, grid=lambda x, idx: (tkc.cdiv(x.r, 16),))
def _argmax(x: gl(f32, 1, 1, "R", "C"), idx: gl(i32, 1, 1, 1, "R")):
    """test/gpu/test_int_gpu.py's argmax, one warp a block (lanesim runs warp 0)."""
    row = tkc.block_idx.x
    best, arg = neg_infty(rv(f32, 16)), zero(rv(i32, 16))
    for j in tkc.range(x.c // 64):
        s = load(rt(f32, 16, 64), x, (0, 0, row, j), fill=-math.inf)
        m = row_max(s)
        col = iota(rt(i32, 16, 64), 1, start=j * 64)
        first = -row_max(-where(sub_row(s, m) == 0.0, col, I32_MAX))
        arg = where(m > best, first, arg)
        best = max(best, m)
    store(idx, arg, (0, 0, 0, row), clip=True)


@tkc.kernel(warps=1)
def _pieces(x: gl(i32, 1, 1, 16, 64), f: gl(f32, 1, 1, 16, 64), out: gl(i32, 1, 5, 16, 64),
            red: gl(i32, 1, 3, 1, 16)):
    """Signed i32 pieces of the argmax on values of both signs."""
    t = load(rt(i32, 16, 64), x, (0, 0, 0, 0))
    s = load(rt(f32, 16, 64), f, (0, 0, 0, 0))
    store(out, -t, (0, 0, 0, 0))
    store(out, where(s > 0.0, t, I32_MAX), (0, 1, 0, 0))               # an f32 mask, an i32 scalar
    store(out, max(min(t, 7), -t), (0, 2, 0, 0))
    store(out, iota(rt(i32, 16, 64), 1, start=tkc.block_idx.x * 64 - 100), (0, 3, 0, 0))
    store(out, where(t < -3, t, 1), (0, 4, 0, 0))
    store(red, row_max(t), (0, 0, 0, 0))
    store(red, -row_max(-t), (0, 1, 0, 0))                              # row_min
    store(red, -row_max(-where(sub_row(s, row_max(s)) == 0.0, iota(rt(i32, 16, 64), 1), I32_MAX)),
          (0, 2, 0, 0))


def test_argmax_lane_simulated():
    """The argmax's nvvm IR on one warp a block: numpy's first maximum, ties
    and ragged rows (-inf fill, clipped store) included."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 1, 40, 192)).astype(np.float32)
    x[0, 0, 3, [5, 70]] = 9.0                       # a tie across tiles: the first wins
    x[0, 0, 4, [100, 101]] = 9.0                    # a tie inside one
    idx = np.full((1, 1, 1, 40), -7, np.int32)
    run_traced(_argmax, [x, idx], blocks=3)
    np.testing.assert_array_equal(idx[0, 0, 0], np.argmax(x[0, 0], axis=1))


def test_signed_pieces_lane_simulated():
    rng = np.random.default_rng(4)
    t = rng.integers(-50, 50, (1, 1, 16, 64)).astype(np.int32)
    t[0, 0, 0, :3] = [-2 ** 31, I32_MAX, 0]         # -(-2^31) wraps to -2^31, as neg.s32
    s = rng.standard_normal((1, 1, 16, 64)).astype(np.float32)
    out = np.full((1, 5, 16, 64), 12345, np.int32)
    red = np.full((1, 3, 1, 16), 12345, np.int32)
    run_traced(_pieces, [t, s, out, red])
    ti = t[0, 0].astype(np.int64)
    cols = np.broadcast_to(np.arange(64), (16, 64))
    neg = (-ti + 2 ** 31) % 2 ** 32 - 2 ** 31
    want = [neg, np.where(s[0, 0] > 0, ti, I32_MAX), np.maximum(np.minimum(ti, 7), neg), cols - 100,
            np.where(ti < -3, ti, 1)]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(out[0, k], w, err_msg=str(k))
    np.testing.assert_array_equal(red[0, 0, 0], ti.max(1))
    np.testing.assert_array_equal(red[0, 1, 0], -neg.max(1))     # row 0's -(-2^31) wraps back
    np.testing.assert_array_equal(red[0, 2, 0], np.argmax(s[0, 0], axis=1))


# ---------------------------------------------------------------- the SASS ptxas makes

def _sass(*bodies: str) -> list[list[str]]:
    """The instructions of kernels k0, k1, ... running `bodies`, from one
    cubin that tkc's ptxas step makes of one PTX module holding them all
    (ptxas assembles each entry on its own): one cuobjdump, ~0.5 s of CPU
    even for this, instead of one a kernel."""
    from tkc.compiler import ptxas
    from tkc.sass import cuobjdump, disassemble
    if shutil.which("ptxas") is None or cuobjdump() is None:
        pytest.skip("ptxas or cuobjdump not available")
    ptx = _HEADER + "".join(_ENTRY.replace("NAME", f"k{i}").replace("BODY", b) for i, b in enumerate(bodies))
    kernels, name = {}, None
    for line in disassemble(ptxas(ptx)[0]).splitlines():
        if "Function :" in line:
            name = line.split("Function :")[1].strip()
            kernels[name] = []
        elif name and line.strip().startswith("/*") and ";" in line:
            kernels[name].append(line.split("/*")[1].split("*/")[1].strip())
    return [kernels[f"k{i}"] for i in range(len(bodies))]


_HEADER = """.version 8.1
.target sm_90a
.address_size 64
"""
_ENTRY = """.visible .entry NAME(.param .u64 p)
{
 .reg .b32 %r<12>; .reg .b64 %rd<2>;
 ld.param.u64 %rd1, [p];
 ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
 BODY
 st.global.u32 [%rd1], %r8;
 ret;
}
"""
_A, _B, _C = "neg.s32 %r5, %r1;", "neg.s32 %r6, %r2;", "neg.s32 %r7, %r3;"


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("negated", [(_B,), (_A, _B, _C)], ids=["b", "abc"])
def test_a_negation_feeding_a_max_is_assembled(op, negated):
    """op(op(a', b'), c') with b' = -b, and with b' = b, are different functions
    (a', c' negated or not alike): their SASS must differ. ptxas 12.9 and 13.0
    assembled both to one VIMNMX3 of a', b, c'."""
    def body(negs):
        movs = {"%r5": "%r1", "%r6": "%r2", "%r7": "%r3"}
        for neg in negs:
            movs.pop(neg.split()[1].rstrip(","))
        body = " ".join(negs) + "".join(f" mov.b32 {d}, {s};" for d, s in movs.items())
        return f"{body} {op}.s32 %r9, %r5, %r6; {op}.s32 %r8, %r9, %r7;"
    with_neg, without = _sass(body(negated), body([n for n in negated if n != _B]))
    assert with_neg and without and with_neg != without, "\n".join(with_neg)


def test_kernels_reach_ptxas_without_neg_s32():
    """The argmax's negations go to ptxas (and into --emit=ptx and the
    cache's kernel.ptx) as not + 1."""
    ptx = compile_to(_argmax.trace(), "ptx")
    assert "neg.s32" not in ptx and "not.b32" in ptx


def test_avoid_ptxas_bugs_rewrites_every_neg_s32():
    from tkc.compiler import avoid_ptxas_bugs
    ptx = "\tneg.s32 \t%r3, %r1;\n\t@%p2 neg.s32 \t%r4, %r4;\n\tneg.s64 \t%rd1, %rd2;\n"
    out = avoid_ptxas_bugs(ptx)
    assert out == ("\tnot.b32 \t%r3, %r1;\n\tadd.s32 \t%r3, %r3, 1;\n"
                   "\t@%p2 not.b32 \t%r4, %r4;\n\t@%p2 add.s32 \t%r4, %r4, 1;\n\tneg.s64 \t%rd1, %rd2;\n")
    assert avoid_ptxas_bugs(out) == out
