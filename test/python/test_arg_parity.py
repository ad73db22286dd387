"""One set of argument rules: the interpreter refuses exactly what a launch
refuses, with the same message (both run tkc.runtime.args on the manifest's
params), checking numpy arrays as their tensors would lie in GPU memory."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tkc
from tkc import bf16, f32, gl, i32, rt, st
from tkc.diagnostics import TkcError
from tkc.ops import load, store

pytest.importorskip("mlir")


@tkc.kernel(warps=1, grid=lambda a, b, n: (tkc.cdiv(a.r, 16), 1))
def _plain(a: gl(bf16, 1, 1, "M", 64), b: gl(bf16, 1, 1, "M", 64), n: i32):
    i = tkc.block_idx.x
    store(b, load(rt(f32, 16, 64), a, (0, 0, i, 0)), (0, 0, i, 0))


@tkc.kernel(warps=1, grid=lambda a, b: (1, 1))
def _tma(a: gl(bf16, 1, 1, "M", "N"), b: gl(bf16, 1, 1, "M", "N")):
    s = st(bf16, 16, 16)
    bar = tkc.barrier()
    tkc.tma.expect(bar, s)
    tkc.tma.load_async(s, a, (0, 0, 0, 0), bar)
    tkc.wait(bar, 0)
    store(b, load(rt(f32, 16, 16), s, (0, 0)), (0, 0, 0, 0), clip=True)


def _launch_error(kernel, args) -> str:
    """What a launch would say: the runtime's checks on the compiled manifest."""
    from tkc.compiler import compile_to, read_manifest
    from tkc.runtime.args import Signature
    from tkc.interpreter.args import _as_on_gpu
    from tkc.dialect.types import GL
    m = kernel.trace()
    with m.context:
        compile_to(m, "nvvm")
        manifest = read_manifest(m)
    views = [_as_on_gpu(GL(p["dtype"], *[-1 if d is None else d for d in p["dims"]]), a)
             if p["kind"] == "gl" else a for p, a in zip(manifest["params"], args)]
    with pytest.raises(TkcError) as info:
        Signature(manifest).bind(views, host_ok=True)
    return info.value.message


def _interpreter_error(kernel, args) -> str:
    with pytest.raises(TkcError) as info:
        kernel.interpret(*args)
    return info.value.message


def _f32(*shape):
    return np.zeros(shape, np.float32)


