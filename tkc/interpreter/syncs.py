"""Named barriers: tk.sync, and the block syncs of other ops (docs/tile-ir.md).

`tk.sync {id = I, warps = W}` is PTX's `bar.sync I, 32*W`: barrier I
completes when W warps have arrived at it (default: id 0, every warp of the
block); those W continue, the other warps are not involved. tk.init_barrier
and the pipeline ops synchronise the whole block the same way (barrier 0).

A warp reaching one yields its op's `SyncPoint` to the scheduler
(machine.py), which records the arrival here; the arrival that makes W
releases the W warps. All waiting arrivals of one completion must be at the
same op: on the GPU a warp at another bar.sync with the same id would
complete the barrier with them, which is never what the author meant, so the
interpreter reports it as a deadlock. `tk.sync {arrive}` (bar.arrive) counts
the warp toward the barrier and lets it go on: it is how one warpgroup
signals another that waits at a tk.sync of the same id (the turns of
warpgroup.turns). An arrival left over when the kernel ends is harmless (the
barriers are reset for the next block). When no warp can move, `deadlock`
says which barrier waits for whom.
"""
from __future__ import annotations

from mlir import ir

from ..dialect.attrs import after_gls
from ..diagnostics import TkcError, error, where
from ..hopper.sync import checked_sync_group
from .gl import whole
from .program import Step, handler


class SyncPoint:
    """One op's barrier: id, warps needed, and the op (for messages);
    arrive: the warp only counts toward it (bar.arrive), it does not wait."""
    __slots__ = ("op", "id", "warps", "block_wide", "arrive")

    def __init__(self, op, id: int, warps: int, block_wide: bool, arrive: bool = False):
        self.op, self.id, self.warps, self.block_wide = op, id, warps, block_wide
        self.arrive = arrive

    def what(self) -> str:
        if self.op.name != "tk.sync":
            return self.op.name
        return "tk.sync {arrive}" if self.arrive else "tk.sync"

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


@handler("tk.atomic_add")
def _atomic_add(c, op):
    """The group meets, its first warp adds (after checking that the TMA
    stores to the `after` gls have completed their writes), the group meets
    again and every warp takes the old value."""
    point = _point(c, op)
    dst, idx = c.slot(op.operands[0]), [c.slot(v) for v in op.operands[2:6]]
    after, out = [c.slot(v) for v in after_gls(op)], c.result_slot(op)
    value = ir.IntegerAttr(op.attributes["value"]).value

    scratch = c.slot(op.operands[1])

    def take(env, w):
        """Read the old value from the scratch (its first word: a shared read
        the race detector orders after the adding warp's write)."""
        key = id(env[scratch])
        if w.block.races is not None:
            w.block.races.read(w.warpid, env[scratch], WORD, op)
        if key not in w.block.atomic_old:
            raise error(op, "tk.atomic_add {delegated}: no warp has added yet (its scratch is empty)")
        env[out] = w.block.atomic_old[key]
    if "delegated" in op.attributes:   # another warp added and left the old value
        return take

    def step(env, w):
        yield point
        if point.warps == 1 or w.warpid == 0:   # the group's first warp adds
            _check_completed(op, w, [whole(env[g])[0] for g in after])
            root, origin = whole(env[dst])
            b, d, r, col = (int(env[i]) + o for i, o in zip(idx, origin))
            if not all(0 <= x < n for x, n in zip((b, d, r, col), root.shape)):
                raise error(op, f"tk.atomic_add: element ({b}, {d}, {r}, {col}) is out of bounds of "
                                f"shape {tuple(root.shape)}")
            w.block.atomic_old[id(env[scratch])] = int(root[b, d, r, col])
            root[b, d, r, col] += value
            if w.block.races is not None:
                w.block.races.write(w.warpid, env[scratch], WORD, op)
        yield point
        take(env, w)
    return Step(step, op, gen=True)


WORD = (slice(0, 1),)   # the scratch's first element: the old value


