"""tk-pipeline-staging and tk-grid-ordering from the DSL: the staged kernels
compute the right numbers in the interpreter (whose race and deadlock checks
cover what the passes wrote), the LCSF template traces to the plain loop's IR,
and every refusal names the author's line and says why."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import tkc
import tkc.interpreter
from tkc import bf16, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.frontend.kernel import kernels_in_file
from tkc.kernels import gemm_hopper
from tkc.ops import subtile, zero


def lit_kernels(name: str) -> dict:
    """{kernel name: kernel} of test/lit/passes/<name> (lit checks their IR,
    these tests run them)."""
    return {k.name: k for k in kernels_in_file(Path(__file__).resolve().parents[1] / "lit" / "passes" / name)}

from helpers import ref_bf16, staged

BM, BN, BK = 128, 256, 64


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def refused(kernel, text: str, marker: str):
    with pytest.raises(TkcError) as e:
        staged(kernel)
    assert text in e.value.message, e.value.message
    assert e.value.where.endswith(f":{line_of(kernel.fn, marker)}:{e.value.where.split(':')[-1]}"), \
        (e.value.where, marker)
    return e.value


# ---------------------------------------------------------------- numbers

def gemm_arrays(m, n, k, rng, out=np.float32, transpose_b=False):
    a = ref_bf16(rng.standard_normal((m, k)))
    b = ref_bf16(rng.standard_normal((n, k) if transpose_b else (k, n)))
    c = np.full((m, n), np.nan, np.float32).astype(out)
    ref = a.astype(np.float64) @ (b.T if transpose_b else b).astype(np.float64)
    return a, b, c, ref


def rel_err(x, ref):
    return float(np.linalg.norm(x.astype(np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("m,n,k,sms", [
    (256, 512, 192, 3),   # 4 work items on 3 persistent blocks: one block takes two
    (128, 256, 64, 1),    # one item, one K step
    (384, 256, 320, 2),   # K = 5 steps over a 4-slot ring: slots wrap mid-item
])
def test_library_gemm_in_the_interpreter(m, n, k, sms, rng):
    kernel = gemm_hopper("bf16")
    a, b, c, ref = gemm_arrays(m, n, k, rng)
    module = staged(kernel)
    tkc.interpreter.run(module, [a, b, c], sms=sms)
    assert not np.isnan(c).any()
    assert rel_err(c, ref) < 1e-2


@pytest.mark.parametrize("out,transpose_b", [("f32", False), ("f32", True), ("bf16", True)])
def test_library_gemm_variants(out, transpose_b, rng):
    kernel = gemm_hopper(out, transpose_b=transpose_b)
    a, b, c, ref = gemm_arrays(256, 256, 128, rng, transpose_b=transpose_b)
    tkc.interpreter.run(staged(kernel), [a, b, c], sms=2)
    assert rel_err(c, ref) < (1e-5 if out == "f32" else 1e-2)


def test_ragged_shapes_are_zero_filled_and_clipped(rng):
    """TMA zero-fills loads past the edge and clips stores, so M, N, K need no padding."""
    a, b, c, ref = gemm_arrays(200, 264, 72, rng)
    tkc.interpreter.run(staged(gemm_hopper("f32")), [a, b, c], sms=3)
    assert rel_err(c, ref) < 1e-5


def test_unstaged_kernel_computes_the_same(rng):
    """Before the passes, tma.load/tma.store synchronise the block: the same
    kernel is correct (and race-free) without a producer."""
    kernel = gemm_hopper("f32", persistent=False, order="xyz")
    module = kernel.trace()
    from tkc.pass_pipeline import run_pipeline
    run_pipeline(module, "tk-layout-selection,tk-verify")
    a, b, c, ref = gemm_arrays(256, 256, 128, rng)
    tkc.interpreter.run(module, [a, b, c])
    assert rel_err(c, ref) < 1e-5


# ---------------------------------------------------------------- the template

def _template_gemm():
    @tkc.kernel(name="lcsf_gemm", warps=8, grid=lambda a, b, c: (c.c // BN, c.r // BM),
                persistent=True)
    def lcsf_gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"),
                  c: gl(f32, 1, 1, "M", "N")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()

        def load(s, k):
            tma.load(s.a, a, (0, 0, bm, k))
            tma.load(s.b, b, (0, 0, k, bn))

        def compute(s, k, acc):
            warpgroup.mma_AB(acc, subtile(s.a, 64, BK, (wg, 0)), s.b)
            warpgroup.mma_async_wait(acc)

        def finish(out, acc):
            for j in range(BN // 32):
                warpgroup.store(out.c[j % 2], subtile(acc, 16, 32, (0, j)), (wg, 0))
                tma.store(c, out.c[j % 2], (0, 0, bm, bn * (BN // 32) + j))

        n = a.c // BK
        tkc.lcsf(n, load, compute, finish,
                 inputs=dict(a=st(bf16, BM, BK), b=st(bf16, BK, BN)),
                 outputs=dict(c=[st(f32, BM, 32), st(f32, BM, 32)]),
                 setup=lambda: zero(rt(f32, 16, BN)))
    return lcsf_gemm


def _loop_gemm():
    @tkc.kernel(name="lcsf_gemm", warps=8, grid=lambda a, b, c: (c.c // BN, c.r // BM),
                persistent=True)
    def loop_gemm(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"),
                  c: gl(f32, 1, 1, "M", "N")):
        bn, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        n = a.c // BK
        a_s, b_s = st(bf16, BM, BK), st(bf16, BK, BN)
        c_s = [st(f32, BM, 32), st(f32, BM, 32)]
        acc = zero(rt(f32, 16, BN))
        for k in tkc.range(n, stages="auto"):
            tma.load(a_s, a, (0, 0, bm, k))
            tma.load(b_s, b, (0, 0, k, bn))
            warpgroup.mma_AB(acc, subtile(a_s, 64, BK, (wg, 0)), b_s)
            warpgroup.mma_async_wait(acc)
        for j in range(BN // 32):
            warpgroup.store(c_s[j % 2], subtile(acc, 16, 32, (0, j)), (wg, 0))
            tma.store(c, c_s[j % 2], (0, 0, bm, bn * (BN // 32) + j))
    return loop_gemm


def test_template_and_loop_trace_to_the_same_ir():
    template, loop = _template_gemm(), _loop_gemm()
    assert str(template.trace()) == str(loop.trace())
    assert str(staged(template)) == str(staged(loop))


def test_template_runs(rng):
    a, b, c, ref = gemm_arrays(256, 512, 128, rng)
    tkc.interpreter.run(staged(_template_gemm()), [a, b, c], sms=3)
    assert rel_err(c, ref) < 1e-5


# ---------------------------------------------------------------- the checker checks the pass

def _move_release_before_wait(module):
    """Break the pass's output the way Mosaic GPU users break theirs (no
    delay_release): release the previous stage before the wgmma wait."""
    from tkc.dialect import walk
    wait = next(op for op in walk(module.operation) if op.name == "tk.warpgroup_mma_wait"
                and op.attributes["pending"].value == 1)
    ops = [o.operation for o in wait.parent.regions[0].blocks[0].operations]
    release = next(o for o in ops[ops.index(wait):] if o.name == "scf.if")
    release.move_before(wait)
    cond = release.operands[0].owner
    cond.move_before(release)
    return module


def test_an_early_release_is_a_race(rng):
    module = _move_release_before_wait(staged(gemm_hopper("f32")))
    a, b, c, _ = gemm_arrays(128, 256, 384, rng)
    with pytest.raises(TkcError, match="race") as e:
        tkc.interpreter.run(module, [a, b, c], sms=1)
    assert "gemm_hopper.py" in str(e.value)


# ---------------------------------------------------------------- what the passes decide

def test_auto_stages_fit_shared_memory():
    text = str(staged(gemm_hopper("bf16")))
    assert text.count("{stages = 4 : i64} : () -> !tk.st") == 2
    assert "tk.order = \"grouped(y, 16, l2)\"" in text
    assert "tk.warps = 12" in text


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_every_stage_count_runs(stages, rng):
    """One stage cannot keep a wgmma in flight (the producer refills the slot
    the consumers would hold): it must release each iteration, not deadlock."""
    a, b, c, ref = gemm_arrays(256, 256, 256, rng)
    module = staged(gemm_hopper("f32", stages=stages))
    relaxed = re.search(r'"tk.warpgroup_mma_wait".*\{pending = 1 : i64\}', str(module))
    assert bool(relaxed) == (stages > 1)
    tkc.interpreter.run(module, [a, b, c], sms=1)
    assert rel_err(c, ref) < 1e-5


def _register_a_gemm(in_registers: bool):
    """C (16 rows) = A B, A's 16-row tile loaded each step into every warp's
    registers (in_registers) or read by wgmma from shared memory (a 64-row
    tile of it)."""
    @tkc.kernel(warps=4, grid=lambda a, b, c: (tkc.cdiv(c.c, 64), 1))
    def reg_a(a: gl(bf16, 1, 1, "M", "K"), b: gl(bf16, 1, 1, "K", "N"), c: gl(f32, 1, 1, "M", "N")):
        from tkc.ops import load, store
        a_s, b_s = st(bf16, 16 if in_registers else 64, 64), st(bf16, 64, 64)
        acc = zero(rt(f32, 16, 64))
        for k in tkc.range(tkc.cdiv(a.c, 64), stages=3):
            tma.load(a_s, a, (0, 0, 0, k))
            tma.load(b_s, b, (0, 0, k, tkc.block_idx.x))
            warpgroup.mma_AB(acc, load(rt(bf16, 16, 64), a_s, (0, 0)) if in_registers else a_s, b_s)
            warpgroup.mma_async_wait(acc)
        store(c, acc, (0, 0, tkc.warpid(), tkc.block_idx.x), clip=True)
    return reg_a


@pytest.mark.parametrize("in_registers", [True, False])
def test_a_wgmma_reading_a_from_registers_stays_waited_on(in_registers, rng):
    """A loop's wgmma stays in flight into the next iteration only when it reads
    A from shared memory: one reading A from registers must retire before the
    next iteration writes its A (PTX leaves writing them earlier undefined; on
    the H200 a split-K GEMM so relaxed gave wrong products, which the
    interpreter, holding each value apart, could not show)."""
    module = staged(_register_a_gemm(in_registers))
    relaxed = re.search(r'"tk.warpgroup_mma_wait".*\{pending = 1 : i64\}', str(module))
    assert bool(relaxed) == (not in_registers)
    a, b = (ref_bf16(rng.standard_normal(s)) for s in ((1, 1, 16, 320), (1, 1, 320, 128)))
    c = np.full((1, 1, 16, 128), np.nan, np.float32)
    tkc.interpreter.run(module, [a, b, c], sms=2)
    assert rel_err(c[0, 0], a[0, 0].astype(np.float64) @ b[0, 0]) < 1e-5


@pytest.mark.parametrize("l2_rows", [1, 2, 16])
def test_group_width_shrinks_when_l2_is_small(l2_rows, rng, monkeypatch):
    """grouped(y, 16, l2): the kernel narrows the group at run time to what
    half the L2 holds of a row's A tiles over the K loop. With a tiny L2 the
    width drops to 1 or 2 rows: every item must still be computed once."""
    from tkc.passes import grid_ordering
    m, n, k = 512, 768, 320            # 4 x 3 items, 5 K steps of a 16 KiB A tile
    monkeypatch.setattr(grid_ordering, "L2_BYTES", l2_rows * 5 * BM * BK * 2)
    monkeypatch.setattr(grid_ordering, "L2_GROUP_SHARE", 1)
    a, b, c, ref = gemm_arrays(m, n, k, rng)
    tkc.interpreter.run(staged(gemm_hopper("f32")), [a, b, c], sms=3)
    assert rel_err(c, ref) < 1e-5


@tkc.kernel(warps=1, grid=lambda o: (o.r // 16, 1, 1), persistent="zigzag")
def zigzag_count(o: gl(f32, 1, 1, "M", 16)):
    """Adds 1 to row tile `item` of o for each time a block takes that item."""
    tkc.ops.store(o, zero(rt(f32, 16, 16)) + 1.0, (0, 0, tkc.block_idx.x, 0), add=True)


@pytest.mark.parametrize("items,sms", [(3, 4), (4, 4), (9, 4), (11, 4), (16, 3), (13, 5)])
def test_zigzag_takes_every_item_once(items, sms):
    """persistent="zigzag": rounds dealt forwards and backwards, the last one
    partial or whole, on blocks = min(sms, items): each item exactly once."""
    o = np.zeros((1, 1, 16 * items, 16), np.float32)
    tkc.interpreter.run(staged(zigzag_count), [o], sms=sms)
    np.testing.assert_array_equal(o, 1.0)


def test_persistent_takes_true_false_or_zigzag():
    with pytest.raises(TkcError, match='persistent must be True, False or "zigzag", got \'snake\''):
        tkc.kernel(warps=1, persistent="snake")(lambda o: None)


def test_stages_override():
    text = str(staged(gemm_hopper("bf16", stages=2)))
    assert text.count("{stages = 2 : i64} : () -> !tk.st") == 2


@pytest.mark.parametrize("kernel,split", [("gemm", (40, 232)), ("fftconv", (24, 112)), ("rotary", (40, 96)),
                                          ("ssd", (40, 216))])
def test_register_split_fits_the_launch_allocation(kernel, split):
    """setmaxnreg moves registers only within what the block launched with
    (65536 / threads a thread, rounded down to 8): an increase past it waits
    forever on the GPU, which the interpreter cannot see. 3 warpgroups launch
    with 168 a thread (504 together), 5 with 96 (480, not 512); 3 at two
    blocks an SM with 80 (an increase to 232 hung rotary on the H100)."""
    from tkc.kernels.fftconv import fftconv
    from tkc.kernels.linear_attention import linear_attention
    from tkc.kernels.rotary import rotary
    from tkc.hopper.warpgroup import register_budget
    k, warpgroups, blocks = {"gemm": lambda: (gemm_hopper("bf16"), 3, 1),
                             "fftconv": lambda: (fftconv(1024, consumers=4), 5, 1),
                             "rotary": lambda: (rotary(128, warps=8, blocks_per_sm=2), 3, 2),
                             "ssd": lambda: (linear_attention(64, 64, decay=True), 2, 2)}[kernel]()
    text = str(staged(k))
    counts = re.findall(r'"tk\.(?:de|in)crease_registers"\(\) \{count = (\d+)', text)
    assert tuple(map(int, counts[:2])) == split, counts
    p, c = split
    budget = register_budget(warpgroups, blocks)
    assert p + (warpgroups - 1) * c <= budget < p + (warpgroups - 1) * (c + 8)


# ---------------------------------------------------------------- refusals

@tkc.kernel(warps=4)
def coords_from_warp(a: gl(bf16, 1, 1, "M", "K")):
    a_s = st(bf16, 64, 64)
    w = tkc.warpid()
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, w, k))  # <- warp
        tkc.sync()


def test_refuses_coords_from_the_warp():
    e = refused(coords_from_warp, "the producer cannot compute this load's coordinates",
                "# <- warp")
    assert "the warp's identity" in e.message


@tkc.kernel(warps=4)
def tile_used_after(a: gl(bf16, 1, 1, "M", "K"), c: gl(f32, 1, 1, "M", "K")):
    a_s = st(bf16, 64, 64)
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
    x = tkc.ops.load(rt(bf16, 16, 64), a_s, (0, 0))  # <- after
    tkc.ops.store(c, x.to(f32), (0, 0, 0, 0))


def test_refuses_a_ring_tile_used_after_its_loop():
    refused(tile_used_after, "is a pipelined tile", "# <- after")


@tkc.kernel(warps=8)
def too_deep(a: gl(bf16, 1, 1, "M", "K")):
    a_s, b_s = st(bf16, 128, 128), st(bf16, 128, 256)
    for k in tkc.range(a.c // 128, stages=4):  # <- deep
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, a, (0, 0, 0, k))


def test_refuses_a_ring_that_does_not_fit():
    e = refused(too_deep, "a 4-stage pipeline needs", "# <- deep")
    assert "x 4 stages" in e.message and "232448" in e.message


@tkc.kernel(warps=4)
def conditional_load(a: gl(bf16, 1, 1, "M", "K")):
    a_s = st(bf16, 64, 64)
    for k in tkc.range(a.c // 64, stages=2):
        with tkc.if_(k > 0):
            tma.load(a_s, a, (0, 0, 0, k))  # <- if


def test_refuses_a_conditional_load():
    refused(conditional_load, "cannot be conditional", "# <- if")


def test_refuses_a_tile_loaded_twice_an_item_outside_the_loop():
    """Each such load waits on and releases the tile once an item; a second
    load into it would overwrite what the first one's readers still read (in a
    kernel of one item too: the producer issues them back to back), and the
    pass had raised a KeyError on it."""
    refused(lit_kernels("pipeline-once-twice.py")["twice"], "loaded at most once a work item", "# <- twice")


@tkc.kernel(warps=4)
def nested_loop(a: gl(bf16, 1, 1, "M", "K")):
    a_s = st(bf16, 64, 64)
    for i in tkc.range(2):
        for k in tkc.range(a.c // 64, stages=2):  # <- nested
            tma.load(a_s, a, (0, 0, i, k))


def test_refuses_a_nested_pipelined_loop():
    refused(nested_loop, "must be at the kernel's top level", "# <- nested")


@tkc.kernel(warps=4)
def no_loads(a: gl(bf16, 1, 1, "M", "K")):
    for k in tkc.range(a.c // 64, stages=2):  # <- empty
        tkc.sync()


def test_refuses_a_pipelined_loop_without_loads():
    refused(no_loads, "has no tma.load to run ahead", "# <- empty")


@tkc.kernel(warps=4)
def unwaited_mma(a: gl(bf16, 1, 1, "M", "K"), c: gl(f32, 1, 1, "M", "K")):
    a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, a, (0, 0, 0, k))
        warpgroup.mma_AB(acc, a_s, b_s)  # <- mma
        tkc.ops.store(c, acc, (0, 0, 0, 0))
    warpgroup.mma_async_wait(acc)


@tkc.kernel(warps=4, grid=lambda a, c: (1, 1, 1))
def vector_ring(a: gl(f32, 1, 1, 2, "N"), c: gl(f32, 1, 1, 1, 64)):
    """Per column, the sum over 64-wide chunks of a's row 0 times its row 1,
    both rows coming through the ring as shared vectors (TMA, one-row boxes)."""
    x_s, y_s = sv(f32, 64), sv(f32, 64)
    acc = zero(rv(f32, 64, "flat"))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(x_s, a, (0, 0, 0, k))
        tma.load(y_s, a, (0, 0, 1, k))
        acc = acc + tkc.ops.load(rv(f32, 64, "flat"), x_s) * tkc.ops.load(rv(f32, 64, "flat"), y_s)
    tkc.ops.store(c, acc, (0, 0, 0, 0))


@pytest.mark.parametrize("n", [64, 320])
def test_shared_vectors_stream_through_the_ring(n):
    """tma.load of an sv, staged like a tile's: the interpreter (races and
    the ring's barriers checked) agrees with numpy; the staged loads expect
    the vectors' bytes."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal((1, 1, 2, n)).astype(np.float32)
    c = np.zeros((1, 1, 1, 64), np.float32)
    vector_ring.interpret(a, c)
    assert np.allclose(c[0, 0, 0], (a[0, 0, 0] * a[0, 0, 1]).reshape(-1, 64).sum(0), atol=1e-5)
    assert "bytes = 512" in str(staged(vector_ring))  # two sv<f32, 64> a stage


