"""The library GEMM on Hopper: C = op(A) @ op(B), op a transpose or not,
optionally batched, optionally with nn.Linear's epilogue (bias, activation).

A (M x K, or K x M) and B (K x N, or N x K: nn.Linear's weight) bf16, f32
accumulation, C bf16 or f32. Written as a plain pipelined loop
(docs/pipelining.md): tk-pipeline-staging makes the producer warpgroup, the
TMA ring and its mbarriers, and keeps each wgmma in flight into the next
iteration; tk-grid-ordering makes it persistent (one block per SM) in
L2-friendly super-rows. No barrier is written here.

A block computes a BM x BN tile of C with BM / 64 consumer warpgroups (each
its 64 rows: a subtile of the A stage; one for BM 16; two on one 64-row tile
with sliced=True) over K steps of 64;
the finish goes through two shared tiles of BM x EPI by TMA stores, so a
work item's stores overlap the next item's main loop. BM is 128, or 64 for C
of few rows (M <= 64: a decode step's activations), where a 128-row tile
would load and multiply half a tile of zeros and the weights' bandwidth is
what counts; or 16 (M <= 16): then TMA loads A's 16 rows, not a 64-row box
mostly past M (whose zero fill cost the H200 ~6 µs at 16 x 4096 x 4096:
17.7 against 12.0), each warp loads them into registers and wgmma
multiplies four copies of them (its M is 64), of which warp 0's are stored.
TMA zero-fills and clips, so M, N and K need not be multiples of the tile:
only rows of 16 bytes (the memory's inner dim a multiple of 8 for bf16: K
and N, or with transpose_a M and N).

swap=True puts C's rows on wgmma's N (swap-AB: the block computes C^T's
tile, B's columns on the consumers' M): BN is then 64 or 128 (one or two
consumer warpgroups) and BM any multiple of 16 up to 256 (wgmma's N), so C
of M rows takes cdiv(M, BM) tiles of BM rows where a 64-row M step would
leave a last tile mostly empty (777 x 4096 x 4096: four tiles of 208 rows,
128 work items, where 128-row tiles make 112 items of 7/8 useful rows). The
finish writes each accumulator's transpose (registers renamed, stored by
stmatrix.trans) into row tiles of C.

The transposes are wgmma's (its transpose bits, valid for bf16): a
transposed operand is read from shared memory as TMA put it, with no copy;
so dW = X^T dY of a linear layer's backward is gemm_hopper(transpose_a=True).
"""

import tkc.dsl as tkc
from tkc.dsl import bf16, f32, gl, rt, rv, st, tma, warpgroup
from tkc.ops import add_col, add_row, gelu, load, silu, store, subtile, transpose, zero

BK_STEP = 64   # K's step (sliced=True: two of them)
EPILOGUE_BYTES = 16384  # one finish tile: 128 x 64 bf16 or 128 x 32 f32 (64 x 128, 64 x 64)
ACTIVATIONS = (None, "gelu", "silu")
GATED = ("swiglu",)   # act(A B_gate) * (A B_up): two weights, one accumulator


# swap=True's tiles: C's rows on wgmma's N, so a tile's height is any multiple
# of 16 up to wgmma's widest N. The heights a schedule takes: those swap_rows
# gives C of 65 to 4096 rows (fewer rows take the 16- and 64-row tiles) but
# 128 and 256, whose tiles waste what 128-row ones do (never picked on the
# H200 over 184 keys); and the widths (BN, with whether blocks are
# persistent) a swapped tile is built at: two consumer warpgroups for C of
# many columns, one (not persistent) for C of few rows, whose tiles are then
# too few to fill the SMs at 128 columns.
SWAP_MAX = 256
SWAP_HEIGHTS = tuple(h for h in range(80, SWAP_MAX, 16) if h != 128)
SWAP_TILES = ((128, True), (64, False))
# ... and split-K 2 (the one-warpgroup tile, not persistent) up to this height:
# C of one such tile's rows and up to 4096 columns has too few tiles for the
# SMs (H200, against each key's pick at 1656 keys of C of 65-2048 rows: 118
# picked a split one, all 80-160 high, median 1.13x; 100 x 4096^2 eager 0.84 ->
# 1.01 of cuBLAS)
SWAP_SPLIT_MAX = 160


