"""Shared pieces of the CPU tests live in modules here (lanesim.py, helpers.py),
never in test files: put this folder on sys.path so tests import them by name,
whatever pytest's import mode, and offer lanesim's fixture to every test."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lanesim import lane_major_io  # noqa: E402,F401  (a fixture)
import pytest  # noqa: E402


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
