"""Data-dependent TMA on the GPU, against PyTorch: pipelined loads of pages a
block table names (a paged sum; a gather-GEMM whose ring slot takes two pages
in its subtiles, persistent), a load into a subtile chosen at run time, and tiles stored by TMA as loaded
(once per work item of a persistent kernel, or ring slots: released only
after the store has read them).
Some indices are out of range (past the end, negative, and 2**26 + 1, whose
row 2**32 + 64 wraps to row 64 if narrowed to 32 bits unchecked): those pages
read as zeros, as in the interpreter (test/python/test_gather.py).

The kernels are test/lit/passes/pipeline-gather.py's, loaded by
test/python/gather_kernels.py (as for the interpreter tests) and bound here
at module level so that `tkc build test/gpu/test_gather_gpu.py` builds them."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from gather_kernels import (copy_pages, copy_square, copy_wide, gather_copy,  # noqa: E402,F401
                            gather_gemm, gather_gemm_copy, paged_sum, pick_page)

pytestmark = pytest.mark.gpu
try:  # the kernels must import without torch: `tkc build` reads this file
    import torch
except ImportError:
    torch = None

PAGE = 64


def _table(shape, n_pages, bad):
    t = torch.randint(0, n_pages, shape, dtype=torch.int32, device="cuda")
    if bad:
        flat = t.view(-1)
        flat[1], flat[2], flat[-1] = n_pages, 2**26 + 1, -1
    return t


def _pages(pages, table, rows=PAGE):
    """pages[i] for each index of table (zeros out of range), as float32 [..., rows, C]."""
    p = pages.view(-1, rows, pages.shape[-1]).float()
    ok = (table >= 0) & (table < p.shape[0])
    got = p[torch.where(ok, table, 0).long()]
    return got * ok[..., None, None]


@pytest.mark.parametrize("bad", [False, True])
def test_paged_sum(bad):
    P, B, J = 9, 5, 7
    pages = torch.randn(P * PAGE, 64, device="cuda", dtype=torch.bfloat16)
    table = _table((B, J), P, bad)
    out = torch.full((B, 1, PAGE, 64), float("nan"), device="cuda")
    paged_sum(pages, table, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out[:, 0], _pages(pages, table).sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("T,K,bad", [(8, 256, False), (263, 512, True)])
def test_gather_gemm(T, K, bad):
    """Odd T: the last block's second page index reads past the table (zeros)."""
    P = 31
    pages = torch.randn(P * PAGE, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, 64, device="cuda", dtype=torch.bfloat16)
    table = _table((1, T), P, bad)
    rows = -(-T // 2) * 2
    out = torch.full((rows * PAGE, 64), float("nan"), device="cuda")
    gather_gemm(pages, table, w, out)
    torch.cuda.synchronize()
    padded = torch.cat([table[0], table.new_full((rows - T,), -1)])
    a = _pages(pages, padded).reshape(rows * PAGE, K)
    torch.testing.assert_close(out, a @ w.float(), rtol=1e-3, atol=1e-2)


def test_pick_page():
    P, T = 6, 11
    pages = torch.randn(P * PAGE, 64, device="cuda", dtype=torch.bfloat16)
    table = _table((1, T), P, bad=True)
    out = torch.full((T * PAGE, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    pick_page(pages, table, out)
    torch.cuda.synchronize()
    assert torch.equal(out.float(), _pages(pages, table[0]).reshape(T * PAGE, 64))


@pytest.mark.parametrize("kernel,rows,T", [(copy_pages, PAGE, 1000), (copy_wide, 256, 400)])
def test_copy_pages(kernel, rows, T):
    """Persistent, several items an SM: each slot is reloaded while earlier
    stores may be in flight."""
    P = 37
    pages = torch.randn(P * rows, rows if kernel is copy_wide else 64, device="cuda", dtype=torch.bfloat16)
    table = _table((1, T), P, bad=True)
    out = torch.full((T * rows, pages.shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(pages, table, out)
    torch.cuda.synchronize()
    assert torch.equal(out.float(), _pages(pages, table[0], rows).reshape(T * rows, -1))


def test_copy_square():
    P, T = 23, 1000
    pages = torch.randn(P * PAGE, 64, device="cuda", dtype=torch.bfloat16)
    table = _table((1, T), P, bad=True)
    out, sq = (torch.full((T * PAGE, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
               for _ in range(2))
    twice = torch.full((T * PAGE, 64), float("nan"), device="cuda")
    copy_square(pages, table, out, sq, twice)
    torch.cuda.synchronize()
    ref = _pages(pages, table[0]).reshape(T * PAGE, 64)
    assert torch.equal(out.float(), ref)
    assert torch.equal(sq, (ref * ref).bfloat16())
    assert torch.equal(twice, 2 * ref)


def test_gather_copy():
    P, B, J = 29, 300, 9
    pages = torch.randn(P * PAGE, 64, device="cuda", dtype=torch.bfloat16)
    table = _table((B, J), P, bad=True)
    out = torch.full((B, 1, J * PAGE, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    gather_copy(pages, table, out)
    torch.cuda.synchronize()
    assert torch.equal(out[:, 0].float(), _pages(pages, table).reshape(B, J * PAGE, 64))


def test_gather_gemm_copy():
    P, T = 13, 40
    pages = torch.randn(P * PAGE, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(T * PAGE, 64, device="cuda", dtype=torch.bfloat16)
    table = _table((1, T), P, bad=True)
    a_out = torch.full((2 * T * PAGE, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = torch.full((PAGE, 64), float("nan"), device="cuda")
    gather_gemm_copy(pages, table, w, a_out, out)
    torch.cuda.synchronize()
    a = _pages(pages, table[0])                                  # [T, 64, 64]
    assert torch.equal(a_out.float(), torch.cat([a.reshape(T * PAGE, 64), w.float()]))
    ref = torch.einsum("tik,tkj->ij", a, w.float().view(T, PAGE, 64))
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-2)
