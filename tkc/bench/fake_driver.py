"""A fake CUDA driver, for measuring and testing tkc's host path without a GPU.

`fake_driver()` swaps tkc.runtime's cuda-bindings module for Python stubs that
return success at the cost of one Python call each, and makes the runtime's
argument checks and the ops' device checks (tkc.torchops.checks) take CPU
tensors as if they lived on cuda:0, and fake tensors (no memory: `tkc tune
--dry-run` makes its examples so) as if they had some. Every other check
still runs, so what a call costs here is tkc's own host work plus a stub
launch.
"""
from __future__ import annotations

import contextlib
import ctypes
from types import SimpleNamespace


class _Handle(int):
    """A CUcontext/CUfunction stand-in: cuda-bindings handles convert with int()."""


class _Stream(_Handle):
    """A CUstream stand-in, true even for stream 0 (as cuda-bindings' objects
    are)."""

    def __bool__(self):
        return True


def fake_cuda():
    """A namespace with the cuda.bindings.driver calls tkc.runtime.driver makes,
    each returning (CUDA_SUCCESS, ...) at the cost of one Python call."""
    ok = 0
    state = SimpleNamespace(current=_Handle(0), launches=0, last=None, set_current=0, result=ok)

    def set_current(ctx):
        state.current = ctx
        state.set_current += 1
        return (ok,)

    def launch(*args):
        state.launches += 1
        state.last = args
        return (state.result,)

    return SimpleNamespace(
        stand_in=True,   # (tkc.runtime.driver.is_fake: its launches are stubs)
        CUresult=SimpleNamespace(CUDA_SUCCESS=ok),
        CUdevice_attribute=SimpleNamespace(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=75,
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=76,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=97,
            CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT=16),
        CUfunction_attribute=SimpleNamespace(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8),
        CUstream=_Stream,
        cuInit=lambda flags: (ok,),
        cuDeviceGet=lambda ordinal: (ok, ordinal),
        cuDevicePrimaryCtxRetain=lambda dev: (ok, _Handle(1000 + dev)),
        cuCtxGetCurrent=lambda: (ok, state.current),
        cuCtxSetCurrent=set_current,
        cuDeviceGetAttribute=lambda attr, dev: (ok, {75: 9, 76: 0, 16: 132}.get(attr, 228 * 1024)),
        cuModuleLoadData=lambda image: (ok, _Handle(1)),
        cuModuleGetFunction=lambda module, name: (ok, _Handle(2)),
        cuFuncSetAttribute=lambda *args: (ok,),
        cuMemAlloc=lambda nbytes: (ok, _Handle(0x7000)), cuMemsetD8=lambda *args: (ok,),
        # two blocks an SM (a real one's count comes from registers and shared memory)
        cuOccupancyMaxActiveBlocksPerMultiprocessor=lambda fn, threads, shared: (ok, 2),
        cuLaunchKernelEx=launch,
        CUlaunchAttribute=_Struct, CUlaunchConfig=_Struct, CUlaunchAttributeID=_Anything(),
        cuTensorMapEncodeTiled=lambda *args: (ok, _TensorMap()),
        cuuint64_t=int, cuuint32_t=int,
        CUtensorMapDataType=_Anything(), CUtensorMapInterleave=_Anything(),
        CUtensorMapSwizzle=_Anything(), CUtensorMapL2promotion=_Anything(),
        CUtensorMapFloatOOBfill=_Anything(),
        state=state,
    )


class _Anything:
    """An enum namespace whose every member is 0."""

    def __getattr__(self, name):
        return 0


class _Struct:
    """A cuda-bindings struct stand-in (CUlaunchConfig, CUlaunchAttribute): any
    field reads as a nested struct until set."""

    def __getattr__(self, name):
        value = _Struct()
        setattr(self, name, value)
        return value


class _TensorMap:
    """A CUtensorMap stand-in: 128 zero bytes."""

    def __init__(self):
        self.raw = ctypes.create_string_buffer(128)

    def getPtr(self):  # noqa: N802 (cuda-bindings' name)
        return ctypes.addressof(self.raw)


@contextlib.contextmanager
def fake_driver(bf16_from_f16: bool = False):
    """Within: tkc.runtime uses fake_cuda(), and tensors the full checks see
    claim to be on cuda:0 (numpy f16 arrays claim bf16 if bf16_from_f16).
    Yields the fake (its .state counts launches); restores everything after."""
    from tkc.runtime import args, driver
    from tkc.runtime.launch import reset_all
    tables = (driver._contexts, driver._functions, driver._shared_optin,
              driver._configs, driver._zeros)
    saved = (driver._cuda, args.view, [dict(t) for t in tables], args.memory_needed)
    real_view = args.view

    def view(obj, stream=None):
        v = real_view(obj, stream)
        if v is not None and bf16_from_f16 and v.dtype == "f16":
            v = v._replace(dtype="bf16")
        return v and v._replace(device="cuda")

    fake = fake_cuda()
    checks = _op_checks()
    saved_type = checks and checks.DEVICE_TYPE
    try:   # whatever fails on the way in, the finally restores the real runtime
        driver._cuda, args.view = fake, view
        args.memory_needed = False   # (a stub launch reads no memory: fake tensors may go in)
        _forget_plans()  # the ops' prepared launches hold the driver they were made with,
        reset_all()  # and the kernels' launchers its functions and tensor maps
        if checks:
            checks.DEVICE_TYPE = "cpu"
        for table in tables:  # what the real driver made stays out of the fake's way
            table.clear()
        yield fake
    finally:
        _forget_plans()
        reset_all()
        driver._cuda, args.view, args.memory_needed = saved[0], saved[1], saved[3]
        if checks:
            checks.DEVICE_TYPE = saved_type
        for table, old in zip(tables, saved[2]):
            table.clear()
            table.update(old)


def _forget_plans() -> None:
    """Drop the torch ops' plans (tkc.torchops.plans), where torch is installed."""
    try:
        from ..torchops import plans
    except ImportError:
        return
    plans.forget()


def _op_checks():
    """tkc.torchops.checks (the ops' device check), where torch is installed."""
    try:
        from ..torchops import checks
    except ImportError:  # no torch: the runtime alone is measured
        return None
    return checks
