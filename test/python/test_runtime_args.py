"""Argument checks and the launch path, on the CPU: numpy arrays stand in for
tensors, and a recording fake replaces the CUDA driver for the launch flow."""
import ctypes
import sys

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.runtime import Artifact, launch
from tkc.runtime import driver, tensors
from tkc.runtime.args import Signature

from helpers import SCALE_MANIFEST as MANIFEST, aligned, good_args

SIG = Signature(Artifact(b"cubin", MANIFEST).manifest)
PREFIX_X = "kernel 'scale': argument 0 'x' (gl<f32, 1, -1, -1, 64>)"
PREFIX_Y = "kernel 'scale': argument 1 'y' (gl<f16, 1, 1, -1, -1>)"


def bind_error(args, host_ok=True) -> TkcError:
    """The error binding args raises, checked to be located at this helper's call."""
    with pytest.raises(TkcError) as info:
        line = sys._getframe().f_lineno + 1
        SIG.bind(args, host_ok=host_ok)
    assert info.value.where == f"{__file__}:{line}"
    return info.value


def with_arg(i, value):
    args = good_args()
    args[i] = value
    return args


def test_good_arguments_pack_in_ptx_order():
    args = good_args()
    bound = SIG.bind(args, host_ok=True)
    # x: pointer, then its runtime dims d and r; y: pointer, r and c; then s, n.
    kinds = [type(v) for v in bound.values]
    assert kinds == [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64,
                     ctypes.c_uint32, ctypes.c_uint32, ctypes.c_float, ctypes.c_int32]
    values = [v.value for v in bound.values]
    assert values == [args[0].ctypes.data, 2, 32, args[1].ctypes.data, 16, 24, 0.5, 3]
    assert bound.env == {"x.b": 1, "x.d": 2, "x.r": 32, "x.c": 64,
                         "y.b": 1, "y.d": 1, "y.r": 16, "y.c": 24, "n": 3}
    assert bound.device is None  # host memory, allowed only with host_ok


def test_count():
    e = bind_error(good_args()[:3])
    assert e.message == "kernel 'scale' takes 4 arguments (x, y, s, n), got 3"


def test_not_a_tensor():
    e = bind_error(with_arg(0, [[1.0] * 64]))
    assert e.message == f"{PREFIX_X}: expected a tensor (torch.Tensor or a DLPack object), found list"


@pytest.mark.parametrize("dtype, name", [(np.float64, "float64"), (np.float16, "f16"), (np.int32, "i32")])
def test_dtype(dtype, name):
    e = bind_error(with_arg(0, np.ones((2, 32, 64), dtype)))
    assert e.message == f"{PREFIX_X}: expected dtype f32, found {name}"


@pytest.mark.parametrize("shape", [(), (1, 1, 2, 32, 64)])
def test_rank(shape):
    e = bind_error(with_arg(0, np.ones(shape, np.float32)))
    assert e.message == f"{PREFIX_X}: expected rank 1 to 4, found rank {len(shape)} (shape {shape})"


def test_rank_one_to_four_viewed_as_4d():
    for shape in [(16, 64), (1, 16, 64), (1, 3, 16, 64)]:
        env = SIG.bind(with_arg(0, np.ones(shape, np.float32)), host_ok=True).env
        assert (env["x.b"], env["x.d"], env["x.r"], env["x.c"]) == (1,) * (4 - len(shape)) + shape
    e = bind_error(with_arg(0, np.ones((64,), np.float32)))  # rank 1: r = 1, not a multiple of 16
    assert "dim r (axis 2 of the 4-D view of shape (64,)) = 1 must be a multiple of 16" in e.message


def test_static_dim():
    e = bind_error(with_arg(0, np.ones((2, 32, 128), np.float32)))
    assert e.message == f"{PREFIX_X}: dim c (axis 3 of the 4-D view of shape (2, 32, 128)) must be 64, found 128"
    e = bind_error(with_arg(0, np.ones((2, 2, 32, 64), np.float32)))
    assert "dim b (axis 0 of the 4-D view of shape (2, 2, 32, 64)) must be 1, found 2" in e.message


