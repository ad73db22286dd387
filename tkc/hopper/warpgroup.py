"""The rules of the Hopper warpgroup ops (docs/tile-ir.md, "Hopper ops").

One table, `VARIANTS`, says for each warpgroup mma which operand is stored
K-major (K contiguous) and which MN-major; from it `mma_problems` derives
every shape and kind rule. tk-verify (tkc/passes/verify_warpgroup.py), the
frontend, the interpreter and the lowering call the same functions, so a
kernel gets the same message wherever the mistake is caught. Pure Python
over the type views: no MLIR at import time.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dialect.attrs import k_order, negated  # noqa: F401  (the rules' readers of the attributes)
from ..dialect.types import RT, ST
from ..dtypes import FP8_DTYPES, is_fp8, itemsize
from .fp8_lanes import k_order_problems

WARPGROUP_WARPS = 4
M = 64              # rows of a warpgroup's result (wgmma m64)
HALF_HINT = ("; wgmma's M is 64 a warpgroup, 16 rows a warp, so 8-row tiles are warp-level "
             "only (mma_AB etc.)")
MAX_N = 256         # widest wgmma (m64n256k16)
MMA_DTYPES = ("bf16", "f16")
# 8-bit operands (e4m3 and e5m2 may mix): wgmma ...k32.f32.e4m3.e5m2 has no
# transpose bits (PTX ISA: imm-trans-a/b only for .f16/.bf16), so both
# operands must be K-major in shared memory (the ABt form); an 8-bit A in
# registers has its own fragment (4 adjacent k a register), not the row
# layout of an rt, so it enters with its columns permuted: only with
# k_order="lanes" (fp8_lanes.py).
FP8_MMA_DTYPES = FP8_DTYPES


def k_step(dtype: str) -> int:
    """K of one wgmma: 32 bytes of each row (k16 for 16-bit, k32 for 8-bit types)."""
    return 32 // itemsize(dtype)
REGISTER_RANGE = (24, 256)  # setmaxnreg: a multiple of 8 in this range
REGISTER_FILE = 65536       # registers of an SM


@dataclass(frozen=True)
class Variant:
    """How a warpgroup mma reads its operands.

    a_k_major: a is 64 x K (rt<16, K> per warp or st<64, K>); else st<K, 64>.
    b_k_major: b is st<N, K> (K contiguous: the ABt form); else st<K, N>.
    The wgmma transpose bits are the negations (tnspA/tnspB = MN-major)."""
    a_k_major: bool
    b_k_major: bool

    @property
    def a_in_registers_allowed(self) -> bool:
        # wgmma reads A from registers only in the K-major (row) fragment.
        return self.a_k_major


VARIANTS = {
    "warpgroup_mma_ab": Variant(a_k_major=True, b_k_major=False),
    "warpgroup_mma_abt": Variant(a_k_major=True, b_k_major=True),
    "warpgroup_mma_atb": Variant(a_k_major=False, b_k_major=False),
    "warpgroup_mma_atbt": Variant(a_k_major=False, b_k_major=True),
}

OPS = tuple(VARIANTS) + ("warpgroup_mma_wait", "increase_registers", "decrease_registers")


def short(v) -> str:
    """rt<bf16, 16, 64, row> (a view without the !tk. noise), or what it is."""
    if v is None:
        return "a non-tk value"
    return v.text().removeprefix("!tk.").replace(" : i64", "").replace('"', "")


def axes(t, k_major: bool) -> tuple[int, int]:
    """(MN, K) of an operand stored K-major (MN x K) or MN-major (K x MN)."""
    return (t.rows, t.cols) if k_major else (t.cols, t.rows)


def mma_problems(name: str, a, b, c, d=None, k_order=None) -> list[str]:
    """Every rule a warpgroup mma (a, b, c) -> d {k_order} breaks, as messages."""
    var = VARIANTS[name]
    out = []
    out += _a_problems(name, var, a)
    if not isinstance(b, ST):
        out.append(f"{name}: b must be an st (wgmma reads B from shared memory), got {short(b)}")
    if not (isinstance(c, RT) and c.dtype == "f32" and c.layout == "row" and c.rows == 16):
        out.append(f"{name}: c must be an f32 row-layout rt<f32, 16, N> per warp (rows "
                   f"16*(warp%4).. of the 64 x N result), got {short(c)}"
                   f"{HALF_HINT if isinstance(c, RT) and c.rows == 8 else ''}")
    if out:
        return out
    out += _dtype_problems(name, a, b, k_order)
    out += _swizzle_problems(name, a, b)
    out += _shape_problems(name, var, a, b, c)
    if d is not None and d != c:
        out.append(f"{name}: result must have c's type {short(c)}, got {short(d)}")
    return out


def _a_problems(name, var, a) -> list[str]:
    if isinstance(a, ST):
        return []
    if isinstance(a, RT) and var.a_in_registers_allowed:
        if a.layout != "row" or a.rows != 16:
            return [f"{name}: a in registers must be a row-layout rt<16, K> per warp (rows "
                    f"16*(warp%4).. of the 64 x K operand), got {short(a)}{HALF_HINT if a.rows == 8 else ''}"]
        return []
    if var.a_in_registers_allowed:
        return [f"{name}: a must be an rt<16, K, row> per warp or an st<64, K>, got {short(a)}"]
    return [f"{name}: a must be an st<K, 64> (a transposed operand is read from shared "
            f"memory only), got {short(a)}"]


def _dtype_problems(name, a, b, k_order) -> list[str]:
    fp8 = is_fp8(a.dtype) or is_fp8(b.dtype)
    order = k_order_problems(name, k_order, isinstance(a, RT), fp8)
    if order:
        return order
    if fp8:
        return _fp8_problems(name, a, b)
    if a.dtype not in MMA_DTYPES or b.dtype != a.dtype:
        return [f"{name}: a and b must both be bf16 or both f16, got {short(a)} and {short(b)}"]
    return []


def _fp8_problems(name, a, b) -> list[str]:
    if not (is_fp8(a.dtype) and is_fp8(b.dtype)):
        return [f"{name}: a and b must both be 8-bit floats (f8e4m3 or f8e5m2) or both bf16 or both "
                f"f16, got {short(a)} and {short(b)}"]
    var = VARIANTS[name]
    if not (var.a_k_major and var.b_k_major):
        return [f"{name}: 8-bit operands must both be K-major (wgmma has no transpose for 8-bit "
                f"types): use warpgroup_mma_abt with a st<64, K> and b st<N, K>, and store a K x N "
                f"matrix transposed (N x K) in memory, got {short(a)} and {short(b)}"]
    if a.cols % k_step(a.dtype):
        return [f"{name}: K of 8-bit operands must be a multiple of 32 (one wgmma k32), got "
                f"{short(a)}"]
    return []


def _swizzle_problems(name, a, b) -> list[str]:
    out = []
    for what, t in (("a", a), ("b", b)):
        if isinstance(t, ST) and t.swizzle == "none":
            out.append(f"{name}: {what} {short(t)} must be swizzled (32b, 64b, 128b or auto): "
                       "wgmma reads shared operands in a swizzled layout")
    return out


def _shape_problems(name, var, a, b, c) -> list[str]:
    n, kb = axes(b, var.b_k_major)
    if isinstance(a, RT):
        m, ka = M, a.cols
    else:
        m, ka = axes(a, var.a_k_major)
    out = []
    if m != M:
        want = "st<64, K>" if var.a_k_major else "st<K, 64>"
        out.append(f"{name}: a must be {want} (a warpgroup computes 64 rows), got {short(a)}")
    if ka != kb:
        out.append(f"{name}: K of a ({ka}) and b ({kb}) must agree: {short(a)}, {short(b)}")
    if n > MAX_N:
        out.append(f"{name}: N = {n} is wider than wgmma's 256: split b into tiles of at most "
                   f"256 columns, got {short(b)}")
    if c.cols != n:
        out.append(f"{name}: c must be rt<f32, 16, {n}, row> (N = {n} from b {short(b)}), "
                   f"got {short(c)}")
    return out


def wait_problems(ins, outs, pending) -> list[str]:
    """warpgroup_mma_wait(tiles...) {pending} -> tiles."""
    out = []
    if not isinstance(pending, int) or isinstance(pending, bool) or pending < 0:
        out.append(f"warpgroup_mma_wait: pending must be an integer >= 0, got {pending!r}")
    for i, t in enumerate(ins):
        if not (isinstance(t, RT) and t.dtype == "f32"):
            out.append(f"warpgroup_mma_wait: tile {i} must be an f32 rt (an accumulator of a "
                       f"warpgroup mma), got {short(t)}")
    if len(outs) != len(ins) or any(o != i for o, i in zip(outs, ins)):
        out.append("warpgroup_mma_wait: results must have the types of the tiles, in order: "
                   f"({', '.join(map(short, ins))}) -> ({', '.join(map(short, outs))})")
    return out


def negate_problems(name: str, op) -> list[str]:
    from mlir import ir
    if "negate" in op.attributes and not isinstance(op.attributes["negate"], ir.BoolAttr):
        return [f"{name}: negate must be true or false, got {op.attributes['negate']}"]
    return []


def register_budget(warpgroups: int, blocks: int = 1) -> int:
    """The per-thread registers of one thread of each warpgroup together that
    a block of `warpgroups` launches with, `blocks` blocks an SM: ptxas gives
    every thread 65536 / (blocks x threads) rounded down to a multiple of 8,
    and setmaxnreg only moves registers within the block's allocation (an
    increase past it waits forever: 5 warpgroups hold 5 x 96 = 480, not 512;
    3 warpgroups at 2 blocks an SM hold 3 x 80 = 240)."""
    return REGISTER_FILE // (blocks * 128 * warpgroups) // 8 * 8 * warpgroups


def register_problems(name: str, count, warps: int | None = None, blocks: int = 1) -> list[str]:
    """increase_registers / decrease_registers {count}; with the kernel's
    warps and blocks an SM, an increase the block's register allocation can
    meet (setmaxnreg only moves registers within it: an increase past it
    waits forever).
    The test is for the usual split: one producer warpgroup at the minimum,
    every other one at `count`."""
    lo, hi = REGISTER_RANGE
    if isinstance(count, bool) or not isinstance(count, int) or not lo <= count <= hi or count % 8:
        return [f"{name}: count must be a multiple of 8 in {lo}..{hi} (setmaxnreg), got {count!r}"]
    if name.endswith("increase_registers") and warps and warps % WARPGROUP_WARPS == 0:
        groups = warps // WARPGROUP_WARPS
        budget = register_budget(groups, blocks)
        if groups > 1 and lo + (groups - 1) * count > budget:
            per_sm = f", {blocks} blocks an SM," if blocks > 1 else ""
            return [f"{name}: {groups - 1} warpgroups at {count} registers and one at {lo} need "
                    f"{lo + (groups - 1) * count} per thread slot; a block of {groups} warpgroups"
                    f"{per_sm} launches with {budget} ({budget // groups} a thread), so setmaxnreg would "
                    f"wait forever: at most {(budget - lo) // (groups - 1) // 8 * 8}"]
    return []


def warps_problems(name: str, warps: int | None) -> list[str]:
    """A warpgroup op needs whole warpgroups: tk.warps a multiple of 4."""
    if warps is not None and warps % WARPGROUP_WARPS:
        return [f"{name}: a warpgroup is 4 warps, so the kernel's tk.warps must be a multiple "
                f"of 4, got {warps}"]
    return []
