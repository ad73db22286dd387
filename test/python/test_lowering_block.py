"""tk-lower-to-nvvm on the block-level IR: rings (tk.alloc {stages}, tk.stage),
subtile views of st and rt, barrier rings, named barriers, and the refusal of
the unstaged tk.pipeline_load / tk.pipeline_store.

The shared-memory addresses are checked three ways: `smem.address` with a
pitch against a brute-force reference written from docs/tile-ir.md ("Shared
tile memory layout"); wgmma descriptors of views read through the ISA model
of wgmma_model.py; and the addresses in the PTX itself, computed by a small
evaluator of the PTX's integer arithmetic (the shared array at 0, the
special registers given), so that what the hardware receives is what the
layout says.
"""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from tkc.diagnostics import TkcError
from tkc.dialect.types import RT, ST
from tkc.dtypes import itemsize
from tkc.hopper import shared as smem
from tkc.lowering import shared

from wgmma_model import BASE, image, wgmma_read

SWIZZLE_BYTES = {"none": 0, "32b": 32, "64b": 64, "128b": 128}


# ---------------------------------------------------------------- the documented layout

def reference_address(st: ST, row: int, col: int) -> int:
    """docs/tile-ir.md, "Shared tile memory layout", written out: row-major
    without a swizzle; else column panels of P = S/E columns, each all R rows
    row-major, one after the other, and the offset o XOR-ed with
    ((o >> 7) & (S/16 - 1)) << 4."""
    e, s = itemsize(st.dtype), SWIZZLE_BYTES[st.swizzle]
    if not s:
        return (row * st.cols + col) * e
    p = s // e
    o = (col // p) * (st.rows * p * e) + row * (p * e) + (col % p) * e
    return o ^ (((o >> 7) & (s // 16 - 1)) << 4)


# (parent, view): every view a legal subtile (whole panels, or whole rows unswizzled)
VIEWS = [
    (ST("bf16", 128, 256, "128b"), (64, 256)),   # row subtile of 4 panels
    (ST("bf16", 128, 256, "128b"), (64, 128)),   # rows and 2 of the 4 panels
    (ST("bf16", 128, 128, "128b"), (16, 64)),    # 16 rows of one panel
    (ST("bf16", 128, 64, "128b"), (64, 64)),     # one panel: pitch changes nothing
    (ST("f16", 64, 128, "64b"), (32, 32)),
    (ST("f32", 32, 64, "32b"), (16, 8)),
    (ST("f32", 64, 64, "128b"), (32, 32)),
    (ST("bf16", 64, 48, "none"), (16, 48)),      # unswizzled: whole rows
]


def _view_cases():
    for parent, (r, c) in VIEWS:
        for i, j in itertools.product(range(parent.rows // r), range(parent.cols // c)):
            yield parent, ST(parent.dtype, r, c, parent.swizzle), i, j


def _case_id(case):
    parent, view, i, j = case
    return f"{parent.dtype}-{parent.rows}x{parent.cols}-{parent.swizzle}-{view.rows}x{view.cols}@{i},{j}"


CASES = list(_view_cases())


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_address_with_pitch_is_the_parents_layout(case):
    """A view at (i, j) starts at the parent's element (i*R', j*C'), and its
    element (r, c) under `address(view, r, c, pitch=parent rows)` is the
    parent's element (i*R' + r, j*C' + c) of the documented layout."""
    parent, view, i, j = case
    start = reference_address(parent, i * view.rows, j * view.cols)
    for r, c in itertools.product(range(view.rows), range(view.cols)):
        want = reference_address(parent, i * view.rows + r, j * view.cols + c)
        assert start + smem.address(view, r, c, pitch=parent.rows) == want, (r, c)


def test_address_without_pitch_is_the_tiles_own_layout():
    for parent, _ in VIEWS:
        for r, c in itertools.product(range(0, parent.rows, 3), range(parent.cols)):
            assert smem.address(parent, r, c) == reference_address(parent, r, c)
            assert smem.address(parent, r, c, pitch=parent.rows) == reference_address(parent, r, c)


def test_own_rows_are_wrong_for_a_row_subtile_of_several_panels():
    """The reason for the pitch: with its own rows the view's second panel
    would land inside the parent's first panel."""
    parent, view = ST("bf16", 128, 256, "128b"), ST("bf16", 64, 256, "128b")
    assert smem.address(view, 0, 64) == 64 * 128
    assert smem.address(view, 0, 64, pitch=128) == reference_address(parent, 0, 64) == 128 * 128


# ---------------------------------------------------------------- the rules (MLIR)

mlir = pytest.importorskip("mlir")
from mlir import ir  # noqa: E402

from tkc.dialect import context, ops  # noqa: E402
from tkc.lowering import lower_module, views, wgmma  # noqa: E402
from tkc.lowering.core import Shared  # noqa: E402


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_subtile_rule_offset_and_pitch(case):
    """The tk.subtile rule at constant indices: a static offset equal to the
    documented start of the view, no dynamic part, the parent's pitch."""
    parent, view, i, j = case
    got = views._st_part(None, Shared(parent, 4096), view, [None, None], [i, j])
    assert got.dynamic is None and got.pitch == parent.rows and got.view == view
    assert got.offset == 4096 + reference_address(parent, i * view.rows, j * view.cols)


def _wgmma_views():
    """(parent, view, i, j, k_major) for views wgmma can take: K-major
    st<MN, K> and MN-major st<K, MN>, rows of a multi-panel parent."""
    yield ST("bf16", 128, 128, "128b"), ST("bf16", 64, 128, "128b"), 1, 0, True
    yield ST("bf16", 128, 256, "128b"), ST("bf16", 64, 256, "128b"), 1, 0, False
    yield ST("bf16", 128, 256, "128b"), ST("bf16", 64, 128, "128b"), 1, 1, True
    yield ST("f16", 192, 128, "64b"), ST("f16", 64, 64, "64b"), 2, 1, True
    yield ST("f16", 64, 128, "64b"), ST("f16", 32, 128, "64b"), 1, 0, False
    yield ST("bf16", 128, 64, "32b"), ST("bf16", 64, 32, "32b"), 1, 1, False


@pytest.mark.parametrize("parent,view,i,j,k_major", list(_wgmma_views()),
                         ids=lambda x: x.text() if isinstance(x, ST) else str(x))
def test_view_descriptors_read_the_view(parent, view, i, j, k_major):
    """Descriptors of a view (its start, the parent's pitch) read, through
    the ISA model, exactly the view's part of the parent's image."""
    memory, ids = image(parent)
    start = views._st_part(None, Shared(parent, 0), view, [None, None], [i, j]).offset
    part = ids[i * view.rows:(i + 1) * view.rows, j * view.cols:(j + 1) * view.cols]
    layout = wgmma.operand_layout(view, k_major, pitch=parent.rows)
    e = itemsize(view.dtype)
    for kk in range(len(layout.steps)):
        got = wgmma_read(memory, layout.descriptor(BASE + start, kk), k_major,
                         view.rows if k_major else view.cols, e)
        want = part[:, 16 * kk:16 * kk + 16] if k_major else part[16 * kk:16 * kk + 16, :].T
        np.testing.assert_array_equal(got, want, err_msg=f"k step {kk}")


# ---------------------------------------------------------------- addresses in the PTX

class Ptx:
    """The integer arithmetic of straight-line PTX, evaluated on demand: a
    register's definitions (several where LLVM duplicated a branch: they
    must agree; a loop's are cycles, refused), with the shared array's
    symbol at 0 and the special registers (`%ctaid.x`, ...) given."""

    _DEF = re.compile(r"^\s*([a-z][\w.:]*)\s+(%\w+),\s*(.*);\s*$")
    _OPS = {"mov": lambda x: x[0], "cvt": lambda x: x[0], "cvta": lambda x: x[0],
            "add": lambda x: x[0] + x[1], "sub": lambda x: x[0] - x[1],
            "mul": lambda x: x[0] * x[1], "mad": lambda x: x[0] * x[1] + x[2],
            "shl": lambda x: x[0] << x[1], "shr": lambda x: x[0] >> x[1],
            "and": lambda x: x[0] & x[1], "or": lambda x: x[0] | x[1], "xor": lambda x: x[0] ^ x[1]}

    def __init__(self, ptx: str, special: dict | None = None):
        self.text, self.special = ptx, dict(special or {})
        self.defs: dict = {}
        self._busy: set = set()
        for line in ptx.splitlines():
            m = self._DEF.match(line)
            if m:
                self.defs.setdefault(m[2], []).append((m[1], [a.strip() for a in m[3].split(",")]))

    def value(self, token: str) -> int:
        token = token.strip()
        if re.fullmatch(r"-?\d+", token):
            return int(token)
        if token == shared.SHARED_SYMBOL:
            return 0
        if token in self.special:
            return self.special[token]
        if token in self._busy:
            raise RecursionError(f"{token} depends on itself (a loop)")
        assert token in self.defs, f"{token}: no definition"
        self._busy.add(token)
        try:
            values = {self._eval(opcode, args) for opcode, args in self.defs[token]}
        finally:
            self._busy.discard(token)
        assert len(values) == 1, f"{token}: its definitions disagree: {values}"
        return values.pop()

    def _eval(self, opcode: str, args: list) -> int:
        op = opcode.split(".")[0]
        assert op in self._OPS, f"no evaluation for {opcode}"
        x = [self.value(a) for a in args]
        if opcode.startswith("shr.s64") and x[0] >> 63:  # arithmetic shift of a negative
            x[0] -= 1 << 64
        return self._OPS[op](x) & ((1 << 64) - 1)

    def address(self, operand: str) -> int:
        """`[sym+N]`, `[%rd+N]`, `[%rd]` as a number."""
        m = re.fullmatch(r"\[([^\]+]+)(?:\+(-?\d+))?\]", operand.strip())
        assert m, operand
        return self.value(m[1]) + int(m[2] or 0)

    def wgmma_descriptors(self) -> list[tuple]:
        """(A descriptor or None for registers, B descriptor) per wgmma, in
        order; each `%tkdN` is built in its asm block from 32-bit words,
        `add.u32 %tklN, %rM, low; mov.b64 %tkdN, {%tklN, high}`: the
        address field plus the constant's low word, and its high word."""
        out, local = [], {}
        for line in self.text.splitlines():
            m = re.fullmatch(r"\s*add.u32 (%tkl\d+), (%r\d+), (\d+);\s*", line)
            if m:
                local[m[1]] = self.value(m[2]) + int(m[3])
                continue
            m = re.fullmatch(r"\s*mov.b64 (%tkd\d+), \{(%tkl\d+), (\d+)\};\s*", line)
            if m:
                assert local[m[2]] < 1 << 32, "the low word carried"
                local[m[1]] = local[m[2]] | int(m[3]) << 32
                continue
            if "wgmma.mma_async" not in line:
                continue
            rest = line.split("}", 1)[1]  # past the accumulators
            regs = re.findall(r"\{[^}]*\}|%rd\d+|%tkd\d+", rest)
            value = lambda r: local[r] if r.startswith("%tkd") else self.value(r)  # noqa: E731
            a = None if regs[0].startswith("{") else value(regs[0])
            out.append((a, value(regs[1])))
            local = {}
        return out

    def tma(self, kind: str) -> list[dict]:
        """Every TMA load ("load") or store ("store"): its shared address,
        its coordinates and (loads) its mbarrier's address."""
        out = []
        for line in self.text.splitlines():
            line = line.strip()
            if not line.startswith("cp.async.bulk.tensor"):
                continue
            if kind == "load" and "shared::cluster.global" in line:
                dst, rest = re.split(r"\s+", line, maxsplit=1)[1].split(", ", 1)
                coords = re.search(r"\{([^}]*)\}", rest)[1].split(",")
                bar = rest.rsplit(", ", 1)[1].rstrip(";")
                out.append({"shared": self.address(dst), "coords": [self.value(c) for c in coords],
                            "barrier": self.address(bar)})
            elif kind == "store" and "global.shared::cta" in line:
                coords = re.search(r"\{([^}]*)\}", line)[1].split(",")
                src = line.rsplit(", ", 1)[1].rstrip(";")
                out.append({"shared": self.address(src), "coords": [self.value(c) for c in coords]})
        return out


def _parse(text):
    with context():
        return ir.Module.parse(text)


def _ptx(text):
    from tkc.compiler import compile_to
    return compile_to(_parse(text), "ptx")


def _manifest(text):
    import json
    m = _parse(text)
    from tkc.compiler import compile_to
    nvvm = compile_to(m, "nvvm")
    raw = re.search(r'tkc.manifest = "((?:[^"\\]|\\.)*)"', nvvm)[1]
    return json.loads(raw.replace("\\22", '"'))


# A GEMM main loop in the shape tk-pipeline-staging produces: a 4-slot ring of
# A tiles (st<bf16, 128, 64>) and a barrier ring, one st<bf16, 64, 256> B
# tile, TMA loads by warp 0 into slot k % 4, each consumer warpgroup's wgmma
# on its 64-row subtile of the slot.
RING_GEMM = '''
!ring = !tk.st<bf16, 128 : i64, 64 : i64, "auto">
!half = !tk.st<bf16, 64 : i64, 64 : i64, "auto">
!sb = !tk.st<bf16, 64 : i64, 256 : i64, "auto">
!acc = !tk.rt<f32, 16 : i64, 256 : i64, "row">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
!gc = !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
!bar = !tk.barrier
func.func @ring_gemm(%a: !g, %b: !g, %c: !gc, %kt: i32) attributes {tk.kernel, tk.warps = 8 : i64,
    tk.arg_names = ["a", "b", "c", "kt"], tk.grid = ["cdiv(c.c, 256)", "cdiv(c.r, 128)", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %ring = "tk.alloc"() {stages = 4 : i64} : () -> !ring
  %sb = "tk.alloc"() : () -> !sb
  %full = "tk.alloc"() {stages = 4 : i64} : () -> !bar
  "tk.init_barrier"(%full) {count = 1 : i64} : (!bar) -> ()
  %n = arith.index_cast %kt : i32 to index
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %w = "tk.warpid"() : () -> index
  %wg = "tk.warpgroupid"() : () -> index
  %leader = arith.cmpi eq, %w, %c0 : index
  %z = "tk.zero"() : () -> !acc
  %res = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (!acc) {
    %s = arith.remui %k, %c4 : index
    %phase = arith.divui %k, %c4 : index
    %slot = "tk.stage"(%ring, %s) : (!ring, index) -> !ring
    %bar = "tk.stage"(%full, %s) : (!bar, index) -> !bar
    scf.if %leader {
      "tk.expect_bytes"(%bar) {bytes = 49152 : i64} : (!bar) -> ()
      "tk.tma_load"(%slot, %a, %c0, %c0, %y, %k, %bar) : (!ring, !g, index, index, index, index, !bar) -> ()
      "tk.tma_load"(%sb, %b, %c0, %c0, %k, %x, %bar) : (!sb, !g, index, index, index, index, !bar) -> ()
    }
    "tk.wait"(%bar, %phase) : (!bar, index) -> ()
    %mine = "tk.subtile"(%slot, %wg, %c0) : (!ring, index, index) -> !half
    %d = "tk.warpgroup_mma_ab"(%mine, %sb, %acc) : (!half, !sb, !acc) -> !acc
    %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc) -> !acc
    "tk.sync"() : () -> ()
    scf.yield %e : !acc
  }
  %y8 = arith.muli %y, %c8 : index
  %row = arith.addi %y8, %w : index
  "tk.store"(%c, %res, %c0, %c0, %row, %x) : (!gc, !acc, index, index, index, index) -> ()
  return
}
'''


def test_ring_gemm_assembles_without_spills():
    """The brief's kernel: 4 x st<bf16, 128, 64> + st<bf16, 64, 256> + 4
    barriers, TMA and wgmma; ptxas assembles it with no spills."""
    import shutil
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH")
    from tkc.compiler import ptxas
    man = _manifest(RING_GEMM)
    assert man["shared_bytes"] == 4 * 16384 + 32768 + 4 * 8
    assert [m["box"] for m in man["tensor_maps"]] == [[128, 64], [64, 64]]
    ptx = _ptx(RING_GEMM)
    assert ptx.count("wgmma.mma_async") == 4  # K = 64: four k16 steps
    assert ptx.count("shared::cluster.global.tile") == 1 + 4  # one A panel, four B panels
    _, res = ptxas(ptx)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, res["ptxas"]


# The same addresses without the loop, at run-time indices from the block
# index, so that the PTX evaluator sees straight-line code.
RING_VIEWS = '''
!ring = !tk.st<bf16, 128 : i64, 64 : i64, "128b">
!half = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!sb = !tk.st<bf16, 64 : i64, 256 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 256 : i64, "row">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
!gc = !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
!bar = !tk.barrier
func.func @ring_views(%a: !g, %b: !g, %c: !gc) attributes {tk.kernel, tk.warps = 4 : i64,
    tk.arg_names = ["a", "b", "c"]} {
  %c0 = arith.constant 0 : index
  %ring = "tk.alloc"() {stages = 4 : i64} : () -> !ring
  %sb = "tk.alloc"() : () -> !sb
  %full = "tk.alloc"() {stages = 4 : i64} : () -> !bar
  %s = "tk.block_idx"() {dim = "x"} : () -> index
  %half = "tk.block_idx"() {dim = "y"} : () -> index
  %slot = "tk.stage"(%ring, %s) : (!ring, index) -> !ring
  %bar = "tk.stage"(%full, %s) : (!bar, index) -> !bar
  "tk.tma_load"(%slot, %a, %c0, %c0, %half, %s, %bar) : (!ring, !g, index, index, index, index, !bar) -> ()
  "tk.tma_load"(%sb, %b, %c0, %c0, %s, %half, %bar) : (!sb, !g, index, index, index, index, !bar) -> ()
  %mine = "tk.subtile"(%slot, %half, %c0) : (!ring, index, index) -> !half
  %z = "tk.zero"() : () -> !acc
  %d = "tk.warpgroup_mma_ab"(%mine, %sb, %z) : (!half, !sb, !acc) -> !acc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc) -> !acc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %e, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  "tk.tma_store"(%a, %mine, %c0, %c0, %half, %s) : (!g, !half, index, index, index, index) -> ()
  return
}
'''


@pytest.mark.parametrize("slot,half", [(0, 0), (3, 1), (2, 1)])
def test_ring_slot_addresses_in_the_ptx(slot, half):
    """Slot s of the ring is s * 16384 bytes in, its barrier s * 8 bytes into
    the barrier ring; the slot's row half `half` starts half * 64 * 128
    bytes further; the descriptors decode to those addresses, with B's
    MN-major LBO its own panel stride."""
    ring_at, b_at, bars_at = 0, 4 * 16384, 4 * 16384 + 32768
    ptx = Ptx(_ptx(RING_VIEWS), {"%ctaid.x": slot, "%ctaid.y": half})
    loads = ptx.tma("load")
    assert [ld["shared"] for ld in loads] == [ring_at + slot * 16384] + [b_at + p * 8192 for p in range(4)]
    assert {ld["barrier"] for ld in loads} == {bars_at + 8 * slot}
    assert loads[0]["coords"][:2] == [64 * slot, 128 * half]
    assert [ld["coords"][0] for ld in loads[1:]] == [256 * half + 64 * p for p in range(4)]
    mine = ring_at + slot * 16384 + half * 64 * 128
    descs = ptx.wgmma_descriptors()
    a = [wgmma.decode(d) for d, _ in descs]
    b = [wgmma.decode(d) for _, d in descs]
    assert [x["address"] for x in a] == [mine + 32 * kk for kk in range(4)]
    assert {(x["lbo"], x["sbo"], x["swizzle"]) for x in a} == {(16, 1024, 128)}
    assert [x["address"] for x in b] == [b_at + 2048 * kk for kk in range(4)]
    assert {(x["lbo"], x["sbo"], x["swizzle"]) for x in b} == {(64 * 128, 1024, 128)}
    store, = ptx.tma("store")
    assert store["shared"] == mine and store["coords"][:2] == [64 * slot, 64 * half]


ROW_VIEWS = '''
!p = !tk.st<bf16, 128 : i64, 256 : i64, "128b">
!h = !tk.st<bf16, 64 : i64, 256 : i64, "128b">
!b = !tk.st<bf16, 64 : i64, 256 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 64 : i64, "row">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
!gc = !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
func.func @row_views(%a: !g, %c: !gc) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "c"]} {
  %c0 = arith.constant 0 : index
  %sp = "tk.alloc"() : () -> !p
  %sb = "tk.alloc"() : () -> !b
  %bar = "tk.alloc"() : () -> !tk.barrier
  %i = "tk.block_idx"() {dim = "y"} : () -> index
  %rows = "tk.subtile"(%sp, %i, %c0) : (!p, index, index) -> !h
  "tk.tma_load"(%rows, %a, %c0, %c0, %i, %c0, %bar) : (!h, !g, index, index, index, index, !tk.barrier) -> ()
  %z = "tk.zero"() : () -> !acc
  %d = "tk.warpgroup_mma_abt"(%rows, %sb, %z) : (!h, !b, !acc) -> !acc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc) -> !acc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %e, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  return
}
'''


@pytest.mark.parametrize("i", [0, 1])
def test_row_subtile_of_four_panels_in_the_ptx(i):
    """Rows 64i.. of st<bf16, 128, 256, 128b>: 4 TMA boxes of 64 x 64 at
    64i*128 + p * 128*128 (the parent's panels), and as the K-major A of a
    wgmma (K = 256) k steps crossing panels by 128*128 bytes too."""
    ptx = Ptx(_ptx(ROW_VIEWS), {"%ctaid.y": i})
    start = i * 64 * 128
    loads = ptx.tma("load")
    assert [ld["shared"] for ld in loads] == [start + p * 16384 for p in range(4)]
    assert [ld["coords"][:2] for ld in loads] == [[64 * p, 64 * i] for p in range(4)]
    a = [wgmma.decode(d)["address"] for d, _ in ptx.wgmma_descriptors()]
    assert a == [start + (kk // 4) * 16384 + (kk % 4) * 32 for kk in range(16)]
    man = _manifest(ROW_VIEWS)
    assert [m["box"] for m in man["tensor_maps"]] == [[64, 64]]


# ---------------------------------------------------------------- rt subtiles (simulated lanes)

@pytest.mark.parametrize("dtype,rows,cols,layout,part,i,j", [
    ("f32", 32, 32, "row", (16, 16), 1, 1),
    ("f32", 32, 64, "row", (16, 32), 1, 0),
    ("bf16", 48, 32, "row", (16, 32), 2, 0),
    ("bf16", 32, 48, "col", (32, 16), 0, 2),
    ("f32", 64, 16, "col", (32, 16), 1, 0),
])
def test_rt_subtile_is_the_part(dtype, rows, cols, layout, part, i, j, lane_major_io):
    """Run on lanesim's 32 lanes: the subtile's fragment holds exactly the
    part of the tile, in its own fragment order."""
    from mlir.dialects import arith
    from lanesim import round_to, run_kernel
    src, out = RT(dtype, rows, cols, layout), RT(dtype, *part, layout)

    def body(x):
        idx = ir.IndexType.get()
        return [ops.subtile(out.mlir(), x, arith.constant(idx, i), arith.constant(idx, j))]

    x = round_to(np.random.default_rng(rows * cols + i).standard_normal((rows, cols)), dtype)
    got, = run_kernel([src], [out], body, [x])
    np.testing.assert_array_equal(got, x[i * part[0]:(i + 1) * part[0], j * part[1]:(j + 1) * part[1]])


# ---------------------------------------------------------------- the plan

PLAN = '''
func.func @plan() attributes {tk.kernel} {
  %a = "tk.alloc"() {stages = 3 : i64} : () -> !tk.st<bf16, 16 : i64, 16 : i64, "32b">
  %b = "tk.alloc"() {stages = 2 : i64} : () -> !tk.sv<f32, 16 : i64>
  %c = "tk.alloc"() {stages = 5 : i64} : () -> !tk.barrier
  %d = "tk.alloc"() : () -> !tk.st<bf16, 16 : i64, 16 : i64, "32b">
  return
}
'''


def test_plan_lays_rings_out_at_the_aligned_stride():
    """A 512-byte swizzled st strides 1024 (its alignment), a 64-byte sv 128,
    a barrier 8; a ring reserves every slot, padding included."""
    m = _parse(PLAN)
    fn = [o.operation for o in m.body.operations][0]
    p = shared.plan(fn)
    assert [smem.stride(t) for t, *_ in p.allocs] == [1024, 128, 8, 1024]
    assert [(off, size, n) for _, off, size, _, n in p.allocs] == \
        [(0, 3072, 3), (3072, 256, 2), (3328, 40, 5), (4096, 512, 1)]
    assert p.total == 4608


# ---------------------------------------------------------------- refusals (located)

def _lower_error(body: str, types: str = "") -> str:
    text = f'''{types}
func.func @k(%a: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>) attributes {{tk.kernel, tk.warps = 4 : i64}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
{body}
  return
}}'''
    m = _parse(text)
    with m.context, pytest.raises(TkcError) as e:
        lower_module(m)
    return str(e.value)


ST64 = '!tk.st<bf16, 64 : i64, 64 : i64, "128b">'
GL = "!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>"


@pytest.mark.parametrize("op,operands", [
    ("pipeline_load", f"(%s, %a, %c0, %c0, %c0, %c0) : ({ST64}, {GL}, index, index, index, index)"),
    ("pipeline_store", f"(%a, %s, %c0, %c0, %c0, %c0) : ({GL}, {ST64}, index, index, index, index)"),
])
def test_pipeline_copies_are_refused_at_their_line(op, operands):
    msg = _lower_error(f'''  %s = "tk.alloc"() : () -> {ST64}
  "tk.{op}"{operands} -> () loc("k.py":7:5)''')
    assert msg.startswith(f"k.py:7:5: error: tk.{op} is a block-level, compiler-synchronised TMA copy")
    assert "tk-pipeline-staging" in msg


def test_stage_needs_a_ring_and_a_slot_in_it():
    msg = _lower_error(f'''  %s = "tk.alloc"() : () -> {ST64}
  %x = "tk.stage"(%s, %c1) : ({ST64}, index) -> {ST64} loc("k.py":3:1)''')
    assert "k.py:3:1: error: tk.stage: the ring must be a tk.alloc {stages = N} result" in msg
    msg = _lower_error(f'''  %s = "tk.alloc"() {{stages = 4 : i64}} : () -> {ST64}
  %x = "tk.stage"(%s, %c4) : ({ST64}, index) -> {ST64} loc("k.py":4:1)''')
    assert "k.py:4:1: error: tk.stage: slot index 4 is out of range 0..3" in msg


def test_rt_subtile_needs_constant_indices():
    rt = '!tk.rt<f32, 32 : i64, 32 : i64, "row">'
    part = '!tk.rt<f32, 16 : i64, 32 : i64, "row">'
    msg = _lower_error(f'''  %x = "tk.zero"() : () -> {rt}
  %w = "tk.warpid"() : () -> index
  %p = "tk.subtile"(%x, %w, %c0) : ({rt}, index, index) -> {part} loc("k.py":5:1)''')
    assert "k.py:5:1: error: tk.subtile: the indices of a register tile must be constants" in msg


def test_subtile_keeps_its_parents_swizzle():
    msg = _lower_error(f'''  %s = "tk.alloc"() : () -> {ST64}
  %p = "tk.subtile"(%s, %c0, %c0) : ({ST64}, index, index) -> !tk.st<bf16, 32 : i64, 64 : i64, "64b"> loc("k.py":6:1)''')
    assert "k.py:6:1: error:" in msg and "128b" in msg


def test_named_sync_and_barrier_ring_init_in_nvvm():
    text = '''
func.func @k() attributes {tk.kernel, tk.warps = 8 : i64} {
  %r = "tk.alloc"() {stages = 3 : i64} : () -> !tk.barrier
  "tk.init_barrier"(%r) {count = 2 : i64} : (!tk.barrier) -> ()
  "tk.sync"() {id = 3 : i64, warps = 4 : i64} : () -> ()
  "tk.sync"() : () -> ()
  return
}'''
    m = _parse(text)
    with m.context:
        lower_module(m)
        assert m.operation.verify()
    nvvm = str(m)
    assert nvvm.count("nvvm.mbarrier.init") == 3 and nvvm.count("nvvm.fence.mbarrier.init") == 1
    assert re.findall(r"getelementptr %\d+\[(\d+)\]", nvvm) == ["0", "8", "16"]
    assert re.search(r"%(\S+) = arith.constant 3 : i32\n\s*%(\S+) = arith.constant 128 : i32\n"
                     r"\s*nvvm.barrier id = %\1 number_of_threads = %\2", nvvm)
    assert nvvm.count("nvvm.barrier0") == 2  # after the init, and the plain sync
