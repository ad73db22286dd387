"""GPU tests (`pytest -m gpu`) need torch, CUDA and a Hopper (sm_90) GPU.

Without them every test marked `gpu` is skipped with the reason, which is
also printed in the session header, so a CPU-only run says why it skipped.

A kernel that deadlocks never returns, and the whole step then waits for its
time limit (twice 7-9 minutes of the lent GPU's time): a watchdog ends the
run when one test takes longer than TKC_GPU_TEST_TIMEOUT seconds (default
240), printing every thread's stack, so the log names the test that hung.
"""
import faulthandler
import functools
import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA Hopper GPU and prebuilt artifacts")
    global _STDERR  # the run's stderr, not a test's captured one: the watchdog writes there
    _STDERR = os.fdopen(os.dup(2), "w")


def pytest_unconfigure(config):
    _STDERR.close()


@functools.cache
def gpu_missing() -> str:
    """Why the GPU tests cannot run here ('' when they can)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "CUDA is not available (no GPU or no driver)"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return f"the GPU is sm_{major}{minor} ({torch.cuda.get_device_name()}); tkc targets sm_90a"
    return ""


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and gpu_missing():
        skip = pytest.mark.skip(reason=f"GPU tests skipped: {gpu_missing()}")
        for item in gpu_items:
            item.add_marker(skip)


def pytest_report_header(config):
    reason = gpu_missing()
    return f"tkc GPU tests: {'skipped, ' + reason if reason else 'enabled'}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(float(os.environ.get("TKC_GPU_TEST_TIMEOUT", "240")), exit=True,
                                      file=_STDERR)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
