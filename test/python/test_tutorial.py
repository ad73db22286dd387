"""docs/tutorial.md runs, so that it cannot rot.

Its fenced blocks are taken in order:
- ```python blocks run in one module namespace, as a reader's session would; each
  is compiled with the Markdown file as its file name and its own line numbers, so a
  traceback or a located tkc error points at the tutorial's line. A block whose first line
  is `# gpu` runs only on a Hopper GPU; one whose first line is `# NAME.py` is also written
  to NAME.py (for the `tkc` commands).
- ```sh blocks run in bash, in the folder of those files, with `tkc` the driver of this
  checkout (`python -m tkc.cli`); every command must succeed.
- a ```text block right after an ```sh block lists lines that the commands print: each
  must occur in their output.
Plus: the blocks name only public attributes of `tkc` (what `import tkc` gives).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("mlir")
pytest.importorskip("torch")  # step 4

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tutorial.md"


def blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, code, line of the code's first line) of each fenced block."""
    out = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        out.append((m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1))
    return out


def gpu_missing() -> str:
    """Why a `# gpu` block cannot run here ('' when it can)."""
    import torch
    if not torch.cuda.is_available():
        return "no CUDA device"
    if torch.cuda.get_device_capability() != (9, 0):
        return f"{torch.cuda.get_device_name()} is not a Hopper GPU (sm_90a)"
    return ""


def run_python(code: str, line: int, ns: dict) -> None:
    """Exec a block with tracebacks at the tutorial's own lines."""
    compiled = compile("\n" * (line - 1) + code, str(DOC), "exec")
    try:
        exec(compiled, ns)
    except Exception as e:
        raise AssertionError(f"docs/tutorial.md:{line}: the python block raised "
                             f"{type(e).__name__}: {e}") from e


def run_sh(code: str, line: int, cwd: Path) -> str:
    script = f'set -eo pipefail\ntkc() {{ "{sys.executable}" -m tkc.cli "$@"; }}\n{code}'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (f"docs/tutorial.md:{line}: the sh block failed "
                                  f"(exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def run_tutorial(tmp_path: Path, gpu: bool) -> int:
    """Run the blocks in order (the `# gpu` ones only if gpu); the python blocks run."""
    module = types.ModuleType("tkc_tutorial")
    sys.modules[module.__name__] = module
    ns, ran, output, last = module.__dict__, 0, None, None
    try:
        for lang, code, line in blocks(DOC.read_text()):
            first = code.split("\n", 1)[0].strip()
            if lang == "python" and (gpu or first != "# gpu"):
                file = re.fullmatch(r"#\s*(\w+\.py)", first)
                if file:
                    (tmp_path / file.group(1)).write_text(code)
                run_python(code, line, ns)
                ran += 1
            elif lang == "sh":
                output = run_sh(code, line, tmp_path)
            elif lang == "text":
                assert last == "sh", f"docs/tutorial.md:{line}: a text block follows an sh block"
                for want in filter(None, (s.strip() for s in code.splitlines())):
                    assert want in output, f"docs/tutorial.md:{line}: {want!r} is not in the output"
            last = lang
    finally:
        del sys.modules[module.__name__]
    return ran


def test_the_tutorial_runs(tmp_path):
    """Every block but the `# gpu` ones: a CPU is enough."""
    assert run_tutorial(tmp_path, gpu=False) >= 7


def test_the_tutorial_runs_on_a_gpu(tmp_path):
    """All of it, the `# gpu` blocks too (launches on a Hopper GPU)."""
    if gpu_missing():
        pytest.skip(f"the tutorial's # gpu blocks need a Hopper GPU: {gpu_missing()}")
    assert run_tutorial(tmp_path, gpu=True) >= 8


def test_the_tutorial_names_only_public_tkc_attributes():
    import tkc
    public = set(dir(tkc)) | set(getattr(tkc, "_TORCH_OPS", ()))
    hidden = {"frontend", "dialect", "passes", "lowering", "interpreter", "compiler", "runtime",
              "torchops", "kernels", "dsl"}
    for lang, code, line in blocks(DOC.read_text()):
        if lang != "python":
            continue
        for name in re.findall(r"\btkc\.(\w+)", code):
            assert name in public and name not in hidden, \
                f"docs/tutorial.md:{line}: tkc.{name} is not public API (docs/dsl.md)"
