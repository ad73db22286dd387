"""Shared-memory race detection: a missing tk.sync is an error on the CPU too.

The interpreter runs warps one after another, so without this a kernel that forgets a barrier still
computes the right numbers (and races on the GPU). docs/tile-ir.md: a warp's shared-memory write is
visible to another warp only after a synchronisation that orders them. Modelled with happens-before
and vector clocks (one per warp, FastTrack-style epochs per 8x16 cell):

- Agents: the block's W warps, and one TMA agent per warp (agent W + w: the asynchronous copies warp
  w issued). Warp w's clock `clock[w]` says, per agent, up to which epoch w has synchronised with
  it; `clock[w, w]` is w's own epoch, bumped at each release (tk.sync, tk.arrive, tk.expect_bytes).
- tk.sync (and tk.init_barrier, a block sync): the clocks of the warps that complete the barrier
  (all of them, or the W of a named `tk.sync {id, warps}`) become the join of theirs, then each
  starts a new epoch. A warp that only arrives (`tk.sync {arrive}`, bar.arrive) releases its clock
  of that moment to the warps that wait, and learns nothing. pipeline_load / pipeline_store
  synchronise the block before and after their copy, which is recorded as warp 0's access in
  between, so every warp is ordered after it.
- mbarriers: an arrival (tk.arrive, tk.expect_bytes) releases the warp's clock into the barrier's
  current phase; a TMA load's delivery releases its agent's epoch into it; when the phase completes
  its clock joins the barrier's completed clock (cumulative over phases); a tk.wait that passes
  acquires that clock.
- Per shared cell (8x16 block of an st, 8 elements of an sv): the epoch of each agent in the last
  write, its site, and per warp the epoch and site of its last read since that write. A read by warp
  r is ordered after the write when every other writer's epoch is <= clock[r]; a write by w is
  ordered after earlier writes and reads the same way with clock[w]. Each slot of a ring (`tk.alloc
  {stages}`) is a buffer of its own; an st subtile is a numpy view, and its accesses are mapped onto
  its parent's cells (`_place`). A tile over the rings (`{after_ring}`: the staging lays it over the
  slots) is a buffer too, but a write to it is checked and recorded in every slot.
- A group op is cooperative: group_load writes as every warp of the group (each at its own arrival;
  the copy happens at the first one), group_store reads as each warp that calls it. A read of the
  group's tile before a member arrived is a race too (that member's part was not written yet).
- Asynchronous reads: a warpgroup mma reads its shared operands (as each calling warp), a tma_store
  / tma_store_add its tile (as the issuing warp), from issue until a wait by the issuing warp
  retires them (tk.warpgroup_mma_wait / tk.tma_store_wait {pending = N} retire all but that warp's N
  most recent mma groups / stores; the warp's end retires the rest). At issue the read is checked
  against earlier writes. While it is in flight, any write to its cells is a race, whoever writes
  (the issuing warp too): nothing can order a write after a read that may still be going on. At
  retirement it is recorded as a read by the issuing warp at its epoch then, so a release before the
  wait does not order it: a consumer that arrives on an "empty" barrier before tk.warpgroup_mma_wait
  (the delayed-release bug) races with the producer's next load into the stage. (The values are
  still computed at issue: only the race check sees the window.)

A race is reported at the second access of an unordered pair in the interpreter's (warp-by-warp)
order, naming the first's line: "warp 1 reads ... written by warp 0 at f:l", "warp 1 overwrites ...
read by warp 0 at f:l" (for an asynchronous read: "at f:l (asynchronously, until the
tk.warpgroup_mma_wait at f:l)"), or "warp 0 overwrites ... while the TMA store issued by warp 0 at
f:l may still read it" (a read of a group copy before a member arrived is located at the read). A
correctly synchronised kernel never gets one: every ordering modelled is one the hardware
guarantees, and accesses are 8-row and 16-column aligned, so cells never make two disjoint accesses
overlap.

Not modelled (so such races are missed, never invented): proxy fences (tk.fence_async) are not
checked; a group copy's write is not compared with earlier unsynchronised writes by its own group's
warps (two copies into one tile give each thread the same elements); a tk.wait acquires everything
the barrier's completed phases released, not only its parity's phase (a warp a whole phase behind
learns too much). Global memory is not tracked. In a cluster, a multicast TMA load into a peer CTA's
tile is not checked against that CTA's earlier accesses (remote_tma_write): cross-CTA order is not
modelled."""
from __future__ import annotations

