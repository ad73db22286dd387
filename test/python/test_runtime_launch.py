"""The launch fast path on the CPU: cached check results never let a changed
argument through, the parameter frame packs what ctypes would, and
driver.launch talks to a fake cuda-bindings module (bench/launch_overhead.py's)."""
import ctypes
import importlib.util
import os
import sys

import numpy as np
import pytest

import tkc
from tkc.diagnostics import TkcError
from tkc.runtime import Artifact, driver, launch, tensors
from tkc.runtime.args import Signature
from tkc.runtime.frame import Frame, Layout
from tkc.runtime.free import FEW
from tkc.runtime.launch import Launcher, launcher

from helpers import SCALE_MANIFEST as MANIFEST, aligned, good_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("launch_overhead", os.path.join(ROOT, "bench", "launch_overhead.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


class Fake:
    """The fake cuda module, the launches it saw, and per-array devices."""

    def __init__(self):
        self.cuda = bench.fake_cuda()
        self.devices = {}  # id(array) -> (kind, ordinal); default cuda:0
        self.launches = []

    def view(self, real):
        def view(obj, stream=None):
            v = real(obj, stream)
            if v is None or v.device not in ("cpu", "cuda"):
                return v
            kind, index = self.devices.get(id(obj), ("cuda", 0))
            return v._replace(device=kind, index=index)
        return view


@pytest.fixture
def fake(monkeypatch):
    """Arrays on a pretend cuda:0 (the checks are real) and a driver that
    records each launch's grid and parameter values at the time of the call."""
    f = Fake()
    monkeypatch.setattr(driver, "_cuda", f.cuda)
    monkeypatch.setattr(driver, "_contexts", {})
    monkeypatch.setattr(driver, "_configs", {})
    monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(driver, "load", lambda image, kernel, device, shared:
                        driver.Function("module", f"fn{device}", device))
    real_launch = driver.launch

    def record(fn, grid, block, shared, stream, values, cluster=(1, 1, 1), current=False):
        f.launches.append((fn.device, grid, stream, values.decoded() if isinstance(values, driver.Params)
                           else [bytes(v) if isinstance(v, ctypes.Array) else v.value for v in values]))
        real_launch(fn, grid, block, shared, stream, values, cluster, current)
    monkeypatch.setattr(driver, "launch", record)
    monkeypatch.setattr("tkc.runtime.args.view", f.view(tensors.view))
    return f


def sent(state):
    """(grid, stream, parameter address) of the last launch (cuLaunchKernelEx's
    config, function, kernelParams, extra)."""
    config, _, address, _ = state.last
    return (config.gridDimX, config.gridDimY, config.gridDimZ), config.hStream, address


def expected_values(x, y, s, n):
    shape = (1,) * (4 - x.ndim) + x.shape
    return [x.ctypes.data, shape[1], shape[2], y.ctypes.data, *y.shape, s, n]


def refused(art, args) -> TkcError:
    with pytest.raises(TkcError) as info:
        line = sys._getframe().f_lineno + 1
        launch(art, args)
    assert info.value.where == f"{__file__}:{line}"
    return info.value


def bind_message(args) -> str:
    """What the full checks say about args (the message a launch must give)."""
    with pytest.raises(TkcError) as info:
        Signature(Artifact(b"c", MANIFEST).manifest).bind(args)
    return info.value.message


# ---- cached checks

def test_repeated_launch_uses_the_plan_with_this_calls_pointers_and_scalars(fake):
    art = Artifact(b"cubin", MANIFEST)
    args = good_args()
    launch(art, args)
    other = [aligned((2, 32, 64), np.float32), aligned((16, 24), np.float16), -1.5, 3]
    launch(art, other)
    assert len(launcher(art).plans) == 1  # same key: one set of full checks
    assert [v for _, _, _, v in fake.launches] == [expected_values(*args), expected_values(*other)]
    assert fake.cuda.state.launches == 2
    frames = list(launcher(art).frames.values())  # one packed frame per distinct set of values
    assert len(frames) == 2 and sent(fake.cuda.state)[2] == frames[-1].address
    launch(art, args)
    assert sent(fake.cuda.state)[2] == frames[0].address and len(launcher(art).frames) == 2


def test_keys_switch_between_shapes_and_grid_scalars(fake):
    art = Artifact(b"cubin", MANIFEST)
    a, b = good_args(), [aligned((3, 64, 64), np.float32), aligned((8, 40), np.float16), 2.0, 5]
    for args in (a, b, a, b):
        launch(art, args)
    assert [g for _, g, _, _ in fake.launches] == [(1, 2, 3), (2, 3, 5)] * 2
    assert [v for _, _, _, v in fake.launches] == [expected_values(*a), expected_values(*b)] * 2
    launch(art, a[:3] + [7])  # n is a grid name: its value is part of the key
    assert fake.launches[-1][1] == (1, 2, 7) and len(launcher(art).plans) == 3


def test_array_changed_in_place_after_a_launch_is_refused(fake):
    art = Artifact(b"cubin", MANIFEST)
    args = good_args()
    launch(art, args)
    x = args[0]
    x.shape = (2, 16, 128)  # same object, new shape: static c is 64
    assert refused(art, args).message == bind_message(args)
    x.shape = (2, 32, 64)
    args[0] = np.lib.stride_tricks.as_strided(x, strides=(0, 256, 4))  # broadcast along d
    assert "expected a contiguous row-major tensor" in refused(art, args).message
    args[0] = x
    launch(art, args)
    assert len(fake.launches) == 2


@pytest.mark.parametrize("change, message", [
    (lambda a: a.__setitem__(0, a[0].astype(np.float16)), "expected dtype f32, found f16"),
    (lambda a: a.__setitem__(1, a[1][:, :16]), "expected a contiguous row-major tensor"),
    (lambda a: a.__setitem__(1, np.ones(16 * 24 + 4, np.float16)[4:].reshape(16, 24)),
     "is not 16-byte aligned"),
    (lambda a: a.__setitem__(0, aligned((2, 40, 64), np.float32)), "must be a multiple of 16"),
    (lambda a: a.__setitem__(2, "0.5"), "expected a real number, found str"),
    (lambda a: a.__setitem__(2, 1e39), "1e+39 does not fit f32"),
    (lambda a: a.__setitem__(3, True), "expected an int, found bool True"),
    (lambda a: a.__setitem__(3, 2**31), "2147483648 does not fit int32"),
    (lambda a: a.__setitem__(3, 0), "grid z = 0 from 'n': empty launch"),
    (lambda a: a.__setitem__(0, [[1.0] * 64]), "expected a tensor"),
    (lambda a: a.pop(), "takes 4 arguments"),
])
def test_changed_arguments_after_a_cached_launch_are_refused(fake, change, message):
    art = Artifact(b"cubin", MANIFEST)
    launch(art, good_args())
    launch(art, good_args())
    args = good_args()
    change(args)
    e = refused(art, args)
    assert message in e.message
    if "grid" not in message:
        assert e.message == bind_message(args)
    assert len(fake.launches) == 2


def test_device_changes_are_refused(fake):
    art = Artifact(b"cubin", MANIFEST)
    args = good_args()
    launch(art, args)
    fake.devices[id(args[1])] = ("cpu", 0)
    assert refused(art, args).message.endswith("the tensor is on the CPU; tkc kernels need CUDA "
                                               "device memory (e.g. tensor.cuda())")
    fake.devices[id(args[1])] = ("cuda", 1)
    assert "on cuda:1, the arguments before it on cuda:0" in refused(art, args).message
    fake.devices[id(args[0])] = ("cuda", 1)
    launch(art, args)
    assert [d for d, _, _, _ in fake.launches] == [0, 1]


def test_unusual_scalars_take_the_full_checks_every_time(fake):
    art = Artifact(b"cubin", MANIFEST)
    for s in (np.float32(0.25), np.float64(-2.0), 4):
        launch(art, good_args()[:2] + [s, np.int64(3)])
    assert [v[6:] for _, _, _, v in fake.launches] == [[0.25, 3], [-2.0, 3], [4.0, 3]]
    assert launcher(art).plans == {}  # an np.int64 grid scalar gives no key


def test_plans_are_bounded(fake, monkeypatch):
    monkeypatch.setattr(Launcher, "PLAN_LIMIT", 2)
    art = Artifact(b"cubin", MANIFEST)
    for n in (1, 2, 3, 1):
        launch(art, good_args()[:3] + [n])
    assert len(launcher(art).plans) <= 2
    assert [g for _, g, _, _ in fake.launches] == [(1, 2, 1), (1, 2, 2), (1, 2, 3), (1, 2, 1)]


def test_streams_and_tensor_map_slots(fake, monkeypatch):
    monkeypatch.setattr("tkc.runtime.tensormap.encode", lambda a: a.address.to_bytes(8, "little") * 16)
    m = dict(MANIFEST, tensor_maps=[{"param": 1, "name": "y", "dtype": "f16", "box": [16, 8],
                                     "swizzle": "none"}])
    art = Artifact(b"cubin", m)
    args = good_args()
    launch(art, args, stream=7)
    launch(art, args, stream=7)
    assert int(sent(fake.cuda.state)[1]) == 7   # the config made for stream 7
    frame = list(launcher(art).frames.values())[-1]
    assert frame.decoded()[-1] == args[1].ctypes.data.to_bytes(8, "little") * 16
    y2 = aligned((16, 24), np.float16)
    launch(art, args[:1] + [y2] + args[2:])
    frame = list(launcher(art).frames.values())[-1]
    assert frame.decoded()[-1] == y2.ctypes.data.to_bytes(8, "little") * 16


# ---- torch tensors: the key is read from their attributes

@pytest.fixture
def torch_fake(fake):
    return pytest.importorskip("torch")


def test_torch_tensor_changes_are_refused(torch_fake, fake):
    torch = torch_fake
    art = Artifact(b"cubin", MANIFEST)
    x, y = torch.ones(2, 32, 64), torch.ones(16, 24, dtype=torch.float16)
    launch(art, [x, y, 0.5, 3])
    launch(art, [x, y, 0.5, 3])
    assert len(launcher(art).plans) == 1
    assert fake.launches[-1][3] == [x.data_ptr(), 2, 32, y.data_ptr(), 16, 24, 0.5, 3]
    cases = [
        ([x.double(), y], "expected dtype f32, found float64"),
        ([x, y[:, :16]], "expected a contiguous row-major tensor"),
        ([x, torch.ones(16 * 24 + 1, dtype=torch.float16)[1:].view(16, 24)], "is not 16-byte aligned"),
        ([x.to("meta"), y], "the tensor is in meta memory"),
        ([x.view(2, 64, 32), y], "must be 64, found 32"),
    ]
    for tensors_, message in cases:
        assert message in refused(art, tensors_ + [0.5, 3]).message
    x.resize_(2, 32, 128)  # the same object, changed in place
    assert "must be 64, found 128" in refused(art, [x, y, 0.5, 3]).message
    x.resize_(2, 32, 64).as_strided_((2, 32, 64), (1, 128, 2))
    assert "expected a contiguous row-major tensor" in refused(art, [x, y, 0.5, 3]).message
    assert len(fake.launches) == 2


def test_fake_tensors_are_refused_even_where_real_ones_were_launched(torch_fake, fake):
    """A fake tensor (FakeTensorMode's, torch.compile's and torch.export's:
    its data pointer is null) would launch a kernel on address 0, whose fault
    ends the process's CUDA context: refused at the caller's line, also when
    a real call of the same layout has left its checks in the cache; an empty
    tensor's null pointer is no such tensor."""
    import warnings

    from torch._subclasses.fake_tensor import FakeTensorMode
    torch = torch_fake
    art = Artifact(b"cubin", MANIFEST)
    x, y = torch.ones(2, 32, 64), torch.ones(16, 24, dtype=torch.float16)
    launch(art, [x, y, 0.5, 3])
    with FakeTensorMode(allow_non_fake_inputs=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (torch's warning at a fake tensor's pointer)
        fx = torch.ones(2, 32, 64)
        assert "the tensor has no memory" in refused(art, [fx, y, 0.5, 3]).message
        assert "argument 0 'x'" in refused(art, [fx, y, 0.5, 3]).message
    assert len(fake.launches) == 1
    empty = torch.ones(0, 32, 64)
    assert empty.data_ptr() == 0
    Signature(art.manifest).bind([empty, y, 0.5, 3])   # (no error)


def test_the_fake_driver_takes_fake_tensors():
    """Within tkc.bench.fake_driver (whose launches are stubs) a fake tensor
    goes through, as `tkc tune --dry-run`'s examples do; outside, the check is
    back."""
    pytest.importorskip("torch")
    from tkc.runtime import args
    with bench.fake_driver():
        assert not args.memory_needed
    assert args.memory_needed


# ---- the parameter frame

def test_layout_aligns_each_parameter_and_the_maps():
    layout = Layout(["u64", "u32", "u32", "f32", "u64", "i32"], maps=2)
    assert layout.offsets == [0, 8, 12, 16, 24, 32]
    assert layout.map_offsets == [64, 192] and layout.size == 320


def test_frame_packs_values_and_maps_at_the_layouts_offsets():
    layout = Layout(["u64", "u32", "f32", "i32", "u64"], maps=1)
    frame = Frame(layout)
    values = [0xDEAD_BEEF_0000, 96, 0.1, -7, 2**64 - 16]
    params = frame.pack(values, [bytes(range(128))])
    assert params.decoded() == [0xDEAD_BEEF_0000, 96, ctypes.c_float(0.1).value, -7, 2**64 - 16,
                                bytes(range(128))]
    assert frame.map_addresses[0] % 64 == 0
    base = frame.map_addresses[0] - layout.map_offsets[0]
    array = (ctypes.c_void_p * 6).from_address(params.address)
    assert list(array) == [base + o for o in layout.offsets] + frame.map_addresses


def test_frames_are_kept_per_values_and_bounded(fake, monkeypatch):
    """A repeated set of values reuses its packed frame; a full cache starts over."""
    monkeypatch.setattr(Launcher, "FRAME_LIMIT", 2)
    art = Artifact(b"cubin", MANIFEST)
    for s in (0.5, 0.5, 1.5, 2.5, 0.5):
        launch(art, good_args()[:2] + [s, 3])
    assert len(launcher(art).frames) <= 2
    assert [v[6] for _, _, _, v in fake.launches] == [0.5, 0.5, 1.5, 2.5, 0.5]


# ---- driver.launch against the fake bindings

def test_driver_launch_sets_the_context_once_and_checks_results(monkeypatch):
    cuda = bench.fake_cuda()
    monkeypatch.setattr(driver, "_cuda", cuda)
    monkeypatch.setattr(driver, "_contexts", {})
    fn = driver.Function("m", "handle", 0)
    values = [ctypes.c_uint64(5), ctypes.c_float(2.0)]
    for _ in range(2):
        driver.launch(fn, (4, 1, 1), (64, 1, 1), 0, 0, values)
    assert cuda.state.set_current == 1 and int(cuda.state.current) == 1000
    config, handle, _, _ = cuda.state.last
    assert handle == "handle" and (config.gridDimX, config.blockDimX, config.sharedMemBytes) == (4, 64, 0)
    cuda.state.result = 700  # e.g. CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(TkcError, match="cuLaunchKernelEx failed: 700"):
        driver.launch(fn, (4, 1, 1), (64, 1, 1), 0, 0, values)


def test_launch_configs_are_reused():
    cuda = pytest.importorskip("cuda.bindings.driver")
    old, driver._cuda = driver._cuda, cuda
    try:
        first = driver._launch_config((4, 2, 1), (128, 1, 1), 0, 0, (2, 1, 1))
        assert driver._launch_config((4, 2, 1), (128, 1, 1), 0, 0, (2, 1, 1)) is first
        assert driver._launch_config((8, 2, 1), (128, 1, 1), 0, 0, (2, 1, 1)).gridDimX == 8
        assert driver._launch_config((4, 2, 1), (128, 1, 1), 0, 5, (2, 1, 1)) is not first   # stream
    finally:
        driver._cuda = old


# ---- Kernel.__call__ keeps its launcher

def _kernel():
    @tkc.kernel(warps=2, grid=lambda x, y, s, n: (x.r // 32, x.d, n))
    def scale(x: tkc.gl("f32", 1, None, None, 64), y: tkc.gl("f16", 1, 1, None, None),
              s: tkc.f32, n: tkc.i32):
        pass
    return scale


def test_kernel_call_keeps_the_launcher(fake, monkeypatch):
    k = _kernel()
    k._artifact = Artifact(b"cubin", MANIFEST)  # as if built
    k(*good_args())
    kept = k._launcher
    monkeypatch.setattr(type(k), "artifact_key", lambda self, *a: pytest.fail("key recomputed"))
    k(*good_args())
    assert k._launcher is kept and len(fake.launches) == 2
    with pytest.raises(TkcError) as info:
        line = sys._getframe().f_lineno + 1
        k(*good_args()[:3])
    assert info.value.message.startswith("kernel scale takes 4 arguments (x, y, s, n), got 3")
    assert info.value.where.startswith(f"{__file__}:{line}")


def test_bench_fake_path_restores_the_runtime():
    before = (driver._cuda, tensors.view)
    from tkc.runtime import args
    view = args.view
    with bench.fake_driver() as cuda:
        launch(Artifact(b"cubin", MANIFEST), good_args())
        assert cuda.state.launches == 1
    assert (driver._cuda, args.view) == (before[0], view)


def test_threads_loading_one_kernel_each_launch_an_opted_in_function():
    """Two threads loading one kernel at once (its module load lets the other
    run) both get a function opted in to the kernel's dynamic shared memory:
    before the load's lock, the second could take the key as opted in by the
    first and launch its own function without (CUDA_ERROR_INVALID_VALUE: the
    ring attention backward's rank threads on the GPU)."""
    import itertools
    import threading
    import time
    with bench.fake_driver() as cuda:
        handles, opted = itertools.count(10), set()

        def load_module(image):
            time.sleep(0.05)   # the driver's load: the other thread runs meanwhile
            return (0, next(handles))

        def set_attribute(handle, attr, value):
            opted.add(handle)
            return (0,)
        cuda.cuModuleLoadData = load_module
        cuda.cuModuleGetFunction = lambda module, name: (0, module)
        cuda.cuFuncSetAttribute = set_attribute
        got = []
        threads = [threading.Thread(target=lambda: got.append(driver.load(b"cubin", "k", 0, 100_000)))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 2 and all(fn.handle in opted for fn in got), (got, opted)


def test_bench_fake_leaves_no_fake_function_or_frame_behind():
    """A launcher used under the fake driver holds the fake's function handle
    and packed frames (tensor maps); both are dropped when the fake exits, so
    a later real launch loads and packs its own."""
    art = Artifact(b"cubin", MANIFEST)
    with bench.fake_driver():
        launch(art, good_args())
        ln = launcher(art)
        assert ln.functions and ln.frames
    assert not ln.functions and not ln.frames


def test_prepared_launch_packs_each_calls_pointers_and_scalars(fake):
    """A prepared launch (the torch ops' hot path, a generated function) packs
    the values the full path packs: this call's data pointers and scalars, the
    plan's runtime dims; a repeated set of values reuses its frame."""
    torch = pytest.importorskip("torch")
    art = Artifact(b"cubin", MANIFEST)
    x, y = torch.zeros(2, 32, 64), torch.zeros(16, 24, dtype=torch.float16)
    go = launcher(art).prepare([x, y, 0.5, 3])
    frames = launcher(art).frames
    for s in (-1.5, 2.0, -1.5):
        x2, y2 = torch.zeros_like(x), torch.zeros_like(y)
        go(x2, y2, s, 3)
        frame = {f.address: f for f in frames.values()}[sent(fake.cuda.state)[2]]
        grid = sent(fake.cuda.state)[0]
        launch(art, [x2, y2, s, 3])  # the full path, for comparison
        assert (grid, frame.decoded()) == fake.launches[-1][1:4:2]
        assert frame.decoded()[0] == x2.data_ptr() and frame.decoded()[-2:] == [s, 3]
    assert fake.cuda.state.launches == 6 and len(fake.launches) == 3  # 3 prepared, 3 full


def test_prepared_launch_with_bound_arguments(fake):
    """Bound arguments keep their prepare-time values (a tensor's pointer, a
    scalar) and leave the launch's parameters: a call passes the others."""
    torch = pytest.importorskip("torch")
    art = Artifact(b"cubin", MANIFEST)
    x, y = torch.zeros(2, 32, 64), torch.zeros(16, 24, dtype=torch.float16)
    go = launcher(art).prepare([x, y, 0.5, 3], bound=(1, 3))
    x2 = torch.zeros_like(x)
    go(x2, -1.5)
    frame = {f.address: f for f in launcher(art).frames.values()}[sent(fake.cuda.state)[2]]
    assert frame.decoded() == [x2.data_ptr(), 2, 32, y.data_ptr(), 16, 24, -1.5, 3]
    with pytest.raises(TypeError):
        go(x2, y, -1.5, 3)   # bound arguments are not parameters any more


def test_prepared_launches_of_one_kind_share_their_compiled_code(fake):
    """The generated function's source depends on which arguments are
    tensors, scalars or bound, not on their values: plans of other shapes
    (a decode step's growing cache plans at each length) reuse its compiled
    code, each with its own constants."""
    torch = pytest.importorskip("torch")
    art = Artifact(b"cubin", MANIFEST)
    x, y = torch.zeros(2, 32, 64), torch.zeros(16, 24, dtype=torch.float16)
    go = launcher(art).prepare([x, y, 0.5, 3])
    x3, y3 = torch.zeros(3, 32, 64), torch.zeros(48, 24, dtype=torch.float16)
    go3 = launcher(art).prepare([x3, y3, 0.5, 3])
    assert go.__code__ is go3.__code__ and go.__globals__ is not go3.__globals__
    go3(x3, y3, 1.0, 3)
    assert {f.address: f for f in launcher(art).frames.values()}[sent(fake.cuda.state)[2]].decoded()[1:3] == [3, 32]
    assert launcher(art).prepare([x, y, 0.5, 3], bound=(1,)).__code__ is not go.__code__


FREE_MANIFEST = {
    "kernel": "free", "version": 1, "target": "sm_90a", "warps": 4, "block": [128, 1, 1], "shared_bytes": 0,
    "grid": ["cdiv(x.r, 32)", "x.d", "1"],
    "params": [
        {"name": "x", "kind": "gl", "dtype": "f32", "dims": [1, None, None, 64], "divisible": [1, 1, 16, 64]},
        {"name": "k", "kind": "gl", "dtype": "f16", "dims": [None, None, None, 64], "strided": True},
        {"name": "s", "kind": "scalar", "dtype": "f32"},
    ],
    "tensor_maps": [{"param": 1, "name": "k", "dtype": "f16", "box": [16, 64], "swizzle": "none"}],
}


def test_prepared_launch_reads_free_arguments_per_call(fake, monkeypatch):
    """A free argument (a decode step's KV cache, one key longer each step, in
    new memory) may change its runtime dims and strides between the calls of
    one prepared launch: each call packs what the full path packs for it, its
    tensor map included (encoded for this call's dims and strides)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr("tkc.runtime.tensormap.encode",
                        lambda a: repr((a.address, a.global_dim, a.global_strides)).encode().ljust(128, b"\0"))
    art = Artifact(b"cubin", FREE_MANIFEST)
    x = torch.zeros(2, 32, 64)
    cache = torch.zeros(2, 3, 40, 64, dtype=torch.float16)
    go = launcher(art).prepare([x, cache[:, :, :10], 0.5], free=(1,))
    frames = go.__globals__["frames"]   # its own few per thread, not the launcher's (free.py)
    for k in (cache[:, :, :11], cache[:, :, :11], torch.zeros(2, 3, 17, 64, dtype=torch.float16),
              torch.zeros(1, 3, 1, 64, dtype=torch.float16), cache[:, 1:2, 5:30]):
        go(x, k, 2.0)
        frame = {f.address: f for f in frames.frames().values()}[sent(fake.cuda.state)[2]]
        launch(art, [x, k, 2.0])   # the full path, for comparison
        assert frame.decoded() == fake.launches[-1][3]
        assert frame.decoded()[4:7] == list(k.shape[:3]) and str(k.shape[2]).encode() in frame.decoded()[-1]
    assert fake.cuda.state.launches == 10
    assert len(frames.frames()) == 4   # one frame per distinct pointer, dims and strides
    assert frames is not launcher(art).frames
    maps = launcher(art).tensor_maps._cache
    maps.clear()
    addresses = set()
    for n in range(12, 12 + 2 * FEW):   # a growing cache: its frames stay few and are reused, its maps not kept
        go(x, cache[:, :, :n], 2.0)
        addresses.add(sent(fake.cuda.state)[2])
        frame = {f.address: f for f in frames.frames().values()}[sent(fake.cuda.state)[2]]
        held = frame.decoded()   # a reused frame holds this call's values, its map encoded for them
        assert held[4:7] == [2, 3, n] and held[-1].startswith(repr((cache.data_ptr(), (64, n, 3, 2))).encode()[:-1])
    assert len(frames.frames()) == FEW and len(addresses) == FEW and not maps


def test_threads_pack_free_arguments_into_frames_of_their_own(fake, monkeypatch):
    """A launch with free arguments repacks its frames in turn: each thread
    has its own, so no thread rewrites a frame another is about to launch."""
    torch = pytest.importorskip("torch")
    import threading
    monkeypatch.setattr("tkc.runtime.tensormap.encode",
                        lambda a: repr((a.address, a.global_dim)).encode().ljust(128, b"\0"))
    art = Artifact(b"cubin", FREE_MANIFEST)
    x, cache = torch.zeros(2, 32, 64), torch.zeros(2, 3, 40, 64, dtype=torch.float16)
    go = launcher(art).prepare([x, cache[:, :, :10], 0.5], free=(1,))
    seen, both = {}, threading.Barrier(2)

    def steps(name):
        for n in range(11, 11 + FEW):
            go(x, cache[:, :, :n], 1.0)
        seen[name] = {f.address for f in go.__globals__["frames"].frames().values()}
        both.wait()   # both threads' frames alive (an ended thread's are freed, their memory reused)
    workers = [threading.Thread(target=steps, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(seen[0]) == len(seen[1]) == FEW and not seen[0] & seen[1]


@pytest.mark.parametrize("free, message", [
    ((0,), "the grid reads its dims"),
    ((2,), "only a gl tensor's dims"),
    ((3,), "only a gl tensor's dims"),
    ((1, 2), "cannot be both bound and free"),
])
def test_free_arguments_the_launch_cannot_read_per_call_are_refused(fake, free, message):
    torch = pytest.importorskip("torch")
    art = Artifact(b"cubin", FREE_MANIFEST)
    with pytest.raises(TkcError, match=message) as info:
        line = sys._getframe().f_lineno + 1
        launcher(art).prepare([torch.zeros(2, 32, 64), torch.zeros(1, 1, 8, 64, dtype=torch.float16), 0.5],
                              free=free, bound=(2,) if len(free) > 1 else ())
    assert info.value.where == f"{__file__}:{line}"


def test_free_arguments_with_divisible_dims_are_refused(fake):
    torch = pytest.importorskip("torch")
    m = dict(FREE_MANIFEST, params=[FREE_MANIFEST["params"][0], dict(FREE_MANIFEST["params"][1],
                                                                     divisible=[1, 1, 16, 1]),
                                    FREE_MANIFEST["params"][2]])
    with pytest.raises(TkcError, match="multiples of"):
        launcher(Artifact(b"cubin", m)).prepare([torch.zeros(2, 32, 64), torch.zeros(1, 1, 16, 64,
                                                                                     dtype=torch.float16), 0.5],
                                                free=(1,))


def test_a_prepared_launch_holds_its_frame_through_the_launch(fake, monkeypatch):
    """go() receives the frame itself, not its address: a frame cache another
    thread clears (a launch with free arguments keeps only a few) may drop the
    frame between its lookup and cuLaunchKernelEx, which reads its buffer."""
    torch = pytest.importorskip("torch")
    seen, real = [], driver.launcher

    def launcher_of(*a, **kw):
        go = real(*a, **kw)
        return lambda stream, params: (seen.append(params), go(stream, params))[1]
    monkeypatch.setattr(driver, "launcher", launcher_of)
    art = Artifact(b"cubin", FREE_MANIFEST)
    x, cache = torch.zeros(2, 32, 64), torch.zeros(2, 3, 40, 64, dtype=torch.float16)
    go = launcher(art).prepare([x, cache[:, :, :10], 0.5], free=(1,))
    for n in range(11, 11 + 2 * FEW):
        go(x, cache[:, :, :n], 1.0)
    assert len(seen) == 2 * FEW and all(isinstance(p, driver.Params) for p in seen)
    assert sent(fake.cuda.state)[2] == seen[-1].address