def test_a_shared_vector_is_not_a_tma_store_source():
    @tkc.kernel(warps=4)
    def store_vector(c: gl(f32, 1, 1, 1, 64)):
        v_s = sv(f32, 64)
        tma.store(c, v_s, (0, 0, 0, 0))
    with pytest.raises(TkcError, match=r"tma.store: the shared side must be a shared tile \(st\), "
                                       r"got !tk.sv<f32, 64"):
        store_vector.trace()


def test_refuses_releasing_a_stage_an_mma_may_still_read():
    e = refused(unwaited_mma, "still in flight when the pipelined loop's iteration ends", "# <- mma")
    assert "no wait at the loop body's top level (pending = 0, or pending = n after n mmas" in e.message


def left_in_flight(stages: int):
    """Each iteration waits for its first mma and leaves its second in
    flight: the stage is held into the next iteration (delayed release)."""
    @tkc.kernel(warps=4, grid=lambda a, c: (1, 1, 1), name=f"left_in_flight_s{stages}")
    def kernel(a: gl(bf16, 1, 1, 64, "K"), c: gl(f32, 1, 2, 64, 64)):
        a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
        x, acc = zero(rt(f32, 16, 64)), zero(rt(f32, 16, 64))
        for k in tkc.range(a.c // 64, stages=stages):
            tma.load(a_s, a, (0, 0, 0, k))
            tma.load(b_s, a, (0, 0, 0, k))
            x = x + warpgroup.mma_async_wait(warpgroup.mma_AB(a_s, b_s, zero(rt(f32, 16, 64))))
            warpgroup.mma_ABt(acc, a_s, b_s)  # <- in flight
        acc = warpgroup.mma_async_wait(acc)
        tkc.ops.store(c, x, (0, 0, tkc.warpid(), 0))
        tkc.ops.store(c, acc, (0, 1, tkc.warpid(), 0))
    return kernel


mma_left_in_flight = left_in_flight(2)


def _left_in_flight_arrays(k):
    rng = np.random.default_rng(3)
    a = ref_bf16(rng.standard_normal((1, 1, 64, 64 * k)) * 0.1)
    blocks = [a[0, 0, :, 64 * j:64 * j + 64].astype(np.float64) for j in range(k)]
    return a, np.zeros((1, 2, 64, 64), np.float32), blocks


@pytest.mark.parametrize("k", [1, 3])
def test_an_mma_left_in_flight_holds_its_stage(k):
    """Accepted; the interpreter (which checks each release against the
    wgmma reads still in flight) agrees with numpy."""
    a, c, blocks = _left_in_flight_arrays(k)
    mma_left_in_flight.interpret(a, c)
    assert np.allclose(c[0, 0], sum(x @ x for x in blocks), atol=1e-3)
    assert np.allclose(c[0, 1], sum(x @ x.T for x in blocks), atol=1e-3)


def test_releasing_the_held_stage_at_the_iteration_end_is_a_race(monkeypatch):
    """Mosaic GPU's missing delay_release: releasing the slot at the end of
    the iteration, under the mma still reading it, is caught as a race."""
    from tkc.passes.pipeline_staging import consumer
    monkeypatch.setattr(consumer, "held_until", lambda body, stages: None)
    a, c, _ = _left_in_flight_arrays(3)
    with pytest.raises(TkcError, match="race"):
        tkc.interpreter.run(staged(mma_left_in_flight), [a, c], sms=1)


# Each iteration issues two mmas, waits for the first with pending = 1 (the
# second still in flight), then a third it leaves in flight: the next
# iteration's pending = 1 wait retires it (groups complete in order), so the
# stage is held until then. The kernel is the lit test's.
left_in_flight_pending = lit_kernels("pipeline-held-pending.py")["held"]


@tkc.kernel(warps=4)
def pending_wait_first(a: gl(bf16, 1, 1, "M", "K"), c: gl(f32, 1, 1, "M", "K")):
    """The body's only wait (pending = 1) comes before its mma: it may leave
    the last iteration's mma in flight, so nothing retires that."""
    a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, a, (0, 0, 0, k))
        acc = warpgroup.mma_async_wait(acc, pending=1)
        warpgroup.mma_AB(acc, a_s, b_s)  # <- in flight
    tkc.ops.store(c, warpgroup.mma_async_wait(acc), (0, 0, 0, 0))


