"""tkc.matmul's schedule space (tkc.torchops.gemm's TILE tunes it; the
library builds every schedule it keeps: tkc.kernels.GEMM_SCHEDULES).

C's schedule, tuned per GPU (tkc/tune/tables): the tile width BN (wider
tiles do more work per byte loaded, narrower ones make more work items where
a wide tile's would leave SMs idle in a wave); the cluster along C's columns
whose CTAs share A's tile by TMA multicast (cluster 2: half of A's loads from
L2 a CTA); whether blocks are persistent (one per SM, looping over work
items) or one per tile, which starts ~0.4 µs sooner where the items fit in one
wave (H200, 2048^3: 24.7 against 25.1 µs); and split-K (split 2: a tile's two
CTAs each sum half of K and add the partials through distributed shared
memory; split 4, of the one-warpgroup tiles: four CTAs, a quarter each), for C
of fewer tiles than SMs (H200, graph-timed against cuBLAS at K 4096: 384 x 256
0.54 -> 1.22 and 150 x 1280 0.75 -> 1.06 at split 4; it loses where its four
times the blocks take more than one wave: 777 x 1536 23.6 against 43.6 µs); swap (C's rows on wgmma's N:
gemm_hopper's docstring), whose tile is swap_rows(M) high, for C whose last
128-row tile would be mostly empty (H200, graph-timed against cuBLAS: 777 x
4096^2 0.83 -> 0.99, 300 x 4096^2 0.61 -> 1.00 at BN 64); the tile's height BM, 128, 64
or 16 (C of few rows: a 128-row tile would stream B at half the rate, its
second half zeros; BM 16 loads only A's 16 rows, gemm_hopper's docstring),
64 and 16 with one block a tile of up to 128 columns, or 32, which only
they take (BN 32: N / 32 blocks to stream B with), or 16 (BM 16 only: a
narrow C, 16 x 1024, has 64 tiles of 16 columns); cluster_m 2, pairs of
64 x 128 blocks along C's rows that share B's tile (multicast down the
cluster's column; unsplit or split 2, not persistent), for C of few row
blocks, whose B loads bound them: 206 of the H200's 4109 keys pick
it (12-02, TILE.tune against each key's pick, >= 3% faster and no slower in
CUDA graphs over rotating inputs: there 1.13x the old pick, median, 1.01-1.49;
C of 128-512 rows x 1280-4096 columns, 640-2048 x 256-1536, 2560-4096 x 256);
other tiles in pairs, and clusters of 4, ran slower (2x where four CTAs do not
co-reside), and so did 2 x 2 and 4 x 2 clusters sharing A along x and B along y
(64-128 x 64-128 tiles, H200, 12-02, 9 C of 64-1500 rows: 0.23-0.82 of cuBLAS where
the picks ran 0.74-0.96); sliced-K (gemm_hopper's sliced: a 64-row tile's two consumer
warpgroups each take half of every 128-deep K step, BN 64 or 128, one block a tile), for C
of few row blocks: 29 of the H200's keys pick it (12-02, each key's pick against sliced BN
64 and 128 over the 960 aligned keys of up to 2048 x 8192: >= 3% faster with a cold L2 and
no slower in CUDA graphs with a warm one; there 1.13x the old pick, median, 1.01-1.59, and
0.84 -> 0.94 of cuBLAS; C of 176-1344 rows x 768-3840 columns); of the 960 misaligned keys
7 won cold, 1 of them warm (1.003x): none picks it; in pairs along C's rows (cluster_m 2)
it won 2 of the aligned 960, not kept (ncu, locked clocks, 12-02, 672 x 1536 x 4096:
sliced BN 128 20.7 µs at 61% of the SMs' throughput, unsliced 27.2 at 45%, cuBLAS's
128 x 64 tiles of two consumer warpgroups in 2-CTA clusters 19.2 at 67%; sliced BN 64
37%). Tuned with A B; the other products
and tkc.linear take the same schedule for their C. Pruned, so the library
does not build them: 2-CTA clusters of the narrow tiles, which never won (H200
probe at 3000^3, 1024^3, 777x4096^2, 8000x8008x4000; at 128-777 x 1536-4096 x 4096,
12-02, BM 64 in clusters of 2 and 4, A multicast: 0.39-0.90 of cuBLAS where the picks
ran 0.74-1.02; ncu: cuBLAS's 64x64 tiles at 256 x 1536 run in clusters of 8, 4 x 2,
which can share B along M too, where tk-pipeline-staging's share A along x), clusters
of blocks that are not persistent (no faster than persistent ones there), and split-K but
for blocks of BN <= 128 that are not persistent (gemm_hopper's rule), and
for swapped tiles but the one-warpgroup ones (split 2 up to SWAP_SPLIT_MAX
high); split 4 of the 128-row tiles (two warps' rows a CTA: tried) won 44 of 1656 keys
by a median 1.04x on the H200, not worth their 30 kernels; BN 32 and 16 unsplit, which
no key of the H200's table picks (their 45 kernels); swapped tiles in 2-CTA clusters
(H200, 2026-11-30, heights 112-240: 777x4096^2 39.7 against the pick's 39.8 µs, 200x11000x4000
39.3 against 38.8, 777x1536x4096 21.8 against 23.4, slower at 256-1536 rows: 7% at a few
keys was not worth a schedule's 15 library kernels untuned across the rest). Not
built: swapped tiles stepping 8 rows short of their height (wgmma N = height - 8, 777 rows
in 200-row steps as cuBLAS's): the swapped kernel's time is its rows' (H200, 12-02, 4 x 32
items at heights 176-224: 45.3-47.9 ns a row of C), so 200 of 208 would run 777 x 4096^2
at ~36.5 against cuBLAS's 35.5 µs (0.97; 208: 37.4, 0.95), not worth its DSL extents;
192-row tiles (three consumer warpgroups; cuBLAS runs 192 x 192 at 3000^3), H200, 12-01,
3000^3: 192 x 192 95.0 µs, 192 x 128 115.9, against the pick's 91.3 and
cuBLAS's 84.8; in a 2-CTA cluster 192 x 192 spills, 192 x 256 does not fit. Nor
split-K through global memory (each CTA's f32 partial TMA-added into a workspace,
the tile's last CTA, by an atomic count, loading it back to store C: any tile and
split; H200, 2026-12-02, a lab prototype, graphs against cuBLAS: 256 x 1536 x 4096
17.3 µs at 128 x 128 split 4, against the pick's 13.9 and cuBLAS's 10.5; 777 x 1536
34.6 against 23.3 and 17.7: the last CTA's round trip through L2; persistent, each
SM looping over (tile, K part) units, split 2 or 3: 0.31-0.57 of cuBLAS at 1152 x 9216,
3000^3, 777 x 11008 x 4096, 2048^3 and 4096^3, where tkc.matmul's picks ran 0.84-1.01). Timed
with a cold L2: a decode step's weights come from HBM (16x4096x4096 hot:
BN 32 split-K best, cold: BN 64 split-K, 12.0 against 14.1 µs).
"""
from __future__ import annotations

