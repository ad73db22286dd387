"""tk-verify's static race check: one warp's shared-memory write and another
warp's read (or write) of the same elements with no barrier between them,
found at compile time where the pattern is static (docs/tile-ir.md, "Static
race check"). The interpreter's detector (tkc/interpreter/races.py) finds
every race a run takes; this finds, without a run, the ones whose warps and
places are known from the code, and warns:

    k.py:14:5: warning: shared-memory race: st<f32, 16, 64> (allocated at k.py:9)
    written at k.py:12 by warp 0, read at k.py:14 by warps 1-3 with no tkc.sync() between

It walks each kernel's author IR (before tk-grid-ordering and tk-pipeline-
staging, whose barriers are theirs) keeping, per path, the shared accesses
since the last barrier, and compares each new access with them:

- who: the warps that run an op, from the branches around it whose
  conditions are functions of warpid()/warpgroupid() and constants (each
  warp's value is computed); a condition that is the same for every warp
  (it depends on no warp id) lets all or none through. Under any other
  condition the warps are unknown and the op's accesses are not checked.
- where: the elements each warp touches, from the op's coordinates (and
  those of the subtiles and ring slots it goes through) as a sum of
  constants, warp-id terms and values the same for every warp; two places
  are compared only when their difference is a constant.
- loops: the body is walked twice, so an access late in one iteration meets
  the next iteration's; places that depend on values of the iteration
  before are unknown then.
- barriers: tk.sync, the block reductions and atomic_add order the warps
  that meet there (a named barrier: the warps that run it, when they are
  its whole group; else every warp), as do tk.init_barrier and the
  compiler-synchronised TMA copies (every warp). Every warp meets a barrier
  at the same line, so what is pending there is what it orders.

Not seen (misses, never false warnings): kernels with hand-off
synchronisation (mbarrier arrive/wait, bar.arrive: a warp's arrival at one
line orders another's wait at another, which a walk in program order does
not follow) are not checked; nor accesses under conditions that depend on
other per-warp values or loop-carried values, places it cannot subtract,
TMA and warpgroup-mma (async proxy) accesses, or scf.while bodies; a
barrier under a condition the same for every warp counts as taken.
"""
from __future__ import annotations

import sys

from ..dialect import walk
from ..dialect.attrs import int_attr, sync_group
from ..dialect.types import RT, RV, ST, SV, safe_view
from ..diagnostics import where
from .verify_messages import short

BARRIERS = ("tk.sync", "tk.block_sum", "tk.block_max", "tk.block_min", "tk.atomic_add",
            "tk.init_barrier", "tk.arrive", "tk.expect_bytes", "tk.wait", "tk.pipeline_load",
            "tk.pipeline_store", "tk.cluster_sync", "tk.arrive_cta")
_HANDOFFS = ("tk.arrive", "tk.wait", "tk.expect_bytes", "tk.arrive_cta")   # mbarriers: an arrival here, a wait there
_MEETS = ("tk.sync", "tk.block_sum", "tk.block_max", "tk.block_min", "tk.atomic_add")  # tk.sync's id / warps
_SHARED_OPS = ("tk.load", "tk.store", "tk.load_split", "tk.store_join", "tk.group_load", "tk.group_store")
_PASS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci")
_WARNED: set = set()   # (first, second) sites warned about in this process (tk-verify runs twice)


def report(module_op, out=None) -> list[str]:
    """Warn on stderr (`out`) about each race found in the module's kernels,
    once per pair of lines a process; returns the warnings' lines."""
    out = out if out is not None else sys.stderr
    lines = []
    for fn in walk(module_op.operation):
        if fn.name == "func.func" and "tk.kernel" in fn.attributes and not _scheduled(fn):
            for key, text in _Kernel(fn).races():
                if key not in _WARNED:
                    _WARNED.add(key)
                    lines.append(text)
                    out.write(text + "\n")
    return lines


def _scheduled(fn) -> bool:
    """The passes have made the kernel's work-item or pipelined loops: their
    synchronisation is the compiler's, and the author's code was checked."""
    return any(o.name == "scf.for" and ("tk.work_items" in o.attributes or "tk.staged" in o.attributes)
               for o in walk(fn))


# ---------------------------------------------------------------- places: linear sums

def _add(a, b, sign=1):
    if a is None or b is None:
        return None
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v or k is None}


def _scale(a, k):
    return None if a is None else {t: v * k for t, v in a.items()}


