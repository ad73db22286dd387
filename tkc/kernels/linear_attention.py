"""Causal linear attention on Hopper, chunk by chunk: the paper's linear
attention family (plain, Mamba-2's decaying form, Based's Taylor map).

    linear_attention: o_t = scale * sum_{s<=t} w(t, s) (q_t . k_s) v_s
        w = 1 (plain; Hedgehog's linear part, FLA's chunk_linear_attn), or
        w = exp(G_t - G_s) with G_t = g_1 + .. + g_t the cumulative sum of a
        per-step log decay g (Mamba-2's SSD with a scalar decay per head and
        step, FLA's chunk_simple_gla: q = C, k = B, v = x dt, g = A dt).
    based: o_t = sum_{s<=t} (1 + x + x^2 / 2) v_s, x = scale * q_t . k_s
        (the 2nd-order Taylor map (1, x, x (x) x / sqrt 2) of q and k; feature
        dim 16, no normaliser: FLA's parallel_based(use_norm=False)).

q, k are [B, H, L, F] and v, o [B, H, L, DV] (SDPA's layout); g is [B, H, L]
(f32). Any L: TMA reads zeros past the end (a zero v row adds nothing, to the
state either), g reads 0, the output is clipped.

A block owns one (batch, head) and walks its chunks of C = 64 steps in order,
with the state of the chunks before in registers (f32) and, for the tensor
cores, in shared memory (bf16). Two consumer warpgroups split the value
columns: each owns DV/2 columns of the state and of o and computes the whole
chunk's scores itself (S = Q K^T is small), so neither reads what the other
writes. tk-pipeline-staging streams Q, K and V by TMA through a ring. Per chunk:

    o = Q H (inter-chunk, from shared) + mask(S) V (intra-chunk)
    H += K^T V

Decay: o's inter part is scaled by exp(G_t) per row, S by exp(G_t - G_s),
and H = exp(G_C) H + (K exp(G_C - G_s))^T V: K's rows are scaled into a
shared tile first (the A operand of a transposed wgmma comes from shared
memory). G inside the chunk is a masked row sum of g (for the rows) and a
masked column sum (for the columns): no cumsum kernel.

Based's state is rows of features against v: the 2nd order x^2 / 2 as the
diagonals d = 0 .. 8 of k k^T (row j of block d: k_j k_(j+d), indices mod
16; it is symmetric, so 136 distinct products, not 256), then the 1st order
(k_j) and the 0th (1): 176 rows where the full map has 273. based() runs a
sequence a block and two blocks an SM, one consumer warpgroup with the
whole state; a warp builds its 16 rows of each 64-row tile from K^T with
roll (k * roll(k, -d)), the query side q * roll(q, -d) * c_d likewise.
"""
from __future__ import annotations


import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import (add_col, add_row, eq, exp, iota, load, mul_row, roll, row_sum,
                     store, sub_col, subtile, sum, transpose, where, zero)

C = 64                  # steps per chunk
CONSUMERS = 2           # consumer warpgroups: DV / 2 value columns each
BASED_F, BASED_DV = 16, 64


def _panel(cols: int) -> str:
    """The swizzle of a bf16 tile whose column subtiles of `cols` are wgmma
    operands: whole panels (64 columns: 128-byte, 32: 64-byte)."""
    return "auto" if cols % 64 == 0 else "64b"


def _causal(w):
    """keep(t, s): s <= t, for the 16 rows of warp w in the chunk."""
    return iota(rt(f32, 16, C), 1) <= iota(rt(f32, 16, C), 0, start=(w % 4) * 16)


def _decay_load(g, b, h, c):
    """Chunk c's log decays along the columns (a row rv). Loaded a chunk
    ahead: the loop does not wait on memory."""
    return load(rv(f32, C, "row"), g, (b, h, 0, c), fill=0.0)


