"""The numpy handlers of the tk ops that move data between registers and
memory: loads and stores (whole, ragged, element-placed, single elements,
split/joined pairs) and the group copies gl <-> shared, with their bounds
rules (window, clipped, access_width).

Unlike register values (compute.py), memory (gl arguments, shared tiles) is
written in place, by stores.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import error
from ..dialect.types import GL, RT, RV, ST, SV
from ..dtypes import FP8_DTYPES
from .gl import whole
from .operands import F32, expect, tview
from .program import handler
from .values import NUMPY, ROUND, rounder, wrap


# ---- memory

@handler("tk.load_split")
def _load_split(c, op):
    """(even, odd) columns of the gl or st tile of twice the results' width."""
    mem_t, t = tview(op.operands[0]), tview(op.results[0])
    expect(isinstance(mem_t, (GL, ST)) and isinstance(t, RT) and tview(op.results[1]) == t, op,
           "splits a gl or st tile into two rt of one type")
    src, idx, outs = c.slot(op.operands[0]), [c.slot(v) for v in op.operands[1:]], \
        [c.slot(r) for r in op.results]
    piece = _pair_piece(op, mem_t, t, "fill")
    rnd_mem, rnd = ROUND[mem_t.dtype], rounder(t.dtype)

    def step(env, w):
        arr, coords = env[src], [env[i] for i in idx]
        ix, part, whole = piece(arr, coords)
        if isinstance(mem_t, ST) and w.block.races is not None:
            w.block.races.read(w.warpid, arr, ix, op)
        whole[part] = rnd_mem(arr[ix].astype(F32))
        env[outs[0]], env[outs[1]] = rnd(whole[:, 0::2]), rnd(whole[:, 1::2])
    return step


@handler("tk.store_join")
def _store_join(c, op):
    mem_t, t = tview(op.operands[0]), tview(op.operands[1])
    expect(isinstance(mem_t, (GL, ST)) and isinstance(t, RT) and tview(op.operands[2]) == t, op,
           "joins two rt of one type into a gl or st tile")
    dst, xs, idx = c.slot(op.operands[0]), [c.slot(v) for v in op.operands[1:3]], \
        [c.slot(v) for v in op.operands[3:]]
    piece, rnd = _pair_piece(op, mem_t, t, "clip"), ROUND[mem_t.dtype]

    def step(env, w):
        arr, coords = env[dst], [env[i] for i in idx]
        ix, part, whole = piece(arr, coords)
        if isinstance(mem_t, ST) and w.block.races is not None:
            w.block.races.write(w.warpid, arr, ix, op)
        whole[:, 0::2], whole[:, 1::2] = env[xs[0]], env[xs[1]]
        arr[ix] = rnd(whole[part])
    return step


def _pair_piece(op, mem_t, t, bound):
    """piece(arr, coords) -> (the gl's index, the pair tile's index, a pair
    tile filled with the fill value): ragged with fill/clip, else whole."""
    shape = (t.rows, 2 * t.cols)
    ragged, elements = bound in op.attributes, "elements" in op.attributes
    expect(ragged or not elements, op, f"element coordinates need {bound}")
    expect(isinstance(mem_t, GL) or not ragged, op, f"{bound} (a ragged access) needs a gl")
    _coords_count(op, mem_t, len(op.operands) - (1 if bound == "fill" else 3))
    fill = F32(op.attributes["fill"].value) if bound == "fill" and ragged else F32(np.nan)
    if ragged:
        width = access_width(t, mem_t, 2)
        return lambda arr, coords: (*clipped(op, coords, shape, arr.shape, width, elements,
                                             whole(arr)[1][3]),
                                    np.full(shape, fill, F32))
    return lambda arr, coords: (window(op, coords, mem_t, shape, arr.shape),
                                (slice(None), slice(None)), np.full(shape, fill, F32))