@pytest.mark.parametrize("k", [1, 3])
def test_a_pending_wait_after_enough_mmas_releases_the_held_stage(k):
    """Accepted: the previous iteration's slot is released right after the
    body's first pending = 1 wait (two mmas issued before it), not at its
    top; the interpreter, which checks each release against the wgmma reads
    still in flight, agrees with numpy."""
    kernel = left_in_flight_pending
    text = str(staged(kernel))
    consumer = text[text.index('role = "producer"'):]
    first_wait = consumer.index('"tk.warpgroup_mma_wait"')
    assert 'pending = 1' in consumer[first_wait:consumer.index("\n", first_wait)]
    assert '"tk.arrive"' not in consumer[:first_wait]           # held until that wait
    a, _, blocks = _left_in_flight_arrays(k)
    c = np.zeros((1, 3, 64, 64), np.float32)
    kernel.interpret(a, c)
    for i, f in enumerate((lambda x: x @ x, lambda x: x @ x.T, lambda x: x @ x)):
        assert np.allclose(c[0, i], sum(f(x) for x in blocks), atol=1e-3)


def test_refuses_a_pending_wait_before_the_bodys_mmas():
    e = refused(pending_wait_first, "still in flight when the pipelined loop's iteration ends",
                "# <- in flight")
    assert "pending = n after n mmas of the body" in e.message


