"""tkc.warpgroup from the Python DSL: numbers through the interpreter, the
compiled PTX/cubin (ptxas, no GPU), and located errors at the author's line."""
from __future__ import annotations

import inspect
import re
import shutil

import numpy as np
import pytest

import tkc
from tkc import bf16, f16, f32, gl, rt, st, warpgroup
from tkc.diagnostics import TkcError
from tkc.interpreter.values import round_bf16, round_f16
from tkc.ops import group_load, load, store, zero


# ---------------------------------------------------------------- kernels

@tkc.kernel(warps=4)
def ab_regs_loop(a: gl(bf16, 1, 1, 64, 128), b: gl(bf16, 1, 1, 128, 64), c: gl(f32, 1, 1, 64, 64)):
    """A from registers, B st<32, 64> per k tile, accumulated over 4 k tiles."""
    sb = st(bf16, 32, 64)
    d = zero(rt(f32, 16, 64))
    for kt in tkc.range(4):
        group_load(sb, b, (0, 0, kt, 0))
        tkc.sync()
        x = load(rt(bf16, 16, 32), a, (0, 0, tkc.warpid(), kt))
        warpgroup.mma_AB(d, x, sb)          # accumulate: c defaults to d
        warpgroup.mma_async_wait(d)
        tkc.sync()
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=8)
def abt_two_warpgroups(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 128, 64),
                       c: gl(f32, 1, 1, 128, 128)):
    """Both warpgroups compute a @ b.T; warp w stores its 16 rows at row block w."""
    sa, sb = st(bf16, 64, 64, "128b"), st(bf16, 128, 64)
    group_load(sa, a, (0, 0, 0, 0))
    group_load(sb, b, (0, 0, 0, 0))
    tkc.sync()
    d = warpgroup.mma_ABt(sa, sb, zero(rt(f32, 16, 128)))   # functional form
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def atb(a: gl(f16, 1, 1, 32, 64), b: gl(f16, 1, 1, 32, 32), c0: gl(f32, 1, 1, 64, 32),
        c: gl(f32, 1, 1, 64, 32)):
    sa, sb = st(f16, 32, 64, "64b"), st(f16, 32, 32, "32b")
    group_load(sa, a, (0, 0, 0, 0))
    group_load(sb, b, (0, 0, 0, 0))
    tkc.sync()
    acc = load(rt(f32, 16, 32), c0, (0, 0, tkc.warpid(), 0))
    d = rt(f32, 16, 32)
    warpgroup.mma_AtB(d, sa, sb, acc)     # in place, c given
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def atbt_pending(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 32, 64), c: gl(f32, 1, 1, 64, 64)):
    """Two groups in flight: wait(pending=1) then wait() for both."""
    sa, sb = st(bf16, 64, 64), st(bf16, 32, 64)
    group_load(sa, a, (0, 0, 0, 0))
    group_load(sb, b, (0, 0, 0, 0))
    tkc.sync()
    d0 = warpgroup.mma_AtBt(sa, sb, zero(rt(f32, 16, 32)))
    d1 = warpgroup.mma_AtBt(sa, sb, zero(rt(f32, 16, 32)))
    warpgroup.mma_async_wait(d0, pending=1)
    warpgroup.mma_async_wait(d0, d1)
    store(c, d0, (0, 0, tkc.warpid(), 0))
    store(c, d1, (0, 0, tkc.warpid(), 1))


@tkc.kernel(warps=8)
def producer_consumer_registers(b: gl(bf16, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64)):
    """Warpgroup 1 (the producer: it loaded b) gives registers away, warpgroup 0
    (the consumer) takes them and computes b @ b.T (TK's producer/consumer)."""
    sb = st(bf16, 64, 64)
    group_load(sb, b, (0, 0, 0, 0))
    tkc.sync()
    with tkc.if_(tkc.warpgroupid() == 1):
        warpgroup.decrease_registers(40)
    with tkc.else_():
        warpgroup.increase_registers(232)
        d = warpgroup.mma_ABt(sb, sb, zero(rt(f32, 16, 64)))
        warpgroup.mma_async_wait(d)
        store(c, d, (0, 0, tkc.warpid(), 0))


