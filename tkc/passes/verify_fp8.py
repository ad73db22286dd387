"""tk-verify rules of the 8-bit floats (docs/tile-ir.md, "8-bit floats"):
f8e4m3 and f8e5m2 are storage types. A shared tile of them is filled and
emptied by TMA and read by warpgroup mma or by a row-layout register tile's
load; a gl of them is moved by TMA and by register tiles of its own dtype; a
register tile of them is converted (copy, to and from the float types),
loaded from and stored to a gl without a fill or conversion, loaded from an
st, subtiled, and is warpgroup mma_ABt's A with k_order="lanes". Everything
else computes in f32 or bf16 after a conversion. verify.py asks this of
every op.
"""
from __future__ import annotations

from ..dialect.types import GL, RT, RV, ST, SV
from ..dtypes import INT_DTYPES, is_fp8
from .verify_messages import describe as _desc

# an 8-bit rt takes part in these (a warpgroup mma: as mma_ABt's A with
# k_order="lanes", hopper/fp8_lanes.py; the warpgroup rules say the rest)
_REGISTER_OPS = {"copy", "load", "store", "subtile", "warpgroup_mma_ab", "warpgroup_mma_abt",
                 "warpgroup_mma_atb", "warpgroup_mma_atbt"}
_SHARED_OPS = {"alloc", "stage", "subtile", "tma_load", "tma_load_multicast", "tma_store", "pipeline_load", "pipeline_store",
               "tma_prefetch", "warpgroup_mma_ab", "warpgroup_mma_abt", "warpgroup_mma_atb",
               "warpgroup_mma_atbt"}                       # an 8-bit st (and gl, with load/store)
_GL_OPS = _SHARED_OPS | {"load", "store", "dim", "gl_slice"}

CONVERT = "convert it with .to(tkc.f32) or .to(tkc.bf16)"


def fp8_problems(op, name: str, ins, outs) -> list[str]:
    """An 8-bit float tile, st or gl where it cannot go (None of them: [])."""
    views = [v for v in (*ins, *outs) if v is not None and is_fp8(getattr(v, "dtype", ""))]
    if not views:
        return []
    regs = [v for v in views if isinstance(v, (RT, RV))]
    if regs and name not in _REGISTER_OPS:
        return [f"{name}: an 8-bit float tile ({_desc(regs[0])}) is a storage type: it is converted, "
                f"loaded from and stored to a gl, or subtiled; {CONVERT} to compute on it"]
    if name == "copy":
        other = next((v for v in (*ins, *outs) if v is not None and v.dtype in INT_DTYPES), None)
        return [f"copy: an 8-bit float tile converts to and from float tiles, got {_desc(other)}"] \
            if other is not None else []
    if name in ("load", "store"):
        return _moved(op, name, ins, outs)
    if any(isinstance(v, (ST, SV)) for v in views) and name not in _SHARED_OPS:
        st = next(v for v in views if isinstance(v, (ST, SV)))
        return [f"{name}: an 8-bit float {_desc(st)} is filled and emptied by TMA (tma.load, "
                "tma.store) and read by warpgroup mma; registers move 8-bit tiles to and from a gl"]
    if any(isinstance(v, GL) for v in views) and name not in _GL_OPS:
        g = next(v for v in views if isinstance(v, GL))
        return [f"{name}: an 8-bit float {_desc(g)} is moved by TMA or by register tiles of its dtype"]
    if "add" in op.attributes and name in ("pipeline_store", "tma_store"):
        return [f"{name}: TMA cannot add into 8-bit floats"]
    return []


def _moved(op, name, ins, outs) -> list[str]:
    mem, reg = (ins[0], outs[0]) if name == "load" else (ins[0], ins[1] if len(ins) > 1 else None)
    if not isinstance(reg, RT):
        return [f"{name}: an 8-bit float {_desc(mem)} is moved by TMA or by register tiles of its dtype, "
                f"got {_desc(reg) if reg is not None else 'one element'}"]
    # from an st: a row-layout load's byte pairs by ld.shared (what a TMA put there)
    from_st = isinstance(mem, ST) and name == "load" and reg.layout == "row"
    if not (isinstance(mem, GL) or from_st):
        return [f"{name}: an 8-bit float tile ({_desc(reg)}) moves to and from a gl, or loads from an st "
                f"in the row layout (ldmatrix and stmatrix move 16-bit elements; shared 8-bit tiles "
                f"are filled by TMA), got {_desc(mem)}"]
    if mem.dtype != reg.dtype:
        return [f"{name}: an 8-bit float tile moves without converting: {_desc(reg)} and {_desc(mem)} "
                f"must have one dtype ({CONVERT} in registers)"]
    if "fill" in op.attributes or "add" in op.attributes or (name == "load" and "clip" in op.attributes):
        return [f"{name}: an 8-bit float tile moves whole tiles (no fill or add; a store may clip)"]
    return []
