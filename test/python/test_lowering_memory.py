"""Memory lowering: swizzle layout, ldmatrix/stmatrix lane addressing (simulated
in numpy against fragments.py), shared-memory planning, divisibility."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.dialect.types import RT, ST
from tkc.dtypes import itemsize
from tkc.hopper import fragments, shared as smem
from tkc.hopper.lanes import lane_offset, ldmatrix_row_col
from tkc.lowering import requirements, shared
from tkc.lowering.lanes import lane_offset_ir, ldmatrix_row_col_ir

SWIZZLED = [ST("bf16", 64, 64, "128b"), ST("bf16", 16, 32, "64b"), ST("f16", 32, 16, "32b"),
            ST("f32", 16, 32, "128b"), ST("f32", 32, 16, "64b"), ST("bf16", 48, 128, "128b")]
ALL = SWIZZLED + [ST("bf16", 32, 48, "none"), ST("f32", 16, 16, "none")]


# ---------------------------------------------------------------- the st layout

def _doc_offset(st: ST, row: int, col: int) -> int:
    """docs/tile-ir.md, written out independently: column panels of P = S/E
    columns, row-major in a panel, then o ^ (((o >> 7) & (S/16 - 1)) << 4)."""
    e = itemsize(st.dtype)
    s = {"none": 0, "32b": 32, "64b": 64, "128b": 128}[st.swizzle]
    if s == 0:
        return (row * st.cols + col) * e
    p = s // e
    o = (col // p) * st.rows * p * e + row * p * e + (col % p) * e
    return o ^ (((o >> 7) & (s // 16 - 1)) << 4)


@pytest.mark.parametrize("st", ALL, ids=lambda s: s.text())
def test_address_is_a_bijection_matching_the_doc(st):
    e = itemsize(st.dtype)
    got = np.array([[smem.address(st, r, c) for c in range(st.cols)] for r in range(st.rows)])
    assert sorted(got.ravel().tolist()) == list(range(0, st.rows * st.cols * e, e))
    doc = np.array([[_doc_offset(st, r, c) for c in range(st.cols)] for r in range(st.rows)])
    np.testing.assert_array_equal(got, doc)


@pytest.mark.parametrize("st", ALL, ids=lambda s: s.text())
def test_16_byte_chunks_stay_contiguous(st):
    e = itemsize(st.dtype)
    n = 16 // e
    for r in range(st.rows):
        for c0 in range(0, st.cols, n):
            a = [smem.address(st, r, c) for c in range(c0, c0 + n)]
            assert a[0] % 16 == 0
            assert a == list(range(a[0], a[0] + 16, e))


@pytest.mark.parametrize("st", [s for s in SWIZZLED if s.swizzle == "128b"], ids=lambda s: s.text())
def test_128b_swizzle_spreads_eight_rows_over_all_banks(st):
    """Why swizzle at all: the same 16-byte column chunk of 8 consecutive rows
    hits 8 different 16-byte bank groups (conflict-free ldmatrix)."""
    n = 16 // itemsize(st.dtype)
    for c0 in range(0, st.cols, n):
        groups = {(smem.address(st, r, c0) % 128) // 16 for r in range(8)}
        assert len(groups) == 8


def test_auto_swizzle_is_the_widest_dividing_the_row():
    assert smem.swizzle_bytes(ST("bf16", 64, 64, "auto")) == 128
    assert smem.swizzle_bytes(ST("bf16", 64, 32, "auto")) == 64
    assert smem.swizzle_bytes(ST("bf16", 64, 16, "auto")) == 32
    assert smem.swizzle_bytes(ST("f32", 16, 16, "auto")) == 64


def _jit(build, nargs: int):
    """JIT-compile `build(*index Values) -> index Value` (arith only) on the
    CPU and return it as a Python function of ints."""
    from mlir import execution_engine, ir, passmanager
    from mlir.dialects import func
    import tkc.dialect as d
    ctx = d.context()
    with ctx, ir.Location.unknown():
        m = ir.Module.create()
        idx = ir.IndexType.get()
        with ir.InsertionPoint(m.body):
            f = func.FuncOp("f", ir.FunctionType.get([idx] * nargs, [idx]))
            f.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            block = f.add_entry_block()
            with ir.InsertionPoint(block):
                func.ReturnOp([build(*block.arguments)])
        passmanager.PassManager.parse(
            "builtin.module(convert-arith-to-llvm,convert-func-to-llvm,convert-index-to-llvm,"
            "reconcile-unrealized-casts)").run(m.operation)
        ee = execution_engine.ExecutionEngine(m)

    def call(*args):
        out = ctypes.c_int64(0)
        ptrs = [ctypes.pointer(ctypes.c_int64(a)) for a in args]
        ee.invoke("f", *ptrs, ctypes.pointer(out))
        return out.value
    call.keep = (ctx, m, ee)
    return call


@pytest.mark.parametrize("st", ALL, ids=lambda s: s.text())
def test_emitted_address_arith_equals_the_python_formula(st):
    """The arith smem.address emits, JIT-compiled on the CPU, gives the
    same offsets as the pure function."""
    f = _jit(lambda r, c: smem.address(st, r, c), 2)
    for r in range(0, st.rows, 3):
        for c in range(0, st.cols, 5):
            assert f(r, c) == smem.address(st, r, c), (r, c)


@pytest.mark.parametrize("st, rt, pitch", [
    (ST("bf16", 64, 128, "128b"), RT("bf16", 16, 64), 64),    # whole panels: c0 outside
    (ST("bf16", 64, 128, "128b"), RT("bf16", 16, 32), 64),    # half a panel: c0 inside
    (ST("bf16", 32, 64, "64b"), RT("bf16", 16, 32), 128),     # a row subtile of a taller parent
    (ST("f32", 64, 64, "32b"), RT("f32", 16, 16), 64),
    (ST("f32", 32, 48, "none"), RT("f32", 16, 16), 32),
], ids=lambda x: x.text() if hasattr(x, "text") else str(x))
def test_split_address_equals_the_swizzled_address(st, rt, pitch):
    """memory._address (whole swizzle periods of rows and whole panels of
    the run-time subtile added after the swizzle), JIT-compiled, gives
    smem.address of the summed coordinates at every subtile position,
    static offset and lane part."""
    from tkc.lowering.core import Shared
    from tkc.lowering.shared_memory import _address
    sh = Shared(st, 0, None, pitch)
    for r, c in ((0, 0), (8, 0), (0, 8), (8, 9)):
        f = _jit(lambda r0, lr, c0, lc: _address(sh, rt, r0, r, lr, c0, c, lc), 4)
        for r0 in range(0, st.rows, rt.rows):
            for c0 in range(0, st.cols, rt.cols):
                for lr, lc in ((0, 0), (7, 2), (5, 8), (3, 6)):
                    if c + lc < rt.cols:
                        want = smem.address(st, r0 + r + lr, c0 + c + lc, pitch)
                        assert f(r0, lr, c0, lc) == want, (r, c, r0, c0, lr, lc)


@pytest.mark.parametrize("layout", ["row", "col"])
def test_emitted_lane_arith_equals_the_python_helpers(layout):
    from mlir.dialects import arith

    def pack(rc):  # two index Values as one: row * 1000 + col
        return arith.addi(arith.muli(rc[0], _const(1000)), rc[1])
    ld = _jit(lambda lane: pack(ldmatrix_row_col_ir(layout, lane)), 1)
    frag = _jit(lambda lane: pack(lane_offset_ir(layout, lane)), 1)
    for lane in range(32):
        r, c = ldmatrix_row_col(layout, lane)
        assert ld(lane) == r * 1000 + c
        r, c = lane_offset(layout, lane)
        assert frag(lane) == r * 1000 + c


def _const(n):
    from mlir import ir
    from mlir.dialects import arith
    return arith.constant(ir.IndexType.get(), n)


# ---------------------------------------------------------------- fragments

@pytest.mark.parametrize("layout", ["row", "col"])
def test_fragment_coords_are_lane0_plus_lane_offset(layout):
    """memory.py computes each lane's base address once: this must hold."""
    for lane in range(32):
        dr, dc = lane_offset(layout, lane)
        for k in range(8):
            r0, c0 = fragments.base_coord(layout, k, 0)
            assert fragments.base_coord(layout, k, lane) == (r0 + dr, c0 + dc)


