"""Warpgroup operations (Hopper wgmma, setmaxnreg): `from tkc import warpgroup`.

A warpgroup is 4 consecutive warps; all 4 call each op. Per warp, the
accumulator is an rt<f32, 16, N> holding rows 16*(warp%4).. of the
warpgroup's 64 x N result:

    warpgroup.mma_AB(d, a, b, c)   d = a @ b + c          (in place: d rebound)
    warpgroup.mma_AB(d, a, b)      d = a @ b + d          (accumulate)
    d = warpgroup.mma_AB(a, b, c)  functional form
    warpgroup.mma_AB(d, a, b, negate=True)   d = -(a @ b) + d (no extra work)
    warpgroup.mma_ABt(d, p8, b, k_order="lanes")   an 8-bit a in registers: its
                                   columns enter in fp8_lane_order() (hopper/fp8_lanes.py)
    warpgroup.mma_async_wait(d)    wait for the issued mmas, then read d

a: rt<16, K, row> per warp or st<64, K> (mma_AB, mma_ABt); st<K, 64>
(mma_AtB, mma_AtBt). b: st<K, N> (AB, AtB) or st<N, K> (ABt, AtBt). The mma
is asynchronous: read an accumulator only after `mma_async_wait` rebinds it.
`increase_registers(n)` / `decrease_registers(n)` move the warpgroup's
register budget (setmaxnreg; n a multiple of 8 in 24..256).

    warpgroup.load(dst, src, coords)   each warp loads its 16 rows of the
    warpgroup.store(dst, src, coords)  64-row tile at coords (in units of
                                       the warpgroup's 64 x C tile)

The in-place and functional forms both take 3 arguments when c is left out;
they differ by the first argument's type: an accumulator is f32, a
multiplicand never is.
"""
from __future__ import annotations

from ..dialect import ops as tk
from ..hopper import warpgroup as rules
from ..hopper.fp8_lanes import fp8_lane_order  # noqa: F401  (public: warpgroup.fp8_lane_order)
from . import ops
from .complex import Complex, partwise
from .tiles import Reg, Shared
from .trace import current, emitting, fail
from .values import Bool
from .workers import warpgroupid, warpid

__all__ = ["mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt", "mma_async_wait", "fp8_lane_order",
           "increase_registers", "decrease_registers", "load", "store", "sync", "turns"]
FIRST_SYNC_ID = 8          # warpgroup g's named barrier is 8 + g (the passes use the low ids)
FIRST_TURN_ID = 12         # warpgroup g's turn barrier (warpgroup.turns) is 12 + g


def _view(x):
    return x.view if isinstance(x, (Reg, Shared)) else None


def _describe(x) -> str:
    return rules.short(x.view) if isinstance(x, (Reg, Shared)) else type(x).__name__


def _is_accumulator(x) -> bool:
    return isinstance(x, Reg) and x.is_tile and x.dtype == "f32"


def _split(py: str, args):
    """(d or None, a, b, c) from the three call forms."""
    if len(args) == 4:
        return args
    if len(args) == 3 and _is_accumulator(args[0]):
        d, a, b = args
        return d, a, b, d
    if len(args) == 3:
        return (None, *args)
    raise fail(f"warpgroup.{py} takes (d, a, b[, c]) in place or (a, b, c) functionally, "
               f"got {len(args)} arguments")


def _check_warps(py: str) -> None:
    problems = rules.warps_problems(f"warpgroup.{py}", current().warps)
    if problems:
        raise fail(problems[0])


def _mma(py: str):
    name = "warpgroup_" + py.lower()

    def op(*args, negate: bool = False, when=None, k_order: str | None = None) -> Reg:
        if not isinstance(negate, bool):
            raise fail(f"warpgroup.{py}: negate must be True or False, got {negate!r}")
        if when is not None and not isinstance(when, Bool):
            raise fail(f"warpgroup.{py}: when must be a traced condition (e.g. j > 0), got {when!r}")
        if any(isinstance(x, Complex) for x in args):
            if when is not None or k_order is not None:
                raise fail(f"warpgroup.{py}: when and k_order are a real mma's, not a complex one's")
            return _complex_mma(py, op, args, negate)
        d, a, b, c = _split(py, args)
        for what, x in (("a", a), ("b", b), ("c", c)):
            if not isinstance(x, (Reg, Shared)):
                raise fail(f"warpgroup.{py}: {what} must be a tile, got {_describe(x)}")
        _check_warps(py)
        problems = rules.mma_problems(name, _view(a), _view(b), _view(c), k_order=k_order)
        if problems:
            raise fail(problems[0].replace(name, f"warpgroup.{py}", 1))
        if d is not None and (not isinstance(d, Reg) or d.view != c.view):
            raise fail(f"warpgroup.{py}: destination {_describe(d)} must have c's type "
                       f"{_describe(c)}")
        dst = d if d is not None else Reg(c.view)
        with emitting():
            value = tk.warpgroup_mma(name, a.value(), b.value(), c.value(), negate,
                                     when.ir() if when is not None else None, k_order=k_order)
        return dst.bind(value)
    op.__name__ = py
    op.__doc__ = (f"{py}(d, a, b[, c]) or d = {py}(a, b, c): the warpgroup's 64 x N "
                  "d = a @ b + c with the named transposes, issued asynchronously; "
                  "negate=True: d = -(a @ b) + c (free: wgmma's scale of a); "
                  "when=cond: only where cond holds, else d = c and an empty group (so the "
                  "waits count it either way), e.g. to leave out a software-pipelined "
                  "loop's edge products; k_order=\"lanes\": an 8-bit a in registers enters with "
                  "each 32 columns in fp8_lane_order() (b's K must be in that order).")
    return op


