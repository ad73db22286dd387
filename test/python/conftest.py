"""Shared pieces of the CPU tests live in modules here (lanesim.py, helpers.py),
never in test files: put this folder on sys.path so tests import them by name,
whatever pytest's import mode, and offer lanesim's fixture to every test."""
import gc
import os
import sys
import types

# One BLAS/OpenMP thread a process: xdist runs a worker per core already, and
# OpenBLAS's extra threads only spin against the other worker (and lit, run
# beside pytest): the attention tests' float64 references took 3x the CPU
# time. Set before numpy or torch is imported (conftest comes first, in the
# xdist controller too, whose environment the workers inherit).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lanesim import lane_major_io  # noqa: E402,F401  (a fixture)
import pytest  # noqa: E402

from helpers import MACHINE_CACHE  # noqa: E402  (imported here: before any test runs)


def pytest_collection_finish(session):
    """The cyclic GC, tuned for a test process: what collection imported
    (torch, MLIR, numpy, every test module: most of the heap) is frozen out
    of the collections, which then walk only what the tests made, and a
    young collection waits for 50,000 new objects, not 700 (the interpreter
    and the passes make millions of short-lived ones). GC time 1.6 s -> 0.5 s
    on the attention, torch-op and norm tests; nothing a test sees changes
    (an explicit gc.collect() still collects everything the tests made)."""
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)


@pytest.fixture
def artifact_cache(monkeypatch):
    """For tests that build a kernel only to read its cubin or resources (SASS
    checks, spill counts): build through the machine's artifact cache, as
    test_kernels.py's library test does, never a private one. The key is the
    kernel's source and the compiler's (tkc/runtime/cache.py), so a hit is this
    compiler's build of this kernel: each kernel then compiles once per compiler
    version for the whole run (all xdist workers, and the library test, which
    builds most of them too) and later runs read it back, instead of compiling
    it again into every test's tmp_path. Tests of the cache itself keep their
    own folders. Returns the folder."""
    monkeypatch.setenv("TKC_CACHE_DIR", MACHINE_CACHE)
    return MACHINE_CACHE


@pytest.fixture(autouse=True)
def _fresh_op_plans():
    """The torch ops keep a plan per argument signature, with the kernels
    picked when it was made: tests that replace kernels (the interpreter
    standing in for the GPU) or picks must not see another test's plans."""
    forget = getattr(sys.modules.get("tkc.torchops.plans"), "forget", None)
    if forget:
        forget()
    yield
    forget = getattr(sys.modules.get("tkc.torchops.plans"), "forget", None)
    if forget:
        forget()


# Packages whose patching cannot change what a kernel traces or passes to
# (the torch ops pick kernels and launch them; the runtime and the tuner run
# them): a test may patch them and still share the prepared kernels.
_NOT_COMPILER = ("tkc.torchops", "tkc.runtime", "tkc.tune")
_patched = [False]   # this test patched tkc's compiler: forget its kernels at its end
_real_setattr, _real_delattr = pytest.MonkeyPatch.setattr, pytest.MonkeyPatch.delattr


def _patching(target) -> None:
    """Kernel.interpret keeps each kernel traced and passed once a process
    (tkc/frontend/interpreted.py). Patching tkc's compiler (a pass that drops
    a wait, say) may change what they are: the kept kernels are dropped then,
    and again when the test ends (its kernels were made with the patch)."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "") \
        if isinstance(target, types.ModuleType) else getattr(target, "__module__", "") or ""
    if name.startswith("tkc") and not name.startswith(_NOT_COMPILER):
        from tkc.frontend import interpreted
        interpreted.forget()
        _patched[0] = True


def _setattr(self, target, *args, **kwargs):
    _patching(target)
    return _real_setattr(self, target, *args, **kwargs)


def _delattr(self, target, *args, **kwargs):
    _patching(target)
    return _real_delattr(self, target, *args, **kwargs)


pytest.MonkeyPatch.setattr, pytest.MonkeyPatch.delattr = _setattr, _delattr


@pytest.fixture(autouse=True)
def _fresh_prepared_kernels():
    """A test that patched tkc's compiler leaves none of its kernels to the
    next (_patching)."""
    _patched[0] = False
    yield
    if _patched[0]:
        from tkc.frontend import interpreted
        interpreted.forget()
        _patched[0] = False
