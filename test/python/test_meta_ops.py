"""tkc's ops on meta tensors (torch's shape inference: a model built under
torch.device("meta")) give their outputs as meta tensors, as torch's own ops
do; any other problem of the call is still refused at the caller's line; and
nothing of the trace behind it (fake tensors) stays behind. On the CPU: no
GPU, no kernel, no driver is needed."""
from __future__ import annotations

import gc
import sys

import pytest

torch = pytest.importorskip("torch")

import tkc  # noqa: E402
from tkc.bench import model  # noqa: E402
from tkc.bench.fake_driver import fake_driver  # noqa: E402
from tkc.diagnostics import TkcError  # noqa: E402

BF, F32, I32, E4M3 = torch.bfloat16, torch.float32, torch.int32, torch.float8_e4m3fn


def M(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


CALLS = {   # name: (call, [(shape, dtype) of each output])
    "matmul batched": (lambda: tkc.matmul(M(3, 64, 128), M(128, 256)), [((3, 64, 256), BF)]),
    "linear gelu": (lambda: tkc.linear(M(64, 128), M(256, 128), M(256), activation="gelu"), [((64, 256), BF)]),
    "swiglu": (lambda: tkc.swiglu(M(64, 128), M(256, 128), M(256, 128)), [((64, 256), BF)]),
    "layer_norm prenorm": (lambda: tkc.layer_norm(M(2, 8, 1024), M(1024), M(1024), residual=M(2, 8, 1024),
                                                  prenorm=True), [((2, 8, 1024), BF)] * 2),
    "rms_norm": (lambda: tkc.rms_norm(M(8, 2048), M(2048)), [((8, 2048), BF)]),
    "attention gqa causal": (lambda: tkc.attention(M(1, 8, 128, 128), M(1, 2, 128, 128), M(1, 2, 128, 128),
                                                   causal=True), [((1, 8, 128, 128), BF)]),
    "attention lse": (lambda: tkc.attention(M(1, 2, 128, 64), M(1, 2, 128, 64), M(1, 2, 128, 64), return_lse=True),
                      [((1, 2, 128, 64), BF), ((1, 2, 128), F32)]),
    "attention decode": (lambda: tkc.attention(M(1, 8, 1, 128), M(1, 2, 4096, 128), M(1, 2, 4096, 128)),
                         [((1, 8, 1, 128), BF)]),
    "attention_varlen": (lambda: tkc.attention_varlen(M(256, 2, 64), M(256, 2, 64), M(256, 2, 64), M(3, dtype=I32),
                                                      M(3, dtype=I32), 128, 128), [((256, 2, 64), BF)]),
    "rotary": (lambda: tkc.rotary_embedding(M(1, 64, 4, 128), M(64, 64), M(64, 64)), [((1, 64, 4, 128), BF)]),
    "fftconv": (lambda: tkc.fftconv(M(2, 8, 1024), tkc.fftconv_filter(M(8, 1024, dtype=F32), 1024)),
                [((2, 8, 1024), BF)]),
    "linear_attention": (lambda: tkc.linear_attention(M(1, 2, 64, 64), M(1, 2, 64, 64), M(1, 2, 64, 64)),
                         [((1, 2, 64, 64), BF)]),
    "quantize_fp8": (lambda: tkc.quantize_fp8(M(128, 256)), [((128, 256), E4M3), ((128, 2), F32)]),
    "scaled_mm": (lambda: tkc.scaled_mm(M(128, 256, dtype=E4M3), M(64, 256, dtype=E4M3).t(), M(1, dtype=F32),
                                        M(1, dtype=F32)), [((128, 64), BF)]),
    "attention_fp8": (lambda: tkc.attention_fp8(*(M(1, 2, 128, 128, dtype=E4M3) for _ in range(3)),
                                                *(M(1, 2, dtype=F32) for _ in range(3))), [((1, 2, 128, 128), BF)]),
}


@pytest.mark.parametrize("name", CALLS)
def test_an_op_on_meta_tensors_gives_meta_outputs(name):
    call, want = CALLS[name]
    out = call()
    out = out if isinstance(out, tuple) else (out,)
    assert [(tuple(t.shape), t.dtype) for t in out] == want
    assert all(t.is_meta for t in out)


def test_a_transformer_block_built_on_the_meta_device():
    """tkc.bench.model's block (layer_norm, linear, rotary on strided views,
    attention, the MLP) run on a model's meta parameters: shape inference."""
    p, (cos, sin) = model.parameters(256, "meta"), model.rope_tables(64, 128, "meta")
    y = model.tkc_block(M(2, 64, 256), p, cos, sin, 2)
    assert y.is_meta and y.shape == (2, 64, 256) and y.dtype == BF


def test_tkc_nn_modules_under_the_meta_device():
    """tkc.nn's modules built and called under torch.device("meta"), as a
    large model is before its weights are loaded."""
    import tkc.nn as tnn
    with torch.device("meta"):
        layers = [tnn.Linear(128, 256, dtype=BF), tnn.LayerNorm(256, dtype=BF), tnn.RMSNorm(256, dtype=BF),
                  tnn.GatedMLP(256, 512, dtype=BF)]
        y = torch.empty(4, 16, 128, dtype=BF)
        for layer in layers:
            y = layer(y)
    assert y.is_meta and y.shape == (4, 16, 256) and y.dtype == BF


def test_other_problems_of_a_meta_call_are_refused_at_the_callers_line():
    with pytest.raises(TkcError, match="a must be bfloat16") as e:
        line = sys._getframe().f_lineno + 1
        tkc.matmul(M(64, 128, dtype=F32), M(128, 256))
    assert e.value.where == f"{__file__}:{line}"
    with pytest.raises(TkcError, match="must be on"):   # meta beside a tensor of memory: the device error
        tkc.matmul(M(64, 128), torch.ones(128, 256, dtype=BF))


def test_nothing_of_a_meta_call_stays_behind():
    """The fake tensors a meta call is traced with are not kept by any cache
    (a kept one would reach a later real call's launch), and a real call
    after meta ones runs its kernels as before."""
    from torch._subclasses.fake_tensor import FakeTensor

    def fakes() -> set:   # (other tests' traces, torch.compile's, may hold some: only new ones count)
        gc.collect()
        return {id(o) for o in gc.get_objects() if isinstance(o, FakeTensor)}
    before = fakes()
    for call, _ in CALLS.values():
        call()
    assert not fakes() - before
    x, w, b = torch.randn(8, 1024).to(BF), torch.ones(1024, dtype=BF), torch.zeros(1024, dtype=BF)
    with fake_driver() as cuda:
        tkc.layer_norm(M(8, 1024), M(1024), M(1024))
        tkc.layer_norm(x, w, b)
        assert cuda.state.launches == 1


def test_a_meta_call_the_trace_cannot_serve_is_a_tkc_error():
    """A call whose trace on fake tensors fails (here: it reads a value) is
    refused with tkc's error, not torch's exception from inside the trace."""
    from tkc.torchops.checks import check_device
    from tkc.torchops.eager import public

    @public
    def reads_values(x):
        check_device("reads_values", ("x", x))
        return x.new_empty(int(x.sum().item()))
    with pytest.raises(TkcError, match="reads_values: its output shapes could not be found on meta tensors"):
        reads_values(M(4))
