"""Warpgroup programs: a GEMM-shaped main loop on Hopper's block level, then an
epilogue of the core generator's statements on its accumulator.

    for k in tkc.range(NK[, stages=...]):    # plain, pipelined (1-3 stages or
        tma.load(a_s, a, ...)                # "auto"), in a persistent grid or not
        tma.load(b_s, b, ...)
        warpgroup.mma_XY(acc, <a: st subtile or this warp's rt>, b_s)
        warpgroup.mma_async_wait(acc)

with the four transposes (a stored K x M for At, b stored N x K for Bt), 1 or 2
warpgroups (2: each its 64 rows, or sliced-K: both the same 64 rows, each half of every
K step, warpgroup 1's partial added to warpgroup 0's through shared memory), some
pipelined ones in (2, 1, 1), (1, 2, 1) or (2, 2, 1) thread-block clusters, and gl dims
that are not multiples of the tiles (TMA zero-fills what lies outside a load and clips a
store). Each warp then holds its 16 rows of its warpgroup's 64 x BN tile (sliced,
warpgroup 1's: twice its half, as well checked): the core statements go on from
there and the program stores like any other (core.Gen.finish).
"""
from __future__ import annotations

from . import ragged as R
from . import statements as S
from .core import Arg, Gen, Program
from .values import EPS, Val

CLUSTER_SHARE = 0.3   # of the pipelined programs whose grid is one cluster along x (along y)
FP8_SHARE = 0.15      # of the warpgroup programs with 8-bit operands (eight_bit)
SLICED_SHARE = 0.3    # of the pipelined 2-warpgroup programs: sliced-K (a side draw)