@tkc.kernel(warps=4)
def guarded(a: gl(bf16, 1, 1, 64, 64), b: gl(bf16, 1, 1, 64, 64), c: gl(f32, 1, 1, 64, 64),
            n: tkc.i32):
    """The software-pipelined edge: S-like products guarded off in the last
    iteration, an accumulation guarded off in the first; each wait counts
    the guarded-off groups (empty) as a real one."""
    sa, sb = st(bf16, 64, 64), st(bf16, 64, 64)
    group_load(sa, a, (0, 0, 0, 0))
    group_load(sb, b, (0, 0, 0, 0))
    tkc.sync()
    acc, total = zero(rt(f32, 16, 64)), zero(rt(f32, 16, 64))
    for j in tkc.range(n + 1):
        s = warpgroup.mma_AB(sa, sb, zero(rt(f32, 16, 64)), when=j < n)   # a b, not in the last
        warpgroup.mma_AB(acc, sa, sb, when=j > 0)                         # acc += a b, not in the first
        warpgroup.mma_async_wait(s, pending=1)   # the first group (s): done either way
        total = total + s                        # while acc's group may run
        warpgroup.mma_async_wait(acc)
    store(c, acc + total, (0, 0, tkc.warpid(), 0))


def _rng(seed):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- numbers