def _chunk_decay(gc, w, g_s):
    """(G at this warp's 16 rows (col rv), G at every column (row rv), G_C):
    the chunk's cumulative sums of the log decay gc (from _decay_load). Each
    warp sums its 16 rows' prefixes (a masked row sum) and the columns read
    all of them back from shared memory (g_s: 16 per warp), which takes
    fewer registers and instructions than a masked column sum of 4 tiles."""
    g_rows = row_sum(where(_causal(w), add_col(zero(rt(f32, 16, C)), gc), 0.0))
    store(g_s, g_rows, (w,))
    warpgroup.sync()
    return g_rows, load(rv(f32, C, "row"), g_s, (w // 4,)), sum(gc)


def _start(state_s, rows: int, DVh: int, mine):
    """The f32 state (rows / 64 warpgroup tiles of DVh columns) at zero, and
    its bf16 copy in this warpgroup's columns of state_s (`mine`), for the
    first chunk's wgmma."""
    state = [zero(rt(f32, 16, DVh)) for _ in range(rows // 64)]
    _publish(state, state_s, rows, mine)
    tkc.fence_async()
    tkc.sync()
    return state


def _publish(state, state_s, rows: int, mine) -> None:
    for t, x in enumerate(state):
        warpgroup.store(mine(state_s, rows), x.to(bf16), (t, 0))


def _chunk(q, k, v, q_s, k_s, v_s, at, DVh: int):
    """Load the chunk at gl coordinates `at` (a TMA ring) and issue S = Q K^T:
    (S, a zero o)."""
    tma.load(q_s, q, at)
    tma.load(k_s, k, at)
    tma.load(v_s, v, at)
    s, o_r = zero(rt(f32, 16, C)), zero(rt(f32, 16, DVh))
    warpgroup.mma_ABt(s, q_s, k_s)
    return s, o_r


def _finish(state, state_s, rows: int, o_r, o_s, o, at, mine) -> None:
    """After the chunk's wgmmas: the state's new copy, and o out by TMA."""
    tkc.sync()                   # every wgmma of this chunk has read state_s (and kd_s)
    _publish(state, state_s, rows, mine)
    warpgroup.store(mine(o_s, C), o_r.to(bf16), (0, 0))
    tkc.fence_async()
    tkc.sync()
    tma.store(o, o_s, at)


# Each library shape's (F, DV, decay) schedules: default_schedule and those the H200's table
# picks (tkc tune over every consumers x blocks an SM x stages that does not spill, 2026-11-30:
# one warpgroup with the whole state beat the H100's two at F = DV = 128, 6-9%). Another shape's
# space is its default alone.
def _s(c: int, b: int, st="auto") -> dict:
    return {"consumers": c, "blocks_per_sm": b, "stages": st}


PICKED = {(64, 64, False): [_s(1, 1), _s(1, 1, 2), _s(1, 2)],
          (64, 64, True): [_s(1, 2, 2)],
          (128, 128, False): [_s(1, 1), _s(1, 1, 2)],
          (128, 128, True): [_s(2, 1)],
          (128, 64, False): [_s(1, 1), _s(1, 1, 2), _s(1, 2, 2)],
          (128, 64, True): []}


def schedules(F: int, DV: int, decay: bool) -> list[dict]:
    """A shape's schedules: default_schedule first, then the tuned picks."""
    first = default_schedule(F, DV, decay)
    return [first, *(c for c in PICKED.get((F, DV, decay), ()) if c != first)]


def library_kernels() -> list:
    """The library's linear-attention kernels: each schedule of PICKED's shapes."""
    return [linear_attention(F, DV, decay, c["stages"], c["consumers"], c["blocks_per_sm"])
            for F, DV, decay in PICKED for c in schedules(F, DV, decay)]


def default_schedule(F: int, DV: int, decay: bool) -> dict:
    """The schedule a shape runs where no tuned table holds its key
    (torchops/linear_attn.py's spaces; the H100's hand picks, docs/kernels.md):
    one consumer warpgroup for the decaying form at DV 64 up to F 128 (from
    F 192 its F x 64 state spills there), else CONSUMERS;
    two blocks an SM for it at F = DV = 64; a two-stage ring for the
    decaying form with two warpgroups at F x DV above 64 x 64."""
    consumers = 1 if decay and DV <= 64 and F <= 128 else CONSUMERS
    return {"consumers": consumers,
            "blocks_per_sm": 2 if decay and consumers == 1 and F * DV <= 64 * 64 else 1,
            "stages": 2 if decay and consumers > 1 and F * DV > 64 * 64 else "auto"}


def linear_attention(F: int = 128, DV: int = 128, decay: bool = False, stages=None,
                     consumers: int | None = None, blocks_per_sm: int | None = None):
    """The kernel la(q, k, v, o, scale) (decay: la(q, k, v, g, o, scale)) for
    feature dim F and value dim DV (multiples of 64 and of 32 * consumers),
    `consumers` warpgroups splitting the value columns, `blocks_per_sm`
    sequences sharing an SM (tkc.kernel's) and a ring of `stages` ("auto":
    the deepest that fits); each left out is default_schedule's."""
    rule = default_schedule(F, DV, decay)
    default = rule["consumers"]
    consumers = consumers or default
    default_blocks = rule["blocks_per_sm"] if consumers == default else 1
    blocks_per_sm = blocks_per_sm or default_blocks
    stages = stages or (rule["stages"] if consumers == default else "auto")
    if F % 64 or F > 256:
        raise TkcError(f"linear attention: the feature dim F = {F} must be 64, 128, 192 or 256")
    if DV % (32 * consumers) or DV > 256:
        raise TkcError(f"linear attention: the value dim DV = {DV} must be 64, 128, 192 or 256")
    DVh = DV // consumers
    # two consumer warpgroups of the decaying form at F = DV = 128 take the
    # producer's spare registers (24 + 2 x 240 = 3 x 168): no spills, 36 bytes at 40 / 232
    registers = (24, 240) if decay and consumers == 2 and F * DV > 64 * 64 else None
    name = f"linear_attn_f{F}_v{DV}" + ("_decay" if decay else "") + (
        "" if stages == "auto" else f"_s{stages}") + (
        "" if (consumers, blocks_per_sm) == (default, default_blocks) else f"_c{consumers}b{blocks_per_sm}")

    def body(q, k, v, g, o, scale):
        h, b = tkc.block_idx.x, tkc.block_idx.y
        wg, w = tkc.warpgroupid(), tkc.warpid()
        q_s, k_s, v_s = st(bf16, C, F), st(bf16, C, F), st(bf16, C, DV, _panel(DVh))
        h_s, o_s = st(bf16, F, DV, _panel(DVh)), st(bf16, C, DV, _panel(DVh))
        kd_s = st(bf16, C, F) if decay else None
        g_s = sv(f32, C * consumers) if decay else None
        mine = lambda x, rows: subtile(x, rows, DVh, (0, wg))  # noqa: E731  this warpgroup's columns
        state = _start(h_s, F, DVh, mine)
        ahead = _decay_load(g, b, h, 0) if decay else None
        for c in tkc.range(tkc.cdiv(q.r, C), stages=stages, registers=registers):
            s, o_r = _chunk(q, k, v, q_s, k_s, v_s, (b, h, c, 0), DVh)
            warpgroup.mma_AB(o_r, q_s, mine(h_s, F))          # the chunks before
            if decay:
                loaded, ahead = ahead, _decay_load(g, b, h, c + 1)
                g_rows, g_cols, g_last = _chunk_decay(loaded, w, g_s)
            warpgroup.mma_async_wait(s, o_r)
            s = s * scale
            k_from = k_s
            if decay:
                o_r = mul_row(o_r, exp(g_rows) * scale)
                s = s * exp(sub_col(add_row(zero(rt(f32, 16, C)), g_rows), g_cols))
                # K's rows times exp(G_C - G_s): each warp its band, its warpgroup's columns
                kd = load(rt(f32, 16, F // consumers), k_s, (w % 4, wg))
                store(kd_s, mul_row(kd, exp(g_last - g_rows)).to(bf16), (w % 4, wg))
                state = [x * exp(g_last) for x in state]
                tkc.fence_async()
                tkc.sync()
                k_from = kd_s
            else:
                o_r = o_r * scale
            warpgroup.mma_AB(o_r, where(_causal(w), s, 0.0).to(bf16), mine(v_s, C))
            for t in range(F // 64):
                warpgroup.mma_AtB(state[t], subtile(k_from, C, 64, (0, t)), mine(v_s, C))
            warpgroup.mma_async_wait(o_r, *state)
            _finish(state, h_s, F, o_r, o_s, o, (b, h, c, 0), mine)

    Q, V = gl(bf16, "B", "H", "L", F), gl(bf16, "B", "H", "L", DV)

    def grid(q, *_):
        return (q.d, q.b)

    if decay:
        @tkc.kernel(name=name, warps=4 * consumers, grid=grid, blocks_per_sm=blocks_per_sm)
        def la(q: Q, k: Q, v: V, g: gl(f32, "B", "H", 1, "Lg"), o: V, scale: tkc.f32):
            body(q, k, v, g, o, scale)
        return la

    @tkc.kernel(name=name, warps=4 * consumers, grid=grid, blocks_per_sm=blocks_per_sm)
    def la(q: Q, k: Q, v: V, o: V, scale: tkc.f32):
        body(q, k, v, None, o, scale)
    return la


def _per_warp(w, build, tile):
    """build(i) (a register tile like `tile`, an rt(...)) in warp i of a
    warpgroup (w: warpid() % 4), as four warp-uniform branches: each warp
    runs only its own, so build may use constants that differ between the
    warps (a roll's shift)."""
    x = zero(tile)   # carried through the branches (no code: one assigns it)
    for i in range(4):
        with tkc.if_(w == i):
            x = build(i)
    return x


def based(stages=2, registers=(24, 232)):
    """Based's kernel b(q, k, v, o, scale): q, k [B, H, L, 16], v, o [B, H, L, 64].

    A block a sequence, two blocks an SM (ThunderKittens' Based runs so too),
    one consumer warpgroup with the whole state. The 2nd order x^2 / 2 is
    symmetric in (i, j), so the state keeps its diagonals d = 0 .. 8 of
    k k^T, not all 256 products: block d's row j is k_j k_(j+d) (indices
    mod 16, roll(k, -d)) against q_j q_(j+d) c_d, c_0 = c_8 = scale^2 / 2
    (d = 8 holds each pair twice), c_1..7 = scale^2. Then the 1st order (k_j
    against scale q_j) and the 0th (row 0: 1 against e_0): 11 blocks of 16
    rows in 3 accumulator tiles of 64 (one block spare, zero), 96 registers;
    176 features where the full map has 273. Warp w builds rows 16w .. of
    each tile's key operand, block 4t + w, in its own branch (_per_warp).
    1.19-1.23x faster on the H100 than the full map (same layout), which was
    1.42-1.45x faster than a block a sequence with two consumer warpgroups
    splitting the features (partial outputs met in shared memory at three
    block barriers a chunk). No spills."""
    F, DV = BASED_F, BASED_DV
    TILES, BLOCKS = 3, 11        # accumulator tiles of 64 rows; blocks of 16 in use
    BATCH = 2                    # phi(q) operands in flight: 4 registers each
    # two ring stages: as fast as three on the H100 (0.193 / 0.194 ms at L 4k)
    name = "based_f16_v64" + ("" if stages == 2 else f"_s{stages}") + (
        "" if registers == (24, 232) else "_r%d_%d" % registers)

    def q_block(qf, b, scale):
        """Block b of phi(q) (16 x 16 a warp, f32): diagonals, 1st, 0th."""
        if b < 9:
            c = scale * scale * (0.5 if b in (0, 8) else 1.0)
            return qf * (qf if b == 0 else roll(qf, -b, 1)) * c
        if b == 9:
            return qf * scale
        return where(eq(iota(rt(f32, 16, F), 1), 0), 1.0, 0.0)

    def k_block(kt, b):
        """Block b of the key operand (16 rows x the chunk, f32): rows j."""
        if b < 9:
            return kt * (kt if b == 0 else roll(kt, -b, 0))
        if b == 9:
            return kt
        if b == 10:                               # the 0th order: row 0
            return where(eq(iota(rt(f32, 16, C), 0), 0), 1.0, 0.0)
        return zero(rt(f32, 16, C))               # the spare block

    def chunk(scale, q_s, k_s, v_s, o_s, a_s, a, o, at):
        w = tkc.warpid() % 4
        # inside the chunk first (S's registers are free before the state's
        # operands are built): 1 + x + x^2 / 2, causal
        s = warpgroup.mma_ABt(zero(rt(f32, 16, C)), q_s, k_s)
        qf = load(rt(f32, 16, F), q_s, (w, 0))
        x = warpgroup.mma_async_wait(s) * scale
        o_r = warpgroup.mma_AB(zero(rt(f32, 16, DV)),
                               where(_causal(w), 1.0 + x + x * x * 0.5, 0.0).to(bf16), v_s)
        # the chunks before: o += phi(q) . state, from last chunk's copy
        for b in range(BLOCKS):
            warpgroup.mma_AB(o_r, q_block(qf, b, scale).to(bf16), subtile(a_s, 16, DV, (b, 0)))
            if b % BATCH == BATCH - 1 and b < BLOCKS - 1:
                # a wgmma holds its register operand until it retires
                o_r = warpgroup.mma_async_wait(o_r, pending=BATCH)
        with tkc.if_(w == 0):
            tma.store_async_wait()    # the last chunk's o is out of o_s
        warpgroup.mma_async_wait(o_r)
        warpgroup.sync()              # o_s free; every wgmma has read the state's copy
        warpgroup.store(o_s, o_r.to(bf16))
        # the state: this warp's block of each tile, rows j along the chunk
        kt = transpose(load(rt(bf16, C, F), k_s, (0, 0))).to(f32)
        for t in range(TILES):
            op = _per_warp(w, lambda i, t=t: k_block(kt, 4 * t + i).to(bf16), rt(bf16, 16, C))
            warpgroup.mma_AB(a[t], op, v_s)
        a = list(warpgroup.mma_async_wait(*a))
        _publish(a, a_s, 64 * TILES, lambda x, rows: x)
        tkc.fence_async()
        warpgroup.sync()              # o_s and the state's copy written
        with tkc.if_(w == 0):
            tma.store_async(o, o_s, at)
        return a

    @tkc.kernel(name=name, warps=4, grid=lambda q, *_: (q.d, q.b), blocks_per_sm=2)
    def based_fwd(q: gl(bf16, "B", "H", "L", F), k: gl(bf16, "B", "H", "L", F),
                  v: gl(bf16, "B", "H", "L", DV), o: gl(bf16, "B", "H", "L", DV), scale: tkc.f32):
        h, b = tkc.block_idx.x, tkc.block_idx.y
        t = dict(q_s=st(bf16, C, F), k_s=st(bf16, C, F), v_s=st(bf16, C, DV),
                 o_s=st(bf16, C, DV, "64b"), a_s=st(bf16, 64 * TILES, DV))
        a = _start(t["a_s"], 64 * TILES, DV, lambda x, rows: x)
        for c in tkc.range(tkc.cdiv(q.r, C), stages=stages, registers=registers):
            at = (b, h, c, 0)
            tma.load(t["q_s"], q, at)
            tma.load(t["k_s"], k, at)
            tma.load(t["v_s"], v, at)
            a = chunk(scale, **t, a=a, o=o, at=at)

    return based_fwd
