"""The CUDA driver API through cuda-bindings: init, contexts, modules, launch.

cuda-bindings is imported on first use (it is the optional [gpu] extra), so
artifacts, caches and argument checks work on a machine without it. Every
CUresult is checked; a failure is a TkcError naming the call and the CUDA
error. Modules are loaded once per (cubin, device) and kept for the process.

`launch` runs on every kernel call, so it calls the bindings directly (no
`call` indirection), checks the current context with one call, and reuses
the CUstream objects and cluster launch configs it made before.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
from typing import NamedTuple

from ..diagnostics import TkcError

_cuda = None            # the cuda.bindings.driver module, once imported
_contexts: dict = {}    # device ordinal -> (primary CUcontext, its int value)
_configs: dict = {}     # (grid, block, shared, stream, cluster) -> CUlaunchConfig
CACHE_LIMIT = 256       # entries kept in _configs (and each launcher's)
_functions: dict = {}   # (cubin sha256, ordinal, kernel name) -> Function
_shared_optin: dict = {}  # same key -> dynamic shared bytes the function is opted in to
_zeros: dict = {}       # device ordinal -> address of ZEROS zero bytes (zeros())
ZEROS = 16              # (a filled load's widest access)
# load's lock: two threads loading one kernel at once (cuModuleLoadData lets the
# other run) each made a function, and the second could find the key opted in
# by the first and launch its own without the opt-in (CUDA_ERROR_INVALID_VALUE
# for more than 48 KiB of dynamic shared memory)
_load_lock = threading.Lock()
STATIC_SHARED_LIMIT = 48 * 1024  # dynamic shared memory above this needs an opt-in


class Function(NamedTuple):
    module: object      # CUmodule (kept so the module is never unloaded under us)
    handle: object      # CUfunction
    device: int


def api():
    """The cuda.bindings.driver module, initialised (cuInit) on first use."""
    global _cuda
    if _cuda is None:
        try:
            from cuda.bindings import driver
        except ImportError:
            raise TkcError("launching kernels needs cuda-bindings: pip install 'tkc[gpu]'") from None
        try:
            err, = driver.cuInit(0)
        except Exception as e:  # cuda-bindings raises when libcuda itself is missing
            raise TkcError(f"cannot load the CUDA driver (libcuda): {e}") from None
        _check(driver, err, "cuInit")
        _cuda = driver
    return _cuda


def is_fake() -> bool:
    """Whether a stand-in answers for the driver (tkc.bench.fake_driver): its
    launches are stubs, so nothing may be timed."""
    return getattr(_cuda, "stand_in", False)


def _check(driver, err, call: str) -> None:
    if err != driver.CUresult.CUDA_SUCCESS:
        raise TkcError(f"{call} failed: {error_text(driver, err)}")


def error_text(driver, err) -> str:
    """'CUDA_ERROR_X: description' for a CUresult."""
    name = getattr(err, "name", str(err))
    try:
        status, text = driver.cuGetErrorString(err)
        if status == driver.CUresult.CUDA_SUCCESS and text:
            return f"{name}: {text.decode() if isinstance(text, bytes) else text}"
    except Exception:  # the name alone is still useful
        pass
    return name


def call(name: str, *args):
    """Call driver function `name`, check its CUresult, return its other results."""
    driver = api()
    err, *out = getattr(driver, name)(*args)
    _check(driver, err, name)
    return out[0] if len(out) == 1 else tuple(out)


def context(ordinal: int):
    """Make the device's primary context current.

    Always the primary one: a module lives in the context it was loaded in, so
    one context per device keeps one module per device; it is also the one
    torch and cupy allocate in, so their pointers are valid in it."""
    known = _contexts.get(ordinal)
    if known is None:
        ctx = call("cuDevicePrimaryCtxRetain", call("cuDeviceGet", ordinal))
        known = _contexts[ordinal] = (ctx, int(ctx))
    ctx, handle = known
    err, current = _cuda.cuCtxGetCurrent()  # per launch: torch may have switched devices
    if err:  # CUresult is an int enum, CUDA_SUCCESS = 0
        _check(_cuda, err, "cuCtxGetCurrent")
    if int(current) != handle:
        call("cuCtxSetCurrent", ctx)
    return ctx


def zeros(ordinal: int) -> int:
    """The address of ZEROS zero bytes on the device, allocated once: what a
    kernel gets for an empty tensor's null pointer. A filled load's lanes off
    their gl read its first element's address before they select the fill
    (lowering/global_memory.py: one register select, which a zero global of
    the module's own in its place made 4-5% slower in the dropout norms'
    backwards, H200), and an empty gl has no first element."""
    known = _zeros.get(ordinal)
    if known is None:
        context(ordinal)
        ptr = call("cuMemAlloc", ZEROS)
        call("cuMemsetD8", ptr, 0, ZEROS)
        known = _zeros[ordinal] = int(ptr)
    return known


def copy_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """nbytes from device address src to dst on stream, by a copy engine:
    dst may be a peer GPU's memory mapped into this process (symmetric
    memory), which the copy then writes over NVLink with no SM's help."""
    cu = api()
    call("cuMemcpyDtoDAsync", cu.CUdeviceptr(dst), cu.CUdeviceptr(src), nbytes, cu.CUstream(stream))