def _element(c, op, mem, coords, x, bound):
    """One element at element coordinates (b, d, r, c) of a gl (an f32, or an
    int of an i32 or i64 gl): outside its rows or columns a load reads fill
    and a store writes nothing. An i32 element stored keeps the value's low
    32 bits (the frontend's index -> i32 cast already wrapped it)."""
    mem_t = tview(mem)
    if isinstance(mem_t, SV) and x is None:
        return _sv_element(c, op, mem, coords)
    expect(isinstance(mem_t, GL) and len(coords) == 4, op, "one element moves to or from a gl, at 4 coordinates")
    expect("elements" in op.attributes and bound in op.attributes, op,
           f"one element needs element coordinates and {bound}")
    arr_s, idx = c.slot(mem), [c.slot(v) for v in coords]
    if x is None:
        out, fill = c.result_slot(op), op.attributes["fill"].value
        ints = mem_t.dtype in ("i32", "i64")
        value = int if ints else lambda v: F32(ROUND[mem_t.dtype](v.astype(F32)))

        def load(env, w):
            b, d, r, col = (int(env[i]) for i in idx)
            arr = env[arr_s]
            _element_bd(op, b, d, arr.shape)
            inside = 0 <= r < arr.shape[2] and 0 <= col < arr.shape[3]
            env[out] = value(arr[b, d, r, col]) if inside else value(np.asarray(fill))
        return load
    rnd = ROUND[mem_t.dtype]
    if mem_t.dtype in ("i32", "i64"):
        bits = 32 if mem_t.dtype == "i32" else 64
        rnd = lambda v: wrap(int(v), bits)  # noqa: E731
    else:
        rnd = lambda v, r=rnd: r(F32(v))  # noqa: E731
    x_s = c.slot(x)

    def store(env, w):
        b, d, r, col = (int(env[i]) for i in idx)
        arr = env[arr_s]
        _element_bd(op, b, d, arr.shape)
        if 0 <= r < arr.shape[2] and 0 <= col < arr.shape[3]:
            arr[b, d, r, col] = rnd(env[x_s])
    return store


def _sv_element(c, op, mem, coords):
    """One element of an f32 sv (every lane reads it), inside the sv or an error."""
    expect(len(coords) == 1 and "elements" in op.attributes and "fill" not in op.attributes, op,
           "one element of an sv: its index, no fill")
    arr_s, i_s, out = c.slot(mem), c.slot(coords[0]), c.result_slot(op)

    def load(env, w):
        arr, i = env[arr_s], int(env[i_s])
        if not 0 <= i < arr.shape[0]:
            raise error(op, f"{op.name}: element {i} is out of bounds of {tview(mem).text()}")
        if w.block.races is not None:
            w.block.races.read(w.warpid, arr, (slice(i, i + 1),), op)
        env[out] = F32(arr[i])
    return load


def _element_bd(op, b, d, full) -> None:
    if not (0 <= b < full[0] and 0 <= d < full[1]):
        raise error(op, f"{op.name}: coordinate ({b}, {d}, ...) is out of bounds of shape {tuple(full)}")


def clipped(op, coords, shape, full, width: int, elements: bool = False,
            origin: int = 0) -> tuple[tuple, tuple]:
    """A ragged gl access: (the gl's index, the piece's index) of the part of
    the `shape` piece at coords (b, d, r, c) that lies inside `full`. With
    element coordinates the piece may start before row or column 0; its
    column in the argument (from a slice's `origin` column) must be a
    multiple of the access width (the GPU's alignment)."""
    b, d, r, c = coords
    if not (0 <= b < full[0] and 0 <= d < full[1]) or (not elements and (r < 0 or c < 0)):
        raise error(op, f"{op.name}: coordinate {tuple(coords)} is out of bounds of shape "
                        f"{tuple(full)} (a ragged access clips rows and columns only)")
    col = origin + (c if elements else c * shape[-1])
    if col % width:
        where = f" (column {col - origin} of a slice starting at column {origin})" if origin else ""
        raise error(op, f"{op.name}: column {col}{where} is not a multiple of {width}, the access "
                        f"width of this {op.name.removeprefix('tk.')} (accesses stay aligned)")
    if len(shape) == 1:  # a vector is row r of the gl
        rows = _span(r, 1, full[2])
        cols = _span(c if elements else c * shape[0], shape[0], full[3])
        if rows[0].stop == rows[0].start:
            cols = (slice(0, 0), slice(0, 0))
        return (b, d, min(max(r, 0), full[2] - 1), cols[0]), (cols[1],)
    rows = _span(r if elements else r * shape[0], shape[0], full[2])
    cols = _span(c if elements else c * shape[1], shape[1], full[3])
    return (b, d, rows[0], cols[0]), (rows[1], cols[1])


def access_width(t, gl_t, k: int = 1) -> int:
    """Elements per GPU memory access of a ragged access of t (requirements.extents;
    k = 2 for a split or joined pair)."""
    from ..hopper.lanes import extents
    return extents(t, gl_t.dtype, True, k)[3]


