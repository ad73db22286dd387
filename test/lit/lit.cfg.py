# lit configuration for tkc: .mlir and .py tests with RUN lines, checked
# with FileCheck. Run with `lit -sv test/lit`.
#
# Tools on PATH in RUN lines: tkc (this tree's, run by tkc_server.py: the
# CLI without a fresh interpreter per RUN line), FileCheck, not, count
# (from the `llvm` Python package's bin/ folder). Substitutions: %python.
# Inputs that are not tests (kernel files, included IR) go in Inputs/ folders.
import os
import sys
import time

import lit.formats

config.name = "tkc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "tkc_server.py", "Inputs", "Output", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)

_repo = os.path.dirname(os.path.dirname(config.test_source_root))


def _llvm_bin():
    import llvm
    return os.path.join(os.path.dirname(llvm.__file__), "bin")


def _tkc_dir():
    """Folder holding the `tkc` the RUN lines call: tkc_server.py's client,
    served by one server for this lit run (started here, in lit's process; it
    exits with lit)."""
    import subprocess
    import tempfile
    sys.path.insert(0, config.test_source_root)
    from tkc_server import CLIENT
    sock = os.path.join(tempfile.mkdtemp(prefix="tkc-lit-"), "tkc.sock")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (_repo, os.environ.get("PYTHONPATH", "")) if p),
        OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # no thread pools to fork
    subprocess.Popen([sys.executable, os.path.join(config.test_source_root, "tkc_server.py"), sock],
                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for _ in range(100):  # bound in ~0.1 s; later, clients would run tkc themselves
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    shim_dir = os.path.join(config.test_source_root, "Output", "bin")
    os.makedirs(shim_dir, exist_ok=True)
    shim = os.path.join(shim_dir, "tkc")
    with open(shim, "w") as f:
        f.write(CLIENT.format(python=sys.executable, sock=sock))
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