def write_value(address: int, value: int, stream: int) -> None:
    """The 32-bit `value` into device memory at address, on stream, once the
    stream's work before it is done and its writes are visible (the default
    cuStreamWriteValue32 fences first, as __threadfence_system() does): a
    flag after the data it announces, even in a peer GPU's memory."""
    cu = api()
    call("cuStreamWriteValue32", cu.CUstream(stream), cu.CUdeviceptr(address), value, 0)


def compute_capability(ordinal: int) -> tuple[int, int]:
    driver = api()
    attr = driver.CUdevice_attribute
    dev = call("cuDeviceGet", ordinal)
    return (call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
            call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))


def device_name(ordinal: int) -> str:
    """The device's name ("NVIDIA H200"), as torch.cuda.get_device_name gives it."""
    raw = call("cuDeviceGetName", 256, call("cuDeviceGet", ordinal))
    return (raw.decode() if isinstance(raw, bytes) else str(raw)).split("\0", 1)[0].strip()


@functools.lru_cache(maxsize=None)
def multiprocessors(ordinal: int) -> int:
    """The device's SM count (the grid language's `sms`)."""
    attr = api().CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return call("cuDeviceGetAttribute", attr, call("cuDeviceGet", ordinal))


def resident(fn: Function, threads: int, shared_bytes: int) -> int:
    """Blocks of fn (threads each, shared_bytes of dynamic shared memory) one
    SM holds at once: the driver's occupancy calculator (registers, shared
    memory, threads and blocks an SM)."""
    context(fn.device)
    return call("cuOccupancyMaxActiveBlocksPerMultiprocessor", fn.handle, threads, shared_bytes)


def _shared_optin_limit(ordinal: int) -> int:
    attr = api().CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return call("cuDeviceGetAttribute", attr, call("cuDeviceGet", ordinal))


def load(image: bytes, kernel: str, ordinal: int, shared_bytes: int) -> Function:
    """The kernel's function in image (cubin, or NUL-terminated PTX) on a device; cached.
    Opts the function in to shared_bytes of dynamic shared memory when above 48 KiB."""
    key = (hashlib.sha256(image).hexdigest(), ordinal, kernel)
    with _load_lock:
        fn = _functions.get(key)
        if fn is None:
            context(ordinal)
            module = call("cuModuleLoadData", image)
            fn = Function(module, call("cuModuleGetFunction", module, kernel.encode()), ordinal)
            _functions[key] = fn
        # Per function, not per load: two artifacts may share a cubin with different sizes.
        if shared_bytes > max(STATIC_SHARED_LIMIT, _shared_optin.get(key, 0)):
            _opt_in_shared(fn, kernel, shared_bytes)
            _shared_optin[key] = shared_bytes
    return fn


