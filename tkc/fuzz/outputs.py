"""How a program writes its results: each warp's tile of each output by a
clipped store (core.Gen.store_output), or through shared memory by a TMA
store of the block's tile (every warp stores its part into an st; the
compiler orders the st's writes before the copy, and TMA clips at the gl's
edge; after a pipelined loop the st may lie over its ring: after_loop;
maybe through a slice of the output at the block's first row or column,
which the same outputs check);
scalars one element a warp (an F32 into an f32 gl, an Index into an i32 or
i64 gl); and, at the end, maybe an atomic_add on a counter of the
block after the outputs' writes, its old value stored too.
"""
from __future__ import annotations

from .gls import Arg


def tma_store(g, v, name: str) -> bool:
    """v's tile of every warp into output `name` through an st and tma.store."""
    if v.kind != "rt" or v.dtype == "i32" or g.rng.random() > 0.12 or g.warps * v.shape[0] > 256:
        return False  # a TMA box is at most 256 x 256
    rows, cols = v.shape
    after = g.after_loop and g.rng.random() < 0.5   # st(after_loop=True): over the ring's slots
    s = g.alloc(f"st({v.dtype}, {g.warps * rows}, {cols}{', after_loop=True' if after else ''})")
    if after:
        g.features.add("after_loop")
    g.emit(f"store({s}, {v.name}, (tkc.warpid(), 0))", "store_shared")
    how = g.rng.random()
    if how < 0.2:   # through a slice at the block's first row: the box inside it, or past the gl's end
        view = f'{name}.slice("r", by * {g.warps * rows}, {g.warps * rows})'
        if how < 0.1:   # made at the top (a persistent item's start: what its finish reads, not carries)
            g.top.append(f"    {name}_rows = {view}")
            view = f"{name}_rows"
        g.emit(f"tma.store({view}, {s}, (0, {g.out_d}, 0, bx))", "tma_store_row_slice")
    elif how < 0.3:   # at its first column (on 16 bytes: a box's columns are a multiple of them)
        g.emit(f'tma.store({name}.slice("c", bx * {cols}, {cols}), {s}, (0, {g.out_d}, by, 0))',
               "tma_store_col_slice")
    else:
        g.emit(f"tma.store({name}, {s}, (0, {g.out_d}, by, bx))", "tma_store")
    return True


def scalar_outputs(g) -> None:
    """Up to two scalars in scope, one element a warp, at (this warp's tile row, bx)."""
    xs = [v for v in g.values() if v.kind in ("f32", "index")]
    for v in xs[-g.rng.choice((0, 1, 2)):] if xs else []:
        j = sum(a.output for a in g.args)
        if v.kind == "f32":
            dtype = "f32"
        else:  # an i64 gl keeps the whole index, an i32 one its low 32 bits
            dtype = g.rng.choice(("i32", "i64"))
        g.args.append(Arg(f"o{j}", dtype, g.out_shape(g.warps * g.grid[1], g.grid[0]), output=True, tol=v.err,
                          bounds=(v.lo, v.hi) if v.kind == "f32" else None,
                          block_rows=g.warps))
        g.emit(f"store(o{j}, {v.name}, at=(0, {g.out_d}, tr, bx), clip=True)", f"store_{v.kind}_element")


def counter(g) -> None:
    """atomic_add(count, 1) once a block after the outputs' writes: every warp
    gets the old value (7, the counter's start: one add an element), and
    stores it plus its tile row; or (a third of them, every block counting
    on one counter) the last block reads every block's writes (last_block)."""
    if g.rng.random() > 0.2:
        return
    sums = [a for a in g.args if a.output and a.dtype == "f32" and a.block_cols]
    if sums and not g.groups and g.rng.random() < 0.35:
        last_block(g, g.rng.choice(sums))
        return
    outs = [a.name for a in g.args if a.output]
    j = len(outs)
    g.args.append(Arg(f"o{j}", "i32", g.out_shape(g.grid[1], g.grid[0]), output=True, block_rows=1))
    after = g.rng.sample(outs, g.rng.randrange(1, len(outs) + 1)) if outs else []
    text = after[0] if len(after) == 1 and g.rng.random() < 0.5 else "[" + ", ".join(after) + "]"
    g.emit(f"old = atomic_add(o{j}, 1, at=(0, {g.out_d}, by, bx), after={text})", "atomic_add")
    g.args.append(Arg(f"o{j + 1}", "i32", g.out_shape(g.warps * g.grid[1], g.grid[0]), output=True,
                      block_rows=g.warps))
    g.emit(f"store(o{j + 1}, old + tr, at=(0, {g.out_d}, tr, bx), clip=True)", "store_index_element")


def last_block(g, src) -> None:
    """Every block counts itself done on one counter (atomic_add after all the
    outputs' writes, which it publishes); the block whose add makes the
    count the grid's (old = 7 + blocks - 1: the counter starts at 7) reads
    the first element of every block's tile of output `src` (f32, written by
    core.Gen.store_output) and stores their sum, in block order, into a new
    one-element output (the split-KV forward's merge by its last split, in
    small: whichever block comes last, on the GPU, sees the others' writes)."""
    outs = [a.name for a in g.args if a.output]
    j, (gx, gy) = len(outs), g.grid
    blocks = gx * gy
    g.args.append(Arg(f"o{j}", "i32", (1, 1, 1, 1), output=True))
    lo, hi = src.bounds
    g.args.append(Arg(f"o{j + 1}", "f32", (1, 1, 1, 1), output=True, tol=blocks * src.tol,
                      bounds=(blocks * min(lo, 0.0), blocks * max(hi, 0.0))))
    g.emit(f"last = atomic_add(o{j}, 1, at=(0, 0, 0, 0), after=[{', '.join(outs)}])", "atomic_add_last_block")
    g.emit(f"with tkc.if_((last == {7 + blocks - 1}) & (tkc.warpid() == 0)):")
    g.depth += 1
    firsts = [f"load(f32, {src.name}, at=(0, 0, {y * src.block_rows}, {x * src.block_cols}), fill=0.0)"
              for y in range(gy) for x in range(gx)]
    g.emit(f"total = {firsts[0]}")
    for f in firsts[1:]:
        g.emit(f"total = total + {f}")
    g.emit(f"store(o{j + 1}, total, at=(0, 0, 0, 0), clip=True)")
    g.depth -= 1
