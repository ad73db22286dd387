"""The LCSF template: ThunderKittens' load-compute-store-finish, as tile IR.

    tkc.lcsf(iters, load, compute, finish, inputs=..., outputs=..., setup=..., store=...)

The author writes the four functions; the template traces them into the
pipelined loop of docs/pipelining.md (the setup, then
`for k in tkc.range(iters, stages=...)` running load and compute (and store),
then finish), which `tk-pipeline-staging` turns into the producer/consumer
pipeline. It owns no synchronisation of its own: the input ring, the
producer and consumer warpgroups, the mbarrier hand-offs and the register
split are the pass's, the same as for a plain pipelined loop.

- inputs: {name: st} — the tiles one iteration loads (an input "stage");
  `load(s, k)` fills them with `tma.load(s.<name>, ...)`.
- outputs: {name: st or list of st} — the tiles `store` and `finish` write
  and send out with `tma.store`.
- setup() -> tuple of register tiles: the consumers' state for a work item
  (e.g. a zeroed accumulator), passed to compute, store and finish.
- compute(s, k, *state): the consumers' work on stage s; update the state in
  place (`warpgroup.mma_AB(acc, ...)`) or return the new state tuple.
- store(out, k, *state): optional, per-iteration outputs.
- finish(out, *state): once per work item, after the loop.
"""
from __future__ import annotations

from types import SimpleNamespace

from .control import range as tk_range
from .tiles import Reg, Shared
from .trace import fail


def lcsf(iters, load, compute, finish=None, *, inputs: dict, outputs: dict | None = None,
         setup=None, store=None, stages="auto", registers=None) -> None:
    """Trace ThunderKittens' load-compute-store-finish template (module doc)."""
    stage = _tiles("inputs", inputs)
    out = _tiles("outputs", outputs or {})
    state = _state(setup() if setup is not None else ())
    for k in tk_range(iters, stages=stages, registers=registers):
        load(stage, k)
        _update(state, compute(stage, k, *state), "compute")
        if store is not None:
            store(out, k, *state)
    if finish is not None:
        finish(out, *state)


def _tiles(what: str, tiles: dict) -> SimpleNamespace:
    if not isinstance(tiles, dict) or not all(isinstance(k, str) for k in tiles):
        raise fail(f"lcsf: {what} must be a dict of name -> shared tile, got {tiles!r}")
    for name, t in tiles.items():
        items = t if isinstance(t, (list, tuple)) else [t]
        if not items or not all(isinstance(x, Shared) for x in items):
            raise fail(f"lcsf: {what}[{name!r}] must be a shared tile (st) or a list of them")
    return SimpleNamespace(**tiles)


def _state(value) -> tuple:
    state = value if isinstance(value, tuple) else (value,)
    for i, h in enumerate(state):
        if not isinstance(h, Reg):
            raise fail(f"lcsf: setup must return register tiles/vectors, item {i} is "
                       f"{type(h).__name__}")
    return state


def _update(state: tuple, returned, who: str) -> None:
    """A function that returns new handles (functional style) updates the state."""
    if returned is None:
        return
    new = returned if isinstance(returned, tuple) else (returned,)
    if len(new) != len(state) or not all(isinstance(h, Reg) for h in new):
        raise fail(f"lcsf: {who} must return nothing (update the state in place) or the "
                   f"{len(state)} state tiles, got {returned!r}")
    for h, n in zip(state, new):
        if n is not h:
            if n.view != h.view:
                raise fail(f"lcsf: {who} returned {n.describe()} for the state tile {h.describe()}")
            h.bind(n.value())