def test_refuses_holding_a_single_stage():
    e = refused(left_in_flight(1), "still in flight when the pipelined loop's iteration ends", "# <- in flight")
    assert "with one stage" in e.message


@tkc.kernel(warps=4, grid=lambda a, c: (2, 1, 1))
def mma_in_branches(a: gl(bf16, 1, 1, 64, "K"), c: gl(f32, 1, 2, 64, 64)):
    a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, a, (0, 0, 0, k))
        with tkc.if_(tkc.block_idx.x == 0):
            acc = warpgroup.mma_async_wait(warpgroup.mma_AB(acc, a_s, b_s))
        with tkc.else_():
            acc = warpgroup.mma_async_wait(warpgroup.mma_ABt(acc, a_s, b_s))
    tkc.ops.store(c, acc, (0, tkc.block_idx.x, tkc.warpid(), 0))


def test_an_if_whose_branches_wait_retires_its_mmas():
    """Each branch of the if waits for its mma, so the stage may be released
    after the if: accepted, and the interpreter (which checks the release
    against the mma's reads) agrees with numpy."""
    rng = np.random.default_rng(0)
    a = ref_bf16(rng.standard_normal((1, 1, 64, 128)) * 0.1)
    c = np.zeros((1, 2, 64, 64), np.float32)
    mma_in_branches.interpret(a, c)
    blocks = [a[0, 0, :, 64 * k:64 * k + 64].astype(np.float64) for k in range(2)]
    assert np.allclose(c[0, 0], sum(x @ x for x in blocks), atol=1e-3)
    assert np.allclose(c[0, 1], sum(x @ x.T for x in blocks), atol=1e-3)