def test_divisibility():
    e = bind_error(with_arg(1, np.ones((16, 20), np.float16)))
    assert e.message == (f"{PREFIX_Y}: dim c (axis 3 of the 4-D view of shape (16, 20)) = 20 "
                         f"must be a multiple of 8 (the kernel's tiles, or its aligned accesses, along c)")


def test_non_contiguous():
    base = np.ones((2, 64, 64), np.float32)
    e = bind_error(with_arg(0, base[:, ::2, :]))
    assert e.message == (f"{PREFIX_X}: expected a contiguous row-major tensor, found shape (2, 32, 64) "
                         f"with strides (4096, 128, 1) (in elements); call .contiguous()")
    e = bind_error(with_arg(1, np.ones((24, 16), np.float16).T))
    assert "expected a contiguous row-major tensor" in e.message


def test_size_one_dims_any_stride():
    # torch gives size-1 dims arbitrary strides; they never change an address.
    base = np.ones((32, 64), np.float32)
    x = np.lib.stride_tricks.as_strided(base, shape=(1, 32, 64), strides=(4, 256, 4))
    assert SIG.bind(with_arg(0, x), host_ok=True).env["x.r"] == 32


def test_misaligned_slice():
    y = np.ones(16 * 24 + 4, np.float16)[4:].reshape(16, 24)  # contiguous, starts 8 bytes in
    assert y.flags.c_contiguous and y.ctypes.data % 16 == 8
    e = bind_error(with_arg(1, y))
    assert e.message.startswith(f"{PREFIX_Y}: data pointer {y.ctypes.data:#x} is not 16-byte aligned")


def test_cpu_memory_refused_for_launch():
    e = bind_error(good_args(), host_ok=False)
    assert e.message == (f"{PREFIX_X}: the tensor is on the CPU; tkc kernels need CUDA device memory "
                         f"(e.g. tensor.cuda())")


@pytest.mark.parametrize("value, message", [
    ("0.5", "expected a real number, found str"),
    (True, "expected a real number, found bool"),
    (1e39, "1e+39 does not fit f32"),
])
def test_f32_scalar(value, message):
    e = bind_error(with_arg(2, value))
    assert e.message == f"kernel 'scale': argument 2 's' (f32): {message}"


def test_f32_scalar_accepts_reals():
    for value in (2, 2.5, np.float32(2.5), float("-inf")):
        assert SIG.bind(with_arg(2, value), host_ok=True).values[6].value == float(value)


@pytest.mark.parametrize("value, message", [
    (3.0, "expected an int, found float 3.0"),
    (False, "expected an int, found bool False"),
    (2**31, "2147483648 does not fit int32"),
    (-2**31 - 1, "-2147483649 does not fit int32"),
])
def test_i32_scalar(value, message):
    e = bind_error(with_arg(3, value))
    assert e.message == f"kernel 'scale': argument 3 'n' (i32): {message}"


def test_i32_scalar_range_edges():
    assert SIG.bind(with_arg(3, np.int64(2**31 - 1)), host_ok=True).values[7].value == 2**31 - 1
    assert SIG.bind(with_arg(3, -2**31), host_ok=True).values[7].value == -2**31


# -- DLPack producers -----------------------------------------------------------