@pytest.mark.parametrize("kind", ["row", "col"])
def test_vector_slots_are_lane0_plus_lane_offset(kind):
    for lane in range(32):
        g, t = divmod(lane, 4)
        part = g if kind == "col" else 2 * t
        for i in range(fragments.vec_elems(64, kind)):
            assert fragments.vec_coord(64, kind, i, lane) == fragments.vec_coord(64, kind, i, 0) + part


# ---------------------------------------------------------------- ldmatrix / stmatrix in numpy

def _smem_with(st: ST, tile: np.ndarray) -> np.ndarray:
    """Shared memory (as 16-bit elements) holding `tile` at the st's layout."""
    mem = np.full(st.rows * st.cols, -1, dtype=np.int64)
    for r in range(st.rows):
        for c in range(st.cols):
            mem[smem.address(st, r, c) // 2] = tile[r, c]
    return mem


def _ldmatrix_x4(mem: np.ndarray, addrs: list[int], trans: bool) -> np.ndarray:
    """PTX ldmatrix.m8n8.x4.b16: lane 8q+j gives the byte address of row j of
    matrix q; lane l receives in register q the pair at row l//4, columns
    2(l%4), 2(l%4)+1 of matrix q (of its transpose with .trans)."""
    mats = np.array([[mem[addrs[8 * q + j] // 2: addrs[8 * q + j] // 2 + 8] for j in range(8)]
                     for q in range(4)])
    if trans:
        mats = mats.transpose(0, 2, 1)
    regs = np.zeros((32, 8), dtype=np.int64)
    for lane in range(32):
        g, t = divmod(lane, 4)
        for q in range(4):
            regs[lane, 2 * q: 2 * q + 2] = mats[q, g, 2 * t: 2 * t + 2]
    return regs


def _stmatrix_x4(mem: np.ndarray, addrs: list[int], regs: np.ndarray, trans: bool) -> None:
    """The mirror of _ldmatrix_x4."""
    mats = np.zeros((4, 8, 8), dtype=np.int64)
    for lane in range(32):
        g, t = divmod(lane, 4)
        for q in range(4):
            mats[q, g, 2 * t: 2 * t + 2] = regs[lane, 2 * q: 2 * q + 2]
    if trans:
        mats = mats.transpose(0, 2, 1)
    for q in range(4):
        for j in range(8):
            a = addrs[8 * q + j] // 2
            mem[a: a + 8] = mats[q, j]


_ST16 = [ST("bf16", 32, 64, "128b"), ST("bf16", 32, 32, "64b"), ST("f16", 32, 16, "32b"),
         ST("bf16", 32, 48, "none")]


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("st", _ST16, ids=lambda s: s.text())
def test_ldmatrix_gives_exactly_the_fragment_layout(st, layout):
    tile = np.arange(st.rows * st.cols).reshape(st.rows, st.cols)
    mem = _smem_with(st, tile)
    for r0 in range(0, st.rows, 16):
        for c0 in range(0, st.cols, 16):
            addrs = [smem.address(st, r0 + rr, c0 + cc)
                     for rr, cc in (ldmatrix_row_col(layout, lane) for lane in range(32))]
            regs = _ldmatrix_x4(mem, addrs, trans=(layout == "col"))
            for lane in range(32):
                for k in range(8):
                    r, c = fragments.base_coord(layout, k, lane)
                    assert regs[lane, k] == tile[r0 + r, c0 + c], (lane, k)


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("st", _ST16, ids=lambda s: s.text())
def test_stmatrix_writes_each_fragment_element_to_its_place(st, layout):
    tile = np.arange(st.rows * st.cols).reshape(st.rows, st.cols) + 7
    mem = np.full(st.rows * st.cols, -1, dtype=np.int64)
    for r0 in range(0, st.rows, 16):
        for c0 in range(0, st.cols, 16):
            regs = np.array([[tile[r0 + fragments.base_coord(layout, k, lane)[0],
                                   c0 + fragments.base_coord(layout, k, lane)[1]] for k in range(8)]
                             for lane in range(32)])
            addrs = [smem.address(st, r0 + rr, c0 + cc)
                     for rr, cc in (ldmatrix_row_col(layout, lane) for lane in range(32))]
            _stmatrix_x4(mem, addrs, regs, trans=(layout == "col"))
    np.testing.assert_array_equal(mem, _smem_with(st, tile))


def test_ldmatrix_row_addresses_are_16_byte_aligned_rows():
    st = ST("bf16", 64, 64, "128b")
    for layout in ("row", "col"):
        for lane in range(32):
            r, c = ldmatrix_row_col(layout, lane)
            assert c % 8 == 0 and smem.address(st, r, c) % 16 == 0


# ---------------------------------------------------------------- plan and divisibility

def _func(body: str, args: str = ""):
    from mlir import ir
    import tkc.dialect as d
    ctx = d.context()
    text = (f'func.func @k({args}) attributes {{tk.kernel}} {{\n{body}\n  return\n}}')
    with ctx:
        m = ir.Module.parse(text)
    return ctx, m, m.body.operations[0]


def _alloc(t: str, line: int) -> str:
    return f'  %a{line} = "tk.alloc"() : () -> {t} loc("k.py":{line}:1)'


def test_plan_aligns_swizzled_tiles_to_1024_and_others_to_128():
    body = "\n".join([_alloc("!tk.sv<f32, 16 : i64>", 1),
                      _alloc('!tk.st<bf16, 64 : i64, 64 : i64, "128b">', 2),
                      _alloc('!tk.st<f32, 16 : i64, 16 : i64, "none">', 3),
                      _alloc("!tk.sv<bf16, 32 : i64>", 4)])
    ctx, m, f = _func(body)
    with ctx:
        p = shared.plan(f)
        ops = list(f.regions[0].blocks[0].operations)
        offsets = [p.offset(op.result) for op in ops[:4]]
    assert offsets == [0, 1024, 1024 + 8192, 1024 + 8192 + 1024]
    assert p.total == offsets[3] + 64


def test_plan_over_227_kib_is_located_and_lists_allocations():
    body = "\n".join(_alloc('!tk.st<bf16, 128 : i64, 256 : i64, "128b">', i) for i in (1, 2, 3, 4, 5, 6))
    ctx, m, f = _func(body)
    with ctx, pytest.raises(TkcError) as e:
        shared.plan(f)
    assert e.value.where == "k.py:4:1"  # 6 x 64 KiB: the fourth is the first past the limit
    assert "232448" in str(e.value) and "k.py:1:1" in str(e.value) and "offset 196608" in str(e.value)
    # every allocation counts, those after the first overflow too
    assert "need 393216 bytes" in str(e.value) and "k.py:6:1" in str(e.value)


def _attr_alloc(t: str, line: int, attrs: str) -> str:
    return f'  %a{line} = "tk.alloc"() {{{attrs}}} : () -> {t} loc("k.py":{line}:1)'


RING_A, RING_B = '!tk.st<bf16, 128 : i64, 64 : i64, "128b">', '!tk.st<bf16, 64 : i64, 128 : i64, "128b">'
PARTIAL = '!tk.st<f32, 128 : i64, 128 : i64, "128b">'


@pytest.mark.parametrize("stages,overlaid", [(5, True), (2, False)])
def test_plan_lays_tiles_after_the_loop_over_its_ring(stages, overlaid):
    """Tiles marked after_ring (tk-pipeline-staging: used only after the
    pipelined loop) start at the ring's first slot where they fit within the
    ring (5 stages of 32 KiB hold a 16 KiB finish tile and a 64 KiB
    partial); where they do not (2 stages), every tile bumps in program
    order as without the mark. An unmarked tile after them keeps its place
    past the ring."""
    body = "\n".join([_attr_alloc(RING_A, 1, f"stages = {stages} : i64"),
                      _attr_alloc(RING_B, 2, f"stages = {stages} : i64"),
                      _attr_alloc(RING_A, 3, "after_ring"), _attr_alloc(PARTIAL, 4, "after_ring"),
                      _alloc(PARTIAL, 5), _alloc("!tk.barrier", 6)])
    ctx, m, f = _func(body)
    with ctx:
        p = shared.plan(f)
        offsets = [p.offset(op.result) for op in list(f.regions[0].blocks[0].operations)[:6]]
    ring = 2 * stages * 16384
    if overlaid:
        assert offsets == [0, stages * 16384, 0, 16384, ring, ring + 65536]
        assert p.total == ring + 65536 + 8
    else:
        assert offsets == [0, 32768, 65536, 81920, 147456, 212992]
        assert p.total == 212992 + 8


def test_plan_overlays_nothing_when_a_tile_sits_between_rings():
    """The tiles after the loop lie over one run of ring allocations: with an
    unmarked tile between the rings, the plan bumps every tile."""
    body = "\n".join([_attr_alloc(RING_A, 1, "stages = 4 : i64"), _alloc(RING_A, 2),
                      _attr_alloc(RING_B, 3, "stages = 4 : i64"), _attr_alloc(RING_A, 4, "after_ring")])
    ctx, m, f = _func(body)
    with ctx:
        p = shared.plan(f)
        offsets = [p.offset(op.result) for op in list(f.regions[0].blocks[0].operations)[:4]]
    assert offsets == [0, 65536, 81920, 147456]


def test_plan_rejects_alloc_inside_a_loop():
    body = ('  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n'
            '  scf.for %i = %c0 to %c1 step %c1 {\n'
            '    %s = "tk.alloc"() : () -> !tk.sv<f32, 16 : i64> loc("k.py":9:3)\n  }')
    ctx, m, f = _func(body)
    with ctx, pytest.raises(TkcError) as e:
        shared.plan(f)
    assert e.value.where == "k.py:9:3"


GL_A = "!tk.gl<bf16, 1 : i64, -1 : i64, -1 : i64, -1 : i64>"
GL_V = "!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, -1 : i64>"


def test_divisible_takes_the_lcm_of_every_access():
    st = '!tk.st<bf16, 64 : i64, 32 : i64, "128b">'
    body = f'''  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = "tk.alloc"() : () -> {st}
  "tk.group_load"(%s, %a, %c0, %c0, %c0, %c0) {{warps = 1 : i64}} : ({st}, {GL_A}, index, index, index, index) -> ()
  scf.for %i = %c0 to %c1 step %c1 {{
    %r = "tk.load"(%a, %c0, %c0, %c0, %i) : ({GL_A}, index, index, index, index) -> !tk.rt<f32, 48 : i64, 16 : i64, "row">
  }}
  %v = "tk.load"(%v0, %c0, %c0, %c0, %c0) : ({GL_V}, index, index, index, index) -> !tk.rv<f32, 80 : i64, "col">
  "tk.store"(%v0, %v, %c0, %c0, %c0, %c0) : ({GL_V}, !tk.rv<f32, 80 : i64, "col">, index, index, index, index) -> ()'''
    ctx, m, f = _func(body, f"%a: {GL_A}, %x: f32, %v0: {GL_V}, %unused: {GL_V}")
    with ctx:
        got = requirements.divisible(f)
    assert got == {0: [1, 1, 192, 32], 2: [1, 1, 1, 80], 3: [1, 1, 1, 1]}