def _span(start: int, n: int, size: int) -> tuple[slice, slice]:
    """(in the gl, in the piece) of the piece's n entries from start within 0..size."""
    lo, hi = max(start, 0), min(start + n, size)
    if hi <= lo:
        return slice(0, 0), slice(0, 0)
    return slice(lo, hi), slice(lo - start, hi - start)


def window(op, coords, mem_t, shape, where: str) -> tuple:
    """The numpy index of a `shape` piece at tile coordinates `coords` of `mem_t`.

    gl: coords (b, d, r, c); a tile piece spans rows r*R.. and cols c*C..,
    a vector piece is row r, cols c*L... st: coords (r, c) in units of the
    piece. sv: no coords, the whole vector.
    """
    if isinstance(mem_t, SV):
        i = coords[0] if coords else 0
        if not 0 <= i < mem_t.length // shape[0]:
            raise error(op, f"{op.name}: coordinate {i} of a {shape[0]}-element piece is out of "
                            f"bounds of {mem_t.text()}")
        return (slice(i * shape[0], (i + 1) * shape[0]),)
    if isinstance(mem_t, ST):
        r, c = coords if coords else (0, 0)
        full = mem_t.shape
        idx = (slice(r * shape[0], (r + 1) * shape[0]), slice(c * shape[1], (c + 1) * shape[1]))
        ok = r >= 0 and c >= 0 and (r + 1) * shape[0] <= full[0] and (c + 1) * shape[1] <= full[1]
    else:  # gl: `full` is the bound array's 4-D shape
        b, d, r, c = coords
        full = where
        if len(shape) == 2:
            idx = (b, d, slice(r * shape[0], (r + 1) * shape[0]), slice(c * shape[1], (c + 1) * shape[1]))
            rows_ok = 0 <= r and (r + 1) * shape[0] <= full[2]
        else:
            idx = (b, d, r, slice(c * shape[0], (c + 1) * shape[0]))
            rows_ok = 0 <= r < full[2]
        ok = 0 <= b < full[0] and 0 <= d < full[1] and rows_ok and c >= 0 \
            and (c + 1) * shape[-1] <= full[3]
    if not ok:
        what = "x".join(map(str, shape))
        raise error(op, f"{op.name}: coordinate {tuple(coords)} of a {what} piece is out of "
                        f"bounds of shape {tuple(full)}")
    return idx


def _coords_count(op, mem_t, n: int) -> None:
    want = {GL: (4,), ST: (2, 0), SV: (1, 0)}[type(mem_t)]
    expect(n in want, op, f"{mem_t} takes {want[0]} coordinates, got {n}")


def _piece_fits(op, mem_t, t) -> None:
    """The register/shared piece `t` can be cut out of `mem_t`."""
    if isinstance(mem_t, SV):
        expect(isinstance(t, (RV, SV)) and mem_t.length % t.length == 0, op,
               f"{t} is not a piece of {mem_t} (its length must divide the sv's)")
    elif isinstance(mem_t, ST):
        expect(isinstance(t, RT) and mem_t.rows % t.rows == 0 and mem_t.cols % t.cols == 0, op,
               f"{t} is not a subtile of {mem_t}")
    else:
        expect(isinstance(t, (RT, RV, ST, SV)), op, f"cannot move {t} to or from a gl")


def _memory(op, mem_t, t, ncoords: int) -> None:
    """Common checks of load/store between memory `mem_t` and registers `t`."""
    expect(isinstance(mem_t, (GL, ST, SV)), op, f"memory operand must be gl, st or sv, got {mem_t}")
    _coords_count(op, mem_t, ncoords)
    _piece_fits(op, mem_t, t)