mma_AB, mma_ABt, mma_AtB, mma_AtBt = (_mma(n) for n in ("mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt"))


def _complex_mma(py: str, real, args, negate: bool) -> Complex:
    """A complex (or complex-times-real) warpgroup mma as real ones, each its
    own wgmma group: d.re = c.re + a.re b.re - a.im b.im, d.im = c.im +
    a.re b.im + a.im b.re, the minus and the operands' conjugates given to
    the wgmma as `negate` (no data is negated)."""
    if len(args) == 4:
        d, a, b, c = args
    elif len(args) == 3 and isinstance(args[0], Complex) and _is_accumulator(args[0].re):
        d, a, b, c = args[0], args[1], args[2], args[0]
    elif len(args) == 3:
        d, (a, b, c) = None, args
    else:
        raise fail(f"warpgroup.{py} takes (d, a, b[, c]) in place or (a, b, c) functionally, "
                   f"got {len(args)} arguments")
    for what, x in (("c", c), ("d", d)):
        if x is not None and not (isinstance(x, Complex) and _is_accumulator(x.re)):
            raise fail(f"warpgroup.{py}: with complex operands {what} must be a complex f32 "
                       f"register tile (tkc.crt(f32, 16, N)), got {x!r}")
    c = c.resolved()
    ar, ai, sa = (a.re, a.im, a.sign) if isinstance(a, Complex) else (a, None, 1)
    br, bi, sb = (b.re, b.im, b.sign) if isinstance(b, Complex) else (b, None, 1)
    s = -1 if negate else 1
    re = real(None, ar, br, c.re, negate=s < 0)
    if ai is not None and bi is not None:
        re = real(None, ai, bi, re, negate=s * sa * sb > 0)
    im = c.im
    for x, y, sign in ((ar, bi, sb), (ai, br, sa)):
        if x is not None and y is not None:
            im = real(None, x, y, im, negate=s * sign < 0)
    if d is None:
        return Complex(re, im)
    d.re.bind(re.value())
    d.im.bind(im.value())
    return d


def mma_async_wait(*tiles, pending: int = 0):
    """Wait until at most `pending` warpgroup mma groups are in flight, and
    rebind each given accumulator to its value after the wait. Returns the
    tile (one given) or the tuple of tiles."""
    given = tiles
    tiles = [p for t in tiles for p in ((t.re, t.im) if isinstance(t, Complex) else (t,))]
    for i, t in enumerate(tiles):
        if not isinstance(t, Reg):
            raise fail(f"warpgroup.mma_async_wait: tile {i} must be a register tile, "
                       f"got {_describe(t)}")
    problems = rules.wait_problems([t.view for t in tiles], [t.view for t in tiles], pending)
    if problems:
        raise fail(problems[0].replace("warpgroup_mma_wait", "warpgroup.mma_async_wait", 1))
    _check_warps("mma_async_wait")
    # one tk.warpgroup_mma_wait per tile type (its variadic operands share a
    # type); the ones after the first find at most `pending` groups in flight
    # already: the same wait, to the hardware and the interpreter
    kinds: dict[str, list[Reg]] = {}
    for t in tiles:
        kinds.setdefault(str(t.value().type), []).append(t)
    for same in kinds.values():
        with emitting():
            op = tk.warpgroup_mma_wait([t.value() for t in same], pending)
        for t, r in zip(same, op.results):
            t.bind(r)
    return given[0] if len(given) == 1 else given


def _registers(increase: bool):
    name = "increase_registers" if increase else "decrease_registers"

    def op(count: int) -> None:
        problems = rules.register_problems(f"warpgroup.{name}", count)
        if problems:
            raise fail(problems[0])
        _check_warps(name)
        with emitting():
            tk.set_registers(increase, count)
    op.__name__ = name
    op.__doc__ = (f"setmaxnreg.{'inc' if increase else 'dec'}: this warpgroup's threads get "
                  "`count` registers each (a multiple of 8 in 24..256).")
    return op


