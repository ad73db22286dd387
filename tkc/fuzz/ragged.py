"""Ragged work items in the generator (tkc.kernel's ragged=, docs/fuzz.md):
a share of the persistent warpgroup programs run over ragged groups, and
their ill-typed twins misuse ragged=.

A ragged program's grid gets a z of 1-3 groups and an i32 gl `count` whose
element z is group z's rows; the blocks then visit only the items y <
ceil(count[z] / R) (at most the grid's Y) of each group. Its outputs get a d
of one matrix a group, written at the item's (bz, by, bx) only, so an item
that never runs leaves its tiles at the initial fill on every side: the
harness's whole-array comparisons show which items ran. The counts are
chosen for the edges: zero, negative, past the grid's height, INT32_MAX
and INT32_MIN, whole multiples of R or not, all groups empty at times, and a
count gl shorter than the groups (c[z] past its end counts 0).
"""
from __future__ import annotations

import re
from dataclasses import replace

from .gls import Arg

RAGGED_SHARE = 0.2          # of the persistent programs
ORDERS = ("", ', order="xyz"', ', order="yxz"', ', order="grouped(y, 2)"', ', order="grouped(x, 2)"')


def _count(r, rows: int, height: int) -> int:
    """One group's count: an edge case or rows inside the grid's height."""
    x = r.random()
    if x < 0.15:
        return 0
    if x < 0.25:
        return -r.randrange(1, 2 * rows + 1)
    if x < 0.4:  # past the grid's height: clamped to Y row blocks
        return height * rows + r.randrange(1, 3 * rows)
    if x < 0.45:
        return r.choice((2 ** 31 - 1, -2 ** 31))
    if x < 0.6:
        return rows * r.randrange(1, height + 1)
    return r.randrange(1, height * rows + 1)


def persistent_opts(g, bm: int) -> str:
    """tkc.kernel's options for g's persistent program: ", persistent=True",
    or (RAGGED_SHARE of them) ragged groups, with g's outputs a matrix a
    group (g.groups, g.out_d), a grid of 2-3 y values and the count gl in
    g.args (before the warpgroup program sizes its tensors by the grid)."""
    r = g.rng
    if r.random() >= RAGGED_SHARE:
        return ", persistent=True"
    g.groups, g.out_d = r.choice((1, 2, 3)), "bz"
    g.grid = (g.grid[0], r.choice((2, 3)))  # a group's height: 1 to Y of its y values run
    rows = r.choice((bm, bm, 2 * bm, 16, r.randrange(1, 2 * bm + 1)))  # R: a multiple of the tile, or any
    n = g.groups - 1 if g.groups > 1 and r.random() < 0.2 else g.groups
    counts = [_count(r, rows, g.grid[1]) for _ in range(n)]
    if r.random() < 0.15:  # every group empty: no block has an item
        counts = [r.choice((0, -1, -rows, -2 ** 31)) for _ in counts]
        g.features.add("ragged_empty")
    g.args.append(Arg("count", "i32", (1, 1, 1, n), values=tuple(counts)))
    g.features.add("ragged")
    persistent = r.choice(("True", "True", '"zigzag"'))
    return f", persistent={persistent}{r.choice(ORDERS)}, ragged=(\"count\", {rows})"


# ------------------------------------------------------------ what ran
# (test_fuzz_ragged.py in the interpreter, test/gpu/test_fuzz_ragged_gpu.py on the GPU)

_OPTION = re.compile(r', ragged=\("count", (\d+)\)')


def live_rows(p) -> list[int]:
    """Each group's live y values in ragged program p: min(max(ceil(count[z]
    / R), 0), Y), 0 past the count gl's end."""
    counts = next(a for a in p.args if a.name == "count").values
    rows, groups = int(_OPTION.search(p.source).group(1)), max(a.shape[1] for a in p.args if a.output)
    return [min(max(-(-counts[z] // rows), 0), p.grid[1]) if z < len(counts) else 0 for z in range(groups)]


def all_items(p):
    """p without ragged= (every item runs, persistent as before), under its own name."""
    name = p.name + "_all"
    return replace(p, name=name, source=_OPTION.sub("", p.source).replace(f"def {p.name}(", f"def {name}("))


def expected(p, full: list) -> list:
    """p's outputs from its all-items twin's: each group's rows past its live
    items (by >= h_z) at the initial fill (0.5, or 7 in an integer gl)."""
    out = []
    for a, x in zip([a for a in p.args if a.output], full):
        x = x.copy()
        for z, h in enumerate(live_rows(p)):
            x[0, z, h * a.block_rows:] = 7 if a.dtype in ("i32", "i64") else 0.5
        out.append(x)
    return out


# ------------------------------------------------------------ ill-typed twins
# (refusals.BREAKS: each sets up g and returns what it breaks)

def _count_arg(g, dtype: str = "i32") -> None:
    g.args.insert(0, Arg("count", dtype, (1, 1, 1, 2), static=True))


def ragged_not_persistent(g):
    """ragged= without persistent: refused at the kernel's decorator."""
    _count_arg(g)
    g.kernel_opts, g.bad_at_def = ', ragged=("count", 16)', True
    return "ragged= without persistent"


def ragged_rows(g):
    """ragged=(count, R) with R not an int >= 1, or a count naming no argument."""
    _count_arg(g)
    spec = g.rng.choice(('("count", 0)', '("count", -16)', '("count", 16.0)', '"count"', '("cnt", 16)'))
    g.kernel_opts, g.bad_at_def = f", persistent=True, ragged={spec}", True
    return "ragged= of a bad R or a missing count"


def ragged_count_dtype(g):
    """A count gl that is not i32: tk-verify refuses the kernel."""
    _count_arg(g, g.rng.choice(("f32", "bf16", "i64")))
    g.kernel_opts, g.bad_at_def = ', persistent=True, ragged=("count", 16)', True
    return "ragged= of a count that is not an i32 gl"


def ragged_writes_count(g):
    """A kernel that writes its count: every block reads it to find its items."""
    _count_arg(g)
    g.kernel_opts, g.bad_at_def = ', persistent=True, ragged=("count", 16)', True
    g.emit(g.rng.choice(("store(count, tr, at=(0, 0, 0, 0), clip=True)",
                         "old9 = atomic_add(count, 1, at=(0, 0, 0, bx))")))
    return "a ragged kernel that writes its count"


KINDS = [ragged_not_persistent, ragged_rows, ragged_count_dtype, ragged_writes_count]


def ragged_misuse(g):
    """One of KINDS (one entry of refusals.BREAKS, so the other kinds keep their share)."""
    return g.rng.choice(KINDS)(g)
