"""Warpgroup mma (wgmma) and setmaxnreg on the GPU, against torch.

Each kernel stages A and B in swizzled shared tiles with group_load (ordinary
shared stores), makes them visible to the async proxy (fence_async + sync),
runs one warpgroup mma variant (A from shared or from registers), waits and
stores. Artifacts: `python3 test/gpu/test_wgmma_gpu.py` builds every kernel
of this file into TKC_CACHE_DIR on a machine with MLIR (then carry the cache).
"""
import pytest

import tkc
from tkc import bf16, f16, f32, gl, rt, st, warpgroup
from tkc.ops import group_load, load, store, zero

pytestmark = pytest.mark.gpu


def _stage(*pairs):
    """group_load each (st, gl, coords), then fence for the async proxy and sync."""
    for s, g, coords in pairs:
        group_load(s, g, coords)
    tkc.fence_async()
    tkc.sync()


@tkc.kernel(warps=4)
def wg_abt_128b(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 128, 64), c: gl(f32, 1, 1, 64, 128)):
    sa, sb = st(bf16, 64, 64, "128b"), st(bf16, 128, 64, "128b")
    _stage((sa, a, (0, 0, 0, 0)), (sb, b, (0, 0, 0, 0)))
    d = warpgroup.mma_ABt(sa, sb, zero(rt(f32, 16, 128)))
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def wg_abt_64b_regs(a: gl(bf16, 1, 1, 64, 32), b: gl(bf16, 1, 1, 64, 32), c: gl(f32, 1, 1, 64, 64)):
    sb = st(bf16, 64, 32, "64b")
    _stage((sb, b, (0, 0, 0, 0)))
    x = load(rt(bf16, 16, 32), a, (0, 0, tkc.warpid(), 0))
    d = warpgroup.mma_ABt(x, sb, zero(rt(f32, 16, 64)))
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def wg_ab_128b(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 64, 128), c: gl(f32, 1, 1, 64, 128)):
    sa, sb = st(bf16, 64, 64, "128b"), st(bf16, 64, 128, "128b")
    _stage((sa, a, (0, 0, 0, 0)), (sb, b, (0, 0, 0, 0)))
    d = warpgroup.mma_AB(sa, sb, zero(rt(f32, 16, 128)))
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def wg_ab_64b_regs(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 64, 32), c0: gl(f32, 1, 1, 64, 32),
                   c: gl(f32, 1, 1, 64, 32)):
    sb = st(bf16, 64, 32, "64b")
    _stage((sb, b, (0, 0, 0, 0)))
    x = load(rt(bf16, 16, 64), a, (0, 0, tkc.warpid(), 0))
    d = load(rt(f32, 16, 32), c0, (0, 0, tkc.warpid(), 0))
    warpgroup.mma_AB(d, x, sb)  # accumulates onto c0
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def wg_atb_64b(a: gl(f16, 1, 1, 32, 64), b: gl(f16, 1, 1, 32, 64), c: gl(f32, 1, 1, 64, 64)):
    sa, sb = st(f16, 32, 64, "64b"), st(f16, 32, 64, "64b")
    _stage((sa, a, (0, 0, 0, 0)), (sb, b, (0, 0, 0, 0)))
    d = warpgroup.mma_AtB(sa, sb, zero(rt(f32, 16, 64)))
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def wg_atbt_128b(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 256, 64), c: gl(f32, 1, 1, 64, 256)):
    sa, sb = st(bf16, 64, 64, "128b"), st(bf16, 256, 64, "128b")
    _stage((sa, a, (0, 0, 0, 0)), (sb, b, (0, 0, 0, 0)))
    d = warpgroup.mma_AtBt(sa, sb, zero(rt(f32, 16, 256)))
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4, grid=lambda a, b, c: (2, 2))
def wg_gemm_32b(a: gl(bf16, 1, 1, 128, 64), b: gl(bf16, 1, 1, 128, 64), c: gl(f32, 1, 1, 128, 128)):
    """c = a @ b.T by 64 x 64 blocks, K in steps of 16 (32-byte swizzle), one group per step."""
    bm, bn = tkc.block_idx.y, tkc.block_idx.x
    sa, sb = st(bf16, 64, 16, "32b"), st(bf16, 64, 16, "32b")
    d = zero(rt(f32, 16, 64))
    for kt in tkc.range(4):
        _stage((sa, a, (0, 0, bm, kt)), (sb, b, (0, 0, bn, kt)))
        warpgroup.mma_ABt(d, sa, sb)
        warpgroup.mma_async_wait(d)
        tkc.sync()  # everyone done reading before the next stage overwrites
    store(c, d, (0, 0, bm * 4 + tkc.warpid(), bn))