increase_registers, decrease_registers = _registers(True), _registers(False)


def sync() -> None:
    """The calling warpgroup's 4 warps wait for each other, the other
    warpgroups go on (a named barrier per warpgroup, `bar.sync 8 + g, 128`):
    e.g. between a warpgroup's shared writes and its own wgmma reading them,
    without holding the other consumers in lockstep as tkc.sync does."""
    _check_warps("sync")
    _each_warpgroup(lambda i: tk.sync(id=FIRST_SYNC_ID + i, warps=4))


def _each_warpgroup(emit) -> None:
    """emit(i) under `if warpgroupid() == i`, for every warpgroup i: named
    barrier ids are constants, so each warpgroup gets its own branch."""
    from .control import if_
    g = warpgroupid()
    for i in range(current().warps // 4):
        with if_(g == i), emitting():
            emit(i)


class Turns:
    """`with turn:` -- see turns()."""

    def __init__(self, groups: int):
        self.groups = groups

    def __enter__(self):
        _turn_barriers(self.groups, lambda g: g, arrive=False)  # wait for my turn
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:  # hand the turn on
            _turn_barriers(self.groups, lambda g: (g + 1) % self.groups, arrive=True)
        return False

    def end(self) -> None:
        """After the last turn: warpgroup 0 takes the last hand-over (see turns())."""
        from .control import if_
        if self.groups > 1:
            with if_(warpgroupid() == 0), emitting():
                tk.sync(id=FIRST_TURN_ID, warps=8)


def turns() -> Turns:
    """FlashAttention-3's ping-pong: the kernel's warpgroups take turns at the
    code under `with turn:` (warpgroup 0, 1, .., 0, 1, ..), e.g. issuing their
    wgmmas, so one warpgroup's softmax runs while the tensor cores work for
    another instead of all of them asking for the tensor cores at once.

        turn = warpgroup.turns()      # once, before the loop: 0 goes first
        for j in tkc.range(n, stages=2):
            with turn:
                warpgroup.mma_ABt(s, q_s, k_s)
            ...
        turn.end()                    # optional at the kernel's end; needed per work item

    Named barrier 12 + g is warpgroup g's: g waits at it (bar.sync) as its
    turn starts, g - 1 arrives on it (bar.arrive) as its own turn ends. Every
    warpgroup takes the same number of turns (one that takes fewer than the
    warpgroup before it leaves the next one waiting forever: the interpreter
    reports that deadlock). turn.end() after the loop has warpgroup 0 take
    the last hand-over; without it that arrival stays pending, harmless when
    the kernel ends, a deadlock when turns() starts again (a persistent
    kernel's next work item: the interpreter reports it). With one warpgroup
    it does nothing."""
    from .control import if_
    _check_warps("turns")
    groups = current().warps // 4
    if groups > 16 - FIRST_TURN_ID:
        raise fail(f"warpgroup.turns: at most {16 - FIRST_TURN_ID} warpgroups (named barriers "
                   f"{FIRST_TURN_ID}..15), the kernel has {groups}")
    if groups > 1:
        with if_(warpgroupid() == 0), emitting():
            tk.sync(id=FIRST_TURN_ID, warps=8, arrive=True)
    return Turns(groups)


def _turn_barriers(groups: int, barrier, arrive: bool) -> None:
    """Warpgroup g waits at (or arrives on) turn barrier barrier(g)."""
    if groups > 1:
        _each_warpgroup(lambda i: tk.sync(id=FIRST_TURN_ID + barrier(i), warps=8, arrive=arrive))


# ---------------------------------------------------------------- memory

def _warp_rows(py: str, reg, coords):
    """coords of the warpgroup's 64-row tile -> this warp's 16-row tile's."""
    if not isinstance(reg, Reg) or not reg.is_tile or reg.view.rows != 16:
        raise fail(f"warpgroup.{py}: the register side must be an rt with 16 rows (each warp's "
                   f"part of the warpgroup's 64 rows), got {_describe(reg)}")
    _check_warps(py)
    coords = list(coords)
    if len(coords) < 2:
        raise fail(f"warpgroup.{py}: coordinates need a row and a column, got {tuple(coords)}")
    coords[-2] = coords[-2] * 4 + warpid() % 4
    return tuple(coords)


@partwise
def load(dst: Reg, src, coords=(0, 0)) -> Reg:
    """Each warp loads its 16 rows of the 64 x C tile of src (gl or st) at coords."""
    return ops.load(dst, src, _warp_rows("load", dst, coords))


@partwise
def store(dst, src: Reg, coords=(0, 0), deinterleave: bool = False) -> None:
    """Each warp stores its 16 rows into the 64 x C tile of dst (gl or st) at
    coords; deinterleave as for ops.store."""
    ops.store(dst, src, _warp_rows("store", src, coords), deinterleave=deinterleave)