def test_ab_from_registers_accumulates_over_a_loop():
    a = _rng(1).standard_normal((64, 128)).astype(np.float32)
    b = _rng(2).standard_normal((128, 64)).astype(np.float32)
    c = np.full((64, 64), np.nan, np.float32)
    ab_regs_loop.interpret(a, b, c)
    np.testing.assert_allclose(c, round_bf16(a).astype(np.float64) @ round_bf16(b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_guarded_mmas_leave_their_accumulators_and_keep_group_counts(n):
    """when=False: d = c and an empty group, so wait(pending=1) right after
    still retires the first mma's group (the interpreter would report s read
    in flight otherwise): n products of a b in each sum over n + 1 iterations."""
    a = _rng(5).standard_normal((64, 64)).astype(np.float32)
    b = _rng(6).standard_normal((64, 64)).astype(np.float32)
    c = np.full((64, 64), np.nan, np.float32)
    guarded.interpret(a, b, c, n)
    want = 2 * n * (round_bf16(a).astype(np.float64) @ round_bf16(b))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-3)


def test_guarded_mma_ptx_branches_around_the_wgmmas(compiled):
    """Each guarded mma: its wgmmas (and a commit) under a branch, a fence and
    an empty commit on the other arm; ptxas keeps the wgmmas asynchronous
    (no C7514: a commit after the arms' join, or an arm's bare commit, made
    it serialise them)."""
    res = compiled["guarded"]
    ptx = res.ptx
    mmas, commits = (len(re.findall(rf"wgmma\.{x}", ptx)) for x in ("mma_async", "commit_group"))
    # (LLVM may duplicate an arm: counts, not positions) 4 k steps a guarded
    # mma, and a fence before every commit, the empty ones' too
    assert mmas and mmas % 4 == 0 and commits > mmas // 4
    assert len(re.findall(r"wgmma\.fence", ptx)) == commits
    assert not res.manifest["resources"]["wgmma_serialized"], res.manifest["resources"]["ptxas"]


def test_abt_on_two_warpgroups_each_warp_gets_its_rows():
    a = _rng(3).standard_normal((64, 64)).astype(np.float32)
    b = _rng(4).standard_normal((128, 64)).astype(np.float32)
    c = np.full((128, 128), np.nan, np.float32)
    abt_two_warpgroups.interpret(a, b, c)
    want = round_bf16(a).astype(np.float64) @ round_bf16(b).T
    np.testing.assert_allclose(c[:64], want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c[64:], want, rtol=1e-5, atol=1e-4)


def test_atb_with_an_explicit_accumulator():
    a = _rng(5).standard_normal((32, 64)).astype(np.float32)
    b = _rng(6).standard_normal((32, 32)).astype(np.float32)
    c0 = _rng(7).standard_normal((64, 32)).astype(np.float32)
    c = np.full((64, 32), np.nan, np.float32)
    atb.interpret(a, b, c0, c)
    want = round_f16(a).T.astype(np.float64) @ round_f16(b) + c0
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_atbt_two_groups_in_flight():
    a = _rng(8).standard_normal((64, 64)).astype(np.float32)
    b = _rng(9).standard_normal((32, 64)).astype(np.float32)
    c = np.full((64, 64), np.nan, np.float32)
    atbt_pending.interpret(a, b, c)
    want = round_bf16(a).T.astype(np.float64) @ round_bf16(b).T
    np.testing.assert_allclose(c[:, :32], want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c[:, 32:], want, rtol=1e-5, atol=1e-4)


def test_setmaxnreg_kernel_runs_in_the_interpreter():
    b = _rng(10).standard_normal((64, 64)).astype(np.float32)
    c = np.full((64, 64), np.nan, np.float32)
    producer_consumer_registers.interpret(b, c)
    want = round_bf16(b).astype(np.float64) @ round_bf16(b).T
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def _take_registers(c: gl(f32, 1, 1, 16, 16)):
    with tkc.if_(tkc.warpgroupid() == 1):
        warpgroup.decrease_registers(24)
    with tkc.else_():
        warpgroup.increase_registers(240)


def test_setmaxnreg_past_a_shared_sms_allocation_is_refused():
    """One block an SM launches 2 warpgroups with 256 registers a thread (512
    for the two), two blocks with 128: there 24 + 240 would wait forever."""
    c = np.zeros((16, 16), np.float32)
    tkc.kernel(warps=8, name="one_block")(_take_registers).interpret(c)
    with pytest.raises(TkcError, match=r"a block of 2 warpgroups, 2 blocks an SM, launches with 256 "
                                       r"\(128 a thread\), so setmaxnreg would wait forever: at most 232"):
        tkc.kernel(warps=8, blocks_per_sm=2, name="two_blocks")(_take_registers).interpret(c)


def test_the_traced_ir_names_the_ops():
    ir_text = atbt_pending.tile_ir()
    assert ir_text.count('"tk.warpgroup_mma_atbt"') == 2
    assert '"tk.warpgroup_mma_wait"' in ir_text and "pending = 1" in ir_text


# ---------------------------------------------------------------- compiled (ptxas, no GPU)

KERNELS = [ab_regs_loop, abt_two_warpgroups, atb, atbt_pending, producer_consumer_registers, guarded]


@pytest.fixture(scope="module")
def compiled():
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH")
    from tkc.compiler import compile_kernel
    return {k.name: compile_kernel(k.trace()) for k in KERNELS}


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_compiles_without_spills(kernel, compiled):
    res = compiled[kernel.name].manifest["resources"]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res["ptxas"]
    assert "C7508" not in res["ptxas"]


# k_steps: wgmmas in the PTX (ab_regs_loop: 2 per k tile, its loop of 4 unrolled by LLVM);
# a descriptor is a register, or (later k steps) %tkdN, k step 0's advanced inside the asm
_D = r"%(?:rd|tkd)\d+"


@pytest.mark.parametrize("kernel,shape,k_steps,trans", [
    (ab_regs_loop, "m64n64k16.f32.bf16.bf16", 8, rf"\{{%r\d+, %r\d+, %r\d+, %r\d+\}}, {_D}, 1, 1, 1, 1;"),
    (abt_two_warpgroups, "m64n128k16.f32.bf16.bf16", 4, rf"{_D}, {_D}, 1, 1, 1, 0, 0;"),
    (atb, "m64n32k16.f32.f16.f16", 2, rf"{_D}, {_D}, 1, 1, 1, 1, 1;"),
    (atbt_pending, "m64n32k16.f32.bf16.bf16", 8, rf"{_D}, {_D}, 1, 1, 1, 1, 0;"),
])
def test_ptx_has_the_wgmma_stream(kernel, shape, k_steps, trans, compiled):
    ptx = compiled[kernel.name].ptx
    mmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+) \{[^}]*\}, (.*)", ptx)
    assert len(mmas) == k_steps
    assert all(s == shape and re.fullmatch(trans, rest) for s, rest in mmas), mmas
    assert ptx.index("wgmma.fence.sync.aligned") < ptx.index("wgmma.mma_async")
    assert ptx.rindex("wgmma.mma_async") < ptx.rindex("wgmma.commit_group.sync.aligned") \
        < ptx.rindex("wgmma.wait_group.sync.aligned")


