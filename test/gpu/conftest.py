"""GPU tests (`pytest -m gpu`) need torch, CUDA and a Hopper (sm_90) GPU.

Without them every test marked `gpu` is skipped with the reason, which is
also printed in the session header, so a CPU-only run says why it skipped.
"""
import functools

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA Hopper GPU and prebuilt artifacts")


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