def swap_rows(m: int) -> int:
    """A swapped tile's height for C of m rows (a batch's): the fewest tiles
    of up to 256 rows, as even as 16-row steps make them (777: four of 208)."""
    tiles = -(-m // SWAP_MAX)
    return -(-(-(-m // tiles)) // 16) * 16


def tile_rows(BM: int, transpose_a: bool) -> int:
    """The BM a schedule's BM takes for a product: 64 for BM 16 with A
    transposed (BM 16 reads A's rows into registers as stored)."""
    return 64 if BM == 16 and transpose_a else BM


def gemm_hopper(out_dtype: str = bf16, transpose_b: bool = False, BN: int = 256,
                stages="auto", persistent: bool = True, order: str = "auto",
                epilogue: tuple | None = None, *, transpose_a: bool = False,
                batched: bool = False, bias: bool = False, activation: str | None = None,
                preact: bool = False, cluster: int = 1, split: int = 1, BM: int = 128,
                swap: bool = False, cluster_m: int = 1, sliced: bool = False):
    """The kernel for one specialisation; its arguments, in order:

        a     gl(bf16, 1, 1, M, K), or (1, 1, K, M) with transpose_a
        b     gl(bf16, 1, 1, K, N), or (1, 1, N, K) with transpose_b
        b_up  gl(bf16, 1, 1, N, K)                  with activation="swiglu"
        bias  gl(bf16, 1, 1, 1, N)                  with bias=True
        c     gl(out_dtype, 1, 1, M, N)             the result
        z     gl(out_dtype, 1, 1, M, N)             with preact=True
        z_up  gl(out_dtype, 1, 1, M, N)             with preact=True and "swiglu"

    transpose_a / transpose_b: C = A^T B, A B^T or A^T B^T from A, B as
    stored (mma_AtB, mma_ABt, mma_AtBt).
    batched=True: a, c (and z) get a batch as the gl's second dim, (1, Bt, M,
    K) etc., and the grid a z axis over it: one launch for [Bt, M, K] x
    [Bt, K, N]. b's batch may be Bt or 1: a B of batch 1 serves every batch
    (shared weights; the runtime takes only contiguous tensors, so a stride-0
    broadcast is written as batch 1, or a 2-D B). bias is one vector for
    all batches. order="auto" keeps the hardware's order here: its analysis
    looks for loads that follow block_idx.y alone, and A's follow y and z.
    bias=True: C = A B + bias, bias[n] added to column n in f32 (the
    accumulator starts from it), as nn.Linear.
    activation "gelu" (erf form, PyTorch's F.gelu default; tk.gelu, its erf
    within 1.5e-7) or "silu": C = act(A B + bias), applied in f32 before the
    conversion. silu's finish moves under the next item's loop like a
    conversion where its carried tiles fit (overlap.py; gelu's erf stays at
    the item's end: beside the carried tiles it spilled).
    preact=True (with an activation): also z = A B + bias, the
    pre-activation a backward needs for gelu'(z) or silu'(z).
    activation="swiglu" (a Llama MLP's gate and up projections in one
    product, transpose_b, not swapped): C = silu(A B_gate^T) * (A B_up^T)
    from two [N, K] weights. The block's accumulator holds BN columns, the
    first half gate columns and the second the up columns of the same BN / 2
    columns of C (TMA loads each weight's rows into one half of the B tile,
    so one wgmma of N = BN serves both): wgmma's fragments put column c and
    c + BN / 2 in the same thread, so the gating is register-local and C's
    tile is BN / 2 wide. Saves what a separate gate, up and product write and
    read ([M, N] each). With preact, z and z_up get the gate and up values.
    epilogue=(cols, buffers): the finish tiles (default: 16 KiB ones, two of them).
    cluster=n: blocks run in clusters of n along x, which share their A
    tiles: tk-pipeline-staging has each CTA load 1/n of A's tile and
    multicast it to the cluster (persistent: tk-grid-ordering deals a
    cluster's CTAs one row of tiles). cluster_m=m (blocks not persistent):
    clusters of m along y, C's row blocks, which share their B tile the
    same way (the L2 serves a column of tiles B once; with cluster or
    split, clusters of (n, m)). The grid's x rounds up to a multiple
    of n (a block past N computes a tile TMA does not store).
    sliced=True (sliced-K, BM 64, blocks not persistent): the block's two
    consumer warpgroups each multiply the same 64 rows of C by half of each
    K step (steps of 128: a warpgroup's half is one 128-byte swizzle panel of
    A's tile), then warpgroup 1 leaves its f32 partial in shared memory and
    warpgroup 0 adds it and finishes: twice the consumer warps on a 64-row
    tile (cuBLAS's 64 x 64 tiles at 256 x 1536 x 4096 run two consumer
    warpgroups too, ncu), for C of few row blocks (gemm_space: where it won).
    split=2 (split-K, blocks not persistent, BN up to 128): a tile's two
    CTAs, a (2, 1, 1) cluster, each sum half of K's steps, then swap their
    f32 partial tiles through distributed shared memory (tma.store_cta) and
    add; CTA 0 stores the tile (CTA 1's stores aim past C's last row, where
    TMA writes nothing). For C of fewer tiles than SMs: twice the blocks
    (swapped tiles too: C of a few hundred rows, one or two tiles high).
    split=4 (one consumer warpgroup: BM 64, or swapped BN 64): a (4, 1, 1)
    cluster, each CTA a quarter of K's steps, then a reduce-scatter: CTA r
    sends each peer w the 16 accumulator rows of its warp w (f32 partials,
    through distributed shared memory, where split 2 swaps whole tiles) and
    finishes warp r's rows, its own partial plus three. Four times the
    blocks, for C whose tiles fill few SMs even at split 2.
    """
    gated = activation in GATED
    if activation not in ACTIVATIONS + GATED:
        raise ValueError(f"gemm_hopper: activation must be one of {ACTIVATIONS + GATED}, got {activation!r}")
    if gated and (swap or not transpose_b or bias or BN % 32):
        raise ValueError(f"gemm_hopper: {activation} reads two [N, K] weights into the halves of a "
                         f"BN-row B tile: it takes transpose_b, BN a multiple of 32, no swap and no "
                         f"bias, got transpose_b={transpose_b}, BN={BN}, swap={swap}, bias={bias}")
    if preact and activation is None:
        raise ValueError("gemm_hopper: preact=True stores the pre-activation: it needs an activation")
    if swap:
        if BN not in (64, 128) or not (16 <= BM <= 256 and BM % 16 == 0):
            raise ValueError(f"gemm_hopper: swap=True takes BN 64 or 128 (its consumer warpgroups' "
                             f"64 columns each) and BM a multiple of 16 up to 256, got BM={BM}, BN={BN}")
    elif BM not in (16, 64, 128):
        raise ValueError(f"gemm_hopper: BM is 128, 64 (one consumer warpgroup) or 16 (A in "
                         f"registers), got {BM}")
    if BM == 16 and transpose_a:
        raise ValueError("gemm_hopper: BM=16 loads A's rows into registers as stored: not with "
                         "transpose_a (take BM=64)")
    size = 2 if out_dtype == bf16 else 4
    out_cols = BN // 2 if gated else BN   # C's columns a tile
    if swap:   # one finish tile of the whole tile: one TMA store an item (H200, 777 x 4096^2 at
        # BM 208: 39.9 µs, against 43.4 through two 16-row ones); split 4's are 16 columns wide,
        # two of them (with one, a pre-activation's store holds the activation's registers: spills)
        default = (BM, 2 if split == 4 else 1)
    else:      # finish tiles of epi columns
        default = (EPILOGUE_BYTES // (BM * size), 2)
        while out_cols % default[0] and default[0] > 16:   # a narrow tile: narrower finish tiles
            default = (default[0] // 2, 2)
    epi, buffers = epilogue or default
    if swap and BM % epi:
        raise ValueError(f"gemm_hopper: swap=True's finish tiles are rows of C: {epi} must divide BM={BM}")
    if not swap and not (0 < BN <= 256 and out_cols % epi == 0):  # the finish stores whole chunks
        raise ValueError(f"gemm_hopper: BN must be a multiple of the finish tile's {epi} columns "
                         f"up to 256 (wgmma's widest N), got {BN}")
    if cluster_m not in (1, 2, 4) or cluster_m > 1 and persistent:
        raise ValueError(f"gemm_hopper: cluster_m is 1, 2 or 4, with blocks that are not persistent "
                         f"(tk-grid-ordering deals clusters items along x only), got "
                         f"cluster_m={cluster_m}, persistent={persistent}")
    if max(cluster, split) * cluster_m > 8:
        raise ValueError(f"gemm_hopper: a cluster holds at most 8 CTAs: cluster_m={cluster_m} times "
                         f"{'split' if split > 1 else 'cluster'}={max(cluster, split)} is more")
    if split not in (1, 2, 4) or split > 1 and (persistent or cluster > 1 or BN > 128):
        raise ValueError("gemm_hopper: split is 1, 2 or 4, and split-K takes blocks that are not "
                         f"persistent, no cluster of its own and BN <= 128 (f32 partial tiles "
                         f"of 128 x BN in shared memory), got split={split}, persistent={persistent}, "
                         f"cluster={cluster}, BN={BN}")
    if sliced and (BM != 64 or swap or split > 1 or cluster > 1 or persistent or gated):
        raise ValueError(f"gemm_hopper: sliced=True splits each K step of a 64-row tile between two "
                         f"consumer warpgroups: it takes BM 64, blocks that are not persistent, no swap, "
                         f"split, cluster along x or gating, got BM={BM}, swap={swap}, split={split}, "
                         f"cluster={cluster}, persistent={persistent}, activation={activation!r}")
    BK = 128 if sliced else BK_STEP   # sliced: a K step of two 64-deep halves
    # the block's accumulator tile, rows x columns: C's BM x BN, swapped C^T's BN x BM
    acc_rows, acc_cols = (BN, BM) if swap else (BM, BN)
    band = split == 4   # each CTA finishes one warp's 16 rows of the accumulator (docstring)
    if band and acc_rows != 64:
        raise ValueError("gemm_hopper: split=4 gives each of the four CTAs one consumer warp's 16 "
                         f"accumulator rows to finish: it takes one consumer warpgroup (BM 64, or "
                         f"swapped BN 64), got BM={BM}, BN={BN}, swap={swap}")
    mma_name = f"{'at' if transpose_a else 'a'}{'bt' if transpose_b else 'b'}"
    name = "_".join(x for x in (
        f"gemm_hopper_{out_dtype}_{mma_name}_{BM}x{BN}x{BK}",
        "" if stages == "auto" else f"s{stages}", "" if persistent else "np",
        "" if order == "auto" else order.replace("(", "").replace(")", "").replace(", ", ""),
        "" if epilogue in (None, default) else f"e{epi}x{buffers}",
        "batched" if batched else "", "bias" if bias else "", activation or "",
        "preact" if preact else "", f"c{cluster}" if cluster > 1 else "",
        f"k{split}" if split > 1 else "", f"cm{cluster_m}" if cluster_m > 1 else "",
        "swap" if swap else "", "sliced" if sliced else "") if x)
    if swap:   # C^T = op(B)^T op(A)^T: B's tile is wgmma's a, A's its b, both read as TMA put them
        mma = getattr(warpgroup, f"mma_{'A' if transpose_b else 'At'}{'B' if transpose_a else 'Bt'}")
    else:
        mma = getattr(warpgroup, f"mma_{'At' if transpose_a else 'A'}{'Bt' if transpose_b else 'B'}")
    act = {"gelu": gelu, "silu": silu, "swiglu": silu}.get(activation)
    batch = "Bt" if batched else 1
    A = gl(bf16, 1, batch, *(("K", "M") if transpose_a else ("M", "K")))
    B = gl(bf16, 1, "Bb" if batched else 1, *(("N", "K") if transpose_b else ("K", "N")))
    C = gl(out_dtype, 1, batch, "M", "N")
    V = gl(bf16, 1, 1, 1, "N")

    def body(a, b, c, vec, z, b_up=None, z_up=None):
        x, bm, wg = tkc.block_idx.x, tkc.block_idx.y, tkc.warpgroupid()
        bn, r = (x // split, x % split) if split > 1 else (x, 0)   # r: this CTA's part of K
        # the cluster rank of split CTA i of this tile's (ranks run x fastest: in (split, m)
        # clusters a tile's CTAs are ranks y * split ..)
        peer = (lambda i: i) if cluster_m == 1 else (lambda i: tkc.cluster_ctarank() - r + i)  # noqa: E731
        # (b, d) of this block's matrices: its batch; B's is 0 when B has batch 1
        ac = (0, tkc.block_idx.z) if batched else (0, 0)
        bc = (0, tkc.block_idx.z % b.d) if batched else (0, 0)
        a_s = st(bf16, BK, BM) if transpose_a else st(bf16, BM, BK)
        b_s = st(bf16, BN, BK) if transpose_b else st(bf16, BK, BN)
        # the finish tiles (band: of warp r's 16 accumulator rows, C's rows or swapped its columns)
        fin = 16 if band else BN if swap else BM
        # split-K's finish tiles and the partials it sends lie over the K loop's ring after it
        # (after_loop: H200, 128 x 128 split 2 at 1536 x 256 x 4096: 2 -> 5 stages, 22.8 -> 16.6 µs);
        # not the others' (deeper rings, 5-7% slower)
        c_s = [st(out_dtype, *((epi, fin) if swap else (fin, epi)), after_loop=split > 1) for _ in range(buffers)]

        def put(t, y, swapped=False):
            """The finished rows of the tile (swapped: y's transpose, its
            columns) into t: the consumers' (BM 16: warp 0's 16, the other
            warps' being copies; band: warp r's)."""
            if sliced:   # warpgroup 0 holds the sums
                with tkc.if_(wg == 0):
                    warpgroup.store(t, y, (0, 0))
            elif band or BM == 16 and not swap:
                with tkc.if_(tkc.warpid() == (r if band else 0)):
                    store(t, y, (0, 0))
            elif swapped:
                store(t, y, (0, tkc.warpid()))
            else:
                warpgroup.store(t, y, (wg, 0))

        if band:   # warp w's partial rows, for CTA w (mine[d - 1]: CTA r + d's), and the peers' of warp r's
            mine = [st(f32, 16, acc_cols, after_loop=True) for _ in range(split - 1)]
            theirs = [st(f32, 16, acc_cols) for _ in range(split - 1)]   # [d - 1]: from CTA r - d
        elif split > 1:   # the partial tiles (swapped: of C^T)
            mine, theirs = st(f32, acc_rows, acc_cols, after_loop=True), st(f32, acc_rows, acc_cols)
        if sliced:   # warpgroup 1's partial tile, over the K loop's ring after it
            part = st(f32, 64, BN, after_loop=True)
        if split > 1:
            got = tkc.barrier()
            tkc.cluster_sync()   # the peer's barrier is initialised before it copies into it
        acc = zero(rt(f32, 16, acc_cols))

        def add_bias(acc):
            # columns past N read 0; swapped, bias[n] is row n of C^T: this warp's 16 columns of C
            if swap:
                return add_row(acc, load(rv(f32, 16, "col"), vec, (0, 0, 0, bn * (BN // 16) + tkc.warpid()),
                                         fill=0.0))
            return add_col(acc, load(rv(f32, BN, "row"), vec, (0, 0, 0, bn), fill=0.0))
        if vec is not None and split == 1 and not sliced:
            # the bias is the accumulator's start, not a finish step: loaded
            # before the loop, it leaves the finish as plain conversions, which
            # tk-pipeline-staging can overlap with the next item's loop (a load
            # in the finish would keep it in place)
            acc = add_bias(acc)
        steps = tkc.cdiv(a.r if transpose_a else a.c, BK)
        if split == 1:
            ks = tkc.range(steps, stages=stages)
        else:   # this CTA's part of the steps
            half = tkc.cdiv(steps, split)
            ks = tkc.range(r * half, tkc.min(r * half + half, steps), stages=stages)
        for k in ks:
            tma.load(a_s, a, (*ac, k, bm) if transpose_a else (*ac, bm, k))
            if gated:   # gate rows into the B tile's first half, up rows into its second
                tma.load(subtile(b_s, BN // 2, BK, (0, 0)), b, (*bc, bn, k))
                tma.load(subtile(b_s, BN // 2, BK, (1, 0)), b_up, (*bc, bn, k))
            else:
                tma.load(b_s, b, (*bc, bn, k) if transpose_b else (*bc, k, bn))
            # each consumer warpgroup (wg < BM / 64) multiplies its 64 rows of C: rows of the
            # A tile, or with transpose_a its columns (a 64-column panel); BM 16: each warp
            # the tile's 16 rows, from registers; swapped, its 64 columns of C: rows of
            # the B tile (B^T) or its columns, times the whole A tile
            if swap:
                mine_b = subtile(b_s, 64, BK, (wg, 0)) if transpose_b else subtile(b_s, BK, 64, (0, wg))
                mma(acc, mine_b, a_s)
            elif sliced:   # all 64 rows of C, this warpgroup's half of the step (of A's columns, B's rows)
                h = BK // 2
                mine_a = subtile(a_s, h, 64, (wg, 0)) if transpose_a else subtile(a_s, 64, h, (0, wg))
                mma(acc, mine_a, subtile(b_s, BN, h, (0, wg)) if transpose_b else subtile(b_s, h, BN, (wg, 0)))
            else:
                if BM == 16:
                    mine_a = load(rt(bf16, 16, BK), a_s, (0, 0))
                else:
                    mine_a = subtile(a_s, BK, 64, (0, wg)) if transpose_a else subtile(a_s, 64, BK, (wg, 0))
                mma(acc, mine_a, b_s)
            warpgroup.mma_async_wait(acc)
        row = bm
        if sliced:   # warpgroup 1's partial, through shared memory, added to warpgroup 0's
            with tkc.if_(wg == 1):
                warpgroup.store(part, acc, (0, 0))
            tkc.sync()
            acc = acc + warpgroup.load(rt(f32, 16, BN), part, (0, 0))
            if vec is not None:
                acc = add_bias(acc)
        if band:   # reduce-scatter: warp w's rows to CTA w, which adds the three partials of them
            for d in range(1, split):
                with tkc.if_(tkc.warpid() == (r + d) % split):
                    store(mine[d - 1], acc, (0, 0))
            tkc.fence_async()
            tkc.sync()
            with tkc.if_(tkc.warpid() == 0):
                tma.expect(got, *theirs)
                for d in range(1, split):
                    tma.store_cta(theirs[d - 1], mine[d - 1], peer((r + d) % split), got)
            tkc.wait(got, 0)
            for t in theirs:   # every warp adds (a warp loads alone); warp r's sums are the ones stored
                acc = acc + load(rt(f32, 16, acc_cols), t, (0, 0))
            if vec is not None:
                acc = add_bias(acc)
        elif split > 1:   # swap the partial tiles with the peer and add its own
            put(mine, acc)
            tkc.fence_async()   # the writes, before the copy engine reads them
            tkc.sync()
            with tkc.if_(tkc.warpid() == 0):
                tma.expect(got, theirs)
                tma.store_cta(theirs, mine, peer(1 - r), got)
            tkc.wait(got, 0)
            acc = acc + (load(rt(f32, 16, BN), theirs, (0, 0)) if BM == 16 and not swap
                         else warpgroup.load(rt(f32, 16, acc_cols), theirs, (wg, 0)))
            if vec is not None:
                acc = add_bias(acc)
            row = bm + r * tkc.cdiv(c.r, BM)   # CTA 1's stores land past C: TMA writes nothing

        def finish(g, y, j, n):
            """Columns j of the tile (swap: rows j of C, columns j of the
            accumulator, transposed) to g, through finish tile n % buffers."""
            out = c_s[n % buffers]
            if swap:   # each warp's 16 columns of C (band: warp r's)
                put(out, transpose(y.to(out_dtype)), swapped=True)
                tma.store(g, out, (*ac, row * (BM // epi) + j, bn * split + r if band else bn))
                return
            put(out, y.to(out_dtype))   # (band: warp r's 16 rows, a 16-row finish tile of C)
            tma.store(g, out, (*ac, row * split + r if band else row, bn * (out_cols // epi) + j))

        if gated:   # C's columns j: gate columns j, times the up ones BN / 2 further
            for j in range(out_cols // epi):
                gate, up = subtile(acc, 16, epi, (0, j)), subtile(acc, 16, epi, (0, j + out_cols // epi))
                if preact:
                    finish(z, gate, j, 3 * j)
                    finish(z_up, up, j, 3 * j + 1)
                finish(c, act(gate) * up, j, 3 * j + 2 if preact else j)
        for j in range(0 if gated else acc_cols // epi):
            y = subtile(acc, 16, epi, (0, j))
            if preact:  # z, then y = act(z): both from the f32 values, each rounded once
                finish(z, y, j, 2 * j)
                finish(c, act(y), j, 2 * j + 1)
            else:
                finish(c, act(y) if act else y, j, j)
        if split > 1:
            tkc.cluster_sync()   # no CTA leaves while the peer may still copy from it

    if gated and preact:
        def gemm(a: A, b: B, b_up: B, c: C, z: C, z_up: C):
            body(a, b, c, None, z, b_up, z_up)
    elif gated:
        def gemm(a: A, b: B, b_up: B, c: C):
            body(a, b, c, None, None, b_up)
    elif bias and preact:
        def gemm(a: A, b: B, bias: V, c: C, z: C):
            body(a, b, c, bias, z)
    elif bias:
        def gemm(a: A, b: B, bias: V, c: C):
            body(a, b, c, bias, None)
    elif preact:
        def gemm(a: A, b: B, c: C, z: C):
            body(a, b, c, None, z)
    else:
        def gemm(a: A, b: B, c: C):
            body(a, b, c, None, None)

    n = max(cluster, split)   # CTAs a cluster along x
    cols = ((lambda c: tkc.cdiv(c.c, out_cols * cluster) * n) if n > 1   # noqa: E731   (whole clusters)
            else (lambda c: tkc.cdiv(c.c, out_cols)))
    rows = ((lambda c: tkc.cdiv(c.r, BM * cluster_m) * cluster_m) if cluster_m > 1   # noqa: E731
            else (lambda c: tkc.cdiv(c.r, BM)))
    grid = ((lambda c: (cols(c), rows(c), c.d)) if batched
            else (lambda c: (cols(c), rows(c))))
    warps = 8 if sliced else 4 * max(1, acc_rows // 64)   # the consumers (tk-pipeline-staging adds the producer)
    if n * cluster_m > 1 and not persistent:
        return tkc.kernel(name=name, warps=warps, grid=grid, cluster=(n, cluster_m, 1))(gemm)
    return tkc.kernel(name=name, warps=warps, persistent=persistent, order=order, grid=grid,
                      cluster=(cluster, 1, 1))(gemm)