CASES = {
    "non-contiguous": (_plain, lambda: [_f32(32, 128)[:, ::2], _f32(32, 64), 1], "contiguous row-major"),
    "mid-row slice": (_plain, lambda: [_f32(33 * 64)[4:4 + 32 * 64].reshape(32, 64), _f32(32, 64), 1],
                      "16-byte aligned"),
    "ragged rows": (_plain, lambda: [_f32(40, 64), _f32(40, 64), 1], "multiple of 16"),
    "one name, two sizes": (_plain, lambda: [_f32(32, 64), _f32(48, 64), 1], "must have one size"),
    "i32 out of range": (_plain, lambda: [_f32(32, 64), _f32(32, 64), 2**31], "does not fit int32"),
    "TMA rows": (_tma, lambda: [_f32(16, 20), _f32(16, 20)], "rows of a multiple of 16 bytes"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_interpreter_and_launch_refuse_alike(case):
    kernel, args, words = CASES[case]
    got = _interpreter_error(kernel, args())
    assert words in got
    addresses = re.compile(r"0x[0-9a-f]+")  # each call makes new arrays
    assert addresses.sub("0x", got) == addresses.sub("0x", _launch_error(kernel, args()))


def test_a_good_slice_is_accepted():
    """A slice starting on a 16-byte boundary (8 bf16) is fine on both."""
    a = _f32(33 * 64)[64:64 + 32 * 64].reshape(32, 64)
    _plain.interpret(a, _f32(32, 64), 1)


# ---------------------------------------------------------------- aliasing

@tkc.kernel(warps=1, grid=lambda x, w, o: (x.r // 16, 1))
def _scale(x: gl(f32, 1, 1, "M", 64), w: gl(f32, 1, 1, "M", 64), o: gl(f32, 1, 1, "M", 64)):
    i = tkc.block_idx.x
    store(o, load(rt(f32, 16, 64), x, (0, 0, i, 0)) * load(rt(f32, 16, 64), w, (0, 0, i, 0)),
          (0, 0, i, 0))


@tkc.kernel(warps=1, grid=lambda x, w, o: (x.r // 16, 1), inplace={"o": "x"})
def _scale_inplace(x: gl(f32, 1, 1, "M", 64), w: gl(f32, 1, 1, "M", 64), o: gl(f32, 1, 1, "M", 64)):
    i = tkc.block_idx.x
    store(o, load(rt(f32, 16, 64), x, (0, 0, i, 0)) * load(rt(f32, 16, 64), w, (0, 0, i, 0)),
          (0, 0, i, 0))


def test_an_output_aliasing_an_input_is_refused():
    x, w = np.ones((32, 64), np.float32), np.full((32, 64), 2, np.float32)
    with pytest.raises(TkcError, match="'o', which the kernel writes, is the same tensor as "
                                       "argument 0 'x'.*inplace=\\{'o': 'x'\\}"):
        _scale.interpret(x, w, x)
    big = np.zeros((48, 64), np.float32)
    with pytest.raises(TkcError, match="'o', which the kernel writes, overlaps argument 0 'x'"):
        _scale.interpret(big[:32], w, big[16:])
    assert _launch_error(_scale, [x, w, x]) == _interpreter_error(_scale, [x, w, x])


def test_inputs_may_alias_and_a_declared_output_may_be_its_input():
    x = np.ones((32, 64), np.float32)
    o = np.zeros_like(x)
    _scale.interpret(x, x, o)  # both read: fine
    np.testing.assert_array_equal(o, x * x)
    y = np.full((32, 64), 3, np.float32)
    _scale_inplace.interpret(y, x + 1, y)  # o is x: declared
    np.testing.assert_array_equal(y, 6)
    big = np.zeros((48, 64), np.float32)
    with pytest.raises(TkcError, match="overlaps"):  # declared, but only the very same tensor
        _scale_inplace.interpret(big[:32], x, big[16:])


def test_launch_checks_aliasing_on_every_call():
    """The launcher's cached plans skip repeated checks, but not this one:
    Signature.check_aliasing runs with each call's pointers."""
    from tkc.runtime.args import Signature
    sig = Signature({"kernel": "k", "grid": ["1", "1", "1"], "inplace": [],
                     "params": [{"name": "x", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64]},
                                {"name": "o", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64],
                                 "writes": True}]})
    span = 32 * 64 * 4   # bytes of a [32, 64] f32 tensor
    sig.check_aliasing([0x1000, 0x1000 + span], [span, span])  # adjacent: fine
    with pytest.raises(TkcError, match="overlaps"):
        sig.check_aliasing([0x1000, 0x1000 + 31 * 64 * 4], [span, span])
    # a null pointer is no memory (fake tensors', as `tkc tune --dry-run` makes them): no overlap
    sig.check_aliasing([0, 0], [span, span])
    sig.check_aliasing([0x1000, 0], [span, span])
    with pytest.raises(TkcError, match="is the same tensor as"):
        sig.check_aliasing([0x1000, 0x1000], [span, span])


def test_inplace_names_are_checked():
    def k(x: gl(f32, 1, 1, 16, 16), o: gl(f32, 1, 1, 16, 16)):
        store(o, load(rt(f32, 16, 16), x, (0, 0, 0, 0)), (0, 0, 0, 0))
    from tkc.compiler import compile_to
    for inplace, words in (({"o": "y"}, "two distinct gl arguments"),
                           ({"x": "o"}, "never writes it")):
        m = tkc.kernel(k, inplace=inplace).trace()
        with m.context, pytest.raises(TkcError, match=words):
            compile_to(m, "tile")