@tkc.kernel(warps=4)
def mma_before_a_one_sided_if(a: gl(bf16, 1, 1, "M", "K"), c: gl(f32, 1, 1, "M", "K")):
    a_s, b_s = st(bf16, 64, 64), st(bf16, 64, 64)
    acc = zero(rt(f32, 16, 64))
    for k in tkc.range(a.c // 64, stages=2):
        tma.load(a_s, a, (0, 0, 0, k))
        tma.load(b_s, a, (0, 0, 0, k))
        warpgroup.mma_AB(acc, a_s, b_s)  # <- mma
        with tkc.if_(tkc.block_idx.x == 0):
            acc = warpgroup.mma_async_wait(acc)
    tkc.ops.store(c, acc, (0, 0, 0, 0))


def test_refuses_an_mma_only_one_branch_waits_for():
    refused(mma_before_a_one_sided_if, "still in flight when the pipelined loop's iteration ends",
            "# <- mma")


# ---------------------------------------------------------------- once-loaded tiles, finishes

@tkc.kernel(warps=4, grid=lambda a, c: (a.r // 64, 1, 1), persistent=True)
def scale_rows(a: gl(bf16, 1, 1, "M", 64), c: gl(bf16, 1, 1, "M", 64)):
    """A tile loaded once per work item, each warp scales its 16 rows into its
    own band of the output tile: banded TMA stores, no barrier."""
    t, o = st(bf16, 64, 64), st(bf16, 64, 64)
    tma.load(t, a, (0, 0, tkc.block_idx.x, 0))
    x = tkc.ops.load(rt(bf16, 16, 64), t, (tkc.warpid(), 0))
    tkc.ops.store(o, x * 2.0, (tkc.warpid(), 0))
    tma.store(c, o, (0, 0, tkc.block_idx.x, 0))


@tkc.kernel(warps=4, grid=lambda a, c: (a.r // 64, 1, 1), persistent=True)
def copy_rows(a: gl(bf16, 1, 1, "M", 64), c: gl(bf16, 1, 1, "M", 64)):
    """The output tile written by a group copy: the whole-tile store protocol."""
    o = st(bf16, 64, 64)
    tkc.ops.group_load(o, a, (0, 0, tkc.block_idx.x, 0))
    tma.store(c, o, (0, 0, tkc.block_idx.x, 0))


@pytest.mark.parametrize("kernel,factor", [(scale_rows, 2.0), (copy_rows, 1.0)])
def test_once_loads_and_finishes(kernel, factor, rng):
    a = ref_bf16(rng.standard_normal((64 * 5, 64)))
    c = np.full_like(a, np.nan)
    module = staged(kernel)
    banded = '"tk.sync"() {warps = 1 : i64}' in str(module)
    assert banded == (kernel is scale_rows)
    tkc.interpreter.run(module, [a, c], sms=2)   # 5 items on 2 blocks
    np.testing.assert_array_equal(c, ref_bf16(a * factor))


@pytest.mark.parametrize("name", ["in_loop", "in_finish"])
def test_once_loaded_tile_released_after_its_last_reader(name, rng):
    """test/lit/passes/once-release.py's kernels (its IR checks say where the
    release goes): q's tile goes back to the producer right after the loop
    (or the finish's read of it), the next item's q loads under this item's
    finish. 5 items on 2 blocks; the interpreter checks the early release for
    races (a release before the last wgmma reading the tile is reported)."""
    kernel = lit_kernels("once-release.py")[name]
    q, k = ref_bf16(rng.standard_normal((128 * 5, 64))), ref_bf16(rng.standard_normal((192, 64)))
    o = np.full_like(q, np.nan)
    tkc.interpreter.run(staged(kernel), [q, k, o], sms=2)
    acc = sum(q.astype(np.float64) @ k[j:j + 64].T for j in range(0, 192, 64))  # Q K_j^T summed
    want = ref_bf16(ref_bf16(acc) + (q if name == "in_finish" else 0))
    np.testing.assert_allclose(o, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name,D", [("in_pending", 64), ("wide_pending", 256)])
def test_once_loaded_tile_released_by_a_pending_wait(name, D, rng):
    """once-release.py's in_pending / wide_pending: the finish's wgmma
    reading q is retired by a pending = 1 wait while another (reading w)
    stays in flight; q goes back to the producer there. At D = 256 q has one
    slot, so the next item's q load follows that release at once: the
    interpreter, which checks the load against the wgmma reads in flight,
    reports a release placed before the wait. 5 items on 2 blocks."""
    kernel = lit_kernels("once-release.py")[name]
    q, w, k = (ref_bf16(rng.standard_normal(shape)) for shape in ((128 * 5, D), (64, D), (192, D)))
    o = np.full((128 * 5, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(kernel), [q, w, k, o], sms=2)
    q64, w64 = q.astype(np.float64), w.astype(np.float64)
    qk = sum(q64 @ k[j:j + 64].T for j in range(0, 192, 64))    # Q K_j^T summed
    want = qk + q64 @ w64.T + np.tile(w64 @ w64.T, (10, 1))
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-3)


@tkc.kernel(warps=4, grid=lambda a, o: (1, 1, 1))
def running_sum(a: gl(f32, 1, 1, "M", 64), o: gl(f32, 1, 1, "M", 64)):
    """o's row tile k = a's tiles 0..k summed: LCSF's store function, a
    per-iteration output the pass double-buffers."""
    def load(s, k):
        tma.load(s.a, a, (0, 0, k, 0))

    def compute(s, k, acc):
        return acc + tkc.ops.load(rt(f32, 16, 64), s.a, (tkc.warpid(), 0))

    def store(out, k, acc):
        tkc.ops.store(out.o, acc, (tkc.warpid(), 0))
        tma.store(o, out.o, (0, 0, k, 0))

    tkc.lcsf(a.r // 64, load, compute, inputs=dict(a=st(f32, 64, 64)),
             outputs=dict(o=st(f32, 64, 64)), store=store,
             setup=lambda: zero(rt(f32, 16, 64)), stages=2)


def test_lcsf_store_runs_per_iteration(rng):
    a = rng.standard_normal((64 * 5, 64)).astype(np.float32)
    o = np.full_like(a, np.nan)
    module = staged(running_sum)
    assert "{stages = 2 : i64} : () -> !tk.st<f32, 64 : i64, 64 : i64" in str(module)  # 2 output slots
    tkc.interpreter.run(module, [a, o])
    want = np.cumsum(a.reshape(5, 64, 64), axis=0).reshape(-1, 64)
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-5)


# A tile stored every iteration, written after the author's tkc.sync: the
# wait for the slot's old store goes before that barrier, and no second
# barrier follows (the lit test's kernel).
accumulate_met = lit_kernels("pipeline-store-add.py")["accumulate_met"]


@pytest.mark.parametrize("tiles", [1, 2, 5])
def test_loop_store_waits_before_the_authors_barrier(tiles, rng):
    x = rng.standard_normal((64 * tiles, 64)).astype(np.float32)
    acc = np.zeros((64, 64), np.float32)
    accumulate_met.interpret(x, acc)
    np.testing.assert_allclose(acc, x.reshape(tiles, 64, 64).sum(0), rtol=1e-5, atol=1e-5)


def test_loop_store_without_its_wait_is_a_race(rng, monkeypatch):
    """The slot written again while the store two iterations back may still
    read it: the interpreter catches it (so the test above checks the wait)."""
    from tkc.passes import pipeline_staging
    waits = pipeline_staging.Staging._store_wait
    monkeypatch.setattr(pipeline_staging.Staging, "_store_wait",
                        lambda self, pending: waits(self, pending) if pending == 0 else None)
    x = rng.standard_normal((64 * 5, 64)).astype(np.float32)
    with pytest.raises(TkcError, match="race"):
        tkc.interpreter.run(staged(accumulate_met), [x, np.zeros((64, 64), np.float32)], sms=1)


# The store warp (tkc.range(store_warp=True)): the consumers only arrive on
# the store's full slot; the store warp issues it and hands the slot back
# through the empty ring.
accumulate = lit_kernels("pipeline-store-add.py")["accumulate"]


def _store_warp_ops(module, name: str) -> list:
    """The ops named `name` in the store warp's code (the scf.if on warp id
    cw + 1, whose loop is tk.staged role "stores")."""
    from tkc.dialect import walk
    loops = [op for op in walk(module.operation) if "tk.staged" in op.attributes
             and '"stores"' in str(op.attributes["tk.staged"])]
    assert len(loops) == 1, loops
    region = loops[0].parent
    return [op for op in walk(region) if op.name == name]


@pytest.mark.parametrize("tiles", [1, 2, 5])
@pytest.mark.parametrize("name", ["accumulate", "accumulate_one_slot"])
def test_store_warp_issues_the_loop_stores(tiles, name, rng):
    """Also with one output slot (store_slots=1): the interpreter's race check
    covers the consumers' wait for the last store's read before the write."""
    module = staged(lit_kernels("pipeline-store-add.py")[name])
    assert _store_warp_ops(module, "tk.tma_store_add"), "the store warp issues the store"
    x = rng.standard_normal((64 * tiles, 64)).astype(np.float32)
    acc = np.zeros((64, 64), np.float32)
    tkc.interpreter.run(module, [x, acc], sms=1)
    np.testing.assert_allclose(acc, x.reshape(tiles, 64, 64).sum(0), rtol=1e-5, atol=1e-5)


def _without(module, op) -> object:
    op.erase()
    return module


def _ring_of(value):
    """The tk.alloc behind a tk.stage view (or the value's own op)."""
    op = value.owner
    op = op.operation if hasattr(op, "operation") else op
    return _ring_of(op.operands[0]) if op.name == "tk.stage" else op


def test_store_warp_consumers_wait_for_the_slot(rng):
    """Without the consumers' wait on the empty ring they write a slot a
    store may still be reading: the interpreter reports the race."""
    from tkc.dialect import walk
    module = staged(accumulate)
    empty = _ring_of(_store_warp_ops(module, "tk.arrive")[-1].operands[0])
    waits = [op for op in walk(module.operation) if op.name == "tk.wait" and _ring_of(op.operands[0]) == empty]
    assert len(waits) == 1
    x = rng.standard_normal((64 * 5, 64)).astype(np.float32)
    with pytest.raises(TkcError, match="race"):
        tkc.interpreter.run(_without(module, waits[0]), [x, np.zeros((64, 64), np.float32)], sms=1)


def test_store_warp_waits_for_the_reads_before_it_hands_the_slot_back(rng):
    """Without the store warp's tma_store_wait before its arrival, the slot is
    handed back while its store may still read it: a race."""
    module = staged(accumulate)
    (wait,) = _store_warp_ops(module, "tk.tma_store_wait")
    x = rng.standard_normal((64 * 5, 64)).astype(np.float32)
    with pytest.raises(TkcError, match="race"):
        tkc.interpreter.run(_without(module, wait), [x, np.zeros((64, 64), np.float32)], sms=1)


def test_store_warp_waits_for_the_written_slot(rng):
    """Without the store warp's wait on the full ring it stores a slot the
    consumers are still writing: a race."""
    module = staged(accumulate)
    (store,) = _store_warp_ops(module, "tk.tma_store_add")
    full = _store_warp_ops(module, "tk.wait")
    assert len(full) == 1 and _ring_of(full[0].operands[0]) != _ring_of(store.operands[1])
    x = rng.standard_normal((64 * 5, 64)).astype(np.float32)
    with pytest.raises(TkcError, match="race"):
        tkc.interpreter.run(_without(module, full[0]), [x, np.zeros((64, 64), np.float32)], sms=1)


@tkc.kernel(warps=2, grid=lambda x, acc: (1,))
def accumulate_two_warps(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 32, 64)):
    x_s, a_s = st(f32, 32, 64), st(f32, 32, 64)
    for i in tkc.range(tkc.cdiv(x.r, 32), stages=2, store_warp=True):  # marker: two warps
        tma.load(x_s, x, (0, 0, i, 0))
        tkc.ops.store(a_s, tkc.ops.load(rt(f32, 16, 64), x_s, (tkc.warpid(), 0)), (tkc.warpid(), 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))


def test_store_warp_asked_for_without_a_warp_to_spare():
    refused(accumulate_two_warps, "store_warp=True cannot be honoured: the consumers are not whole "
            "warpgroups", "marker: two warps")


def test_store_warp_is_not_the_default():
    """Without store_warp=True consumer warp 0 issues the loop's stores."""
    module = staged(accumulate_met)
    assert 'role = "stores"' not in str(module)
    assert "tk.tma_store_add" in str(module)


@tkc.kernel(warps=8, grid=lambda x, acc: (1,), persistent=True)
def accumulate_persistent(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True):  # marker: persistent
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))


def test_store_warp_asked_for_in_a_persistent_kernel():
    refused(accumulate_persistent, "store_warp=True cannot be honoured: the kernel is persistent",
            "marker: persistent")


@tkc.kernel(warps=4, grid=lambda x, acc: (1,))
def accumulate_nothing_stored(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64)):
    x_s = st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True):  # marker: no store
        tma.load(x_s, x, (0, 0, i, 0))
        tkc.ops.store(acc, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0, tkc.warpid(), 0))