def _opt_in_shared(fn: Function, kernel: str, shared_bytes: int) -> None:
    limit = _shared_optin_limit(fn.device)
    if shared_bytes > limit:
        raise TkcError(f"kernel '{kernel}' needs {shared_bytes} bytes of shared memory; "
                       f"device {fn.device} allows {limit} per block")
    attr = api().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    call("cuFuncSetAttribute", fn.handle, attr, shared_bytes)


def loaded() -> list[tuple]:
    """(cubin sha256, device, kernel) of every function loaded so far."""
    return list(_functions)


def params_array(values: list):
    """A void*[] pointing at each ctypes value (kept alive by the caller)."""
    return (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))


class Params:
    """Parameters whose void*[] is built already, at `address`, in `storage`
    (which keeps that memory alive): what a launch passes as kernelParams.
    frame.py's frames make them; a launcher keeps one per distinct set of
    values, so it is one object, referring to nothing that refers back."""

    __slots__ = ("storage", "address")

    def __init__(self, storage, address: int):
        self.storage, self.address = storage, address


def launch(fn: Function, grid, block, shared_bytes: int, stream: int, values: list,
           cluster=(1, 1, 1), current: bool = False) -> None:
    """Launch fn; values are ctypes objects in the kernel's parameter order
    (a Params, or any list: its void*[] is then built here). current: the
    caller has made fn's device's context current already."""
    cu = _cuda or api()
    if not current:
        context(fn.device)  # a thread torch never touched has no current context
    if isinstance(values, Params):
        address = values.address
    else:
        array = params_array(values)  # alive until the call returns
        address = ctypes.addressof(array)
    config = _launch_config(tuple(grid), tuple(block), shared_bytes, stream, tuple(cluster))
    err, = cu.cuLaunchKernelEx(config, fn.handle, address, 0)
    if err:
        _check(cu, err, "cuLaunchKernelEx")


def launcher(fn: Function, grid, block, shared_bytes: int, cluster=(1, 1, 1)):
    """go(stream, params): `launch` with this grid, block and shared
    memory bound once (a prepared launch calls it per op call; `launch`
    itself, whose grid changes between calls, binds nothing, so that a call
    builds no closure). The caller makes the context current first."""
    cu = _cuda or api()
    handle = fn.handle
    grid, block, cluster = tuple(grid), tuple(block), tuple(cluster)
    configs: dict = {}  # stream -> this launch's CUlaunchConfig on it

    def go(stream: int, params: Params) -> None:   # (params held here: a cache another thread
        # clears may have dropped it, and its buffer must live until cuLaunchKernelEx copies it)
        config = configs.get(stream)
        if config is None:
            if len(configs) >= CACHE_LIMIT:
                configs.clear()
            config = configs[stream] = _new_config(grid, block, shared_bytes, stream, cluster)
        err, = cu.cuLaunchKernelEx(config, handle, params.address, 0)
        if err:
            _check(cu, err, "cuLaunchKernelEx")
    return go


def _launch_config(grid, block, shared_bytes: int, stream: int, cluster):
    """The CUlaunchConfig of a launch, made once per distinct launch shape."""
    key = (grid, block, shared_bytes, stream, cluster)
    config = _configs.get(key)
    if config is None:
        if len(_configs) >= CACHE_LIMIT:
            _configs.clear()
        config = _configs[key] = _new_config(grid, block, shared_bytes, stream, cluster)
    return config


def _new_config(grid, block, shared_bytes: int, stream: int, cluster):
    """Every launch allows programmatic stream serialization: a kernel's first
    instructions wait for the grid before it and then let the next launch
    (tkc/lowering/walker.py, _grid_dependency), so the next kernel's blocks
    are scheduled while this one's last blocks run and its launch latency
    hides behind them (H200, eager, with and without the attribute: 2048^3
    4% faster, LayerNorm 16384x1024 forward 7%; docs/tile-ir.md). A kernel
    before ours that never lets dependents launch (torch's) lets ours
    launch at its completion, as without it."""
    driver = api()
    attrs = []
    if cluster != (1, 1, 1):
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        attrs.append(attr)
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    attrs.append(attr)
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared_bytes
    config.hStream = driver.CUstream(stream)
    config.attrs = attrs
    config.numAttrs = len(attrs)
    return config