def _const(a):
    """a's value when it is a constant, else None."""
    return a[None] if a is not None and len(a) == 1 else None


class _Access:
    """One op's shared access: its warps, the elements each touches, and per
    warp p, the warps ordered after p's access by the barriers since."""
    __slots__ = ("op", "write", "group", "buf", "boxes", "warps", "ordered")

    def __init__(self, op, write, group, buf, boxes, warps, ordered=None):
        self.op, self.write, self.group, self.buf = op, write, group, buf
        self.boxes, self.warps = boxes, warps   # warp -> [(start, size)] per dim
        self.ordered = ordered if ordered is not None else {p: frozenset((p,)) for p in warps}

    def but(self, ordered=None, boxes=None) -> "_Access":
        return _Access(self.op, self.write, self.group, self.buf, boxes or self.boxes, self.warps,
                       ordered if ordered is not None else self.ordered)

    def stale(self) -> "_Access":
        """This access seen from the next iteration: places that depend on
        a value that is the same for all warps may have changed."""
        return self.but(boxes={w: [(s if s is not None and len(s) == 1 else None, n) for s, n in box]
                               for w, box in self.boxes.items()})


def _merge(base: dict, a: dict, b: dict, everyone: frozenset, split=None) -> dict:
    """The state after two paths from `base`. An access of `base` missing
    from a path is ordered for every warp there (a barrier dropped it).
    split = (T, E, S): the warps S divided into those that took the first
    path (T) and the second (E): what each warp learnt comes from its own
    path. Else either path may have run for any warp: an access counts as
    ordered after either's barriers (a miss rather than a false warning)."""
    out = {k: v for k, v in {**a, **b}.items() if k not in base}
    for k in base:
        x, y = a.get(k), b.get(k)
        if x is None or y is None:
            if split is None or (x or y) is None:
                continue              # ordered on one path: taken as ordered
            x, y = (x or y.but({p: everyone for p in y.ordered}), y or x.but({p: everyone for p in x.ordered}))
        if split is None:
            out[k] = x.but({p: x.ordered[p] | y.ordered[p] for p in x.ordered})
        else:
            t, e, s = split
            out[k] = x.but({p: (x.ordered[p] & t) | (y.ordered[p] & e) | ((x.ordered[p] | y.ordered[p]) - s)
                            for p in x.ordered})
    return out


def _overlap(a, b) -> bool:
    if len(a) != len(b):
        return False
    for (sa, na), (sb, nb) in zip(a, b):
        if sa is not None and sb is not None and len(sa) == len(sb) == 1:
            d = sa[None] - sb[None]   # two constants (most places): their difference
        else:
            d = _const(_add(sa, sb, -1))
        if d is None or not (d < nb and -d < na):
            return False
    return True


# ---------------------------------------------------------------- the walk

