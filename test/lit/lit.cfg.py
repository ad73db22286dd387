# lit configuration for tkc: .mlir and .py tests with RUN lines, checked
# with FileCheck. Run with `lit -sv test/lit`.
#
# Tools on PATH in RUN lines: tkc (the console script, or a shim running
# `python3 -m tkc.cli` when it is not installed), FileCheck, not, count
# (from the `llvm` Python package's bin/ folder). Substitutions: %python.
# Inputs that are not tests (kernel files, included IR) go in Inputs/ folders.
import os
import shutil
import sys

import lit.formats

config.name = "tkc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Inputs", "Output", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)

_repo = os.path.dirname(os.path.dirname(config.test_source_root))


def _llvm_bin():
    import llvm
    return os.path.join(os.path.dirname(llvm.__file__), "bin")


def _tkc_dir():
    """Folder holding a `tkc` executable: the installed script, else a shim."""
    here = os.path.join(os.path.dirname(sys.executable), "tkc")
    if os.path.exists(here):
        return os.path.dirname(here)
    found = shutil.which("tkc")
    if found:
        return os.path.dirname(found)
    shim_dir = os.path.join(config.test_source_root, "Output", "bin")
    os.makedirs(shim_dir, exist_ok=True)
    shim = os.path.join(shim_dir, "tkc")
    with open(shim, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" -m tkc.cli "$@"\n')
    os.chmod(shim, 0o755)
    return shim_dir


_path = [_tkc_dir(), _llvm_bin(), os.path.dirname(sys.executable),
         config.environment.get("PATH", os.environ.get("PATH", ""))]
config.environment["PATH"] = os.pathsep.join(_path)
# The working tree's tkc, whatever is installed.
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in (_repo, os.environ.get("PYTHONPATH", "")) if p)
# Keep tests away from the user's artifact cache; never print tracebacks
# unless asked to in the caller's environment.
config.environment["TKC_CACHE_DIR"] = os.path.join(config.test_source_root, "Output", "cache")
for var in ("TKC_DEBUG", "TKC_OFFLINE", "HOME"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%python", sys.executable))
