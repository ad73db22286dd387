"""tk-verify rules of the multi-GPU ops (docs/tile-ir.md, "Several GPUs"):
tk.peer, tk.rank, tk.world_size, tk.signal, tk.wait_signal, and the kernel's
tk.peers attribute (and tk.strided, which must not name a parallel gl).
tk-verify (verify.py) calls `CHECKS[name](op, name, ins, outs, kernel)` per
op and `check_kernel(kernel)` per kernel.
"""
from __future__ import annotations

from ..dialect.kernel import check_peers, check_strided, lenient, parallel_args
from ..dialect.types import GL
from .verify_messages import describe as _desc


def check_kernel(fn):
    """(where, message) pairs: tk.peers names distinct gl arguments. (A flag
    wait before compiler-synchronised loads is run by the producer warp:
    tk-pipeline-staging, flags.py.)"""
    name = f"kernel @{fn.attributes['sym_name'].value}"
    if "tk.peers" in fn.attributes:
        yield from (("", m) for m in check_peers(name, fn.attributes["tk.peers"],
                                                 fn.regions[0].blocks[0].arguments))
    if "tk.strided" in fn.attributes:
        yield from (("", m) for m in check_strided(name, fn.attributes["tk.strided"],
                                                   fn.regions[0].blocks[0].arguments, _parallel(fn)))


def _parallel(kernel) -> list:
    return lenient(parallel_args, kernel) if kernel is not None else []


def _check_peer(op, name, ins, outs, kernel):
    """peer(pgl argument, rank: index) -> the same gl type."""
    from mlir import ir
    src = op.operands[0]
    args = list(kernel.regions[0].blocks[0].arguments) if kernel is not None else []
    num = next((i for i, a in enumerate(args) if a == src), None) \
        if isinstance(src, ir.BlockArgument) else None
    if num is None or num not in _parallel(kernel):
        what = f"argument {num}" if num is not None else "a value that is not a kernel argument"
        yield (f"{name}: the source must be a parallel gl argument (one the kernel's tk.peers "
               f"lists: tkc.pgl), got {what}")
    if outs[0] != ins[0]:
        yield f"{name}: the result has the source's type {_desc(ins[0])}, got {_desc(outs[0])}"


def _check_rank(op, name, ins, outs, kernel):
    if not _parallel(kernel):
        yield (f"{name}: the kernel has no parallel gl argument (tk.peers): ranks belong to the "
               "pgls a launch passes")


def _check_flag(op, name, ins, outs, kernel):
    """signal / wait_signal(flags: gl<i32>, b, d, r, c, value)."""
    if not (isinstance(ins[0], GL) and ins[0].dtype == "i32"):
        yield f"{name}: the flags must be an i32 gl, got {_desc(ins[0])}"


CHECKS = {
    "peer": _check_peer,
    "rank": _check_rank,
    "world_size": _check_rank,
    "signal": _check_flag,
    "wait_signal": _check_flag,
}