@tkc.kernel(warps=8)
def wg_setmaxnreg(b: gl(bf16, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
    """Warpgroup 1 stages b and gives registers away; warpgroup 0 takes them and computes."""
    sb = st(bf16, 64, 64)
    with tkc.if_(tkc.warpgroupid() == 1):
        group_load(sb, b, (0, 0, 0, 0), warps=4)
        tkc.fence_async()
    tkc.sync()
    with tkc.if_(tkc.warpgroupid() == 1):
        warpgroup.decrease_registers(40)
    with tkc.else_():
        warpgroup.increase_registers(232)
        d = warpgroup.mma_ABt(sb, sb, zero(rt(f32, 16, 64)))
        warpgroup.mma_async_wait(d)
        store(c, d, (0, 0, tkc.warpid(), 0))


KERNELS = [wg_abt_128b, wg_abt_64b_regs, wg_ab_128b, wg_ab_64b_regs, wg_atb_64b, wg_atbt_128b,
           wg_gemm_32b, wg_setmaxnreg]


# ---------------------------------------------------------------- tests

def _torch():
    return pytest.importorskip("torch")


def _randn(*shape, dtype="bf16"):
    torch = _torch()
    return torch.randn(*shape, device="cuda",
                       dtype=torch.bfloat16 if dtype == "bf16" else torch.float16)


def _check(got, want):
    torch = _torch()
    torch.cuda.synchronize()
    assert not got.isnan().any()
    torch.testing.assert_close(got, want.float(), rtol=1e-4, atol=1e-3)


def _out(*shape):
    torch = _torch()
    return torch.full(shape, float("nan"), device="cuda", dtype=torch.float32)


def test_abt_shared_128b():
    a, b, c = _randn(64, 64), _randn(128, 64), _out(64, 128)
    wg_abt_128b(a, b, c)
    _check(c, a.float() @ b.float().T)


def test_abt_registers_64b():
    a, b, c = _randn(64, 32), _randn(64, 32), _out(64, 64)
    wg_abt_64b_regs(a, b, c)
    _check(c, a.float() @ b.float().T)


def test_ab_shared_128b():
    a, b, c = _randn(64, 64), _randn(64, 128), _out(64, 128)
    wg_ab_128b(a, b, c)
    _check(c, a.float() @ b.float())


def test_ab_registers_64b_accumulates():
    torch = _torch()
    a, b, c = _randn(64, 64), _randn(64, 32), _out(64, 32)
    c0 = torch.randn(64, 32, device="cuda")
    wg_ab_64b_regs(a, b, c0, c)
    _check(c, a.float() @ b.float() + c0)


def test_atb_f16_64b():
    a, b, c = _randn(32, 64, dtype="f16"), _randn(32, 64, dtype="f16"), _out(64, 64)
    wg_atb_64b(a, b, c)
    _check(c, a.float().T @ b.float())


def test_atbt_128b_n256():
    a, b, c = _randn(64, 64), _randn(256, 64), _out(64, 256)
    wg_atbt_128b(a, b, c)
    _check(c, a.float().T @ b.float().T)


def test_gemm_32b_k_loop_and_grid():
    a, b, c = _randn(128, 64), _randn(128, 64), _out(128, 128)
    wg_gemm_32b(a, b, c)
    _check(c, a.float() @ b.float().T)


def test_setmaxnreg_producer_consumer():
    b, c = _randn(64, 64), _out(64, 64)
    wg_setmaxnreg(b, c)
    _check(c, b.float() @ b.float().T)


if __name__ == "__main__":
    for k in KERNELS:
        art = k.build()
        res = art.manifest["resources"]
        print(f"{k.name}: {res['registers']} registers, "
              f"{res['spill_stores'] + res['spill_loads']} spill bytes")
