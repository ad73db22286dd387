"""Philox4x32-10 (Salmon et al., SC'11), the counter-based generator of curand,
PyTorch's CUDA RNG and Triton's tl.rand: numpy reference and constants.

tkc's random numbers (`tk.rand`, docs/tile-ir.md "Random numbers") number the
elements of a tensor, element e: key (seed, 0), counter (n, n >> 32, offset,
0) with n = e // 4, output word e % 4, as a float u / 2^32 rounded down to 24
bits: (u >> 8) * 2^-24 in [0, 1). The interpreter computes it here; the
lowering emits the same rounds (tkc/lowering/random.py). Pure numpy: no MLIR.
"""
from __future__ import annotations

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57   # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85   # key schedule (golden ratio, sqrt(3) - 1)
ROUNDS = 10
MASK = 0xFFFFFFFF


def philox4x32(counter, key, rounds: int = ROUNDS) -> tuple:
    """The 4 output words for counters (c0, c1, c2, c3) and key (k0, k1):
    arrays (broadcast) of uint32 values, as uint64 arrays below 2^32."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) & MASK for c in counter)
    k0, k1 = (np.asarray(k, np.uint64) & MASK for k in key)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = c0 * np.uint64(M0), c2 * np.uint64(M1)  # exact: both factors < 2^32
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & MASK, p1 >> np.uint64(32), p1 & MASK
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def uniform(seed: int, offset: int, elements) -> np.ndarray:
    """tk.rand's value for element numbers `elements` (an int array), float32."""
    e = np.asarray(elements, np.int64).astype(np.uint64)
    n = e >> np.uint64(2)
    words = philox4x32((n & MASK, n >> np.uint64(32), np.uint64(offset & MASK), 0), (seed & MASK, 0))
    u = np.choose((e & np.uint64(3)).astype(np.int64), words)
    return ((u >> np.uint64(8)).astype(np.float64) * 2.0 ** -24).astype(np.float32)
