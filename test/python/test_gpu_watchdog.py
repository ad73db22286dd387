"""test/gpu/conftest.py's watchdog: a test that hangs (a kernel that deadlocks
never returns) ends the run after TKC_GPU_TEST_TIMEOUT seconds with every
thread's stack in the output, instead of holding the GPU until the step's
time limit; tests that finish are untouched."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CONFTEST = Path(__file__).parents[1] / "gpu" / "conftest.py"


def _run(tmp_path, body: str):
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text(f"import time\n\n\ndef test_one():\n    {body}\n")
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TKC_GPU_TEST_TIMEOUT": "2"})
    return r.returncode, r.stdout + r.stderr, time.monotonic() - start


def test_a_hanging_test_ends_the_run_and_is_named(tmp_path):
    rc, out, took = _run(tmp_path, "time.sleep(60)")
    assert rc != 0 and took < 30
    assert "Timeout (0:00:02)!" in out and 'test_one.py", line 5 in test_one' in out


def test_a_test_that_finishes_is_untouched(tmp_path):
    rc, out, _ = _run(tmp_path, "time.sleep(0.1)")
    assert rc == 0 and "1 passed" in out and "Timeout" not in out