@handler("tk.load")
def _load(c, op):
    if str(op.results[0].type) in ("f32", "i32", "i64"):
        return _element(c, op, op.operands[0], op.operands[1:], None, "fill")
    mem_t, t = tview(op.operands[0]), tview(op.results[0])
    _memory(op, mem_t, t, len(op.operands) - 1)
    expect((mem_t.dtype == "i32") == (t.dtype == "i32"), op,
           f"an i32 tile moves to and from an i32 gl, got {t} and {mem_t}")
    src, out, idx = c.slot(op.operands[0]), c.result_slot(op), [c.slot(v) for v in op.operands[1:]]
    rnd_mem, rnd, shape = ROUND[mem_t.dtype], rounder(t.dtype), t.shape
    # what a load makes of the memory's values: rounded to the memory's dtype
    # (a gl array may hold values its dtype cannot), then the registers'
    # (once when they are one dtype: rounding is idempotent)
    read = rnd_mem if rnd is rnd_mem else (lambda x: rnd(rnd_mem(x)))
    held = NUMPY[mem_t.dtype]   # what the memory's values are read as (float32, int32)
    shared = not isinstance(mem_t, GL)
    expect("elements" not in op.attributes or "fill" in op.attributes, op,
           "element coordinates need fill (the load may reach past the gl's edges)")
    if "fill" in op.attributes:  # ragged: what lies outside the gl reads as fill
        expect(not shared, op, "fill (a ragged load) needs a gl source")
        fill = rnd(np.full(shape, op.attributes["fill"].value, NUMPY[t.dtype]))
        width, elements = access_width(t, mem_t), "elements" in op.attributes

        def ragged(env, w):
            arr = env[src]
            ix, part = clipped(op, [env[i] for i in idx], shape, arr.shape, width, elements,
                               whole(arr)[1][3])
            piece = fill.copy()
            piece[part] = read(arr[ix].astype(held))
            env[out] = piece
        return ragged

    def step(env, w):
        arr = env[src]
        ix = window(op, [env[i] for i in idx], mem_t, shape, arr.shape)
        if shared and w.block.races is not None:
            w.block.races.read(w.warpid, arr, ix, op)
        piece = arr[ix]
        # astype copies (registers never alias memory)
        env[out] = read(piece.astype(held))
    return step


