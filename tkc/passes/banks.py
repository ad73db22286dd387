"""Shared-memory bank conflicts of the accesses tkc's lowering emits.

Shared memory has 32 banks of 4-byte words; word w lives in bank w % 32.
A warp's request is served in phases, each a set of lanes served together:
8 lanes for 16-byte accesses (ldmatrix/stmatrix rows, 16-byte copies), 16
for 8-byte ones, 32 for 4-byte or narrower ones. A phase costs as many
cycles as the most words it needs from any one bank; lanes asking for the
same word share it (broadcast), so only distinct words count. The conflict
degree of an access pattern is that maximum over all its phases ("N-way"),
the way ThunderKittens' appendix counts banks: 1 means conflict-free.

The lane addresses are those of the lowering itself, from the Hopper facts
it uses (tkc/hopper/shared.py and lanes.py): `address` for the swizzled
layout, `ldmatrix_row_col` for the rows lanes give ldmatrix/stmatrix,
`lane_offset` and `runs` for the f32 and wide element paths, the 16-byte
chunk rule of group copies (tkc/lowering/memory.py), and fragments.py's
vector slots. So the report describes the code that runs.

A tile's subtile coordinates are runtime values, so a pattern's degree is
the worst over every subtile position the st has for that rt shape.

Patterns (`Access.pattern`):
  "ldmatrix"    tk.load st -> rt, 16-bit st (.trans for a col-layout rt)
  "stmatrix"    tk.store rt -> st, 16-bit st (.trans for col)
  "deinterleave" tk.store {deinterleave} f32 rt -> f32 st: stmatrix .x4 of
                f32 words, two a base tile, each 16-byte row 4 columns
  "f32 pair"    tk.load/tk.store of an rt with an f32 st: 8-byte pairs in the
                row layout, single 4-byte elements in the col layout
  "wide access" tk.load/tk.store of a wide-layout rt with an st: a lane's 8
                adjacent columns, in accesses of up to 16 bytes
  "pairs"       tk.load_split/tk.store_join of an rt with an st: a lane's run
                of n columns is 2n adjacent st columns, in pieces of up to 16
                bytes
  "group copy"  tk.group_load/group_store: 16 bytes a thread
  "vector"      tk.load/tk.store of an rv with an sv, a run of slots a lane

The core (`degree`, `phases`) is pure Python: it needs no MLIR context (the
lowering helpers it imports are only loaded when called). `report` walks a
module and is used by tk-layout-selection (warnings above 1-way) and by the
tk-bank-report pass (a remark for every access).
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Iterable, Iterator

from ..dialect.types import RT, RV, ST, SV, view
from ..diagnostics import noted_at, where
from ..dtypes import itemsize
from ..hopper import fragments
from ..hopper.fragments import HALF, extent_ok
from ..hopper.lanes import deinterleaved_row_col, lane_offset, ldmatrix_row_col, runs, vec_runs
from ..hopper.shared import address
from .registry import register
from ..dialect import walk

BANKS = 32
WORD = 4  # bytes per bank word


@dataclass(frozen=True)
class Access:
    """One shared-memory access pattern: which tile, which instruction shape.

    `shared` is an ST or SV view; `reg` the RT/RV moved (None for group
    copies); `warps` the group size of a group copy."""
    pattern: str
    shared: ST | SV
    reg: RT | RV | None = None
    warps: int = 1

    def describe(self) -> str:
        name = self.pattern
        if name in ("ldmatrix", "stmatrix") and self.reg.layout == "col":
            name += ".trans"
        return f"{name} of {_text(self.shared)}"


def _text(t) -> str:
    """st<bf16, 64, 64, "none"> (the type without the dialect noise)."""
    return t.text().removeprefix("!tk.").replace(" : i64", "")


# ---------------------------------------------------------------- counting

def phase_degree(addresses: Iterable[int], width: int) -> int:
    """Most distinct words any one bank serves for these lanes' accesses of
    `width` bytes at byte `addresses` (WORD = 4: shifts and masks, as this
    runs for every phase of every access a layout choice scores)."""
    if width > WORD:
        words = {(a + k) >> 2 for a in addresses for k in range(0, width, WORD)}
    else:
        words = {a >> 2 for a in addresses}
    per_bank = [0] * BANKS
    for w in words:
        per_bank[w % BANKS] += 1
    return max(per_bank) or 1


def lanes_per_phase(width: int) -> int:
    """Lanes served together: 128 bytes of requests per phase."""
    return 32 if width <= 4 else 128 // width


@functools.cache
def degree(access: Access) -> int:
    """The conflict degree of an access pattern (1 = conflict-free). Cached
    per pattern for the process: a pure function of the (frozen) Access, and
    every trace of a kernel (each interpret(), build, fuzz program) asks for
    the same few again: layout selection scores each swizzle by them."""
    return max((phase_degree(addrs, width) for addrs, width in phases(access)), default=1)


def phases(access: Access) -> Iterator[tuple[list[int], int]]:
    """Every phase of the pattern as (lanes' byte addresses, access width)."""
    gen = {"ldmatrix": _matrix, "stmatrix": _matrix, "deinterleave": _deinterleaved, "f32 pair": _elements,
           "wide access": _elements, "pairs": _pairs, "group copy": _group, "vector": _vector}[access.pattern]
    for addrs, width in gen(access):
        n = lanes_per_phase(width)
        for p in range(0, len(addrs), n):
            yield addrs[p:p + n], width


# ---------------------------------------------------------------- patterns

def _subtiles(st: ST, rt: RT):
    """Top-left (row, col) of every position of rt inside st."""
    for i in range(st.rows // rt.rows):
        for j in range(st.cols // rt.cols):
            yield i * rt.rows, j * rt.cols


def _matrix(a: Access):
    """ldmatrix/stmatrix .x4: one instruction per 16x16 base tile; lane l
    gives the address of one 16-byte row (shared_memory.py's _st_to_rt/_rt_to_st).
    All 32 lanes are listed; `phases` cuts them into the 4 matrices (an
    8-row rt's .x2: lanes 0-15, its 2 matrices)."""
    st, rt = a.shared, a.reg
    half = rt.rows == HALF
    lanes = [ldmatrix_row_col(rt.layout, lane, half) for lane in range(16 if half else 32)]
    for r0, c0 in _subtiles(st, rt):
        for bi in range(0, rt.rows, 16):
            for bj in range(0, rt.cols, 16):
                yield [address(st, r0 + bi + lr, c0 + bj + lc) for lr, lc in lanes], 16


def _deinterleaved(a: Access):
    """tk.store {deinterleave} (_rt_to_st_deinterleaved): an stmatrix .x4 for
    each 8-column half of a base tile; lane l gives the address of one
    16-byte row (deinterleaved_row_col)."""
    st, rt = a.shared, a.reg
    lanes = [deinterleaved_row_col(lane) for lane in range(16 if rt.rows == HALF else 32)]
    for r0, c0 in _subtiles(st, rt):
        for bi in range(0, rt.rows, 16):
            for bj in range(0, rt.cols, 8):
                yield [address(st, r0 + bi + lr, c0 + bj + lc) for lr, lc in lanes], 16


def _pieces(addrs: list[int], e: int, n: int):
    """A run of n elements of e bytes per lane, as the lowering's accesses of
    at most 16 bytes (access.py's _pieces)."""
    m = min(n, 16 // e)
    for k in range(0, n, m):
        yield [x + k * e for x in addrs], min(m, n - k) * e


def _elements(a: Access):
    """The f32 and wide paths (_st_elems): lane l moves each run of adjacent
    columns at its fragment coordinate (runs), in pieces of up to 16 bytes."""
    st, rt = a.shared, a.reg
    e = itemsize(st.dtype)
    lanes = [lane_offset(rt.layout, lane) for lane in range(32)]
    for r0, c0 in _subtiles(st, rt):
        for _, r, c, n in runs(rt):
            yield from _pieces([address(st, r0 + lr + r, c0 + lc + c) for lr, lc in lanes], e, n)


def _pairs(a: Access):
    """load_split/store_join (_st_pairs): as _elements on the pair tile, a
    run of n columns at 2 (lane col + c), 2n elements."""
    st, rt = a.shared, a.reg
    e = itemsize(st.dtype)
    lanes = [lane_offset(rt.layout, lane) for lane in range(32)]
    for r0, c0 in _subtiles(st, rt.with_(cols=2 * rt.cols)):
        for _, r, c, n in runs(rt):
            yield from _pieces([address(st, r0 + lr + r, c0 + 2 * (lc + c)) for lr, lc in lanes], e, 2 * n)


def group_chunk(chunk: int, per_row: int, e: int) -> tuple[int, int]:
    """(row, col) of 16-byte chunk `chunk` of a group copy: chunks are
    row-major, per_row to a row (memory.py's _copy_chunk)."""
    return chunk // per_row, (chunk % per_row) * (16 // e)


def _group(a: Access):
    """Group copies: thread t of the group moves chunk it*32W + t in round
    `it`; each warp's 32 threads issue one 16-byte access per round."""
    sh, e = a.shared, itemsize(a.shared.dtype)
    rows, cols = (sh.rows, sh.cols) if isinstance(sh, ST) else (1, sh.length)
    per_row, threads = cols * e // 16, 32 * a.warps
    chunks = rows * per_row
    for base in range(0, chunks, threads):
        for warp0 in range(base, min(base + threads, chunks), 32):
            lanes = range(warp0, min(warp0 + 32, chunks))
            addrs = []
            for chunk in lanes:
                row, col = group_chunk(chunk, per_row, e)
                addrs.append(address(sh, row, col) if isinstance(sh, ST) else col * e)
            yield addrs, 16


def _vector(a: Access):
    """sv <-> rv: lane l moves each run of its vector slots (vec_runs), at
    every position of the rv in the sv."""
    sv, rv = a.shared, a.reg
    e = itemsize(sv.dtype)
    for at in range(0, sv.length, rv.length):
        for i, _, n in vec_runs(rv):
            yield from _pieces([(at + fragments.vec_coord(rv.length, rv.kind, i, lane)) * e
                                for lane in range(32)], e, n)


# ---------------------------------------------------------------- ops -> accesses

def access_of(op, layout: str | None = None) -> Access | None:
    """The shared access pattern of a tk.load/store/load_split/store_join/
    group_load/group_store (with its rt in `layout` if given), None when it
    touches no shared memory (or its types are malformed)."""
    try:
        types = [view(v.type) for v in op.operands[:2]]
        if op.name in ("tk.load", "tk.store", "tk.load_split", "tk.store_join"):
            reg = view((op.results[0] if op.name in ("tk.load", "tk.load_split") else op.operands[1]).type)
            if layout is not None and isinstance(reg, RT):
                reg = reg.with_(layout=layout)
        if op.name == "tk.store" and "deinterleave" in op.attributes:
            ok = isinstance(types[0], ST) and isinstance(reg, RT) and _tiles(types[0], reg)
            return Access("deinterleave", types[0], reg) if ok else None
        if op.name in ("tk.load", "tk.store"):
            return _transfer("ldmatrix" if op.name == "tk.load" else "stmatrix", types[0], reg)
        if op.name in ("tk.load_split", "tk.store_join"):
            if isinstance(types[0], ST) and isinstance(reg, RT) and _tiles(types[0], reg.with_(cols=2 * reg.cols)):
                return Access("pairs", types[0], reg)
            return None
        if op.name in ("tk.group_load", "tk.group_store"):
            sh = types[0] if op.name == "tk.group_load" else types[1]
            return _group_access(op, sh)
    except (ValueError, IndexError):
        return None  # malformed: tk-verify reports it
    return None


def _transfer(matrix: str, sh, reg) -> Access | None:
    if isinstance(sh, ST) and isinstance(reg, RT):
        if not _tiles(sh, reg):
            return None
        if reg.layout == "wide":
            return Access("wide access", sh, reg)
        return Access(matrix if itemsize(sh.dtype) == 2 else "f32 pair", sh, reg)
    if isinstance(sh, SV) and isinstance(reg, RV) and sh.length % reg.length == 0:
        return Access("vector", sh, reg)
    return None


def _tiles(st: ST, rt: RT) -> bool:
    """Shapes the lowering accepts (else tk-verify reports the op)."""
    return (all(extent_ok(n, half=True) for n in (st.rows, rt.rows))
            and all(extent_ok(n) for n in (st.cols, rt.cols))
            and st.rows % rt.rows == 0 and st.cols % rt.cols == 0)


def _group_access(op, sh) -> Access | None:
    from mlir import ir
    w = op.attributes["warps"] if "warps" in op.attributes else None
    if not isinstance(sh, (ST, SV)) or not isinstance(w, ir.IntegerAttr) or w.value < 1:
        return None
    if isinstance(sh, ST) and not (extent_ok(sh.rows, half=True) and extent_ok(sh.cols)):
        return None
    return Access("group copy", sh, None, w.value)


def accesses(module_op):
    """(op, Access) for every shared access in the module, in IR order."""
    for op in walk(module_op.operation):
        if op.name in ("tk.load", "tk.store", "tk.load_split", "tk.store_join", "tk.group_load",
                       "tk.group_store"):
            a = access_of(op)
            if a is not None:
                yield op, a


_WARNED: set = set()  # (location, access) pairs already warned about in this process


def report(module_op, *, least: int = 2, kind: str = "warning", out=None) -> list:
    """Write `file:line:col: <kind>: N-way shared-memory bank conflicts:
    <pattern>` for each access of degree >= least; return (op, access,
    degree) for all of them (degree is cached per pattern)."""
    out = out if out is not None else sys.stderr  # looked up now: pytest's capsys
    found = []
    # once per line (unrolled copies repeat it) and, for warnings, once per
    # process: each interpret() or build of a kernel runs this pass again
    said = _WARNED if kind == "warning" else set()
    for op, a in accesses(module_op):
        n = degree(a)
        found.append((op, a, n))
        loc = where(op)
        if n >= least and (loc, a) not in said and (kind != "warning" or noted_at(loc)):
            said.add((loc, a))
            out.write(f"{loc + ': ' if loc else ''}{kind}: {n}-way shared-memory bank "
                      f"conflicts: {a.describe()}\n")
    return found


@register("tk-bank-report",
          "remark the shared-memory bank-conflict degree of every shared access")
def run(module_op) -> None:
    report(module_op, least=1, kind="remark")