def test_store_warp_asked_for_without_a_store():
    refused(accumulate_nothing_stored, "store_warp=True cannot be honoured: this loop has no tma.store",
            "marker: no store")


def test_store_warp_option_must_be_a_bool():
    with pytest.raises(TkcError, match="store_warp must be True or False, got 'yes'"):
        @tkc.kernel(warps=4, grid=lambda x: (1,))
        def bad(x: gl(f32, 1, 1, None, 64)):
            x_s = st(f32, 64, 64)
            for i in tkc.range(4, stages=2, store_warp="yes"):
                tma.load(x_s, x, (0, 0, i, 0))
        bad.trace()


@pytest.mark.parametrize("slots,warp", [(3, True), (1, None)])
def test_store_slots_are_one_or_two_with_the_store_warp(slots, warp):
    with pytest.raises(TkcError, match="store_slots must be 1 or 2, with store_warp=True"):
        @tkc.kernel(warps=4, grid=lambda x: (1,))
        def bad(x: gl(f32, 1, 1, None, 64)):
            x_s = st(f32, 64, 64)
            for i in tkc.range(4, stages=2, store_warp=warp, store_slots=slots):
                tma.load(x_s, x, (0, 0, i, 0))
        bad.trace()


@tkc.kernel(warps=8, grid=lambda x, acc: (1,))
def accumulate_by_warpgroup(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, None, 64)):
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True):  # marker: warp ids
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s), (0, 0))
        tma.store_add(acc, a_s, (0, 0, tkc.warpgroupid(), 0))