class DLPackOnly:
    """An object known only through the DLPack protocol (as jax or cupy arrays are)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_view_matches_numpy():
    base = np.arange(4 * 3 * 64, dtype=np.float32).reshape(4, 3, 64)
    for a in (base, base[1:], base[:, ::2], np.ones((8, 8), np.float16)):
        assert tensors.view(DLPackOnly(a)) == tensors.view(a)


def test_dlpack_arguments_checked():
    e = bind_error(with_arg(0, DLPackOnly(np.ones((2, 32, 64), np.int16))))
    assert e.message == f"{PREFIX_X}: expected dtype f32, found int16"
    args = with_arg(1, DLPackOnly(np.ones((16, 24), np.float16)))
    assert SIG.bind(args, host_ok=True).values[3].value == args[1].array.ctypes.data


# -- the launch flow, with a fake driver ------------------------------------------

class FakeDriver:
    def __init__(self):
        self.loads, self.launches = [], []

    def compute_capability(self, device):
        return (9, 0)

    def load(self, image, kernel, device, shared):
        self.loads.append((image, kernel, device, shared))
        return driver.Function("module", f"fn:{device}", device)

    def context(self, device):
        return None

    def launch(self, fn, grid, block, shared, stream, values, cluster=(1, 1, 1), current=False):
        self.launches.append((fn, grid, block, shared, stream, values.decoded(), cluster))


@pytest.fixture
def fake(monkeypatch):
    """A fake driver, and arrays that claim to live on cuda:0 (the checks are real)."""
    fake = FakeDriver()
    for name in ("compute_capability", "load", "context", "launch"):
        monkeypatch.setattr(driver, name, getattr(fake, name))
    real_view = tensors.view
    monkeypatch.setattr("tkc.runtime.args.view",
                        lambda obj, stream=None: (v := real_view(obj, stream)) and v._replace(device="cuda"))
    return fake


def test_launch_flow(fake):
    art = Artifact(b"cubin", MANIFEST)
    args = good_args()
    launch(art, args)
    launch(art, args, stream=7)
    assert fake.loads == [(b"cubin", "scale", 0, 1024)]  # loaded once, reused
    first, second = fake.launches
    assert first[1:5] == ((1, 2, 3), (64, 1, 1), 1024, 0)
    assert first[5] == [args[0].ctypes.data, 2, 32, args[1].ctypes.data, 16, 24, 0.5, 3]
    assert second[4] == 7 and second[0] is first[0]


def test_launch_errors_before_touching_the_gpu(fake):
    art = Artifact(b"cubin", MANIFEST)
    with pytest.raises(TkcError) as info:
        line = sys._getframe().f_lineno + 1
        launch(art, with_arg(3, 0))
    assert info.value.message == "grid z = 0 from 'n': empty launch"
    assert info.value.where == f"{__file__}:{line}"
    with pytest.raises(TkcError, match="expected dtype f16"):
        launch(art, with_arg(1, np.ones((16, 24), np.float32)))
    assert fake.loads == [] and fake.launches == []


def test_launch_refuses_other_gpus_and_tensor_maps(fake, monkeypatch):
    monkeypatch.setattr(driver, "compute_capability", lambda device: (8, 0))
    with pytest.raises(TkcError, match="built for sm_90a .Hopper.; cuda:0 is sm_80"):
        launch(Artifact(b"cubin", MANIFEST), good_args())
    with pytest.raises(TkcError, match="uses TMA tensor maps"):
        launch(Artifact(b"cubin", dict(MANIFEST, tensor_maps=[{"param": "x"}])), good_args())
    assert fake.launches == []


def test_cluster_grid_must_divide(fake):
    art = Artifact(b"cubin", dict(MANIFEST, cluster=[2, 1, 1]))
    with pytest.raises(TkcError, match=r"grid \(1, 2, 3\) is not a multiple of its cluster shape \(2, 1, 1\)"):
        launch(art, good_args())
    launch(art, with_arg(0, np.ones((2, 64, 64), np.float32)))
    assert fake.launches[0][1] == (2, 2, 3) and fake.launches[0][6] == (2, 1, 1)


def test_params_array_points_at_values():
    values = [ctypes.c_uint64(0xDEAD0000), ctypes.c_uint32(5), ctypes.c_float(1.5)]
    arr = driver.params_array(values)
    assert [arr[i] for i in range(3)] == [ctypes.addressof(v) for v in values]
    assert ctypes.c_float.from_address(arr[2]).value == 1.5


def test_launch_configs_allow_programmatic_serialization():
    """Every launch allows the next kernel to be scheduled before it ends (its
    kernel waits for this one first: griddepcontrol); a cluster launch also
    gives its cluster's shape."""
    cuda = pytest.importorskip("cuda.bindings.driver")
    ids = cuda.CUlaunchAttributeID
    old, driver._cuda = driver._cuda, cuda  # building the struct needs no GPU
    try:
        c = driver._launch_config((4, 2, 1), (128, 1, 1), 2048, 0, (2, 1, 1))
        plain = driver._launch_config((4, 2, 1), (128, 1, 1), 2048, 0, (1, 1, 1))
    finally:
        driver._cuda = old
    assert (c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.sharedMemBytes) == (4, 2, 1, 128, 2048)
    assert c.numAttrs == 2 and c.attrs[0].value.clusterDim.x == 2
    assert [a.id for a in c.attrs] == [ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                       ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION]
    assert plain.numAttrs == 1 and plain.attrs[0].id == ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert plain.attrs[0].value.programmaticStreamSerializationAllowed == 1