import itertools

from .gemm_hopper import SWAP_HEIGHTS, SWAP_SPLIT_MAX, SWAP_TILES

# the default (each list's first value) first: the tile of large C
SPACE = {"BN": [256, 192, 128, 64, 32, 16], "cluster": [1, 2], "persistent": [True, False],
         "split": [1, 2, 4], "BM": sorted({128, 64, 16, *SWAP_HEIGHTS}, key=lambda h: (h != 128, h)),
         "swap": [False, True], "cluster_m": [1, 2], "sliced": [False, True]}


def pruned(c: dict) -> bool:
    """The schedules the space drops (the module docstring says why)."""
    if c["sliced"] and (c["BM"] != 64 or c["BN"] not in (64, 128) or c["persistent"] or c["split"] > 1
                        or c["cluster"] > 1 or c["cluster_m"] > 1 or c["swap"]):
        return True
    if c["cluster_m"] > 1 and (c["BM"] != 64 or c["BN"] != 128 or c["persistent"] or c["split"] > 2
                               or c["swap"] or c["cluster"] > 1):
        return True
    if c["swap"]:   # the swapped tiles gemm_hopper.SWAP_TILES names, at each height; split: the narrow one
        return c["BM"] not in SWAP_HEIGHTS or (c["BN"], c["persistent"]) not in SWAP_TILES \
            or c["cluster"] > 1 or c["split"] > 1 and (c["BN"] != 64 or c["split"] == 2 and c["BM"] > SWAP_SPLIT_MAX)
    return (c["BM"] not in (128, 64, 16)
            or c["cluster"] > 1 and (c["BN"] < 192 or not c["persistent"] or c["split"] > 1)
            or c["split"] > 1 and (c["BN"] > 128 or c["persistent"]) or c["split"] == 4 and c["BM"] != 64
            or c["BM"] < 128 and (c["BN"] > 128 or c["persistent"] or c["cluster"] > 1)
            or c["BN"] == 32 and c["BM"] == 128 or c["BN"] == 16 and c["BM"] != 16
            or c["BN"] <= 32 and c["split"] == 1)   # BN 32 and 16 won only split (H200, every key)


# every schedule the space keeps, as gemm_hopper's keyword arguments ({"BN": 256, "cluster": 1, ...})
SCHEDULES = tuple(c for c in (dict(zip(SPACE, v)) for v in itertools.product(*SPACE.values())) if not pruned(c))


def label(s: dict) -> str:
    """A schedule as reports and test ids name it: "BN 128 BM 64 split 2 cluster_m 2"."""
    flags = [f"{k} {s[k]}" for k in ("cluster", "split", "cluster_m") if s[k] > 1]
    flags += [k for k in ("persistent", "swap", "sliced") if s[k]]
    return " ".join([f"BN {s['BN']} BM {s['BM']}", *flags])


def pruned_gated(c: dict) -> bool:
    """pruned's, and the schedules a gated tile (tkc.swiglu's) cannot take:
    gemm_hopper's rule, not swapped and BN a multiple of 32; and not in
    clusters along C's rows (untried there)."""
    return pruned(c) or c["swap"] or c["BN"] % 32 != 0 or c["cluster_m"] > 1 or c["sliced"]


# ... and of those a gated tile takes
GATED_SCHEDULES = tuple(c for c in SCHEDULES if not pruned_gated(c))
