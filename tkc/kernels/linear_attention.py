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

Based's state is rows of features: 16i + j hold sum_s k_si k_sj v_s (i, j <
16, the accumulator's rows), and, transposed, V^T K (1st order) and V^T 1
(0th: every column the sum of v), whose 16 columns are the wgmma's N.
based() runs a sequence a block and two blocks an SM, one consumer
warpgroup with the whole state. A warp builds its 16 rows of each 64-row
2nd-order tile from K^T (k_i = K^T[i, :], a col_pick, times K^T: k_i k_j for
every j), and the query side of row block i is q * q_i * scale^2 / 2 (q_i =
q[:, i], a row_pick; a 16-column A operand: 16 wgmmas of K = 16), then
q * scale and e_0 against the two transposed orders.
"""
from __future__ import annotations


import tkc
from tkc import bf16, f32, gl, rt, rv, st, sv, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import (add_col, add_row, eq, exp, iota, load, mul_col, mul_row, row_sum,
                     store, sub_col, subtile, sum, transpose, where, zero)

C = 64                  # steps per chunk
CONSUMERS = 2           # consumer warpgroups: DV / 2 value columns each
BASED_F, BASED_DV = 16, 64
# Based's spill stores (ptxas 13.0): 5 loop invariants, reloaded once a
# chunk (tkc build refuses more; 72 bytes while every stmatrix position of the
# state's copy held its own address register)
BASED_SPILLS = 20


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


def linear_attention(F: int = 128, DV: int = 128, decay: bool = False, stages="auto",
                     consumers: int | None = None, blocks_per_sm: int | None = None):
    """The kernel la(q, k, v, o, scale) (decay: la(q, k, v, g, o, scale)) for
    feature dim F and value dim DV (multiples of 64 and of 32 * consumers),
    `consumers` warpgroups splitting the value columns (default: one for
    the decaying form at DV 64, whose elementwise decay work each warpgroup
    repeats: 12-17% faster on the H100 than two; else CONSUMERS),
    `blocks_per_sm` sequences sharing an SM (tkc.kernel's; default: two for
    the decaying form at F = DV = 64, whose one consumer warpgroup then
    still has 216 registers, enough for no spills: 7-24% faster on the H100
    than one; F 128 at two, 12 bytes of spills, measured as fast as one)."""
    default = 1 if decay and DV <= 64 else CONSUMERS
    consumers = consumers or default
    default_blocks = 2 if decay and consumers == 1 and F * DV <= 64 * 64 else 1
    blocks_per_sm = blocks_per_sm or default_blocks
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
    if stages == "auto" and decay and F * DV > 64 * 64 and consumers > 1:
        # two stages, not the deepest ring that fits (3): 3-4% faster on the
        # H100 (F = DV = 128; 11% when this kernel still spilled into L1)
        stages = 2

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
        def la(q: Q, k: Q, v: V, g: gl(f32, "B", "H", 1, "L"), o: V, scale: tkc.f32):
            body(q, k, v, g, o, scale)
        return la

    @tkc.kernel(name=name, warps=4 * consumers, grid=grid, blocks_per_sm=blocks_per_sm)
    def la(q: Q, k: Q, v: V, o: V, scale: tkc.f32):
        body(q, k, v, None, o, scale)
    return la


def based(stages=2, registers=(24, 232)):
    """Based's kernel b(q, k, v, o, scale): q, k [B, H, L, 16], v, o [B, H, L, 64].

    A block a sequence, two blocks an SM (ThunderKittens' Based runs so too):
    one consumer warpgroup holds the whole state, the 2nd order as 4 tiles
    of 64 rows (i = 4t .. 4t + 3, every j) for the accumulator, the 1st and
    0th orders transposed (V^T K and V^T 1: 64 x 16, the features as the
    wgmma's N) and kept in shared memory (f32) between chunks. Two
    sequences an SM run independently, so one's waits (wgmma, barriers)
    run under the other's work: 1.42-1.45x faster on the H100 than a block
    a sequence with two consumer warpgroups splitting the features, whose
    partial outputs met in shared memory at every chunk. The consumer takes
    the producer's spare registers (setmaxnreg 24 / 232: two blocks fill the
    register file); ptxas spills BASED_SPILLS bytes."""
    F, DV = BASED_F, BASED_DV
    BATCH = 2                    # phi(q) operands in flight: 4 registers each
    name = "based_f16_v64" + ("" if stages == 2 else f"_s{stages}") + (
        "" if registers == (24, 232) else "_r%d_%d" % registers)

    def chunk(scale, q_s, k_s, v_s, o_s, a2_s, a1_s, a0_s, a1f_s, a0f_s, ones_s, a2, o, at):
        w = tkc.warpid() % 4
        # inside the chunk first (S's registers are free before the state's
        # operands are built): 1 + x + x^2 / 2, causal
        s = warpgroup.mma_ABt(zero(rt(f32, 16, C)), q_s, k_s)
        qf = load(rt(f32, 16, F), q_s, (w, 0))
        x = warpgroup.mma_async_wait(s) * scale
        o_r = warpgroup.mma_AB(zero(rt(f32, 16, DV)),
                               where(_causal(w), 1.0 + x + x * x * 0.5, 0.0).to(bf16), v_s)
        # the chunks before: o += phi(q) . state, from last chunk's copies
        warpgroup.mma_ABt(o_r, (qf * scale).to(bf16), a1_s)
        e0 = where(eq(iota(rt(f32, 16, F), 1), 0), 1.0, 0.0)   # column 0 of a0_s: sum_s v_s
        warpgroup.mma_ABt(o_r, e0.to(bf16), a0_s)
        for i in range(F):
            warpgroup.mma_AB(o_r, mul_row(qf, qf[:, i] * (scale * scale / 2)).to(bf16),
                             subtile(a2_s, 16, DV, (i, 0)))
            if i % BATCH == BATCH - 1 and i < F - 1:
                # a wgmma holds its register operand until it retires
                o_r = warpgroup.mma_async_wait(o_r, pending=BATCH)
        with tkc.if_(w == 0):
            tma.store_async_wait()    # the last chunk's o is out of o_s
        warpgroup.mma_async_wait(o_r)
        warpgroup.sync()              # o_s free; every wgmma has read the state's copies
        warpgroup.store(o_s, o_r.to(bf16))
        # the state: this warp's 16 rows (i = 4t + w, every j) of each 2nd-order tile
        kt = transpose(load(rt(bf16, C, F), k_s, (0, 0)))
        # the 1st and 0th orders live in shared memory (f32) between chunks:
        # 16 registers fewer where o and the 2nd order's operands need them
        a1 = warpgroup.mma_AtB(warpgroup.load(rt(f32, 16, F), a1f_s), v_s, k_s)
        a0 = warpgroup.mma_AtB(warpgroup.load(rt(f32, 16, F), a0f_s), v_s, ones_s)
        for t in range(F // 4):
            warpgroup.mma_AB(a2[t], mul_col(kt, kt[4 * t + w, :]).to(bf16), v_s)
            if t % 2 == 1:
                a2[t - 1], a2[t] = warpgroup.mma_async_wait(a2[t - 1], a2[t])
        a1, a0 = warpgroup.mma_async_wait(a1, a0)
        _publish(a2, a2_s, F * F, lambda x, rows: x)
        for x, x_s, xf_s in ((a1, a1_s, a1f_s), (a0, a0_s, a0f_s)):
            warpgroup.store(xf_s, x)
            warpgroup.store(x_s, x.to(bf16))
        tkc.fence_async()
        warpgroup.sync()              # o_s and the state's copies written
        with tkc.if_(w == 0):
            tma.store_async(o, o_s, at)
        return a2

    @tkc.kernel(name=name, warps=4, grid=lambda q, *_: (q.d, q.b), blocks_per_sm=2,
                spills=BASED_SPILLS)
    def based_fwd(q: gl(bf16, "B", "H", "L", F), k: gl(bf16, "B", "H", "L", F),
                  v: gl(bf16, "B", "H", "L", DV), o: gl(bf16, "B", "H", "L", DV), scale: tkc.f32):
        h, b = tkc.block_idx.x, tkc.block_idx.y
        t = dict(q_s=st(bf16, C, F), k_s=st(bf16, C, F), v_s=st(bf16, C, DV),
                 o_s=st(bf16, C, DV, "64b"), a2_s=st(bf16, F * F, DV),
                 a1_s=st(bf16, DV, F), a0_s=st(bf16, DV, F),
                 a1f_s=st(f32, DV, F), a0f_s=st(f32, DV, F), ones_s=st(bf16, C, F))
        a2 = [zero(rt(f32, 16, DV)) for _ in range(F // 4)]
        _publish(a2, t["a2_s"], F * F, lambda x, rows: x)
        z = zero(rt(f32, 16, F))
        for x_s in ("a1_s", "a0_s", "a1f_s", "a0f_s"):
            warpgroup.store(t[x_s], z if t[x_s].dtype == f32 else z.to(bf16))
        warpgroup.store(t["ones_s"], (z + 1.0).to(bf16))
        tkc.fence_async()
        tkc.sync()
        for c in tkc.range(tkc.cdiv(q.r, C), stages=stages, registers=registers):
            at = (b, h, c, 0)
            tma.load(t["q_s"], q, at)
            tma.load(t["k_s"], k, at)
            tma.load(t["v_s"], v, at)
            a2 = chunk(scale, **t, a2=a2, o=o, at=at)

    return based_fwd