def test_store_warp_refuses_coordinates_it_cannot_compute():
    refused(accumulate_by_warpgroup, "store_warp=True cannot be honoured: the store at", "marker: warp ids")
    with pytest.raises(TkcError, match="depend on the warp's identity"):
        staged(accumulate_by_warpgroup)


@tkc.kernel(warps=8, grid=lambda x, acc, o: (1,))
def two_stores(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 128, 64), o: gl(f32, 1, 1, None, 64)):
    """Two consumer warpgroups (as the attention backward), two stores an
    iteration: acc += each 128-row tile of x, o = 2 x."""
    x_s, a_s, b_s = st(f32, 128, 64), st(f32, 128, 64), st(f32, 128, 64)
    for i in tkc.range(tkc.cdiv(x.r, 128), stages=2, store_warp=True):
        tma.load(x_s, x, (0, 0, i, 0))
        wg = tkc.warpgroupid()
        t = warpgroup.load(rt(f32, 16, 64), subtile(x_s, 64, 64, (wg, 0)))
        warpgroup.store(subtile(a_s, 64, 64, (wg, 0)), t, (0, 0))
        tma.store_add(acc, a_s, (0, 0, 0, 0))
        warpgroup.store(subtile(b_s, 64, 64, (wg, 0)), t * 2.0, (0, 0))
        tma.store(o, b_s, (0, 0, i, 0))


@pytest.mark.parametrize("tiles", [1, 3])
def test_store_warp_two_warpgroups_two_stores(tiles, rng):
    module = staged(two_stores)
    assert len(_store_warp_ops(module, "tk.wait")) == 2   # a full ring per store
    x = rng.standard_normal((128 * tiles, 64)).astype(np.float32)
    acc, o = np.zeros((128, 64), np.float32), np.full_like(x, np.nan)
    tkc.interpreter.run(module, [x, acc, o], sms=1)
    np.testing.assert_allclose(acc, x.reshape(tiles, 128, 64).sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o, 2 * x, rtol=1e-6)


@pytest.mark.parametrize("name", ["last_warp", "last_issuer"])
def test_atomic_add_publishes_the_stores(name, rng):
    """pipeline-atomic-add.py: two blocks add x's tiles into acc by TMA
    reduce-adds; tkc.ops.atomic_add(after=acc) counts each done once its adds
    have completed, and the second (the last) copies the sum to out. With
    the store warp, the store warp adds for the block (delegated)."""
    kernel = lit_kernels("pipeline-atomic-add.py")[name]
    x = rng.standard_normal((64 * 3, 64)).astype(np.float32)
    acc, out = np.zeros((64, 64), np.float32), np.full((64, 64), np.nan, np.float32)
    count = np.zeros(16, np.int32)
    tkc.interpreter.run(staged(kernel), [x, acc, count, out], sms=2)
    assert count[0] == 2 and not count[1:].any()
    want = 2 * x.reshape(3, 64, 64).sum(0)
    np.testing.assert_allclose(acc, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out, acc)


