"""Matrix products as PyTorch ops: tkc.matmul and tkc.linear.

    c = tkc.matmul(a, b)                  # a [..., M, K], b [K, N] or [..., K, N], bf16
    y = tkc.linear(x, w, bias, "gelu")    # x [..., K], w [N, K]: act(x w^T + bias)

Both run the library GEMM (tkc/kernels/gemm_hopper.py) forward and back:
a transposed operand is read as stored (wgmma's transpose bits), so
x @ w.t(), the gradients dA = dC B^T and dB = A^T dC, and a linear layer's
dW = dY^T X need no transpose copies. A 2-D b serves a whole batch of a as
one [batch * M, K] matrix; a batched b runs the batched kernel (b's batch
equal to a's, or 1). linear's activation (None, "gelu" in its erf form,
"silu") runs in the GEMM's epilogue; when a gradient is wanted the forward
also stores the pre-activation, and the backward applies act' with torch's
gelu_backward / silu_backward. Rows must be 16-byte multiples (K and N
multiples of 8); M and the batch are free.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from ..diagnostics import TkcError
from ..kernels.gemm_hopper import ACTIVATIONS, gemm_hopper, swap_rows, tile_rows
from ..kernels.gemm_space import SPACE, pruned
from ..runtime.callsite import caller
from ..tune import autotune, bucket, tables
from . import checks
from .checks import autocast, check_device, check_tensor, dense
from .eager import Op, plain_key, public
from .plans import PlanCache, signature

__all__ = ["matmul", "linear"]
BF16 = torch.bfloat16


@functools.lru_cache(maxsize=None)
def _kernel(transpose_a: bool, transpose_b: bool, batched: bool = False, bias: bool = False,
            activation: str | None = None, preact: bool = False, BN: int = 256, cluster: int = 1,
            persistent: bool = True, split: int = 1, BM: int = 128, swap: bool = False, cluster_m: int = 1,
            sliced: bool = False):
    return gemm_hopper("bf16", transpose_b, BN=BN, persistent=persistent, transpose_a=transpose_a,
                       batched=batched, bias=bias, activation=activation, preact=preact,
                       cluster=cluster, split=split, BM=BM if swap else tile_rows(BM, transpose_a),
                       swap=swap, cluster_m=cluster_m, sliced=sliced)


FINE = 4096  # up to here the schedule is tuned per 128 rows and 256 columns of C
WIDE = 16384  # ... and up to here per 1024 columns
# ... and beyond per power of two, tuned at an LM head's vocabularies (32k to 128k columns: Llama-2's
# 32000, Llama-3's 128256; Qwen's 151936 and Gemma's 256000 take 128k's pick: tuning holds every
# candidate's copy of B and C, 3 GB each at 256k) and the rows from a decode step's to a prefill
# chunk's; more rows are many waves of the widest tile (the default)
HEADS, HEAD_ROWS = (32768, 65536, 131072), (16, 64, 128, 256, 512, 1024, 2048)
FEW = (16, 64)   # C of up to 16, and of 17 to 64 rows (a decode step's activations): keys of their own
MOST_ROWS = 16384   # _tile_examples' most rows (MOST_ROWS x WIDE: their largest C)


def _tile_key(a, b, c) -> tuple:
    """What C's schedule depends on: its rows in all (batch x M) and its
    columns, up to FINE in steps of 128 rows (up to 16 and up to 64 rows
    apart: one 16- or 64-row tile), with the height of a swapped tile
    (swap_rows of a batch's M: how many rows its last tile wastes), and 256
    columns (how the work items fill the SMs' waves changes within a power
    of two), then 1024 columns up to WIDE (a wide C of few rows is few waves:
    at 1024 x 6144 the pick for 8192 columns ran 1.3x the best), beyond
    them powers of two (HEADS); and whether both operands' rows miss
    128-byte alignment (see _misaligned)."""
    rows = c.shape[-2] * (c.shape[-3] if len(c.shape) > 2 else 1)
    return _key(rows, c.shape[-1], _misaligned(a, b), c.shape[-2])


def _key(rows: int, cols: int, misaligned: bool, m: int | None = None) -> tuple:
    few = next((f for f in FEW if rows <= f), None)
    r = (few,) if few else (-(-rows // 128) * 128, swap_rows(m or rows)) if rows <= FINE else (bucket(rows),)
    c = -(-cols // 256) * 256 if cols <= FINE else -(-cols // 1024) * 1024 if cols <= WIDE else bucket(cols)
    return (*r, c, misaligned)


def _wider(key: tuple) -> dict:
    """The pick of a key no table holds, of more columns than FINE (the
    tables tune fewer widths there): a misaligned key's is the aligned key's
    of its columns where a table holds that; else, up to WIDE columns, its
    columns' power-of-two bucket's, and beyond, its rows' at the most
    columns below its own a table holds (of HEADS, else WIDE: a decode
    step's LM head of 16 rows runs a 16-row tile, not the default's 128
    rows); any other key's, the default. (On the H200's misaligned keys up
    to FINE, 473 with both picks timed, the aligned one's ran 1.026x the
    best on average, at most 1.20x; the bucket's 1.096x, at most 1.86x.)"""
    cols = key[-2]
    if cols <= FINE:
        return TILE.default
    if key[-1] and tables.lookup(TILE.name, (*key[:-1], False)) is not None:
        return TILE.choose((*key[:-1], False))
    if cols > WIDE:
        held = [n for n in HEADS if n < cols and tables.lookup(TILE.name, (*key[:-2], n, key[-1])) is not None]
        return TILE.choose((*key[:-2], held[-1] if held else WIDE, key[-1]))
    wider = (*key[:-2], bucket(cols), key[-1])
    return TILE.choose(wider) if wider != key else TILE.default


def _serves(config: dict, key: tuple) -> bool:
    """A swapped tile serves the key whose C its height fits (a 4-part key's second)."""
    return not config["swap"] or len(key) == 4 and key[1] == config["BM"]


def _misaligned(a: Tensor, b: Tensor) -> bool:
    """Both operands' rows (as stored) start off 128-byte boundaries: each TMA
    box row then spans one more L2 sector, and the main loop waits on loads
    (H200: 3000^3 runs at 0.73x cuBLAS, 3008^3 at 1.08x); a cluster that
    multicasts A halves A's share of that traffic. One aligned operand keeps
    the loads ahead (3072x3072x3000 A B: 1.05x)."""
    return a.shape[-1] * a.element_size() % 128 != 0 and b.shape[-1] * b.element_size() % 128 != 0


def _tile_examples() -> list:
    """The shapes `tkc tune --library` tunes the schedule at: every key's C up
    to FINE rows (its most rows) and WIDE columns, and 8192 and 16384 rows
    beyond; then HEAD_ROWS x HEADS (an LM head's); K 4096, and then for the
    misaligned keys K 4000 with C 8 columns short of the key's."""
    rows = [*_example_rows(), 8192, MOST_ROWS]
    cols = [*range(256, FINE + 1, 256), *range(FINE + 1024, WIDE + 1, 1024)]
    return [*(_example(m, n, 4096) for m in rows for n in cols),
            *(_example(m, n, 4096) for m in HEAD_ROWS for n in HEADS),
            *(_example(m, n - 8, 4000) for m in rows for n in cols)]


def _example(m: int, n: int, k: int):
    """A function making A B's kernel arguments for C of m x n."""
    return lambda: [_gl(torch.randn(m, k, device="cuda").to(BF16)),
                    _gl(torch.randn(k, n, device="cuda").to(BF16)),
                    _gl(torch.empty(m, n, device="cuda", dtype=BF16))]


def _tile_example(key: tuple):
    """An example making `key` where _tile_examples has none (C of more rows,
    or of more columns than WIDE but an LM head's: a call's, for `tkc tune
    --call`): C of the key's most rows that make it and its columns, as
    _tile_examples makes them; None for a key no such C makes, or a C larger
    than theirs (tuning holds a copy of C per candidate)."""
    cols, misaligned = key[-2:]
    rows = next((m for m in range(key[0], max(key[0] - 128, 0), -1) if _key(m, 0, False)[:-2] == key[:-2]), None)
    if rows is None or rows * cols > MOST_ROWS * WIDE:   # (and HEAD_ROWS x HEADS: 2048 x 128k, as large)
        return None
    return _example(rows, cols - 8, 4000) if misaligned else _example(rows, cols, 4096)


def _example_rows() -> list[int]:
    """C's rows in _tile_examples up to FINE: each key's most."""
    most = {}
    for m in range(1, FINE + 1):
        most[_key(m, 0, False)[:-2]] = m
    return list(most.values())


# C's schedule, tuned per GPU (tkc/tune/tables) over tkc/kernels/gemm_space.py's
# space (its docstring: what each choice is for, and what is pruned and why).
TILE = autotune(space=SPACE, key=_tile_key, name="tkc.matmul.tile", examples=_tile_examples, flush_l2=True,
                prune=pruned, fits=_serves, fallback=_wider, example=_tile_example)(
    lambda **schedule: _kernel(False, False, False, **schedule))   # (gemm_hopper's keywords)


def _schedule(rows: int, cols: int, a: Tensor, b: Tensor, m: int | None = None) -> dict:
    """{BN, cluster, persistent, split, BM, swap, cluster_m, sliced} for C of rows x cols (m rows
    a batch, when batched) from operands a and b as stored."""
    return TILE.choose(_key(rows, cols, _misaligned(a, b), m))


def _as_rows(t: Tensor) -> tuple[Tensor, bool]:
    """(m, transposed): a 2-D operand as the kernel reads it, the matrix itself
    (row-major) or, when t is the transpose of a row-major matrix, that matrix
    and True, where the rows as stored are whole 16-byte units from a 16-byte
    boundary, as TMA moves them; anything else is copied, row-major or, where
    only t's columns are whole units (the backward's A^T of an odd M), as its
    transpose."""
    batch_ok = t.dim() == 2 or t.shape[0] == 1 or t.stride(0) == t.shape[1] * t.shape[2]
    rows, cols = t.shape[-1] % 8 == 0, t.shape[-2] % 8 == 0
    batch_ok = batch_ok and not t.data_ptr() % checks.ALIGN   # (TMA reads from 16-byte boundaries)
    if batch_ok and t.stride(-1) == 1 and t.stride(-2) == t.shape[-1] and rows:
        return t, False
    if batch_ok and t.stride(-2) == 1 and t.stride(-1) == t.shape[-2] and cols:
        return t.transpose(-1, -2), True
    if rows or not cols:
        return dense(t), False
    return dense(t.transpose(-1, -2)), True   # (a backward's A^T of odd M: rows of K)


def _gl(t: Tensor) -> Tensor:
    """A 2-D or 3-D tensor as the kernels' 4-D gl view."""
    return t.view(1, 1, *t.shape) if t.dim() == 2 else t.unsqueeze(0)


def _mm_plan(a: Tensor, b: Tensor):
    """C = A B for a [M, K] or [Bt, M, K] and b [K, N] (a's batch flattened
    into M), or batched a [Bt, M, K] and b [Bt or 1, K, N]; operands stored
    transposed are read so, others copied."""
    batched = a.dim() == 3 and b.dim() == 3
    shape = (*a.shape[:-1], b.shape[-1])
    if a.numel() == 0 or b.numel() == 0:  # empty, or K = 0 (a sum of nothing)
        return lambda a, b: torch.zeros(shape, device=a.device, dtype=BF16)

    def operands(a, b):
        a = a if batched or a.dim() == 2 else a.reshape(-1, a.shape[-1])
        return _as_rows(a), _as_rows(b)
    (ma, ta), (mb, tb) = operands(a, b)
    copy = ma.data_ptr() != a.data_ptr() or mb.data_ptr() != b.data_ptr()
    M, N = shape[-2] if batched else math.prod(shape[:-1]), shape[-1]
    sched = _schedule(M * (a.shape[0] if batched else 1), N, ma, mb, M)
    out = (a.shape[0], M, N) if batched else (M, N)  # the kernel's view of C
    launch = _kernel(ta, tb, batched, **sched).prepare(
        _gl(ma), _gl(mb), _gl(torch.empty(out, device=a.device, dtype=BF16)))

    def run(a, b):
        if copy:
            (a, _), (b, _) = operands(a, b)
        c = torch.empty(shape, device=a.device, dtype=BF16)
        launch(a, b, c)
        return c
    return run


_mm_plans = PlanCache(_mm_plan)


def _mm_impl(a: Tensor, b: Tensor) -> Tensor:
    """a [..., M, K] @ b [K, N] (a's batch flattened into M) or [B, K, N]."""
    return _mm_plans(signature(a, b), a, b)(a, b)


def _mm_fake(a, b):
    return a.new_empty((*a.shape[:-1], b.shape[-1]))


def _mm_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mm_backward(ctx, dc):
    if dc is None:
        return None, None
    a, b = ctx.saved_tensors
    need_a, need_b = ctx.needs_input_grad[:2]
    da = _matmul(dc, b.transpose(-1, -2)) if need_a else None   # dC B^T: B read transposed
    if not need_b:
        return da, None
    if b.dim() == 2:  # shared B: dB = sum over the batch = A^T dC over the flattened rows
        a2, dc2 = a.reshape(-1, a.shape[-1]), dc.reshape(-1, dc.shape[-1])
        return da, _matmul(a2.transpose(0, 1), dc2)
    db = _matmul(a.transpose(-1, -2), dc)
    return da, db.sum(0, keepdim=True) if b.shape[0] == 1 and a.shape[0] != 1 else db


_matmul = Op("tkc::matmul", _mm_impl, _mm_fake, _mm_setup, _mm_backward)
_plain = PlanCache()  # plain calls (eager.plain_key) of matmul and linear: key -> run


@public
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b in bf16 (f32 accumulation) for a [..., M, K] and b [K, N] or
    [..., K, N] (b's batch a's, or 1); differentiable in a and b. K and N
    multiples of 8 (16-byte rows); either operand may be a transpose. As
    torch.matmul, a vector a [K] is a row (dropped from the result) and a
    vector b [K] a column (then M is the multiple of 8: a b = (b a^T)^T)."""
    key = plain_key(None, a, b)
    run = _plain.get(key)
    if run is not None:
        return run(a, b)
    if _fits(a, b) and (b.dim() == 2 or a.dim() == b.dim() == 3 and b.shape[0] in (1, a.shape[0])):
        if key is None:
            return _matmul(a, b)  # the common cases, checked in a few reads
        run = _mm_plans(signature(a, b), a, b)
        _plain.keep(key, run)
        return run(a, b)
    if (cast := autocast(a, b)) is not None:   # AMP: float32 operands in a bf16 region
        return matmul(*cast)
    fn = "matmul"
    check_tensor(fn, "a", a, None, "", (BF16,))
    check_tensor(fn, "b", b, None, "", (BF16,))
    if a.dim() == 1 and b.dim() >= 2:   # torch.matmul's vector @ matrix: a row of one, dropped
        return matmul(a.unsqueeze(0), b).squeeze(-2)
    if b.dim() == 1 and a.dim() >= 2:   # matrix @ vector: b as a row times a's transpose
        if a.shape[-2] % 8:
            raise TkcError(f"{fn}: a matrix times a vector b [K] runs as b a^T, whose rows are a's: "
                           f"M = {a.shape[-2]} must be a multiple of 8, got shapes {tuple(a.shape)} and "
                           f"{tuple(b.shape)}", caller())
        return matmul(b.unsqueeze(0), a.transpose(-1, -2)).squeeze(-2)
    if a.dim() < 2 or b.dim() < 2:
        raise TkcError(f"{fn}: a and b must not both be vectors (a dot product: torch.dot), got shapes "
                       f"{tuple(a.shape)} and {tuple(b.shape)}", caller())
    if a.shape[-1] != b.shape[-2]:
        raise TkcError(f"{fn}: a's last dim (K = {a.shape[-1]}) must be b's second to last, got "
                       f"shapes {tuple(a.shape)} and {tuple(b.shape)}", caller())
    _check_rows(fn, K=a.shape[-1], N=b.shape[-1])
    check_device(fn, ("a", a), ("b", b))
    if b.dim() == 2:
        return _matmul(a, b)
    try:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise TkcError(f"{fn}: a's and b's batch dims must broadcast, got shapes {tuple(a.shape)} and "
                       f"{tuple(b.shape)}", caller()) from None
    n = math.prod(batch)   # (not -1: a reshape of no elements cannot infer it)
    a3 = a.expand(*batch, *a.shape[-2:]).reshape(n, *a.shape[-2:])
    b3 = b.reshape(1, *b.shape[-2:]) if b.shape[:-2].numel() == 1 else \
        b.expand(*batch, *b.shape[-2:]).reshape(n, *b.shape[-2:])
    if a3.shape[0] == 0:
        return a.new_zeros((*batch, a.shape[-2], b.shape[-1]))
    return _matmul(a3, b3).view(*batch, a.shape[-2], b.shape[-1])


# ---------------------------------------------------------------- linear

def _lin_plan(x: Tensor, w: Tensor, bias: Tensor | None, activation: str, preact: bool):
    M, N = x.shape[0], w.shape[0]
    act = activation or None
    if x.numel() == 0 or w.numel() == 0:
        def empty(x, w, bias, shape=(M, N)):
            z = torch.zeros(shape, device=x.device, dtype=BF16)
            if bias is not None:
                z += bias
            y = z if act is None else getattr(torch.nn.functional, act)(z)
            return y, z if preact else None
        return empty
    kernel = _kernel(False, True, False, bias is not None, act, preact, **_schedule(M, N, x, w))
    dev = x.device
    out = lambda: torch.empty(M, N, device=dev, dtype=BF16)  # noqa: E731
    args = (_gl(x), _gl(w), *([bias.view(1, 1, 1, -1)] if bias is not None else []), _gl(out()),
            *([_gl(out())] if preact else []))
    launch = kernel.prepare(*args)

    if preact:
        def run(x, w, bias):
            y, z = out(), out()
            launch(x, w, *([bias] if bias is not None else []), y, z)
            return y, z
    elif bias is None:   # shape: y's (a plain call's [..., N]: the launch reads its pointer)
        def run(x, w, bias, shape=(M, N)):
            y = torch.empty(shape, device=dev, dtype=BF16)
            launch(x, w, y)
            return y, None
    else:
        def run(x, w, bias, shape=(M, N)):
            y = torch.empty(shape, device=dev, dtype=BF16)
            launch(x, w, bias, y)
            return y, None
    return run


_lin_plans = PlanCache(_lin_plan)


def _lin_impl(x: Tensor, w: Tensor, bias: Tensor | None, activation: str,
              preact: bool) -> tuple[Tensor, Tensor]:
    """(y, z): y = act(x w^T + bias) for x [M, K] and w [N, K] (row-major);
    z the pre-activation when preact (else empty). x, w and bias as a compiled
    graph hands them: copied where TMA cannot read them (checks.dense)."""
    x, w, bias = dense(x), dense(w), bias if bias is None else dense(bias)
    key = (signature(x, w, bias), activation, preact)
    y, z = _lin_plans(key, x, w, bias, activation, preact)(x, w, bias)
    return y, x.new_empty(0) if z is None else z


def _lin_fake(x, w, bias, activation, preact):
    y = x.new_empty(x.shape[0], w.shape[0])
    return y, torch.empty_like(y) if preact else x.new_empty(0)


def _lin_setup(ctx, inputs, output):
    x, w, bias, activation, preact = inputs
    ctx.save_for_backward(x, w, output[1] if preact else None)
    ctx.activation, ctx.has_bias = activation, bias is not None


def _lin_backward(ctx, dy, dz_unused):
    if dy is None:
        return None, None, None, None, None
    x, w, z = ctx.saved_tensors
    dz = dense(dy)
    if ctx.activation == "gelu":
        dz = torch.ops.aten.gelu_backward(dz, z)
    elif ctx.activation == "silu":
        dz = torch.ops.aten.silu_backward(dz, z)
    dx = _matmul(dz, w) if ctx.needs_input_grad[0] else None             # dZ W
    dw = _matmul(dz.transpose(0, 1), x) if ctx.needs_input_grad[1] else None  # dZ^T X
    db = dz.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return dx, dw, db, None, None


_linear = Op("tkc::linear", _lin_impl, _lin_fake, _lin_setup, _lin_backward)


@public
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None,
           activation: str | None = None) -> Tensor:
    """act(x weight^T + bias) in bf16 for x [..., K], weight [N, K] and bias
    [N] (nn.Linear's layout), act None, "gelu" (erf form) or "silu";
    differentiable in x, weight and bias. K and N multiples of 8."""
    key = plain_key(activation, x, weight, bias)
    run = _plain.get(key)
    if run is not None:
        return run(x, weight, bias)
    if (cast := autocast(x, weight, bias)) is not None:   # AMP: float32 weights, activations
        return linear(*cast, activation)
    fn = "linear"
    check_tensor(fn, "x", x, None, "", (BF16,))
    check_tensor(fn, "weight", weight, 2, "[N, K]", (BF16,))
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise TkcError(f"{fn}: x's last dim must be weight's K = {weight.shape[1]}, got shape "
                       f"{tuple(x.shape)}", caller())
    if activation not in ACTIVATIONS:
        raise TkcError(f"{fn}: activation must be one of {ACTIVATIONS}, got {activation!r}",
                       caller())
    named = [("x", x), ("weight", weight)]
    if bias is not None:
        check_tensor(fn, "bias", bias, 1, f"[{weight.shape[0]}]", (BF16,))
        if bias.shape[0] != weight.shape[0]:
            raise TkcError(f"{fn}: bias must be [{weight.shape[0]}] (weight's N), got "
                           f"{tuple(bias.shape)}", caller())
        named.append(("bias", bias))
    _check_rows(fn, K=weight.shape[1], N=weight.shape[0])
    check_device(fn, *named)
    x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])   # (-1 is ambiguous when K = 0)
    x2, w, b = dense(x2), dense(weight), bias if bias is None else dense(bias)
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, b))
    act = activation or ""
    y, _ = _linear(x2, w, b, act, bool(activation) and grad)
    if key is not None and x2.data_ptr() == x.data_ptr() and w is weight and b is bias:
        plan, shape = _lin_plans((signature(x2, w, b), act, False), x2, w, b, act, False), \
            (*x.shape[:-1], weight.shape[0])
        _plain.keep(key, lambda x, w, b: plan(x, w, b, shape)[0])   # (y made [..., N]: no view)
    return y.view(*x.shape[:-1], weight.shape[0])


def _fits(a, b) -> bool:
    """bf16 tensors of 2 or 3 dims whose K agree, K and N multiples of 8, on
    one device of the ops' type: nothing for the detailed checks to refuse."""
    return isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype == BF16 and b.dtype == BF16 \
        and 2 <= a.dim() <= 3 and 2 <= b.dim() <= 3 and a.shape[-1] == b.shape[-2] \
        and not a.shape[-1] % 8 and not b.shape[-1] % 8 and a.device == b.device \
        and a.device.type == checks.DEVICE_TYPE


def _check_rows(fn: str, **dims: int) -> None:
    for name, n in dims.items():
        if n % 8:
            raise TkcError(f"{fn}: {name} = {n} must be a multiple of 8 (TMA moves rows of "
                           f"16-byte units: 8 bf16)", caller())
