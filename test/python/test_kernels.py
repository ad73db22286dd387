"""The kernel library on the CPU: numbers through the interpreter, and every
kernel compiles for sm_90a to a cubin with zero spills (the library's, and
every attention kernel a tuned table may pick: the library builds only the
common shapes')."""
import math

import numpy as np
import pytest

from tkc.kernels import attention_fwd, gemm, gemm_hopper, library, reference
from tkc.kernels.attention_tuned import all_kernels
from tkc.kernels.reference import round_bf16


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def check_gemm_interpreted(kern, out, m, n, k, seed, transpose_b=False):
    """C = A @ B (or A @ B^T) through the interpreter: every element written, numbers as numpy's."""
    rng = np.random.default_rng(seed)
    a = round_bf16(rng.standard_normal((m, k)))
    b = round_bf16(rng.standard_normal((n, k) if transpose_b else (k, n)))
    c = np.full((m, n), np.nan, dtype=np.float32)
    kern.interpret(a, b, c)
    assert not np.isnan(c).any()
    assert rel_err(c, reference.gemm(a, b.T if transpose_b else b)) < (1e-2 if out == "bf16" else 1e-6)


@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_gemm_interpreted(out):
    check_gemm_interpreted(gemm(out, BM=64, BN=64, BK=32, WM=2, WN=2), out, 128, 192, 96, seed=0)


def test_gemm_default_tiles_interpreted():
    check_gemm_interpreted(gemm("f32"), "f32", 128, 256, 64, seed=1)


@pytest.mark.parametrize("out", ["bf16", "f32"])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_gemm_hopper_interpreted(out, transpose_b):
    """The staged, persistent library GEMM on the interpreter's 4
    SMs: 6 items, so two blocks take a second one; 5 K steps over the
    4-slot ring, so slots and barrier phases wrap inside a work item."""
    check_gemm_interpreted(gemm_hopper(out, transpose_b=transpose_b), out, 384, 512, 320,
                           seed=2, transpose_b=transpose_b)


def test_gemm_hopper_sass(artifact_cache):
    """wgmma (HGMMA, not HMMA), TMA loads (1 box of A, 4 panels of B) and
    TMA stores (4 finish tiles, in the three places the finish is overlapped:
    inside the next item's loop, after a short loop, after the last item),
    no local memory, no wgmma serialisation."""
    from tkc.sass import cuobjdump, disassemble, opcodes
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    art = gemm_hopper("bf16").build()
    ops = opcodes(disassemble(art.cubin))
    assert ops.get("HGMMA", 0) >= 4 and ops["HGMMA"] % 4 == 0, ops
    assert ops.get("UTMALDG") == 5 and ops.get("UTMASTG") == 12, ops
    assert not art.manifest["resources"]["wgmma_serialized"]
    assert "HMMA" not in ops and "LDL" not in ops and "STL" not in ops
    assert art.manifest["resources"]["spill_stores"] == 0


def check_attention_interpreted(kern, D, N, seed):
    """softmax(Q K^T * scale) V for B=1, H=2 through the interpreter."""
    rng = np.random.default_rng(seed)
    q, k, v = (round_bf16(rng.standard_normal((1, 2, N, D))) for _ in range(3))
    o = np.full((1, 2, N, D), np.nan, dtype=np.float32)
    scale = 1.0 / math.sqrt(D)
    kern.interpret(q, k, v, o, scale)
    assert not np.isnan(o).any()
    assert rel_err(o, reference.attention(q, k, v, scale)) < 1e-2


@pytest.mark.parametrize("D,kvsub", [(64, 32), (128, 16)])
def test_attention_interpreted(D, kvsub):
    check_attention_interpreted(attention_fwd(D, KV_SUB=kvsub), D, 128, seed=D)


def _built() -> list:
    found = library() + [attention_fwd(64), attention_fwd(128, KV_SUB=16)]   # + the Figure 1 examples
    names = {k.name for k in found}
    return found + [k for k in all_kernels() if k.name not in names]


@pytest.mark.parametrize("kern", _built(), ids=lambda k: k.name)
def test_library_kernel_compiles_without_spills(kern):
    # The machine's artifact cache: its key is the kernel's source and the
    # compiler's, so an entry found there is this compiler's build of it (a
    # fresh machine compiles every kernel; a second run reads them back).
    art = kern.build()
    res = art.manifest["resources"]
    assert art.cubin[:4] == b"\x7fELF"
    # no spills, unless the kernel declares an allowance (tkc.kernel(spills=N): the
    # attention backward's, at its definition)
    assert res["spill_stores"] <= kern.spills and res["spill_loads"] <= 3 * kern.spills, res
    assert 0 < res["registers"] <= 255
