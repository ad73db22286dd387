"""Named barriers: tk.sync, and the block syncs of other ops (docs/tile-ir.md).

`tk.sync {id = I, warps = W}` is PTX's `bar.sync I, 32*W`: barrier I
completes when W warps have arrived at it (default: id 0, every warp of the
block); those W continue, the other warps are not involved. tk.init_barrier
and the pipeline ops synchronise the whole block the same way (barrier 0).

A warp reaching one yields its op's `SyncPoint` to the scheduler
(machine.py), which records the arrival here; the arrival that makes W
releases the W warps. All arrivals of one completion must be at the same op:
on the GPU a warp at another bar.sync with the same id would complete the
barrier with them, which is never what the author meant, so the interpreter
reports it as a deadlock. When no warp can move, `deadlock` says which
barrier waits for whom.
"""
from __future__ import annotations

from ..diagnostics import TkcError, error, where
from ..passes.verify_block import checked_sync_group
from .program import Step, handler


class SyncPoint:
    """One op's barrier: id, warps needed, and the op (for messages)."""
    __slots__ = ("op", "id", "warps", "block_wide")

    def __init__(self, op, id: int, warps: int, block_wide: bool):
        self.op, self.id, self.warps, self.block_wide = op, id, warps, block_wide

    def what(self) -> str:
        return "tk.sync" if self.op.name == "tk.sync" else self.op.name

    def describe(self) -> str:
        """'tk.sync (k.py:7:9)', with its barrier when it is not the block's."""
        at = f"{self.what()} ({where(self.op) or self.op.location})"
        return at if self.block_wide else f"{at} on barrier {self.id} of {self.warps} warps"


def block_sync(c, op) -> SyncPoint:
    """The whole block synchronising at `op` (barrier 0, every warp)."""
    return SyncPoint(op, 0, c.warps, True)


@handler("tk.sync")
def _sync(c, op):
    point = _point(c, op)

    def step(env, w):
        yield point  # the scheduler holds the warp until the barrier completes
    return Step(step, op, gen=True)


def _point(c, op) -> SyncPoint:
    i, warps = checked_sync_group(op, c.warps)
    return SyncPoint(op, i, warps, i == 0 and warps == c.warps)


class NamedBarriers:
    """The block's barriers: per id, the warps arrived since its last completion."""

    def __init__(self):
        self.arrived: dict[int, list[tuple[int, SyncPoint]]] = {}

    def arrive(self, w: int, point: SyncPoint) -> list[int] | None:
        """Warp w arrives at `point`; the warps released when that completes it."""
        waiting = self.arrived.setdefault(point.id, [])
        if waiting and waiting[0][1].op is not point.op:
            raise _mismatch(waiting[0], (w, point))
        waiting.append((w, point))
        if len(waiting) < point.warps:
            return None
        del self.arrived[point.id]
        return [v for v, _ in waiting]

    def deadlock(self, stopped: dict, done: list) -> TkcError:
        """No warp can move and each waits at a barrier: explain the first's."""
        w = min(stopped)
        point = stopped[w]
        here = sorted(v for v, _ in self.arrived[point.id])
        if point.block_wide and done:
            return error(point.op, f"deadlock at sync: warps {here} wait here but warps "
                                   f"{done} returned without reaching it")
        others = [f"warp {v} waits at {p.describe()}" for v, p in stopped.items()
                  if v not in here]
        if done:
            others.append(f"warps {done} returned")
        return error(point.op, f"deadlock at sync: barrier {point.id} completes when "
                               f"{point.warps} warps arrive, but only warps {here} wait here"
                               + "".join(f"; {o}" for o in others))


def _mismatch(first: tuple, other: tuple) -> TkcError:
    (w0, p0), (w, p) = first, other
    if p0.block_wide and p.block_wide and p0.what() == p.what() == "tk.sync":
        return error(p0.op, f"deadlock at sync: warp {w0} waits here but warp {w} waits at "
                            f"another tk.sync ({where(p.op) or p.op.location})")
    return error(p0.op, f"deadlock at sync: warp {w0} waits here on barrier {p0.id} but warp "
                        f"{w} arrives on it at {p.describe()} (all arrivals of one "
                        f"completion must be at one op)")
