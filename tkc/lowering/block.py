"""Block reductions: tk.block_sum, tk.block_max, tk.block_min.

Every lane of every warp of the group (the block, or tk.sync's id / warps:
warps 0 .. W-1) writes its scalars of x into the scratch sv, the group meets
(bar.sync, workers._barrier), and every lane reads the W warps' scalars at
its own positions and combines them in warp order, ((x0 + x1) + x2) + ...
The lowering never needs x's fragment layout: all warps hold x in one
layout, so a lane's k-th scalar is the same element in every warp (the
replicated copies of an rv included). Every warp reads the same values in
the same order, so every warp gets the same bits, and the interpreter's
float32 sum in warp order gives them too (tkc/interpreter/block.py).

Scratch layout: lane l's k-th group of m scalars (m = 4, 2 or 1: the widest
that divides its count n) of warp w sits at word ((w * n/m + k) * 32 + l) * m,
so a warp's writes and reads are 16-byte accesses at consecutive lanes:
conflict-free. A run inside a loop first meets the group once more, so that
no warp overwrites the scratch while another still reads the previous run's
values; outside loops an op runs once and its scratch (one sv a call) is
fresh. So one barrier outside loops, two inside.
"""
from __future__ import annotations

from ..diagnostics import error
from ..dialect.types import SV
from ..hopper.sync import checked_sync_group
from .access import _add, _load_piece, _mul, _sh_ptr, _store_piece
from .compute import BINARY
from .core import Frag, Shared, rule
from .workers import _barrier

LANES = 32
_COMBINE = {"tk.block_sum": "add", "tk.block_max": "max", "tk.block_min": "min"}
_LOOPS = ("scf.for", "scf.while")


@rule(*_COMBINE)
def _block_reduce(lw, op, args):
    x, scratch = args
    vals = x.vals if isinstance(x, Frag) else [x]
    if isinstance(x, Frag) and x.view.dtype != "f32" or not all(str(v.type) == "f32" for v in vals):
        raise error(op, f"{op.name} reduces f32 values, found {op.operands[0].type}")
    _, warps = checked_sync_group(op, lw.warps)
    if warps == 1:       # one warp's reduction is its own value
        return [x]
    n = len(vals)
    need = warps * LANES * n
    if not (isinstance(scratch, Shared) and isinstance(scratch.view, SV) and scratch.view.dtype == "f32"
            and scratch.view.length >= need):
        raise error(op, f"{op.name}: scratch must be an sv<f32> of at least {need} elements, "
                        f"found {op.operands[1].type}")
    m = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
    chunk = LANES * m * 4                      # bytes of one group of m scalars, all lanes
    lane = _mul(lw.lane(), m * 4)        # this lane's bytes into a chunk
    if _in_loop(op):
        _barrier(lw, op)                       # the previous run's reads are done
    mine = _add(_mul(lw.warp(), (n // m) * chunk), lane)
    for k in range(0, n, m):
        _store_piece(_sh_ptr(lw, scratch, _add(mine, k // m * chunk)), vals[k:k + m], "f32")
    _barrier(lw, op)
    fn = BINARY[_COMBINE[op.name]]
    out = []
    for k in range(0, n, m):
        acc = None
        for w in range(warps):
            got = _load_piece(_sh_ptr(lw, scratch, _add(lane, (w * (n // m) + k // m) * chunk)), "f32", m)
            acc = got if acc is None else [fn(a, b) for a, b in zip(acc, got)]
        out.extend(acc)
    return [Frag(x.view, out) if isinstance(x, Frag) else out[0]]


def _in_loop(op) -> bool:
    """op sits in a loop body (it may run again before its scratch is read)."""
    p = op.parent
    while p is not None and p.name != "func.func":
        if p.name in _LOOPS:
            return True
        p = p.parent
    return False