def _check_completed(op, w, roots) -> None:
    """No TMA store to one of `roots` may still be writing (tk.tma_store_wait
    {writes} completes them; waiting for their reads is not enough), and
    with race checks each completion must happen before the add (warp w's):
    a barrier or mbarrier from the waiting warp to w."""
    block = w.block
    for warp, stores in block.tma_writes.items():
        for store, arr in stores:
            if any(arr is r for r in roots):
                raise error(op, f"tk.atomic_add comes after the writes of the TMA store at "
                                f"{where(store) or store.location} (warp {warp}), which may not have "
                                "completed: that warp needs tk.tma_store_wait {writes} first, and the "
                                "adding thread an ordering after it")
    if block.races is None:
        return
    for store, arr, warp, epoch in block.tma_written:
        if any(arr is r for r in roots) and block.races.clock[w.warpid, warp] < epoch:
            raise error(op, f"tk.atomic_add is not ordered after the completion of the TMA store at "
                            f"{where(store) or store.location} (awaited by warp {warp}): nothing "
                            f"(a barrier or an mbarrier) leads from that wait to warp {w.warpid}, "
                            "whose thread adds")


def _point(c, op) -> SyncPoint:
    i, warps = checked_sync_group(op, c.warps)
    return SyncPoint(op, i, warps, i == 0 and warps == c.warps, "arrive" in op.attributes)


class NamedBarriers:
    """The block's barriers: per id, the warps arrived since its last
    completion (waiting at a tk.sync, or only arrived: bar.arrive)."""

    def __init__(self):
        self.arrived: dict[int, list[tuple[int, SyncPoint]]] = {}

    def arrive(self, w: int, point: SyncPoint) -> list[int] | None:
        """Warp w arrives at `point`; when that completes the barrier, the
        warps that waited at it (released), else None."""
        here = self.arrived.setdefault(point.id, [])
        if here and here[0][1].warps != point.warps:
            raise _counts(here[0], (w, point))
        first = next((a for a in here if not a[1].arrive), None)  # the first warp waiting
        if not point.arrive and first is not None and first[1].op is not point.op:
            raise _mismatch(first, (w, point))
        here.append((w, point))
        if len(here) < point.warps:
            return None
        del self.arrived[point.id]
        return [v for v, p in here if not p.arrive]

    def deadlock(self, stopped: dict, done: list) -> TkcError:
        """No warp can move and each waits at a barrier: explain the first's."""
        w = min(stopped)
        point = stopped[w]
        arrived = self.arrived[point.id]
        here = sorted(v for v, p in arrived if not p.arrive)
        if point.block_wide and done:
            return error(point.op, f"deadlock at sync: warps {here} wait here but warps "
                                   f"{done} returned without reaching it")
        others = [f"warp {v} waits at {p.describe()}" for v, p in stopped.items()
                  if v not in here]
        gone = sorted(v for v, p in arrived if p.arrive)
        if gone:
            at = next(p for _, p in arrived if p.arrive)
            others.insert(0, f"warps {gone} arrived on it at {at.describe()} and went on")
        if done:
            others.append(f"warps {done} returned")
        return error(point.op, f"deadlock at sync: barrier {point.id} completes when "
                               f"{point.warps} warps arrive, but only warps {here} wait here"
                               + "".join(f"; {o}" for o in others))


def _counts(first: tuple, other: tuple) -> TkcError:
    """Two arrivals of one completion that disagree on its warp count."""
    (w0, p0), (w, p) = first, other
    return error(p.op, f"barrier {p.id}: warp {w} arrives here for {p.warps} warps, but warp "
                       f"{w0} arrived at {p0.describe()} (all arrivals of one completion must "
                       f"name one warp count)")


def _mismatch(first: tuple, other: tuple) -> TkcError:
    (w0, p0), (w, p) = first, other
    if p0.block_wide and p.block_wide and p0.what() == p.what() == "tk.sync":
        return error(p0.op, f"deadlock at sync: warp {w0} waits here but warp {w} waits at "
                            f"another tk.sync ({where(p.op) or p.op.location})")
    return error(p0.op, f"deadlock at sync: warp {w0} waits here on barrier {p0.id} but warp "
                        f"{w} arrives on it at {p.describe()} (all arrivals of one "
                        f"completion must be at one op)")