@handler("tk.store")
def _store(c, op):
    if str(op.operands[1].type) in ("f32", "i32", "i64"):
        return _element(c, op, op.operands[0], op.operands[2:], op.operands[1], "clip")
    mem_t, t = tview(op.operands[0]), tview(op.operands[1])
    _memory(op, mem_t, t, len(op.operands) - 2)
    expect((mem_t.dtype == "i32") == (t.dtype == "i32"), op,
           f"an i32 tile moves to and from an i32 gl, got {t} and {mem_t}")
    dst, x, idx = c.slot(op.operands[0]), c.slot(op.operands[1]), [c.slot(v) for v in op.operands[2:]]
    rnd, shape = ROUND[mem_t.dtype], t.shape
    shared = not isinstance(mem_t, GL)
    expect("elements" not in op.attributes or "clip" in op.attributes, op,
           "element coordinates need clip (the store may reach past the gl's edges)")
    add = "add" in op.attributes  # atomic adds: the gl's values plus x
    expect(not add or (not shared and mem_t.dtype == "f32"), op, "add needs an f32 gl destination")
    if "deinterleave" in op.attributes:
        expect(shared and isinstance(t, RT) and mem_t.dtype == t.dtype == "f32" and t.layout == "row", op,
               "deinterleave writes an f32 row-layout rt into an f32 st")

        def arranged(v):   # each 8 columns as their evens, then their odds
            r, c = v.shape
            return v.reshape(r, c // 8, 4, 2).transpose(0, 1, 3, 2).reshape(r, c)
    elif "packed" in op.attributes:
        fp8 = not add and not shared and t.dtype == mem_t.dtype and t.dtype in FP8_DTYPES
        expect(isinstance(t, RT) and t.layout == "row" and (fp8 or add and t.dtype == "f32"), op,
               "packed adds an f32 row-layout rt into an f32 gl, or stores an 8-bit one into a gl of its dtype")

        def arranged(v):   # a lane's columns 2t, 2t + 1, 2t + 8, 2t + 9 of 16 at 4t .. 4t + 3
            r, c = v.shape
            return v.reshape(r, c // 16, 2, 4, 2).transpose(0, 1, 3, 2, 4).reshape(r, c)
    else:
        def arranged(v):
            return v

    def put(arr, ix, v):
        arr[ix] = rnd(arr[ix] + v) if add else rnd(v)
    if "clip" in op.attributes:  # ragged: what lies outside the gl is not written
        expect(not shared, op, "clip (a ragged store) needs a gl destination")
        width, elements = access_width(t, mem_t), "elements" in op.attributes

        def ragged(env, w):
            arr = env[dst]
            ix, part = clipped(op, [env[i] for i in idx], shape, arr.shape, width, elements,
                               whole(arr)[1][3])
            put(arr, ix, arranged(env[x])[part])
        return ragged

    def step(env, w):
        arr = env[dst]
        ix = window(op, [env[i] for i in idx], mem_t, shape, arr.shape)
        if shared and w.block.races is not None:
            w.block.races.write(w.warpid, arr, ix, op)
        put(arr, ix, arranged(env[x]))
    return step


def _group(c, op, mem, shared):
    """Checks and slots of group_load/group_store; returns (W, gl type, shared type)."""
    gl_t, sh_t = tview(mem), tview(shared)
    expect(isinstance(gl_t, GL), op, f"global operand must be a gl, got {gl_t}")
    expect(isinstance(sh_t, (ST, SV)), op, f"shared operand must be an st or sv, got {sh_t}")
    expect(gl_t.dtype == sh_t.dtype, op, f"dtypes differ: {gl_t} and {sh_t}")
    expect(len(op.operands) == 6, op, f"takes 4 coordinates, got {len(op.operands) - 2}")
    warps = op.attributes["warps"].value
    expect(0 < warps <= c.group_warps and c.group_warps % warps == 0, op,
           f"a group of {warps} warps does not divide the block's {c.group_warps} warps that run it")
    return warps, gl_t, sh_t


def _arrive_at_group(op, key, warps, w, coords):
    """(arrival, first): this warp's group's n-th run of this op, and whether
    the warp is the first of its group to reach it.

    Every warp of the group calls a group op; the copy is done once, by the
    first to arrive (the scheduler runs warps in order up to each barrier,
    so it is complete before the next tk.sync, when the data is visible).
    The block checks at each barrier that the whole group arrived.
    """
    n = w.counts.get(key, 0)
    w.counts[key] = n + 1
    token = (key, w.warpid // warps, n)
    arrival = w.block.groups.get(token)
    if arrival is None:
        arrival = w.block.groups[token] = GroupArrival(op, warps, coords)
        return arrival, True
    if arrival.coords != coords:
        raise error(op, f"{op.name}: warps of one group disagree on coordinates: "
                        f"{tuple(arrival.coords)} and {tuple(coords)} (warp {w.warpid})")
    arrival.count += 1
    return arrival, False


class GroupArrival:
    """How many warps of a group reached one run of a group op; `prior`: the
    accesses the group's copy overwrites (races.Prior), for later members."""
    __slots__ = ("op", "warps", "coords", "count", "prior")

    def __init__(self, op, warps, coords):
        self.op, self.warps, self.coords, self.count, self.prior = op, warps, coords, 1, None

    def members(self, token) -> set[int]:
        """The warps of the group that `token` (key, group, run) names."""
        first = self.warps * token[1]
        return set(range(first, first + self.warps))

    def check(self) -> None:
        if self.count != self.warps:
            raise error(self.op, f"{self.op.name}: only {self.count} of the {self.warps} warps "
                                 f"of a group called it before the next tk.sync (every warp "
                                 f"of the group must)")


@handler("tk.group_load")
def _group_load(c, op):
    warps, gl_t, sh_t = _group(c, op, op.operands[1], op.operands[0])
    dst, src, idx = c.slot(op.operands[0]), c.slot(op.operands[1]), [c.slot(v) for v in op.operands[2:]]
    rnd, shape, key = ROUND[sh_t.dtype], sh_t.shape, object()

    def step(env, w):
        coords = [env[i] for i in idx]
        arrival, first = _arrive_at_group(op, key, warps, w, coords)
        races = w.block.races
        if races is not None:  # the copy is every member's write
            base = warps * (w.warpid // warps)
            arrival.prior = races.group_write(w.warpid, env[dst], first, arrival.prior,
                                              slice(base, base + warps), op)
        if first:
            arr = env[src]
            env[dst][...] = rnd(arr[window(op, coords, gl_t, shape, arr.shape)].astype(F32))
    return step


@handler("tk.group_store")
def _group_store(c, op):
    warps, gl_t, sh_t = _group(c, op, op.operands[0], op.operands[1])
    dst, src, idx = c.slot(op.operands[0]), c.slot(op.operands[1]), [c.slot(v) for v in op.operands[2:]]
    rnd, shape, key = ROUND[gl_t.dtype], sh_t.shape, object()

    def step(env, w):
        coords = [env[i] for i in idx]
        _, first = _arrive_at_group(op, key, warps, w, coords)
        if w.block.races is not None:  # each member reads the tile
            w.block.races.read(w.warpid, env[src], (slice(None),), op)
        if first:
            arr = env[dst]
            arr[window(op, coords, gl_t, shape, arr.shape)] = rnd(env[src])
    return step