import numpy as np

from ..diagnostics import TkcError, error, where
from ..hopper.warpgroup import short

CELL = 16  # elements per cell along a row: every tile access is 16-aligned there
CELL_ROWS = 8  # rows per cell, and elements per cell of an sv: 8-row tiles and their 8-long
               # "col" vectors (fragments.HALF) are 8-aligned
_ALL = slice(None)
_NONE = slice(0, 0)  # no co-writers

OVER_RING = "over_ring"   # a Site's kind: a write to a tile over the rings, recorded in a slot
# kind of asynchronous read -> (what reads, the op that retires it)
ASYNC = {"wgmma": ("the warpgroup mma", "tk.warpgroup_mma_wait"),
         "tma_store": ("the TMA store", "tk.tma_store_wait")}


class PhaseClock:
    """What an mbarrier orders: its current phase's releases (`acc`) and the
    join of its completed phases' (`done`)."""
    __slots__ = ("acc", "done")

    def __init__(self, agents: int):
        self.acc = np.zeros(agents, np.int64)
        self.done = np.zeros(agents, np.int64)

    def complete(self) -> None:
        np.maximum(self.done, self.acc, out=self.done)
        self.acc[:] = 0


class Site:
    """Where an access happened: its op, and for an asynchronous read the
    kind and the op that retired it (None: the warp's end)."""
    __slots__ = ("op", "kind", "until")

    def __init__(self, op, kind: str | None = None, until=None):
        self.op, self.kind, self.until = op, kind, until

    def text(self) -> str:
        if self.kind is None:
            return where(self.op)
        if self.kind == OVER_RING:
            return f"{where(self.op)} (into a tile over the ring: st(after_loop=True))"
        end = f"the {ASYNC[self.kind][1]} at {where(self.until)}" if self.until is not None \
            else "the warp returned"
        return f"{where(self.op)} (asynchronously, until {end})"


class Buffer:
    """Race bookkeeping of one shared st/sv, per cell. `w_max` bounds each
    agent's write epochs over the whole buffer from above, so that a read
    ordered after all of them (the common case) skips the per-cell check.
    `inflight`: the asynchronous reads of it not retired yet."""
    __slots__ = ("what", "w_epoch", "w_site", "r_epoch", "r_site", "w_max", "vector", "reads",
                 "inflight")

    def __init__(self, what: str, cells: tuple, agents: int, warps: int, vector: bool):
        self.what, self.vector = what, vector
        self.w_epoch = np.zeros((agents, *cells), np.int64)  # 0: agent did not write
        self.w_site = np.full(cells, -1, np.int64)
        self.r_epoch = np.zeros((warps, *cells), np.int64)  # 0: no read since the write
        self.r_site = np.full((warps, *cells), -1, np.int64)
        self.w_max = np.zeros(agents, np.int64)
        self.reads = 0
        self.inflight: list[AsyncRead] = []

    def cells(self, ix: tuple) -> tuple:
        """The cell region covering the elements [ix] (slices, as memory.window
        gives: explicit bounds, or slice(None) for the whole buffer)."""
        if self.vector:
            return (_ALL, _cell_slice(ix[0], CELL_ROWS))
        if len(ix) == 1:
            return (_ALL, _ALL)
        return (_cell_slice(ix[0], CELL_ROWS), _cell_slice(ix[1], CELL))


class Place:
    """An access's elements in terms of the buffer that owns them: `arr` the
    buffer's array, `ix` the index into it, `region` its cells."""
    __slots__ = ("buf", "arr", "ix", "region")

    def __init__(self, buf: Buffer, arr: np.ndarray, ix: tuple):
        self.buf, self.arr, self.ix, self.region = buf, arr, ix, buf.cells(ix)