class _Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.warps = int_attr(fn, "tk.warps") if "tk.warps" in fn.attributes else 1
        self.varies: dict = {}
        self.found: dict = {}
        self.made = 0

    def races(self):
        if not isinstance(self.warps, int) or self.warps < 2:
            return []
        if any(o.name in _HANDOFFS or (o.name == "tk.sync" and "arrive" in o.attributes) for o in walk(self.fn)):
            return []   # one warp's arrival orders another's wait at another line: not followed
        self.all = frozenset(range(self.warps))
        self._block(self.fn.regions[0].blocks[0], self.all, {})
        return list(self.found.items())

    # -- values
    def _varies(self, v) -> bool:
        """v may differ between warps (it depends on a warp or lane id, or on
        something this check does not follow)."""
        key = v
        if key in self.varies:
            return self.varies[key]
        self.varies[key] = True   # cycles: assume the worst
        owner = v.owner
        op = getattr(owner, "operation", None)
        if op is None:   # a block argument
            block = owner
            parent = block.owner.operation
            if parent.name == "func.func":
                out = False
            elif parent.name == "scf.for" and v == block.arguments[0]:
                out = any(self._varies(x) for x in list(parent.operands)[:3])
            else:
                out = True
        elif op.name in ("tk.warpid", "tk.warpgroupid", "tk.laneid") or op.regions and len(op.regions):
            out = True
        else:
            out = any(self._varies(x) for x in op.operands)
        self.varies[key] = out
        return out

    def _eval(self, v, w):
        """v for warp w as a linear sum (None: unknown)."""
        op = getattr(v.owner, "operation", None)
        name = getattr(op, "name", None)
        if name == "arith.constant":
            c = int_attr(op, "value")
            return {None: c} if isinstance(c, int) else None
        if name == "tk.warpid":
            return {None: w}
        if name == "tk.warpgroupid":
            return {None: w // 4}
        if name in _PASS:
            return self._eval(op.operands[0], w)
        if name in ("arith.addi", "arith.subi"):
            return _add(self._eval(op.operands[0], w), self._eval(op.operands[1], w),
                        1 if name == "arith.addi" else -1)
        if name in ("arith.muli", "arith.divui", "arith.divsi", "arith.remui", "arith.remsi",
                    "arith.floordivsi", "arith.cmpi", "arith.minui", "arith.maxui", "arith.minsi",
                    "arith.maxsi", "arith.andi", "arith.ori", "arith.select"):
            args = [self._eval(x, w) for x in op.operands]
            consts = [_const(a) for a in args]
            if None not in consts:
                got = _fold(op, name, consts)
                if got is not None:
                    return {None: got}
            if name == "arith.muli" and all(a is not None for a in args):
                for a, b in ((args[0], consts[1]), (args[1], consts[0])):
                    if b is not None:
                        return _scale(a, b)
        return None if self._varies(v) else {v: 1, None: 0}

    # -- regions
    def _block(self, block, warps, state):
        for op in block.operations:
            op = op.operation
            if op.name in BARRIERS:
                state = self._barrier(op, warps, state)
            elif op.name in _SHARED_OPS:
                state = self._access(op, warps, state)
            elif op.name == "scf.if":
                state = self._if(op, warps, state)
            elif op.name == "scf.for":
                state = self._for(op, warps, state)
            elif op.regions and len(op.regions):   # scf.while and the like: not followed
                state = {}
        return state

    def _barrier(self, op, warps, state):
        """The warps meeting at op are ordered after what any of them was
        ordered after. A named barrier that exactly the warps running it
        complete orders those; any other is taken as the block's."""
        group = sync_group(op, self.warps)
        named = op.name in _MEETS and group[0] != 0 and warps is not None and group[1] == len(warps)
        if not named:
            return {}
        out = {}
        for k, a in state.items():
            ordered = {p: (o | warps) if o & warps else o for p, o in a.ordered.items()}
            if any(len(o) < self.warps for o in ordered.values()):
                out[k] = a.but(ordered)
        return out

    def _if(self, op, warps, state):
        cond = op.operands[0]
        split = None
        if warps is None or self._varies(cond):
            values = None if warps is None else {w: _const(self._eval(cond, w)) for w in warps}
            if values is None or None in values.values():
                then = other = None
            else:
                then = frozenset(w for w in warps if values[w])
                other = warps - then
                split = (then, other, warps)
        else:
            then = other = warps          # the same for every warp: all or none take it
        out = self._block(op.regions[0].blocks[0], then, dict(state))
        alt = self._block(op.regions[1].blocks[0], other, dict(state)) \
            if len(op.regions) > 1 and len(op.regions[1].blocks) else state
        return _merge(state, out, alt, self.all, split)

    def _for(self, op, warps, state):
        if warps is not None and any(self._varies(x) for x in list(op.operands)[:3]):
            warps = None                  # a trip count that differs between warps
        body = op.regions[0].blocks[0]
        first = self._block(body, warps, dict(state))
        second = self._block(body, warps, {k: a.stale() for k, a in first.items()})
        return _merge(state, state, second, self.all)

    # -- accesses
    def _access(self, op, warps, state):
        sh = op.operands[1 if op.name == "tk.group_store" else 0]
        view = safe_view(sh)
        if not isinstance(view, (ST, SV)) or warps is None:
            return state
        write = op.name in ("tk.store", "tk.store_join", "tk.group_load")
        group = op.name in ("tk.group_load", "tk.group_store")
        buf, boxes = None, {}
        for w in warps:
            buf, base = self._view(sh, w)
            boxes[w] = self._box(op, view, base, w, group)
        new = _Access(op, write, group, buf, boxes, warps)
        for old in state.values():
            if old.buf == buf and (old.write or write) and not (old.group and group and old.write and write):
                self._compare(old, new)
        self.made += 1            # a key for the access, kept by its copies on every path
        return {**state, self.made: new}

    def _view(self, v, w):
        """(root alloc value, the element offset of v in it per dim, with a
        leading ring-slot dim) for warp w."""
        op = getattr(v.owner, "operation", None)
        name = getattr(op, "name", None)
        if name == "tk.subtile":
            root, base = self._view(op.operands[0], w)
            t = safe_view(v)
            i, j = (self._eval(x, w) for x in list(op.operands)[1:3])
            return root, [base[0], _add(base[1], _scale(i, t.rows)), _add(base[2], _scale(j, t.cols))]
        if name == "tk.stage":
            root, base = self._view(op.operands[0], w)
            return root, [_add(base[0], self._eval(op.operands[1], w))] + base[1:]
        zero = {None: 0}
        return v, [zero, zero, zero]

    def _box(self, op, view, base, w, group):
        """[(start, size)] of the elements op touches for warp w: the slot,
        then rows and cols (an sv: one row of its elements)."""
        slot = (base[0], 1)
        rows, cols = (view.rows, view.cols) if isinstance(view, ST) else (1, view.length)
        if group:
            return [slot, (base[1], rows), (base[2], cols)]
        reg = safe_view(op.results[0] if op.name in ("tk.load", "tk.load_split") else op.operands[1])
        first = {"tk.load": 1, "tk.load_split": 1, "tk.store": 2, "tk.store_join": 3}[op.name]
        coords = [self._eval(x, w) for x in list(op.operands)[first:]]
        elements = "elements" in op.attributes
        if isinstance(reg, RT):
            r, c = reg.rows, reg.cols * (2 if op.name in ("tk.load_split", "tk.store_join") else 1)
            if len(coords) != 2:
                return [slot, (None, r), (None, c)]
            i, j = coords if elements else (_scale(coords[0], r), _scale(coords[1], c))
            return [slot, (_add(base[1], i), r), (_add(base[2], j), c)]
        if isinstance(reg, RV):
            n = reg.length
            i = coords[0] if coords else {None: 0}
            return [slot, (base[1], 1), (_add(base[2], i if elements else _scale(i, n)), n)]
        return [slot, (None, rows), (None, cols)]

    def _compare(self, old, new) -> None:
        a, b = set(), set()
        for p in old.warps:
            for q in new.warps:
                if q not in old.ordered[p] and _overlap(old.boxes[p], new.boxes[q]):
                    a.add(p)
                    b.add(q)
        if not a:
            return
        key = (where(old.op), where(new.op))
        if key in self.found or not all(key):
            return
        verb = lambda acc: "written" if acc.write else "read"
        again = " again" if old.write and new.write else ""
        alloc = where(old.buf.owner)
        self.found[key] = (
            f"{key[1]}: warning: shared-memory race: {short(old.buf.type)}"
            f"{f' (allocated at {_line(alloc)})' if alloc else ''} {verb(old)} at {_line(key[0])} by {_warps(a)}, "
            f"{verb(new)}{again} at {_line(key[1])} by {_warps(b)} with no tkc.sync() between")


def _fold(op, name, c):
    from mlir import ir
    if name == "arith.cmpi":
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        a, b = c
        return int([a == b, a != b, a < b, a <= b, a > b, a >= b, a < b, a <= b, a > b, a >= b][pred])
    if name == "arith.select":
        return c[1] if c[0] else c[2]
    a, b = c
    if name in ("arith.divui", "arith.divsi", "arith.floordivsi", "arith.remui", "arith.remsi") and b == 0:
        return None
    return {"arith.muli": lambda: a * b, "arith.divui": lambda: a // b, "arith.divsi": lambda: int(a / b),
            "arith.floordivsi": lambda: a // b, "arith.remui": lambda: a % b,
            "arith.remsi": lambda: a - int(a / b) * b, "arith.minui": lambda: min(a, b),
            "arith.maxui": lambda: max(a, b), "arith.minsi": lambda: min(a, b), "arith.maxsi": lambda: max(a, b),
            "arith.andi": lambda: a & b, "arith.ori": lambda: a | b}[name]()


def _line(loc: str) -> str:
    """'file:line' of 'file:line:col'."""
    return loc.rsplit(":", 1)[0] if loc.count(":") >= 2 else loc


def _warps(ws) -> str:
    ws = sorted(ws)
    if len(ws) == 1:
        return f"warp {ws[0]}"
    if ws == list(range(ws[0], ws[-1] + 1)):
        return f"warps {ws[0]}-{ws[-1]}"
    return "warps " + ", ".join(map(str, ws))
