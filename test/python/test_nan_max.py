"""Tiles' max, min, relu and row/col max skip NaNs as the GPU's max.f32 does
(a NaN gives the other operand; only NaNs give NaN), in the interpreter as
in the lowering (arith.maxnumf). The GPU twin: test/gpu/test_nan_gpu.py."""
import numpy as np
import pytest
from nan_kernels import inputs, nan_maxes, reference

pytest.importorskip("mlir")


def test_interpreter_skips_nans_as_max_f32():
    x, y = inputs()
    o = np.zeros((3, 16, 32), np.float32)
    r, c = np.zeros(16, np.float32), np.zeros(32, np.float32)
    nan_maxes.interpret(x, y, o, r, c)
    want_o, want_r, want_c = reference(x, y)
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(r, want_r)
    np.testing.assert_array_equal(c, want_c)
    assert np.isnan(r[7]) and not np.isnan(r[0]) and np.isnan(c[20]) and o[2, 0, 3] == 0


def test_lowering_uses_the_nan_skipping_max():
    from tkc.compiler import compile_to
    module = nan_maxes.trace()
    compile_to(module, "nvvm")
    text = str(module)
    assert "arith.maxnumf" in text and "arith.minnumf" in text
    assert "arith.maximumf" not in text and "arith.minimumf" not in text