def test_driver_errors_are_named():
    cuda = pytest.importorskip("cuda.bindings.driver")
    old, driver._cuda = driver._cuda, cuda
    try:
        text = driver.error_text(cuda, cuda.CUresult.CUDA_ERROR_INVALID_VALUE)
    finally:
        driver._cuda = old
    assert text.startswith("CUDA_ERROR_INVALID_VALUE")


# ---- named dims: every dim with one name has one size

def _named(dims, names, divisible):
    return {"kind": "gl", "dtype": "f32", "dims": dims, "names": names, "divisible": divisible}


GEMM_MANIFEST = {
    "version": 1, "kernel": "gemm", "target": "sm_90a", "warps": 1, "block": [32, 1, 1],
    "grid": ["cdiv(c.c, 16)", "cdiv(c.r, 16)", "1"], "shared_bytes": 0,
    "params": [
        {"name": "a", **_named([1, 1, None, None], [None, None, "M", "K"], [1, 1, 16, 16])},
        {"name": "b", **_named([1, 1, None, None], [None, None, "K", "N"], [1, 1, 16, 16])},
        {"name": "c", **_named([1, 1, None, None], [None, None, "M", "N"], [1, 1, 16, 16])},
    ],
}
GEMM = Signature(Artifact(b"cubin", GEMM_MANIFEST).manifest)


def gemm_args(m, k, n, c_rows=None):
    return [aligned((m, k), np.float32), aligned((k, n), np.float32),
            aligned((m if c_rows is None else c_rows, n), np.float32)]


def test_named_dims_that_agree_bind():
    bound = GEMM.bind(gemm_args(32, 48, 16), host_ok=True)
    assert (bound.env["a.r"], bound.env["b.r"], bound.env["c.c"]) == (32, 48, 16)


@pytest.mark.parametrize("args, message", [
    # c has more rows than a: the grid covers c, a's rows would be read out of bounds
    (gemm_args(32, 48, 16, c_rows=64),
     "dim r of argument 2 'c' is 64, but dim r of argument 0 'a' is 32: both are named 'M'"),
    # a's K (cols) against b's K (rows): one name across different axes
    ([aligned((32, 48), np.float32), aligned((32, 16), np.float32), aligned((32, 16), np.float32)],
     "dim r of argument 1 'b' is 32, but dim c of argument 0 'a' is 48: both are named 'K'"),
])
def test_named_dims_that_differ_are_located_errors(args, message):
    with pytest.raises(TkcError) as info:
        line = sys._getframe().f_lineno + 1
        GEMM.bind(args, host_ok=True)
    assert info.value.where == f"{__file__}:{line}"
    assert info.value.message == f"kernel 'gemm': {message} and must have one size"


def test_unnamed_dims_may_differ():
    """The shapes of the failing case bind when no dim is named."""
    unnamed = {**GEMM_MANIFEST, "params": [{**p, "names": [None] * 4} for p in GEMM_MANIFEST["params"]]}
    Signature(Artifact(b"cubin", unnamed).manifest).bind(gemm_args(32, 48, 16, c_rows=64), host_ok=True)
