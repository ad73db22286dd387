"""Shared-memory race detection: a missing tk.sync is an error on the CPU too.

The interpreter runs warps one after another, so without this a kernel that
forgets a barrier still computes the right numbers (and races on the GPU).
docs/tile-ir.md: a warp's shared-memory write is visible to another warp only
after a synchronisation that orders them. We model that with happens-before
and vector clocks (one per warp, FastTrack-style epochs per 16x16 cell):

- Agents: the block's W warps, and one TMA agent per warp (agent W + w: the
  asynchronous copies warp w issued). Warp w's clock `clock[w]` says, per
  agent, up to which epoch w has synchronised with it; `clock[w, w]` is w's
  own epoch, bumped at each release (tk.sync, tk.arrive, tk.expect_bytes).
- tk.sync (and tk.init_barrier, a block sync): every clock becomes the join
  of all clocks, then each warp starts a new epoch.
- mbarriers: an arrival (tk.arrive, tk.expect_bytes) releases the warp's
  clock into the barrier's current phase; a TMA load's delivery releases its
  agent's epoch into it; when the phase completes its clock joins the
  barrier's completed clock (cumulative over phases); a tk.wait that passes
  acquires that clock.
- Per shared cell (16x16 block of an st, 16 elements of an sv): the epoch of
  each agent in the last write, its site, and per warp the epoch and site of
  its last read since that write. A read by warp r is ordered after the write
  when every other writer's epoch is <= clock[r]; a write by w is ordered
  after earlier writes and reads the same way with clock[w].
- A group op is cooperative: group_load writes as every warp of the group
  (each at its own arrival; the copy happens at the first one), group_store
  reads as each warp that calls it. A read of the group's tile before a
  member arrived is a race too (that member's part was not written yet).
- warpgroup mma reads its shared operands as each calling warp, at issue;
  tma_store reads its tile as the issuing warp, at issue.

A race is reported at the second access of an unordered pair in the
interpreter's (warp-by-warp) order, naming the first's line: "warp 1 reads
... written by warp 0 at f:l" or "warp 1 overwrites ... read by warp 0 at
f:l" (a read of a group copy before a member arrived is located at the
read). A correctly synchronised kernel never gets one: every ordering
modelled is one the hardware guarantees, and accesses are 16-aligned, so
cells never make two disjoint accesses overlap.

Not modelled (so such races are missed, never invented): the asynchronous
window of wgmma and tma_store reads (recorded at issue: an arrive before
the wgmma wait, or an overwrite before tma_store_wait, passes); proxy fences
(tk.fence_async) are not checked; a group copy's write is not compared with
earlier unsynchronised writes by its own group's warps (two copies into one
tile give each thread the same elements); a tk.wait acquires everything the
barrier's completed phases released, not only its parity's phase (a warp a
whole phase behind learns too much). Global memory is not tracked.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import TkcError, error, where
from ..passes.verify_warpgroup import short

CELL = 16  # elements per cell side: every tile access is 16-aligned
_ALL = slice(None)
_NONE = slice(0, 0)  # no co-writers


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


class Buffer:
    """Race bookkeeping of one shared st/sv, per cell. `w_max` bounds each
    agent's write epochs over the whole buffer from above, so that a read
    ordered after all of them (the common case) skips the per-cell check."""
    __slots__ = ("what", "w_epoch", "w_site", "r_epoch", "r_site", "w_max", "vector", "reads")

    def __init__(self, what: str, cells: tuple, agents: int, warps: int, vector: bool):
        self.what, self.vector = what, vector
        self.w_epoch = np.zeros((agents, *cells), np.int64)  # 0: agent did not write
        self.w_site = np.full(cells, -1, np.int64)
        self.r_epoch = np.zeros((warps, *cells), np.int64)  # 0: no read since the write
        self.r_site = np.full((warps, *cells), -1, np.int64)
        self.w_max = np.zeros(agents, np.int64)
        self.reads = 0

    def cells(self, ix: tuple) -> tuple:
        """The cell region covering the elements [ix] (slices, as ops.window
        gives: explicit bounds, or slice(None) for the whole buffer)."""
        if self.vector:
            return (_ALL, _cell_slice(ix[0]))
        if len(ix) == 1:
            return (_ALL, _ALL)
        return (_cell_slice(ix[0]), _cell_slice(ix[1]))


class Prior:
    """A region's accesses before a write: per agent the latest write epoch
    and its site, per warp the latest read epoch and its site."""
    __slots__ = ("w_max", "w_site", "r_max", "r_site", "reads")

    def __init__(self, buf: Buffer, region: tuple):
        self.w_max, self.w_site = _latest(buf.w_epoch, np.broadcast_to(buf.w_site, buf.w_epoch.shape), region)
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
        self.buffers: dict[int, Buffer] = {}  # id(shared array) -> bookkeeping
        self.sites: list = []  # site id -> op
        self._site_ids: dict[int, int] = {}

    # ---- synchronisation

    def sync(self) -> None:
        """tk.sync: everyone learns everything, then starts a new epoch."""
        self.clock[:] = self.clock.max(axis=0)
        self.clock[np.arange(self.warps), np.arange(self.warps)] += 1

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

    def add_buffer(self, arr: np.ndarray, t, op) -> None:
        if id(arr) not in self.buffers:
            shape = arr.shape if arr.ndim == 2 else (1, arr.shape[0])
            cells = tuple(-(-n // CELL) for n in shape)
            what = f"{short(t)} (allocated at {where(op)})"
            self.buffers[id(arr)] = Buffer(what, cells, self.agents, self.warps, arr.ndim == 1)

    def _site(self, op) -> int:
        s = self._site_ids.get(id(op))
        if s is None:
            s = self._site_ids[id(op)] = len(self.sites)
            self.sites.append(op)
        return s

    # ---- accesses (ix: the numpy index of the elements, as ops.window gives)

    def read(self, w: int, arr: np.ndarray, ix: tuple, op) -> None:
        """Warp w reads arr[ix]: every other writer must be ordered before."""
        buf = self.buffers.get(id(arr))
        if buf is None:
            return
        region = buf.cells(ix)
        vc = self.clock[w]
        if (buf.w_max > vc).any():
            late = buf.w_epoch[(_ALL, *region)].reshape(self.agents, -1).max(axis=1) > vc
            if late.any():
                a = int(np.argmax(late))
                cell = np.argmax(buf.w_epoch[(a, *region)] > vc[a])
                site = buf.w_site[region].reshape(-1)[cell]
                raise self._race_read(op, w, a, self.sites[site], buf, arr, ix)
        buf.r_epoch[(w, *region)] = vc[w]
        buf.r_site[(w, *region)] = self._site(op)
        buf.reads += 1

    def write(self, w: int, arr: np.ndarray, ix: tuple, op) -> None:
        """Warp w writes arr[ix] (tk.store)."""
        buf = self.buffers.get(id(arr))
        if buf is None:
            return
        region = buf.cells(ix)
        self._check_prior(Prior(buf, region), w, w, _NONE, buf, arr, ix, op)
        self._record(buf, region, w, self.clock[w, w], op)

    def tma_write(self, w: int, arr: np.ndarray, op) -> None:
        """Warp w issues a TMA load into arr: a write by its TMA agent,
        ordered after what w knows when it issues."""
        buf = self.buffers.get(id(arr))
        if buf is None:
            return
        region = buf.cells((_ALL,))
        self._check_prior(Prior(buf, region), self.warps + w, w, _NONE, buf, arr, (_ALL,), op)
        self.tma[w] += 1
        self._record(buf, region, self.warps + w, self.tma[w], op)

    def group_write(self, w: int, arr: np.ndarray, first: bool, prior, members: slice, op):
        """Warp w's part of a group_load into all of arr (`members`: the
        group's warps, a slice). `first`: w is the
        first of its group here (it records the write; the Prior it returns
        is kept for the others); later members check the same prior accesses,
        and any read of the tile since the first arrival."""
        buf = self.buffers.get(id(arr))
        if buf is None:
            return None
        region = buf.cells((_ALL,))
        if first:
            prior = Prior(buf, region)
        self._check_prior(prior, w, w, members, buf, arr, (_ALL,), op)
        if first:
            self._record(buf, region, w, self.clock[w, w], op)
            return prior
        if buf.reads != prior.reads:
            self._reads_before_member(buf, region, w, arr, op)
        buf.w_epoch[(w, *region)] = self.clock[w, w]
        buf.w_max[w] = max(buf.w_max[w], self.clock[w, w])
        return prior

    # ---- checks

    def _check_prior(self, prior: Prior, agent: int, w: int, members, buf, arr, ix, op) -> None:
        """A write by `agent`, ordered by warp w's clock, after `prior`."""
        vc = self.clock[w]  # w's own accesses are <= vc[w]: never late
        late_w = prior.w_max > vc
        late_w[members] = False  # co-writers of one group copy
        if late_w.any():
            a = int(np.argmax(late_w))
            raise self._race_write(op, agent, a, self.sites[prior.w_site[a]], buf, arr, ix,
                                   "written")
        late_r = prior.r_max > vc[:self.warps]
        if late_r.any():
            r = int(np.argmax(late_r))
            raise self._race_write(op, agent, r, self.sites[prior.r_site[r]], buf, arr, ix, "read")

    def _reads_before_member(self, buf, region, w, arr, op) -> None:
        """Reads of a group copy's tile before member w wrote its part."""
        read = buf.r_epoch[(_ALL, *region)].reshape(self.warps, -1).max(axis=1) > 0
        read[w] = False
        if read.any():
            r = int(np.argmax(read))
            cell = np.argmax(buf.r_epoch[(r, *region)] > 0)
            site = self.sites[buf.r_site[(r, *region)].reshape(-1)[cell]]
            raise self._race_read(site, r, w, op, buf, arr, (_ALL,))

    def _record(self, buf, region, agent: int, epoch, op) -> None:
        buf.w_epoch[(_ALL, *region)] = 0
        buf.w_epoch[(agent, *region)] = epoch
        buf.w_site[region] = self._site(op)
        buf.r_epoch[(_ALL, *region)] = 0
        buf.w_max[agent] = max(buf.w_max[agent], epoch)

    # ---- messages

    def _agent(self, a: int) -> str:
        return f"warp {a}" if a < self.warps else f"the TMA load issued by warp {a - self.warps}"

    def _race_read(self, read_op, r: int, a: int, write_op, buf, arr, ix) -> TkcError:
        return error(read_op, f"shared-memory race: warp {r} reads {_piece(buf, arr, ix)} "
                              f"written by {self._agent(a)} at {where(write_op)} without a "
                              f"tk.sync or barrier wait in between")

    def _race_write(self, op, agent: int, other: int, other_op, buf, arr, ix, how) -> TkcError:
        other_s = f"warp {other}" if how == "read" else self._agent(other)
        return error(op, f"shared-memory race: {self._agent(agent)} overwrites "
                         f"{_piece(buf, arr, ix)} {how} by {other_s} at {where(other_op)} "
                         f"without a tk.sync or barrier wait in between")


def _cell_slice(s: slice) -> slice:
    if s.start is None:
        return _ALL
    return slice(s.start // CELL, -(-s.stop // CELL))


def _piece(buf: Buffer, arr: np.ndarray, ix: tuple) -> str:
    """'rows 16..31, cols 0..63 of st<...> (allocated at f:l)' or the whole buffer."""
    if arr.ndim == 2 and len(ix) == 2:
        (r0, r1, _), (c0, c1, _) = ix[0].indices(arr.shape[0]), ix[1].indices(arr.shape[1])
        if (r1 - r0, c1 - c0) != arr.shape:
            return f"rows {r0}..{r1 - 1}, cols {c0}..{c1 - 1} of {buf.what}"
    return buf.what