def a_pieces(g, a_s: str, bm: int, bk: int, m: int, nk: int, looped: bool) -> None:
    """A's tma.load (A stored M x K): the whole tile at its block row (maybe
    through a slice of A from that row), or 2-4 row pieces into subtiles of
    it; the row (in pieces) maybe read from an index table (a gather: a page
    index per piece, hoisted or read each k step; out of range: zeros), as
    paged attention does."""
    r = g.rng
    parts = r.choice((1, 1, 2, 4)) if bm == 128 else r.choice((1, 2))
    unit = bm // parts
    views = [g.alloc(f"subtile({a_s}, {unit}, {bk}, ({h}, 0))") for h in range(parts)] if parts > 1 else [a_s]
    if parts > 1:
        g.features.add("tma_load_subtile")
    rows = [f"by * {parts} + {h}" if parts > 1 else "by" for h in range(parts)]
    src = "a"
    if parts == 1 and r.random() < 0.25:   # through a slice at the block's first row (made before the loop)
        g.top.append(f'    a_rows = a.slice("r", by * {bm}, {bm})')
        src, rows = "a_rows", ["0"]
        g.features.add("tma_load_row_slice")
    elif r.random() < 0.4:
        pages = -(-m // unit)
        per_k = looped and r.random() < 0.5
        t = f"t{sum(a.name.startswith('t') for a in g.args)}"
        g.args.append(Arg(t, "i32", (1, 1, g.grid[1] * parts if per_k else 1,
                                     nk if per_k else max(1, g.grid[1] * parts + r.randrange(-1, 2))),
                          ints=(-2, pages + 1)))
        g.features.add("tma_gather_per_k" if per_k else "tma_gather")
        for h in range(parts):
            at = f"({rows[h]}), k" if per_k else f"0, {rows[h]}"
            line = f"p{h} = load(i32, {t}, at=(0, 0, {at}), fill=-1)"
            if per_k:
                g.emit(line)
            else:  # before the loop (the producer hoists it anyway)
                g.top.append("    " + line)
            rows[h] = f"p{h}"
    for h in range(parts):
        g.emit(f"tma.load({views[h]}, {src}, (0, 0, {rows[h]}, k))", "tma_load")


def mma_options(g, looped: bool) -> str:
    """Now and then negate=True (acc - a b: the same interval) or when= a
    condition uniform over each warpgroup (else acc stays: within it too),
    drawn from a side generator (Gen.side)."""
    side = g.side("mma-options")
    out = ""
    if side.random() < 0.15:
        out += ", negate=True"
        g.features.add("wgmma_negate")
    if side.random() < 0.15:
        conds = ["bx == 0", "by % 2 == 1", "wg == 0"] + (["k > 0", "k % 2 == 0"] if looped else [])
        out += f", when={side.choice(conds)}"
        g.features.add("wgmma_when")
    return out


def eight_bit(g) -> tuple | None:
    """Now and then 8-bit operands: (A's, B's dtype), each f8e4m3 or f8e5m2
    (mma_ABt, both K-major as FP8 wgmma reads them; A from shared memory or
    this warp's registers, k_order="lanes"; K tiles of 32 or 64). From a
    side generator (Gen.side)."""
    side = g.side("eight-bit")
    if side.random() >= FP8_SHARE:
        return None
    g.features.add("wgmma_f8")
    return side.choice(("f8e4m3", "f8e5m2")), side.choice(("f8e4m3", "f8e5m2"))


def generate(rng, name: str, seed: int, index: int) -> Program:
    g = Gen(rng, name)
    wgs = rng.choice((1, 1, 2))
    g.warps = 4 * wgs
    bm, bn, bk = 64 * wgs, rng.choice((16, 32, 64)), rng.choice((16, 32, 64))
    persistent = rng.random() < 0.3
    if persistent:  # maybe over ragged groups (ragged.py): the grid's z and y, a count gl
        g.kernel_opts = R.persistent_opts(g, bm)
    op = rng.choice(("mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt"))
    f8 = eight_bit(g)
    if f8:
        op, bk = "mma_ABt", 2 * bk if bk < 32 else bk   # (K steps of 32: 32 or 64 columns)
    ta, tb = S.MMA_SHAPES[op]
    a_reg = not ta and rng.random() < 0.3      # A from registers: this warp's 16 rows
    # compiler-synchronised TMA loads sit at the top level or in the pipelined
    # loop (tk-pipeline-staging refuses them in a plain loop): no stages, one k step
    stages = rng.choice(("", ", stages=1", ", stages=2", ", stages=3", ', stages="auto"'))
    nk = rng.randrange(1, 4) if stages else 1
    # sliced-K (gemm_hopper's sliced): both warpgroups multiply one 64-row tile, each by half of
    # every K step (128 deep: a half of A's columns is one 128-byte swizzle panel), then
    # warpgroup 1's partial goes through shared memory into warpgroup 0's (a side draw)
    sliced = wgs == 2 and bool(stages) and not (f8 or a_reg or persistent) \
        and g.side("sliced").random() < SLICED_SHARE
    if sliced:
        bm, bk = 64, 128
        g.features.add("sliced_k")
    # the outputs' st (outputs.tma_store) come after a pipelined loop of loads: over its ring
    g.after_loop = bool(stages) and not persistent
    # in (2, 1, 1) clusters: tk-pipeline-staging multicasts A's tiles where their rows are the same
    # in both CTAs (not a gathered row), tk-grid-ordering pairs a persistent grid's CTAs
    cx = 2 if stages and not g.groups and g.grid[0] == 2 and rng.random() < CLUSTER_SHARE else 1
    # ... and in (cx, 2, 1) ones, blocks not persistent: B's tiles (and A's through a slice that
    # does not follow by) down the cluster's column (a side draw: the other draws stay the same)
    cy = 2 if stages and not g.groups and not persistent and g.grid[1] == 2 \
        and g.side("cluster-y").random() < CLUSTER_SHARE else 1
    if cx * cy > 1:
        g.kernel_opts += f", cluster=({cx}, {cy}, 1)"
        g.features.update(f for f, n in (("cluster", cx), ("cluster_y", cy)) if n > 1)
    m = g.grid[1] * bm - (8 if ta else 1) * rng.randrange(0, 5 if ta else 40)  # TMA rows: 16-byte multiples
    n = g.grid[0] * bn - 8 * rng.randrange(0, bn // 8)
    k = nk * bk - 8 * rng.randrange(0, bk // 8)  # the last k tile ragged: zero-filled on both sides
    if f8:   # an 8-bit gl's rows are whole 16-byte units (the launch's rule)
        k = -(-k // 16) * 16
    da, db = f8 or ("bf16", "bf16")
    a_shape, b_shape = ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))
    g.args += [Arg("a", da, (1, 1) + a_shape), Arg("b", db, (1, 1) + b_shape)]
    a_s = g.alloc(f"st({da}, {bk}, {bm})" if ta else f"st({da}, {bm}, {bk})")
    b_s = g.alloc(f"st({db}, {bn}, {bk})" if tb else f"st({db}, {bk}, {bn})")
    g.emit(f"acc = zero(rt(f32, 16, {bn}))", "zero")
    if stages:
        g.emit(f"for k in tkc.range({nk}{stages}):", "pipelined")
        g.depth += 1
    else:
        g.emit("k = 0")
    if ta:
        g.emit(f"tma.load({a_s}, a, (0, 0, k, by))", "tma_load")
    else:
        a_pieces(g, a_s, bm, bk, m, nk, bool(stages))
    g.emit(f"tma.load({b_s}, b, (0, 0, {'bx, k' if tb else 'k, bx'}))")
    lanes = ""
    if sliced:
        h = bk // 2
        operand = f"subtile({a_s}, {h}, 64, (wg, 0))" if ta else f"subtile({a_s}, 64, {h}, (0, wg))"
        b_s = f"subtile({b_s}, {bn}, {h}, (0, wg))" if tb else f"subtile({b_s}, {h}, {bn}, (wg, 0))"
    elif a_reg:   # (8-bit: wgmma takes its columns in fp8_lane_order() per 32, and so reads B's K)
        operand = f"load(rt({da}, 16, {bk}), {a_s}, (tkc.warpid(), 0))"
        lanes = ', k_order="lanes"' if f8 else ""
        g.features.add("wgmma_f8_lanes" if f8 else "wgmma_a_registers")
    elif ta:
        operand = f"subtile({a_s}, {bk}, 64, (0, wg))"
    else:
        operand = f"subtile({a_s}, 64, {bk}, (wg, 0))"
    g.emit(f"warpgroup.{op}(acc, {operand}, {b_s}{lanes}{mma_options(g, bool(stages))})", f"wgmma_{op}")
    g.emit("warpgroup.mma_async_wait(acc)")
    g.depth = 1
    if sliced:   # over the ring where outputs may lie (warpgroup 1's values: twice its half)
        part = g.alloc(f"st(f32, 64, {bn}{', after_loop=True' if g.after_loop else ''})")
        g.emit("with tkc.if_(wg == 1):")
        g.emit(f"    warpgroup.store({part}, acc, (0, 0))")
        g.emit("tkc.sync()")
        g.emit(f"acc = acc + warpgroup.load(rt(f32, 16, {bn}), {part}, (0, 0))")
    if persistent:
        g.features.add("persistent")
    kk = nk * bk
    acc = Val("acc", "rt", "f32", (16, bn), "row", -float(kk), float(kk), EPS["f32"] * kk)
    g.define(acc)
    g.body(rng.randrange(0, 6))
    ids = "bx, by, bz = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z" if g.groups else \
        "bx, by = tkc.block_idx.x, tkc.block_idx.y"
    return g.finish(seed, index, prologue=[ids, "wg = tkc.warpgroupid()", f"tr = by * {g.warps} + tkc.warpid()"])