def _two_outputs(store_warp):
    @tkc.kernel(warps=4, grid=lambda x, acc, o, count, out: (2,))
    def k(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, 64, 64), o: gl(f32, 2, 1, None, 64),
          count: gl(tkc.i32, 1, 1, 1, 16), out: gl(f32, 1, 1, 64, 64)):
        """atomic_add after the TMA stores to two gls of different shapes
        (issue 41): acc += x's tiles, o[block] = x; the last block writes
        acc + the sum of both blocks' copies' tiles into out."""
        from tkc.ops import atomic_add, load, store
        x_s, a_s, b_s = st(f32, 64, 64), st(f32, 64, 64), st(f32, 64, 64)
        for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=store_warp):
            tma.load(x_s, x, (0, 0, i, 0))
            t = warpgroup.load(rt(f32, 16, 64), x_s)
            warpgroup.store(a_s, t, (0, 0))
            tma.store_add(acc, a_s, (0, 0, 0, 0))
            warpgroup.store(b_s, t, (0, 0))
            tma.store(o, b_s, (tkc.block_idx.x, 0, i, 0))
        with tkc.if_(atomic_add(count, 1, at=(0, 0, 0, 0), after=[acc, o]) == 1):
            w = tkc.warpid()
            t = load(rt(f32, 16, 64), acc, (0, 0, w, 0))
            for i in tkc.range(x.r // 64):
                for b in range(2):         # this block's copy and the other's
                    t = t + load(rt(f32, 16, 64), o, (b, 0, 4 * i + w, 0))
            store(out, t, (0, 0, w, 0))
    return k


@pytest.mark.parametrize("store_warp", [True, False])
def test_atomic_add_publishes_stores_to_two_gls(store_warp, rng):
    module = staged(_two_outputs(store_warp))
    x = rng.standard_normal((64 * 3, 64)).astype(np.float32)
    acc, o = np.zeros((64, 64), np.float32), np.zeros((2, 1, 64 * 3, 64), np.float32)
    count, out = np.zeros(16, np.int32), np.full((64, 64), np.nan, np.float32)
    tkc.interpreter.run(module, [x, acc, o, count, out], sms=2)
    assert count[0] == 2
    np.testing.assert_array_equal(o, np.stack([x, x])[:, None])
    sum3 = x.reshape(3, 64, 64).sum(0)
    np.testing.assert_allclose(out, 4 * sum3, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("missing,message", [
    ("writes", re.escape("which may not have completed: that warp needs tk.tma_store_wait {writes}")),
    # the consumers read before the store warp added, or after it without an ordering
    ("wait", r"no warp has added yet \(its scratch is empty\)|shared-memory race: warp 0 reads sv<f32, 16>")])
def test_atomic_add_unordered_is_caught(monkeypatch, missing, message, rng):
    """What the interpreter reports when the staging pass leaves out the
    ordering: no wait for the store warp's writes (missing "writes"), or the
    consumers reading the old value without waiting for the store warp's
    barrier (missing "wait"; the attention backward's schedule meets the
    race instead of the empty scratch)."""
    import tkc.passes.pipeline_staging as staging
    from tkc.dialect import ops as tk
    if missing == "writes":
        monkeypatch.setattr(staging.Staging, "_published", lambda self: [])
    else:
        real = tk.wait
        publish = staging.Staging._publish

        def no_wait(self):
            monkeypatch.setattr(tk, "wait", lambda *a, **k: None)
            publish(self)
            monkeypatch.setattr(tk, "wait", real)
        monkeypatch.setattr(staging.Staging, "_publish", no_wait)
    kernel = lit_kernels("pipeline-atomic-add.py")["last_warp"]
    x = rng.standard_normal((64 * 3, 64)).astype(np.float32)
    with pytest.raises(TkcError, match=message):
        tkc.interpreter.run(staged(kernel), [x, np.zeros((64, 64), np.float32), np.zeros(16, np.int32),
                                             np.zeros((64, 64), np.float32)], sms=2)


@tkc.kernel(warps=4, grid=lambda x, acc, count: (3,))
def ticket_first(x: gl(f32, 1, 1, None, 64), acc: gl(f32, 1, 1, None, 64), count: gl(tkc.i32, 1, 1, 1, 16)):
    """Each block takes a ticket t before its loop (a dynamic scheduler's
    idiom) and adds (t + 1) times x's tiles into its row tile of acc."""
    from tkc.ops import atomic_add
    t = atomic_add(count, 1, at=(0, 0, 0, 0))
    x_s, a_s = st(f32, 64, 64), st(f32, 64, 64)
    for i in tkc.range(tkc.cdiv(x.r, 64), stages=2, store_warp=True):
        tma.load(x_s, x, (0, 0, i, 0))
        warpgroup.store(a_s, warpgroup.load(rt(f32, 16, 64), x_s) * (t + 1).to(f32), (0, 0))
        tma.store_add(acc, a_s, (0, 0, tkc.block_idx.x, 0))


def test_atomic_add_before_the_loop_stays_with_the_consumers(rng):
    """An atomic_add before the pipelined loop follows no store: the
    consumers add (the store warp, which adds only after its loop, does not
    take it over: the consumers would wait for it before the loop)."""
    module = staged(ticket_first)
    assert not _store_warp_ops(module, "tk.atomic_add")
    x = rng.standard_normal((64 * 2, 64)).astype(np.float32)
    acc, count = np.zeros((64 * 3, 64), np.float32), np.zeros(16, np.int32)
    tkc.interpreter.run(module, [x, acc, count], sms=2)
    assert count[0] == 3
    total = x.reshape(2, 64, 64).sum(0)
    tickets = [round(float(np.median(tile / total))) for tile in acc.reshape(3, 64, 64)]   # t + 1
    assert sorted(tickets) == [1, 2, 3]   # each ticket taken once
    for tile, k in zip(acc.reshape(3, 64, 64), tickets):
        np.testing.assert_allclose(tile, k * total, rtol=1e-5, atol=1e-4)


def test_a_prefetch_is_issued_by_the_producer_and_changes_nothing(rng):
    """pipeline-prefetch.py: the top-level tma.prefetch (of the next block's
    Q tile, past the end for the last block) moves to the producer warp; the
    interpreter runs it as the hint it is, and the numbers are the loop's."""
    kernel = lit_kernels("pipeline-prefetch.py")["prefetch_next"]
    q, k = ref_bf16(rng.standard_normal((128 * 3, 64))), ref_bf16(rng.standard_normal((192, 64)))
    o = np.full((128 * 3, 64), np.nan, np.float32)
    tkc.interpreter.run(staged(kernel), [q, k, o])
    want = sum(q.astype(np.float64) @ k[j:j + 64].T for j in range(0, 192, 64))
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-3)
    assert "tk.tma_prefetch" in str(staged(kernel))


def test_prefetch_refusals():
    """tma.prefetch takes the shared tile whose box it names and a gl of one dtype."""
    @tkc.kernel
    def wrong_dtype(a: gl(f32, 1, 1, 64, 64)):
        tma.prefetch(st(bf16, 64, 64), a, (0, 0, 0, 0))
    with pytest.raises(TkcError, match="TMA copies without converting"):
        wrong_dtype.trace()

    @tkc.kernel
    def three_coords(a: gl(bf16, 1, 1, 64, 64)):
        tma.prefetch(st(bf16, 64, 64), a, (0, 0, 0))
    with pytest.raises(TkcError, match=r"coordinates are \(b, d, r, c\)"):
        three_coords.trace()