class AsyncRead:
    """A read in flight: issued by warp `w` at `op`, of `place`."""
    __slots__ = ("w", "place", "op", "kind")

    def __init__(self, w: int, place: Place, op, kind: str):
        self.w, self.place, self.op, self.kind = w, place, op, kind


class Prior:
    """A region's accesses before a write: per agent the latest write epoch
    and its site, per warp the latest read epoch and its site."""
    __slots__ = ("w_max", "w_site", "r_max", "r_site", "reads")

    def __init__(self, buf: Buffer, region: tuple):
        e = buf.w_epoch[(_ALL, *region)].reshape(len(buf.w_epoch), -1)
        i = e.argmax(axis=1)   # the write sites are one per cell, whichever agent wrote
        self.w_max, self.w_site = e[np.arange(len(e)), i], buf.w_site[region].reshape(-1)[i]
        self.r_max, self.r_site = _latest(buf.r_epoch, buf.r_site, region)
        self.reads = buf.reads  # reads of the buffer so far (to see if any came since)


def _latest(epochs, sites, region):
    """Per agent (first axis), the largest epoch in `region` and its site."""
    e = epochs[(_ALL, *region)].reshape(len(epochs), -1)
    i = e.argmax(axis=1)
    rows = np.arange(len(e))
    return e[rows, i], sites[(_ALL, *region)].reshape(len(sites), -1)[rows, i]


