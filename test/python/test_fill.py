"""Filled loads past a gl's end, down to an empty gl (interpreted; on the GPU:
test/gpu/test_fill_gpu.py), and the address an empty tensor is launched with."""
import numpy as np
import pytest
from fill_kernels import check, filled


@pytest.mark.parametrize("n", [0, 2, 37, 64])
def test_filled_loads_of_a_short_or_empty_gl(n):
    y = np.full((4, 32), -1.0, np.float32)
    filled.interpret(np.arange(1, n + 1, dtype=np.float32).reshape(1, 1, 1, n), y.reshape(1, 1, 4, 32))
    check(y, n)


def test_an_empty_tensor_is_launched_with_the_zeros_address(monkeypatch):
    """A filled load's lanes off the gl read its first element's address (then
    select the fill): an empty CUDA tensor's null pointer goes to the kernel
    as driver.zeros, on the plan's fast path (Signature.key) and the full
    checks' (bind); a tensor with elements as its own."""
    from tkc.compiler import compile_kernel
    from tkc.runtime import args, driver
    from tkc.runtime.args import Signature
    from tkc.runtime.tensors import TensorView
    sig = Signature(compile_kernel(filled.trace()).manifest)
    monkeypatch.setattr(driver, "zeros", lambda ordinal: 0x7000 + ordinal)
    monkeypatch.setattr(args, "memory_needed", False)
    y = TensorView("f32", (1, 1, 4, 32), (512, 512, 128, 4), 4, 0x100000, "cuda", 1)
    for n, ptr, want in ((0, 0, 0x7001), (8, 0x200000, 0x200000)):
        v = TensorView("bf16", (1, 1, 1, n), (2 * n, 2 * n, 2 * n, 2), 2, ptr, "cuda", 1)
        assert sig.key([v, y])[1] == [want, 0x100000]
        assert [x.value for x in sig.bind([v, y]).values][:3:2] == [want, 0x100000]
    host = TensorView("bf16", (1, 1, 1, 0), (0, 0, 0, 2), 2, 0, "cpu", 0)   # (the interpreter's: no memory to stand in)
    assert args._address(host) == 0