def test_waits_keep_their_pending_counts(compiled):
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+);", compiled["atbt_pending"].ptx)
    assert waits == ["1", "0"]


def test_setmaxnreg_gets_one_block_per_sm(compiled):
    ptx = compiled["producer_consumer_registers"].ptx
    assert re.search(r"\.minnctapersm 1\b", ptx) and re.search(r"\.maxntid 256, 1, 1", ptx)
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx)
    assert ".minnctapersm" not in compiled["atb"].ptx  # only kernels that reallocate


def test_ptxas_ignoring_setmaxnreg_is_an_error(compiled):
    from tkc.compiler import ptxas
    ptx = re.sub(r"\.minnctapersm 1\n", "", compiled["producer_consumer_registers"].ptx)
    with pytest.raises(TkcError, match=r"ptxas ignored setmaxnreg \(C7508\)"):
        ptxas(ptx)


@tkc.kernel(warps=8)
def greedy_producer(b: gl(bf16, 1, 1, 64, 64), c: gl(f32, 1, 1, 128, 64)):
    """Both warpgroups run the mma after the branch: 40 registers cannot hold it."""
    sb = st(bf16, 64, 64)
    group_load(sb, b, (0, 0, 0, 0))
    tkc.sync()
    with tkc.if_(tkc.warpgroupid() == 1):
        warpgroup.decrease_registers(40)
    d = warpgroup.mma_ABt(sb, sb, zero(rt(f32, 16, 64)))
    warpgroup.mma_async_wait(d)
    store(c, d, (0, 0, tkc.warpid(), 0))


def test_a_decrease_below_what_the_code_needs_is_an_error(compiled):
    from tkc.compiler import compile_kernel
    with pytest.raises(TkcError, match=r"ptxas ignored setmaxnreg \(C7507\): the code after a "
                                       r"decrease_registers\(n\) needs more than n registers"):
        compile_kernel(greedy_producer.trace())


def test_sass_has_hgmma(compiled):
    """The cubin's SASS runs the tensor cores' warpgroup instruction."""
    from tkc.sass import cuobjdump, disassemble
    if cuobjdump() is None:
        pytest.skip("cuobjdump not available (pip install nvidia-cuda-cuobjdump)")
    assert "HGMMA.64x128x16.F32.BF16" in disassemble(compiled["abt_two_warpgroups"].cubin)


# ---------------------------------------------------------------- located errors

def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _traced_error(kernel, marker: str, match: str):
    with pytest.raises(TkcError, match=match) as info:
        kernel.trace()
    assert info.value.where.startswith(f"{__file__}:{_line(kernel.fn, marker)}:"), info.value.where


@tkc.kernel(warps=2)
def two_warps(b: gl(bf16, 1, 1, 64, 64)):
    sb = st(bf16, 64, 64)
    warpgroup.mma_ABt(sb, sb, zero(rt(f32, 16, 64)))  # marker
    

@tkc.kernel(warps=4)
def unswizzled(b: gl(bf16, 1, 1, 64, 64)):
    sb = st(bf16, 64, 64, "none")
    warpgroup.mma_ABt(sb, sb, zero(rt(f32, 16, 64)))  # marker


@tkc.kernel(warps=4)
def atb_from_registers(a: gl(bf16, 1, 1, 64, 64)):
    sb = st(bf16, 64, 64)
    x = load(rt(bf16, 64, 64, "col"), a, (0, 0, 0, 0))
    warpgroup.mma_AtB(x, sb, zero(rt(f32, 16, 64)))  # marker


@tkc.kernel(warps=4)
def k_mismatch(a: gl(bf16, 1, 1, 64, 64)):
    sa, sb = st(bf16, 64, 32), st(bf16, 64, 64)
    warpgroup.mma_ABt(sa, sb, zero(rt(f32, 16, 64)))  # marker


@tkc.kernel(warps=4)
def too_wide(a: gl(bf16, 1, 1, 64, 64)):
    sa, sb = st(bf16, 64, 16), st(bf16, 512, 16)
    warpgroup.mma_ABt(sa, sb, zero(rt(f32, 16, 512)))  # marker