class RaceTracker:
    """The happens-before state of one block: warp clocks and shared cells."""

    def __init__(self, warps: int):
        self.warps, self.agents = warps, 2 * warps
        self.clock = np.zeros((warps, self.agents), np.int64)
        self.clock[np.arange(warps), np.arange(warps)] = 1  # epoch 0 means "none"
        self.tma = np.zeros(warps, np.int64)  # each warp's TMA agent's epoch
        self.named: dict[int, np.ndarray] = {}  # named barrier -> clocks released by bar.arrive
        self.buffers: dict[int, Buffer] = {}  # id(shared array) -> bookkeeping
        # the rings' slots, and the tiles over them (st(after_loop=True), which hopper.shared's
        # layout overlays): a write to one is checked and recorded as a write to every slot
        self.ring_slots, self.over_ring = [], set()
        self.sites: list[Site] = []  # site id -> Site
        self._site_ids: dict[tuple, int] = {}
        # per warp, per kind: its groups of asynchronous reads, oldest first
        self.inflight = [{k: [] for k in ASYNC} for _ in range(warps)]

    # ---- synchronisation

    def sync(self, warps=None, barrier: int | None = None) -> None:
        """tk.sync among `warps` (default all): they learn what each of them
        knows, and what the warps that only arrived on named barrier
        `barrier` knew when they arrived, then start a new epoch. Other warps
        are not involved."""
        ws = np.arange(self.warps) if warps is None else np.asarray(sorted(warps), np.int64)
        arrived = self.named.pop(barrier, None)
        if not len(ws):  # completed by arrivals alone: nobody learns anything
            return
        joined = self.clock[ws].max(axis=0)
        if arrived is not None:
            np.maximum(joined, arrived, out=joined)
        self.clock[ws] = joined
        self.clock[ws, ws] += 1

    def release_named(self, w: int, barrier: int) -> None:
        """Warp w arrives on named barrier `barrier` and goes on (bar.arrive):
        what it knows now is released to the warps that complete it."""
        acc = self.named.setdefault(barrier, np.zeros(self.agents, np.int64))
        np.maximum(acc, self.clock[w], out=acc)
        self.clock[w, w] += 1

    def phase_clock(self) -> PhaseClock:
        return PhaseClock(self.agents)

    def release(self, w: int, phase: PhaseClock) -> None:
        """Warp w arrives on a barrier: its history goes into the phase."""
        np.maximum(phase.acc, self.clock[w], out=phase.acc)
        self.clock[w, w] += 1

    def acquire(self, w: int, phase: PhaseClock) -> None:
        """Warp w's tk.wait passed: it learns what the completed phases ordered."""
        np.maximum(self.clock[w], phase.done, out=self.clock[w])

    def deliver(self, w: int, phase: PhaseClock) -> None:
        """Warp w's latest TMA load completes on the phase."""
        t = self.warps + w
        phase.acc[t] = max(phase.acc[t], self.tma[w])

    # ---- buffers and sites

    def add_buffer(self, arr: np.ndarray, t, op, slot: str = "", place: str | None = None) -> None:
        """Track `arr`, a shared buffer of type t allocated at op; `slot`
        names a ring's slot in messages ("slot 2 of 4 of "); place: "ring"
        or "over_ring" (a ring's slot, a tile over the rings)."""
        if place == "ring":
            self.ring_slots.append(arr)
        elif place == "over_ring":
            self.over_ring.add(id(arr))
        if id(arr) not in self.buffers:
            shape = arr.shape if arr.ndim == 2 else (1, arr.shape[0])
            cells = (1, -(-shape[1] // CELL_ROWS)) if arr.ndim == 1 else \
                (-(-shape[0] // CELL_ROWS), -(-shape[1] // CELL))
            what = f"{slot}{short(t)} (allocated at {where(op)})"
            self.buffers[id(arr)] = Buffer(what, cells, self.agents, self.warps, arr.ndim == 1)

    def _site(self, op, kind: str | None = None, until=None) -> int:
        key = (id(op), kind, id(until))
        s = self._site_ids.get(key)
        if s is None:
            s = self._site_ids[key] = len(self.sites)
            self.sites.append(Site(op, kind, until))
        return s

    def _place(self, arr: np.ndarray, ix: tuple) -> Place | None:
        """The buffer and index of the elements arr[ix]; arr is a buffer or
        an st subtile, a numpy view into one (whose offset gives its place)."""
        buf = self.buffers.get(id(arr))
        if buf is not None:
            return Place(buf, arr, ix)
        base = arr.base
        buf = self.buffers.get(id(base)) if base is not None else None
        if buf is None or base.ndim != 2:
            return None
        r0, c0 = divmod((_address(arr) - _address(base)) // arr.itemsize, base.shape[1])
        rows, cols = ix if len(ix) == 2 else (_ALL, _ALL)
        return Place(buf, base, (_shift(rows, r0, arr.shape[0]), _shift(cols, c0, arr.shape[1])))

    # ---- accesses (ix: the numpy index of the elements, as memory.window gives)

    def read(self, w: int, arr: np.ndarray, ix: tuple, op) -> None:
        """Warp w reads arr[ix]: every other writer must be ordered before."""
        p = self._place(arr, ix)
        if p is not None:
            self._check_read(w, p, op)
            self._record_read(w, p, self._site(op))

    def issue(self, w: int, kind: str, arrays: list, op) -> None:
        """Warp w issues an asynchronous read (ASYNC kind) of all of each of
        `arrays`: checked now, recorded when `retire` retires it."""
        group = []
        for arr in arrays:
            p = self._place(arr, (_ALL,))
            if p is None:
                continue
            self._check_read(w, p, op)
            read = AsyncRead(w, p, op, kind)
            p.buf.inflight.append(read)
            group.append(read)
        self.inflight[w][kind].append(group)

    def retire(self, w: int, kind: str, keep: int, until=None) -> None:
        """Warp w's wait at `until` (None: the warp returned) retires all but
        its `keep` most recent groups of `kind`: their reads end here."""
        groups = self.inflight[w][kind]
        n = max(len(groups) - keep, 0)
        for group in groups[:n]:
            for read in group:
                read.place.buf.inflight.remove(read)
                self._record_read(w, read.place, self._site(read.op, kind, until))
        del groups[:n]

    def finish(self, w: int) -> None:
        """Warp w returned: whatever it left in flight has been read by then."""
        for kind in ASYNC:
            self.retire(w, kind, 0)

    def write(self, w: int, arr: np.ndarray, ix: tuple, op) -> None:
        """Warp w writes arr[ix] (tk.store)."""
        p = self._place(arr, ix)
        if p is None:
            return
        self._check_prior(Prior(p.buf, p.region), w, w, _NONE, p, op)
        if id(p.arr) in self.over_ring:
            self._check_rings(w, op)
        self._record(p, w, self.clock[w, w], op)

    def _check_rings(self, w: int, op) -> None:
        """A write to a tile over the rings: every slot's reads (another warp's
        ld.shared or wgmma of the last slot) ordered before it (writes: the
        slots' TMA loads, waited for; other such tiles, disjoint there), and it
        recorded in each slot, so that a later unordered read is a race too."""
        for arr in self.ring_slots:
            q = Place(self.buffers[id(arr)], arr, (_ALL,))
            prior = Prior(q.buf, q.region)
            prior.w_max[:] = 0
            try:
                self._check_prior(prior, w, w, _NONE, q, op)
            except TkcError as e:
                raise error(op, f"{e.message} (the tile lies over the loop's ring)") from None
            self._record(q, w, self.clock[w, w], op, OVER_RING)

    def tma_write(self, w: int, arr: np.ndarray, op) -> None:
        """Warp w issues a TMA load into arr: a write by its TMA agent,
        ordered after what w knows when it issues."""
        p = self._place(arr, (_ALL,))
        if p is None:
            return
        self._check_prior(Prior(p.buf, p.region), self.warps + w, w, _NONE, p, op)
        self.tma[w] += 1
        self._record(p, self.warps + w, self.tma[w], op)

    def remote_tma_write(self, w: int, arr: np.ndarray, op) -> None:
        """A multicast TMA load issued by warp w of another CTA of the cluster
        writes arr: recorded as warp w's TMA agent's write (this block's
        readers must wait on the barrier it completes on), but not checked
        against this block's earlier accesses: their order runs through the
        peer's barriers (remote arrivals), which these clocks do not see."""
        p = self._place(arr, (_ALL,))
        if p is not None:
            self.tma[w] += 1
            self._record(p, self.warps + w, self.tma[w], op)

    def group_write(self, w: int, arr: np.ndarray, first: bool, prior, members: slice, op):
        """Warp w's part of a group_load into all of arr (`members`: the
        group's warps, a slice). `first`: w is the
        first of its group here (it records the write; the Prior it returns
        is kept for the others); later members check the same prior accesses,
        and any read of the tile since the first arrival."""
        p = self._place(arr, (_ALL,))
        if p is None:
            return None
        if first:
            prior = Prior(p.buf, p.region)
        self._check_prior(prior, w, w, members, p, op)
        if first:
            self._record(p, w, self.clock[w, w], op)
            return prior
        if p.buf.reads != prior.reads:
            self._reads_before_member(p, w, op)
        p.buf.w_epoch[(w, *p.region)] = self.clock[w, w]
        p.buf.w_max[w] = max(p.buf.w_max[w], self.clock[w, w])
        return prior

    # ---- checks

    def _check_read(self, w: int, p: Place, op) -> None:
        """Every write of p's cells by another agent is ordered before w's read."""
        buf, vc = p.buf, self.clock[w]
        if not (buf.w_max > vc).any():
            return
        late = buf.w_epoch[(_ALL, *p.region)].reshape(self.agents, -1).max(axis=1) > vc
        if late.any():
            a = int(np.argmax(late))
            cell = np.argmax(buf.w_epoch[(a, *p.region)] > vc[a])
            site = buf.w_site[p.region].reshape(-1)[cell]
            raise self._race_read(op, w, a, self.sites[site], p)

    def _record_read(self, w: int, p: Place, site: int) -> None:
        p.buf.r_epoch[(w, *p.region)] = self.clock[w, w]
        p.buf.r_site[(w, *p.region)] = site
        p.buf.reads += 1

    def _check_prior(self, prior: Prior, agent: int, w: int, members, p: Place, op) -> None:
        """A write by `agent`, ordered by warp w's clock, after `prior`, and
        into no cell an asynchronous read may still be reading."""
        self._check_inflight(agent, p, op)
        vc = self.clock[w]  # w's own accesses are <= vc[w]: never late
        late_w = prior.w_max > vc
        late_w[members] = False  # co-writers of one group copy
        if late_w.any():
            a = int(np.argmax(late_w))
            site = self.sites[prior.w_site[a]]
            raise self._race_write(op, agent, a, site, p, "written")
        late_r = prior.r_max > vc[:self.warps]
        if late_r.any():
            r = int(np.argmax(late_r))
            raise self._race_write(op, agent, r, self.sites[prior.r_site[r]], p, "read")

    def _check_inflight(self, agent: int, p: Place, op) -> None:
        for read in p.buf.inflight:
            if _overlap(read.place.region, p.region, p.buf.w_site.shape):
                what, wait = ASYNC[read.kind]
                raise error(op, f"shared-memory race: {self._agent(agent)} overwrites "
                                f"{_piece(p)} while {what} issued by warp {read.w} at "
                                f"{where(read.op)} may still read it (no {wait} retired it "
                                f"before)")

    def _reads_before_member(self, p: Place, w: int, op) -> None:
        """Reads of a group copy's tile before member w wrote its part."""
        buf, region = p.buf, p.region
        read = buf.r_epoch[(_ALL, *region)].reshape(self.warps, -1).max(axis=1) > 0
        read[w] = False
        if read.any():
            r = int(np.argmax(read))
            cell = np.argmax(buf.r_epoch[(r, *region)] > 0)
            site = self.sites[buf.r_site[(r, *region)].reshape(-1)[cell]]
            raise self._race_read(site.op, r, w, Site(op), p)

    def _record(self, p: Place, agent: int, epoch, op, kind: str | None = None) -> None:
        buf, region = p.buf, p.region
        buf.w_epoch[(_ALL, *region)] = 0
        buf.w_epoch[(agent, *region)] = epoch
        buf.w_site[region] = self._site(op, kind)
        buf.r_epoch[(_ALL, *region)] = 0
        buf.w_max[agent] = max(buf.w_max[agent], epoch)

    # ---- messages

    def _agent(self, a: int) -> str:
        return f"warp {a}" if a < self.warps else f"the TMA load issued by warp {a - self.warps}"

    def _race_read(self, read_op, r: int, a: int, write: Site, p: Place) -> TkcError:
        return error(read_op, f"shared-memory race: warp {r} reads {_piece(p)} "
                              f"written by {self._agent(a)} at {write.text()} without a "
                              f"tk.sync or barrier wait in between")

    def _race_write(self, op, agent: int, other: int, other_site: Site, p: Place,
                    how) -> TkcError:
        other_s = f"warp {other}" if how == "read" else self._agent(other)
        return error(op, f"shared-memory race: {self._agent(agent)} overwrites "
                         f"{_piece(p)} {how} by {other_s} at {other_site.text()} "
                         f"without a tk.sync or barrier wait in between")


def _cell_slice(s: slice, n: int) -> slice:
    if s.start is None:
        return _ALL
    return slice(s.start // n, -(-s.stop // n))


def _address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _shift(s: slice, offset: int, n: int) -> slice:
    """Slice s of a view's n elements along an axis, as a slice of its base."""
    lo, hi, _ = s.indices(n)
    return slice(lo + offset, hi + offset)


def _overlap(a: tuple, b: tuple, cells: tuple) -> bool:
    """Two cell regions share a cell."""
    for sa, sb, n in zip(a, b, cells):
        a0, a1, _ = sa.indices(n)
        b0, b1, _ = sb.indices(n)
        if max(a0, b0) >= min(a1, b1):
            return False
    return True


def _piece(p: Place) -> str:
    """'rows 16..31, cols 0..63 of st<...> (allocated at f:l)' or the whole buffer."""
    arr, ix = p.arr, p.ix
    if arr.ndim == 2 and len(ix) == 2:
        (r0, r1, _), (c0, c1, _) = ix[0].indices(arr.shape[0]), ix[1].indices(arr.shape[1])
        if (r1 - r0, c1 - c0) != arr.shape:
            return f"rows {r0}..{r1 - 1}, cols {c0}..{c1 - 1} of {p.buf.what}"
    return p.buf.what
