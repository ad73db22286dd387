"""The FP8 GEMM as a PyTorch op: tkc.scaled_mm, torch._scaled_mm's product.

    c = tkc.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)

a [M, K] float8_e4m3fn row-major, b [K, N] float8_e4m3fn column-major (b.t()
contiguous: K-major, what FP8 wgmma reads; torch._scaled_mm takes it so);
scale_a and scale_b f32, either one element each (per tensor) or scale_a
[M, 1] and scale_b [1, N] (row-wise); c = (a @ b) * scale_a * scale_b in f32,
rounded once to out_dtype (bf16 or f32); use_fast_accum as torch's. K must be a multiple of 16 (rows of
16 bytes, for TMA), N of 8 (C's rows); M is free. Forward only (as
torch._scaled_mm). The kernel: tkc/kernels/scaled_mm_hopper.py, its tile
width BN tuned per shape with use_fast_accum (tkc.scaled_mm.fast_tile), its
height BM (128 or 192) without (tkc.scaled_mm.tile).

Block scales (DeepSeek-V3's, torch's ScalingType.BlockWise1x128 for a and
BlockWise128x128 for b, recognised by their shapes and strides as torch
does): scale_a [M, K/128] with strides (1, M) (stored transposed, [K/128, M]
contiguous: what tkc.quantize_fp8 returns), scale_b [K/128, ceil(N/128)]
with strides (1, K/128) (b's blocks of 128 rows of K x 128 columns of N,
stored as a contiguous [ceil(N/128), K/128]); K a multiple of 128;
c[m, n] = sum over kb of (a_kb @ b_kb)[m, n] * scale_a[m, kb] * scale_b[kb, n // 128].
The kernel: tkc/kernels/scaled_mm_blockwise.py (always promoted: the block
scales are applied where each K step's partial joins the accumulator, so
use_fast_accum=True is refused). Shapes that fit two kinds mean the same
product (e.g. M = 1, K = 128, N <= 128: per tensor), so the first that fits
is taken: per tensor, row-wise, blocks.
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.scaled_mm_blockwise import scaled_mm_blockwise
from ..kernels.scaled_mm_hopper import FAST_WIDTHS, HEIGHTS, PROMOTED_BN, scaled_mm_hopper
from ..runtime.callsite import caller
from ..tune import autotune, bucket
from .checks import check_device, check_flags, check_tensor
from .eager import Op, plain_key, public
from .plans import PlanCache, signature, sms

__all__ = ["scaled_mm"]
E4M3, F32 = torch.float8_e4m3fn, torch.float32
OUT = {torch.bfloat16: "bf16", torch.float32: "f32"}


@functools.lru_cache(maxsize=None)
def _kernel(out: str, rowwise: bool, BN: int = 256, fast: bool = False, BM: int = 128):
    return scaled_mm_hopper(out, rowwise, BN=BN, fast_accum=fast, BM=BM)


@functools.lru_cache(maxsize=None)
def _block_kernel(out: str, BM: int = 128):
    return scaled_mm_blockwise(out, BM=BM)


BLOCK = 128   # the block scales' extent along K (and along N for b)


def _scaling(M: int, N: int, K: int, sa: Tensor, sb: Tensor) -> str | None:
    """"tensor", "rowwise" or "block" as the scales' shapes (and, for blocks,
    strides: torch's layouts) say, the first that fits; None if none does."""
    if sa.numel() == 1 and sb.numel() == 1:
        return "tensor"
    if tuple(sa.shape) == (M, 1) and tuple(sb.shape) == (1, N):
        return "rowwise"
    KB, NB = -(-K // BLOCK), -(-N // BLOCK)
    if K % BLOCK == 0 and tuple(sa.shape) == (M, KB) and tuple(sb.shape) == (KB, NB) \
            and _strides(sa, (1, M)) and _strides(sb, (1, KB)):
        return "block"
    return None


def _strides(t: Tensor, want: tuple) -> bool:
    """t's strides are `want` where its dims are longer than 1 (torch's check_size_stride)."""
    return all(n == 1 or s == w for n, s, w in zip(t.shape, t.stride(), want))


def _key(a, b, sa, sb, c) -> tuple:
    """What the tile width depends on: C's rows and columns (_mn_key)."""
    return _mn_key(c.shape[-2], c.shape[-1])


MANY = 32   # waves of 128-row items from which the key is one: the taller tile's share wins


def _height_key(M: int, N: int, sm_count: int) -> tuple:
    """What the tile height depends on: how many waves (one work item an SM:
    the blocks are persistent) C's items make at each height, for each wave
    takes one item's time, full or not. A 192-row item does 1.5x a 128-row
    one's work in ~1.3x its time (H200, block scales, K 7168), so 192 wins
    unless its waves round up worse: M 2100 x N 4096, 5 waves of 128 against
    3 of 192, ran 139 against 111 µs, M 1000 (2 waves either way) 60 against
    75. Power-of-two buckets of M could not tell those apart. From MANY
    waves of 128 rows on, one key."""
    cols = -(-N // PROMOTED_BN)
    waves = tuple(-(-(-(-M // h) * cols) // sm_count) for h in HEIGHTS)
    return waves if waves[0] <= MANY else (MANY + 1,)


def _tile_key(a, b, sa, sb, c) -> tuple:
    return _height_key(c.shape[-2], c.shape[-1], sms(c.device))


def _mn_key(M: int, N: int) -> tuple:
    return bucket(M), bucket(N)


def _example(m: int, n: int):
    return lambda: [torch.randn(m, 4096, device="cuda").to(E4M3).view(1, 1, m, 4096),
                    torch.randn(n, 4096, device="cuda").to(E4M3).view(1, 1, n, 4096),
                    torch.ones(1, 1, 1, 1, device="cuda"), torch.ones(1, 1, 1, 1, device="cuda"),
                    torch.empty(1, 1, m, n, device="cuda", dtype=torch.bfloat16)]


def _examples() -> list:
    return [_example(m, n) for m in (1024, 2048, 4096, 8192) for n in (1024, 4096, 8192)]


WIDTHS = (4096, 7168, 8192, 2048, 1024, 3072, 6144, 5120, 12288, 16384)   # C's columns, common first


def _height_shapes(sm_count: int) -> list:
    """One C (rows, columns) per key of _height_key on a GPU of sm_count SMs: the
    middle of the rows (64-row steps up to 16k: both heights' item counts
    change only there) that make the key, at the first width that has it,
    WIDTHS before the other multiples of 128 up to 16k."""
    found: dict = {}
    for n in (*WIDTHS, *range(128, 16385, 128)):
        for m in range(64, 16385, 64):
            found.setdefault(_height_key(m, n, sm_count), {}).setdefault(n, []).append(m)
    return [(rows[len(rows) // 2], n) for by_n in found.values() for n, rows in list(by_n.items())[:1]]


def _height_examples() -> list:
    return [_example(m, n) for m, n in _height_shapes(sms(torch.device("cuda")))]   # K 4096


# use_fast_accum's tile width, tuned per GPU (tkc/tune/tables), as
# tkc.matmul's. The promoted kernel is 128 wide: its second accumulator
# leaves no registers for wider tiles (scaled_mm_hopper). 192 wide: no key of
# the H200's table picked it (12 keys: 256 at 10, 128 at 2), so it went.
FAST_TILE = autotune(space={"BN": list(FAST_WIDTHS)}, key=_key, name="tkc.scaled_mm.fast_tile",
                     examples=_examples)(lambda BN: _kernel("bf16", False, BN, True))

# The promoted kernels' tile height (per-tensor, row-wise and block scales
# alike: one structure, tuned on the per-tensor one): 192 rows (three
# consumer warpgroups) share each 128-wide B tile among more output, 128 make
# more items where C is small; keyed by the waves each height makes
# (_height_key), so an untuned key takes 128.
TILE = autotune(space={"BM": list(HEIGHTS)}, key=_tile_key, name="tkc.scaled_mm.tile",
                examples=_height_examples)(lambda BM: _kernel("bf16", False, PROMOTED_BN, False, BM))


def _plan(a: Tensor, b: Tensor, sa: Tensor, sb: Tensor, out_dtype, fast: bool):
    M, N = a.shape[0], b.shape[1]
    kind = _scaling(M, N, a.shape[1], sa, sb)
    rowwise = kind != "tensor"
    if a.numel() == 0 or b.numel() == 0:
        return lambda a, b, sa, sb: torch.zeros(M, N, device=a.device, dtype=out_dtype)
    bm = 128 if fast else TILE.choose(_height_key(M, N, sms(a.device)))["BM"]
    if kind == "block":
        return _block_plan(a, b, sa, sb, out_dtype, bm)
    bn = FAST_TILE.choose(_mn_key(M, N))["BN"] if fast else PROMOTED_BN
    c = torch.empty(M, N, device=a.device, dtype=out_dtype)
    views = lambda a, b, sa, sb: (a.view(1, 1, M, -1), b.t().view(1, 1, N, -1),  # noqa: E731
                                  sa.reshape(1, 1, 1, -1), sb.reshape(1, 1, 1, -1))
    launch = _kernel(OUT[out_dtype], rowwise, bn, fast, bm).prepare(*views(a, b, sa, sb), c.view(1, 1, M, N))

    def run(a, b, sa, sb):   # (a prepared launch reads the data pointers alone: no views)
        c = torch.empty(M, N, device=a.device, dtype=out_dtype)
        launch(a, b, sa, sb, c)
        return c
    return run


def _block_plan(a: Tensor, b: Tensor, sa: Tensor, sb: Tensor, out_dtype, bm: int):
    """The block-scaled kernel's launch: the scales as the transposed
    contiguous tensors they are stored as (sa.t() [K/128, M], sb.t()
    [ceil(N/128), K/128]), no copies unless their rows are not 16 bytes
    (M or K/128 not a multiple of 4: tma_scales)."""
    M, N = a.shape[0], b.shape[1]
    views = lambda a, b, sa, sb: (a.view(1, 1, M, -1), b.t().view(1, 1, N, -1),  # noqa: E731
                                  tma_scales(sa.t()).view(1, 1, -1, M + -M % 4), tma_scales(sb.t())[None, None])
    c = torch.empty(M, N, device=a.device, dtype=out_dtype)
    launch = _block_kernel(OUT[out_dtype], bm).prepare(*views(a, b, sa, sb), c.view(1, 1, M, N))

    def run(a, b, sa, sb):
        c = torch.empty(M, N, device=a.device, dtype=out_dtype)
        launch(*views(a, b, sa, sb), c.view(1, 1, M, N))
        return c
    return run


def tma_scales(t: Tensor) -> Tensor:
    """Block scales stored transposed, t [..., rows, n] (scale_a's [K/128, M],
    scale_b's [ceil(N/128), K/128]), as the block-scaled kernels' TMA reads
    them (scaled_mm_blockwise.py: they ride the ring with the operands' tiles):
    t itself when its rows are 16 bytes (n a multiple of 4) and it is 16-byte
    aligned, the usual case; else a copy with its rows padded with zeros."""
    n = t.shape[-1]
    if n % 4 == 0 and t.data_ptr() % 16 == 0:
        return t
    padded = t.new_zeros(*t.shape[:-1], n + -n % 4)
    padded[..., :n] = t
    return padded


_plans = PlanCache(_plan)
_plain = PlanCache()   # an eager call's key (eager.plain_key) -> its plan's run


def _impl(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype,
          use_fast_accum: bool) -> Tensor:
    return _plans((signature(a, b, scale_a, scale_b), out_dtype, use_fast_accum), a, b, scale_a, scale_b,
                  out_dtype, use_fast_accum)(a, b, scale_a, scale_b)


def _fake(a, b, scale_a, scale_b, out_dtype, use_fast_accum):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


_scaled_mm = Op("tkc::scaled_mm", _impl, _fake)


@public
def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor,
              out_dtype: torch.dtype = torch.bfloat16, use_fast_accum: bool = False) -> Tensor:
    """(a @ b) * scale_a * scale_b for a [M, K] e4m3 row-major and b [K, N] e4m3
    column-major (b.t() contiguous), f32 scales per tensor (one element each)
    or row-wise (scale_a [M, 1], scale_b [1, N]) or in blocks (scale_a
    [M, K/128] of 1x128 blocks, strides (1, M); scale_b [K/128, ceil(N/128)]
    of 128x128 blocks, strides (1, K/128); K a multiple of 128), out_dtype
    bf16 or f32: the semantics of torch._scaled_mm. K a multiple of 16, N of 8.
    use_fast_accum=True (as torch's): the wgmmas accumulate into the result
    directly, in their reduced precision, faster; False (the default):
    promoted into f32 every 128 of K, the accuracy of torch's default."""
    key = plain_key((out_dtype, use_fast_accum), a, b, scale_a, scale_b)
    run = _plain.get(key)
    if run is not None:   # a repeated eager call: the key fixes what the checks read
        return run(a, b, scale_a, scale_b)
    fn = "scaled_mm"
    check_flags(fn, use_fast_accum=use_fast_accum)
    check_tensor(fn, "a", a, 2, "[M, K]", (E4M3,))
    check_tensor(fn, "b", b, 2, "[K, N]", (E4M3,))
    check_tensor(fn, "scale_a", scale_a, None, "", (F32,))
    check_tensor(fn, "scale_b", scale_b, None, "", (F32,))
    (M, K), N = a.shape, b.shape[1]
    if b.shape[0] != K:
        raise TkcError(f"{fn}: b must be [K, N] with a's K = {K}, got shape {tuple(b.shape)}", caller())
    if out_dtype not in OUT:
        raise TkcError(f"{fn}: out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}",
                       caller())
    if K % 16 or N % 8:
        raise TkcError(f"{fn}: K = {K} must be a multiple of 16 and N = {N} of 8 (TMA moves rows of "
                       f"16 bytes: 16 e4m3 of a and b, 8 bf16 of the result)", caller())
    if a.stride() != (K, 1):
        raise TkcError(f"{fn}: a must be row-major (contiguous [M, K]), got strides {a.stride()}",
                       caller())
    if b.stride() != (1, K):
        raise TkcError(f"{fn}: b must be column-major, b.t() a contiguous [N, K] (FP8 wgmma reads "
                       f"both operands K-major), got strides {b.stride()}: pass b.t().contiguous().t()",
                       caller())
    kind = _scaling(M, N, K, scale_a, scale_b)
    if kind is None:
        _explain_scales(fn, M, N, K, scale_a, scale_b)
    if kind != "block" and not (scale_a.is_contiguous() and scale_b.is_contiguous()):
        raise TkcError(f"{fn}: scales must be contiguous", caller())
    if kind == "block" and use_fast_accum:
        raise TkcError(f"{fn}: block scales are applied where each K step's partial sum joins the f32 "
                       f"accumulator (promotion): use_fast_accum=True has no block-scaled kernel", caller())
    check_device(fn, ("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b))
    if key is not None:   # eager: the plan at once next time
        run = _plans((signature(a, b, scale_a, scale_b), out_dtype, bool(use_fast_accum)), a, b, scale_a,
                     scale_b, out_dtype, bool(use_fast_accum))
        _plain.keep(key, run)
        return run(a, b, scale_a, scale_b)
    return _scaled_mm(a, b, scale_a, scale_b, out_dtype, bool(use_fast_accum))


def _explain_scales(fn: str, M: int, N: int, K: int, sa: Tensor, sb: Tensor) -> None:
    """The located error for scales that fit no kind (_scaling)."""
    KB, NB = K // BLOCK, -(-N // BLOCK)
    if tuple(sa.shape) == (M, -(-K // BLOCK)) and tuple(sb.shape) == (-(-K // BLOCK), NB):
        if K % BLOCK:
            raise TkcError(f"{fn}: block scales cover 128 of K: K = {K} must be a multiple of 128", caller())
        raise TkcError(f"{fn}: block scales must be stored transposed (torch's layout): scale_a "
                       f"[{M}, {KB}] with strides (1, {M}) and scale_b [{KB}, {NB}] with strides (1, {KB}), "
                       f"got strides {sa.stride()} and {sb.stride()} (tkc.quantize_fp8 returns scale_a "
                       f"so; else pass s.t().contiguous().t())", caller())
    raise TkcError(f"{fn}: scales must be one element each (per tensor), scale_a [M, 1] = [{M}, 1] and "
                   f"scale_b [1, N] = [1, {N}] (row-wise), or blocks: scale_a [M, K/128] = "
                   f"[{M}, {-(-K // BLOCK)}] and scale_b [K/128, ceil(N/128)] = [{-(-K // BLOCK)}, {NB}], "
                   f"got {tuple(sa.shape)} and {tuple(sb.shape)}", caller())
