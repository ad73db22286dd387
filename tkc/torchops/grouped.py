"""The grouped block-scaled FP8 GEMM for mixture-of-experts as a PyTorch op:
tkc.grouped_scaled_mm, DeepGEMM's two layouts in torch._scaled_mm's
conventions (e4m3 operands, f32 block scales stored transposed, b
column-major per expert).

    c = tkc.grouped_scaled_mm(a, b, scale_a, scale_b, groups)

b [E, K, N] (b[e] column-major: b.transpose(1, 2) a contiguous [E, N, K])
with 128x128 scales scale_b [E, K/128, ceil(N/128)] (scale_b.transpose(1, 2)
contiguous), K a multiple of 128, N of 8. a's layout is told by its rank:

- contiguous (2-D a, prefill): a [M, K] holds every expert's rows, each
  expert's padded to a multiple of 128 (M a multiple of 128); scale_a
  [M, K/128] with strides (1, M) (tkc.quantize_fp8's); groups [M/128] int32,
  the expert of each block of 128 rows (-1: padding only; such a block's
  rows of c, and those of a block naming no expert, are not written).
  c [M, N], row r = a[r] @ b[groups[r // 128]] with the block scales.
- contiguous by counts (2-D a and `counts=`): a [M, K] holds expert e's
  counts[e] rows right after expert e - 1's (from row 0; each count a
  multiple of 4: an expert padded to 4 rows, not 128; rows past their sum
  not written); counts int32 [E] on the device (a router's token counts),
  checked where they can be read (not under CUDA-graph capture or
  torch.compile: a sync, as attention_varlen's offsets). c [M, N]. Its
  tiles are 128 or 192 rows (tuned), each expert's from its first row on:
  the 192-row tiles the row blocks' layout cannot take.
- masked (3-D a, decode under CUDA graphs): a [E, max_m, K], scale_a
  [E, max_m, K/128] with strides (K/128 * max_m, 1, max_m) (each expert's
  transposed); groups [E] int32, the rows in use of each expert (read on
  the device). c [E, max_m, N]: rows below groups[e] are a[e] @ b[e] with
  the block scales; row blocks (of 128 or 192 rows: the tile's height,
  tuned) wholly past them are not written, the rest of a live block's rows
  hold what a's rows there give.

Forward only. The kernels: tkc/kernels/scaled_mm_grouped.py.
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.scaled_mm_grouped import ALIGN, grouped_contiguous, grouped_counts, grouped_masked
from ..kernels.scaled_mm_hopper import HEIGHTS
from ..runtime.callsite import caller
from ..tune import autotune, bucket
from .checks import check_device, check_tensor
from .eager import Op, plain_key, public, readable
from .plans import PlanCache, signature
from .scaled import tma_scales

__all__ = ["grouped_scaled_mm"]
E4M3, F32, I32 = torch.float8_e4m3fn, torch.float32, torch.int32
OUT = {torch.bfloat16: "bf16", torch.float32: "f32"}
BLOCK = 128


@functools.lru_cache(maxsize=None)
def _kernel(out: str, layout: str, BM: int = BLOCK):
    """The kernel of a layout: "blocks" (contiguous by row blocks), "counts" or "masked"."""
    if layout == "blocks":
        return grouped_contiguous(out)
    return (grouped_masked if layout == "masked" else grouped_counts)(out, BM=BM)


def _height_key(a, b, *_) -> tuple:
    """A masked or counts kernel's gls: power-of-two buckets of a's rows (masked: max_m, how
    many rows an expert may have, the counts being on the device; by counts: all experts'
    rows) and of N."""
    return bucket(a.shape[-2]), bucket(b.shape[-2])


MASKED_SHARES = (0.7, 0, 0.37, 0.18, 0.54, 0, 0.09, 1.0)   # the examples' counts: shares of max_m


def _masked_examples() -> list:
    """8 experts, two empty, the others' counts MASKED_SHARES of max_m; K 4096.
    The rows past the counts are zeros (a's and c's), so every height writes
    the same c."""
    def make(max_m, n, k=4096):
        def args():
            E, dev = len(MASKED_SHARES), "cuda"
            live = torch.arange(max_m, device=dev)[None, :] < torch.tensor(
                [int(f * max_m) for f in MASKED_SHARES], device=dev)[:, None]
            a = (torch.randn(E, max_m, k, device=dev) * live[..., None]).to(E4M3)
            return [a[None], torch.randn(1, E, n, k, device=dev).to(E4M3),
                    torch.ones(1, E, k // BLOCK, max_m, device=dev),
                    torch.ones(1, E, -(-n // BLOCK), k // BLOCK, device=dev),
                    live.sum(1).to(I32).view(1, 1, 1, E),
                    torch.zeros(1, E, max_m, n, device=dev, dtype=torch.bfloat16)]
        return args
    return [make(m, n) for m in (128, 256, 512, 1024, 2048, 4096, 8192) for n in (2048, 4096, 7168)]


# The masked kernel's tile height, tuned per GPU (tkc/tune/tables): 192 rows
# do 1.5x 128 rows' work in ~1.3x the time (H200) but pad each expert's last
# block further (an untuned key takes 128). The contiguous layout's blocks
# are 128 rows by its definition, so its kernel has that height alone.
MASKED_TILE = autotune(space={"BM": list(HEIGHTS)}, key=_height_key, name="tkc.grouped_scaled_mm.masked_tile",
                       examples=_masked_examples)(lambda BM: _kernel("bf16", "masked", BM))


def _counts_examples() -> list:
    """8 experts, two empty, the others' counts MASKED_SHARES of M / 8 (multiples of ALIGN) back
    to back; K 4096."""
    def make(m, n, k=4096):
        def args():
            E, dev = len(MASKED_SHARES), "cuda"
            count = torch.tensor([int(f * m / E) // ALIGN * ALIGN for f in MASKED_SHARES], device=dev, dtype=I32)
            return [torch.randn(1, 1, m, k, device=dev).to(E4M3), torch.randn(1, E, n, k, device=dev).to(E4M3),
                    torch.ones(1, 1, k // BLOCK, m, device=dev), torch.ones(1, E, -(-n // BLOCK), k // BLOCK, device=dev),
                    count.view(1, 1, 1, E), count.cumsum(0, dtype=I32).view(1, 1, 1, E),
                    torch.zeros(1, 1, m, n, device=dev, dtype=torch.bfloat16)]
        return args
    return [make(m, n) for m in (1024, 2048, 4096, 8192, 16384, 32768) for n in (2048, 4096, 7168)]


# The counts layout's tile height, tuned per GPU as the masked one's (an untuned key takes 128).
COUNTS_TILE = autotune(space={"BM": list(HEIGHTS)}, key=_height_key, name="tkc.grouped_scaled_mm.counts_tile",
                       examples=_counts_examples)(lambda BM: _kernel("bf16", "counts", BM))


def _views(a, b, sa, sb, groups):
    """The kernels' gls: a (1, 1 or E, rows, K), b (1, E, N, K), the scales as stored
    (transposed), groups (1, 1, 1, n)."""
    a4 = a.view(1, 1, *a.shape) if a.dim() == 2 else a.view(1, *a.shape)
    sa4 = tma_scales(sa.t() if sa.dim() == 2 else sa.transpose(1, 2))   # padded if its rows are not 16 bytes
    sa4 = sa4.view(1, *[1] * (3 - sa4.dim()), *sa4.shape)
    bt, sbt = b.transpose(1, 2), tma_scales(sb.transpose(1, 2))
    return a4, bt.view(1, *bt.shape), sa4, sbt[None], groups.view(1, 1, 1, -1)


def _out(a, b, out_dtype):
    return a.new_empty((*a.shape[:-1], b.shape[2]), dtype=out_dtype)


def _plan(a, b, sa, sb, groups, out_dtype, by_counts=False):
    layout = "masked" if a.dim() == 3 else "counts" if by_counts else "blocks"
    if a.numel() == 0 or b.numel() == 0:
        return lambda a, b, sa, sb, groups: _out(a, b, out_dtype).zero_()
    c = _out(a, b, out_dtype)
    # by counts, the experts' row ends too (count's running sum: where each one's rows start);
    # a launch reads a tensor's pointer alone, so its runs pass them 1-D
    ends = (lambda groups: (_ends(groups),)) if layout == "counts" else (lambda groups: ())
    views = (*_views(a, b, sa, sb, groups), *(e.view(1, 1, 1, -1) for e in ends(groups)))
    bm = BLOCK if layout == "blocks" else \
        (MASKED_TILE if layout == "masked" else COUNTS_TILE).choose(_height_key(*views))["BM"]
    launch = _kernel(OUT[out_dtype], layout, bm).prepare(*views, c.view(1, -1, *c.shape[-2:]))
    # the scales read in place (tma_scales padded neither; the key fixes that for later
    # calls): the launch takes the tensors themselves, as it reads their pointers alone
    in_place = views[2].data_ptr() == sa.data_ptr() and views[3].data_ptr() == sb.data_ptr()

    def run(a, b, sa, sb, groups):
        c = _out(a, b, out_dtype)
        if in_place:
            launch(a, b, sa, sb, groups, *ends(groups), c)
        else:
            launch(*_views(a, b, sa, sb, groups), *ends(groups), c.view(1, -1, *c.shape[-2:]))
        return c
    return run


def _ends(counts: Tensor) -> Tensor:
    """Each expert's last row + 1 (the counts' running sum, on the device: one small launch)."""
    return counts.cumsum(0, dtype=I32)


_plans = PlanCache(_plan)
_plain = PlanCache()   # an eager call's key (eager.plain_key) -> its plan's run


def _impl(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, groups: Tensor,
          out_dtype: torch.dtype, by_counts: bool) -> Tensor:
    return _plans((signature(a, b, scale_a, scale_b, groups), out_dtype, by_counts), a, b, scale_a, scale_b,
                  groups, out_dtype, by_counts)(a, b, scale_a, scale_b, groups)


def _fake(a, b, scale_a, scale_b, groups, out_dtype, by_counts):
    return _out(a, b, out_dtype)


_grouped = Op("tkc::grouped_scaled_mm", _impl, _fake)


@public
def grouped_scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, groups: Tensor | None = None,
                      out_dtype: torch.dtype = torch.bfloat16, *, counts: Tensor | None = None) -> Tensor:
    """Each expert's rows of a times its b[e], block-scaled FP8 (1x128 scales for a, 128x128
    for b): contiguous if a is [M, K] (groups: the expert of each 128-row block; or counts=:
    each expert's rows, back to back), masked if a is [E, max_m, K] (groups: each expert's row
    count). Layouts in the module's docstring."""
    by_counts = counts is not None
    rows_of = counts if by_counts else groups
    key = plain_key((out_dtype, by_counts), a, b, scale_a, scale_b, rows_of)
    run = _plain.get(key)
    if run is not None:   # a repeated eager call: the key fixes what the checks read (not counts' values)
        if by_counts:
            _check_counts(counts, a.shape[0])
        return run(a, b, scale_a, scale_b, rows_of)
    fn = "grouped_scaled_mm"
    if by_counts and groups is not None:
        raise TkcError(f"{fn}: give groups (row blocks' experts, or the masked layout's counts) or counts= (the "
                       f"contiguous layout by counts), not both", caller())
    if rows_of is None:
        raise TkcError(f"{fn}: groups is needed (or counts= for the contiguous layout by counts)", caller())
    check_tensor(fn, "a", a, None, "", (E4M3,))
    check_tensor(fn, "b", b, 3, "[E, K, N]", (E4M3,))
    for name, t in (("scale_a", scale_a), ("scale_b", scale_b)):
        check_tensor(fn, name, t, None, "", (F32,))
    check_tensor(fn, "counts" if by_counts else "groups", rows_of, 1, "1-D", (I32,))
    if a.dim() not in (2, 3) or by_counts and a.dim() != 2:
        raise TkcError(f"{fn}: a must be [M, K] (contiguous layout) or [E, max_m, K] (masked"
                       f"{', with groups' if by_counts else ''}), got shape {tuple(a.shape)}", caller())
    if out_dtype not in OUT:
        raise TkcError(f"{fn}: out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}", caller())
    E, K, N = b.shape
    masked = a.dim() == 3
    rows, KB, NB = a.shape[-2], K // BLOCK, -(-N // BLOCK)
    if a.shape[-1] != K or (masked and a.shape[0] != E):
        raise TkcError(f"{fn}: a must be [{'E, max_m' if masked else 'M'}, K] with b's "
                       f"{'E = ' + str(E) + ', ' if masked else ''}K = {K}, got {tuple(a.shape)}", caller())
    if K % BLOCK or N % 8:
        raise TkcError(f"{fn}: K = {K} must be a multiple of 128 (the scales' blocks) and N = {N} of 8", caller())
    if not masked and not by_counts and rows % BLOCK:
        raise TkcError(f"{fn}: in the contiguous layout each expert's rows are padded to a multiple of 128, "
                       f"so M = {rows} must be one (or give counts=: experts back to back)", caller())
    if not a.is_contiguous():
        raise TkcError(f"{fn}: a must be contiguous (row-major), got strides {a.stride()}", caller())
    if b.stride() != (K * N, 1, K):
        raise TkcError(f"{fn}: b must be column-major per expert, b.transpose(1, 2) a contiguous [E, N, K] "
                       f"(FP8 wgmma reads both operands K-major), got strides {b.stride()}", caller())
    want_sa = ((E, rows, KB), (KB * rows, 1, rows)) if masked else ((rows, KB), (1, rows))
    if tuple(scale_a.shape) != want_sa[0] or not _strides_ok(scale_a, want_sa[1]):
        raise TkcError(f"{fn}: scale_a must be {list(want_sa[0])} with strides {want_sa[1]} (1x128 blocks, "
                       f"stored transposed as tkc.quantize_fp8 writes them), got {tuple(scale_a.shape)} with "
                       f"strides {scale_a.stride()}", caller())
    if tuple(scale_b.shape) != (E, KB, NB) or not _strides_ok(scale_b, (KB * NB, 1, KB)):
        raise TkcError(f"{fn}: scale_b must be [E, K/128, ceil(N/128)] = [{E}, {KB}, {NB}] with strides "
                       f"({KB * NB}, 1, {KB}) (128x128 blocks, each expert's stored transposed), got "
                       f"{tuple(scale_b.shape)} with strides {scale_b.stride()}", caller())
    n = E if masked or by_counts else rows // BLOCK
    if rows_of.shape[0] != n or not rows_of.is_contiguous():
        what = "each expert's row count" if masked or by_counts else "the expert of each 128-row block of a"
        raise TkcError(f"{fn}: {'counts' if by_counts else 'groups'} must be a contiguous int32 [{n}]: {what}, "
                       f"got shape {tuple(rows_of.shape)}", caller())
    check_device(fn, ("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b),
                 ("counts" if by_counts else "groups", rows_of))
    if by_counts:
        _check_counts(counts, rows)
    if key is not None:   # eager: the plan at once next time
        run = _plans((signature(a, b, scale_a, scale_b, rows_of), out_dtype, by_counts), a, b, scale_a, scale_b,
                     rows_of, out_dtype, by_counts)
        _plain.keep(key, run)
        return run(a, b, scale_a, scale_b, rows_of)
    return _grouped(a, b, scale_a, scale_b, rows_of, out_dtype, by_counts)


def _check_counts(counts: Tensor, M: int) -> None:
    """The counts layout's values, when they can be read (not while a CUDA graph is
    captured or anything traces, nor of a meta tensor; as attention_varlen's offsets): each
    a multiple of ALIGN (the tiles' row scales start on 16 bytes) and at least 0, their sum
    at most M."""
    if not readable(counts):
        return
    c = counts.tolist()
    if any(n < 0 or n % ALIGN for n in c) or sum(c) > M:
        raise TkcError(f"grouped_scaled_mm: counts must be multiples of {ALIGN} (each expert's rows, padded so), "
                       f"at least 0, summing to at most M = {M} (a's rows), got "
                       f"{c if len(c) <= 16 else c[:16] + ['...']}", caller())


def _strides_ok(t: Tensor, want: tuple) -> bool:
    """t's strides are `want` where its dims are longer than 1 (any, when it
    holds nothing: an empty batch's scales, however made)."""
    return t.numel() == 0 or all(n == 1 or s == w for n, s, w in zip(t.shape, t.stride(), want))
