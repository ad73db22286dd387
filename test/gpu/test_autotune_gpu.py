"""tkc.autotune end to end on the GPU: a small space tuned with the real
timer (CUDA graphs) and the real output check, the pick recorded and run."""
import pytest

import tkc
from tkc import f32, gl, rt
from tkc.kernels.attention_tuned import all_kernels
from tkc.ops import load, store

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@tkc.autotune(space={"R": [16, 32, 64], "factor": [2.0, 3.0]}, name="test_gpu.scale",
              key=lambda x, y: x.shape[0] // 4096)
def scale(R, factor):
    """y = factor * x with R rows a block; factor 3 is a wrong candidate."""
    @tkc.kernel(warps=1, grid=lambda x, y: (tkc.cdiv(x.r, R),), name=f"gpu_tune_scale_{R}_{factor:g}")
    def k(x: gl(f32, 1, 1, "N", 64), y: gl(f32, 1, 1, "N", 64)):
        t = load(rt(f32, R, 64), x, (0, 0, tkc.block_idx.x, 0))
        store(y, t * factor, (0, 0, tkc.block_idx.x, 0))
    return k


def test_tune_a_small_space_end_to_end(tmp_path, monkeypatch):
    from tkc.tune import tables
    monkeypatch.setattr(tables, "user_path", lambda device=None: tmp_path / "tuned.json")
    x = torch.randn(8192, 64, device="cuda")
    y = torch.zeros_like(x)
    result = scale.tune(x, y, rounds=3)
    status = {(r["config"]["R"], r["config"]["factor"]): r["status"] for r in result.rows}
    assert all(s == "rejected" for (R, f), s in status.items() if f == 3.0)
    assert result.best["factor"] == 2.0 and status[(result.best["R"], 2.0)] == "best"
    assert all(r["us"] > 0 for r in result.rows if r["status"] in ("ok", "best"))
    scale.forget()   # read back from the table
    assert scale.pick((x, y)) == result.best
    scale(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x) and torch.count_nonzero(y) > 0


def _library_spaces() -> list:
    import tkc.torchops  # noqa: F401  (registers the library's spaces)
    from tkc.tune import cli
    return cli._builders([], True)


# `tkc build` of this file: the defaults, and what attention's examples run to make their arguments
KERNELS = [t.kernel(t.default) for t in _library_spaces()] + all_kernels()


def test_every_library_space_s_first_example_runs_its_default():
    """What `tkc tune --library` starts each space with: its first example
    made on the GPU and its default's kernel run on it (the norms' examples
    had gone stale against their kernels' arguments and every norm key
    failed to tune, 12-01; the CPU test checks only the count)."""
    ran = []
    for tuned in _library_spaces():
        example = tuned.examples()[0]
        args = example() if callable(example) else example
        tuned.kernel(tuned.default)(*args)
        torch.cuda.synchronize()
        ran.append(tuned.name)
        del args
    assert len(ran) >= 100