@tkc.kernel(warps=4)
def mixed_dtypes(a: gl(bf16, 1, 1, 64, 64)):
    sa, sb = st(bf16, 64, 64), st(f16, 64, 64)
    warpgroup.mma_ABt(sa, sb, zero(rt(f32, 16, 64)))  # marker


@tkc.kernel(warps=4)
def bad_registers(a: gl(bf16, 1, 1, 64, 64)):
    warpgroup.increase_registers(100)  # marker


@tkc.kernel(warps=4)
def wait_on_bf16(a: gl(bf16, 1, 1, 64, 64)):
    x = load(rt(bf16, 16, 64), a, (0, 0, 0, 0))
    warpgroup.mma_async_wait(x)  # marker


@tkc.kernel(warps=4)
def when_not_traced(a: gl(bf16, 1, 1, 64, 64)):
    sa = st(bf16, 64, 64)
    warpgroup.mma_ABt(sa, sa, zero(rt(f32, 16, 64)), when=True)  # marker


@pytest.mark.parametrize("kernel,match", [
    (when_not_traced, r"warpgroup.mma_ABt: when must be a traced condition \(e.g. j > 0\), got True"),
    (two_warps, "warpgroup is 4 warps, so the kernel's tk.warps must be a multiple of 4, got 2"),
    (unswizzled, r"a st<bf16, 64, 64, none> must be swizzled"),
    (atb_from_registers, r"warpgroup.mma_AtB: a must be an st<K, 64>"),
    (k_mismatch, r"K of a \(32\) and b \(64\) must agree"),
    (too_wide, r"N = 512 is wider than wgmma's 256"),
    (mixed_dtypes, "a and b must both be bf16 or both f16"),
    (bad_registers, r"count must be a multiple of 8 in 24..256 \(setmaxnreg\), got 100"),
    (wait_on_bf16, "tile 0 must be an f32 rt"),
], ids=lambda x: getattr(x, "name", ""))
def test_errors_name_the_author_line(kernel, match):
    _traced_error(kernel, "# marker", match)


def test_three_argument_forms_are_told_apart_by_the_accumulator():
    """mma_AB(d, a, b) accumulates into d; mma_AB(a, b, c) is functional."""
    text = ab_regs_loop.tile_ir()
    # the loop-carried d feeds c, and the wait's result is what the loop yields
    m = re.search(r'"tk\.warpgroup_mma_ab"\(%\S+, %\S+, (%\S+)\)', text)
    assert m and m[1].startswith("%arg")


def _exchange(sync):
    """Two warpgroups; each warp writes its 16 rows of its warpgroup's 64-row
    half of a shared tile, then reads the whole half back (rows of the other
    3 warps): ordered by `sync`."""
    @tkc.kernel(warps=8, grid=lambda a, o: (1,))
    def exchange(a: gl(f32, 1, 1, 128, 64), o: gl(f32, 1, 1, 128, 64)):
        s = st(f32, 128, 64)
        w, g = tkc.warpid(), tkc.warpgroupid()
        store(s, load(rt(f32, 16, 64), a, (0, 0, w, 0)), (w, 0))
        sync()
        mine = load(rt(f32, 16, 64), s, (g * 4 + (w + 1) % 4, 0))   # a neighbour's rows
        store(o, mine, (0, 0, w, 0))
    return exchange


def test_warpgroup_sync_orders_a_warpgroups_shared_exchange():
    a = np.arange(128 * 64, dtype=np.float32).reshape(1, 1, 128, 64)
    o = np.zeros_like(a)
    _exchange(warpgroup.sync).interpret(a, o)
    w = np.arange(8)
    want = a[0, 0].reshape(8, 16, 64)[(w // 4) * 4 + (w % 4 + 1) % 4]
    assert np.array_equal(o[0, 0].reshape(8, 16, 64), want)
    with pytest.raises(TkcError, match="shared-memory race"):
        _exchange(lambda: None).interpret(a, np.zeros_like(a))
    text = _exchange(warpgroup.sync).tile_ir()          # a named barrier a warpgroup
    assert '"tk.sync"() {id = 8 : i64, warps = 4 : i64}' in text
    assert '"tk.sync"() {id = 9 : i64, warps = 4 : i64}' in text
