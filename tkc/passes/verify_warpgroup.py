"""tk-verify's hook for the Hopper warpgroup ops (docs/tile-ir.md, "Hopper
ops"): warpgroup mma, its wait and setmaxnreg.

The rules themselves are Hopper facts that the frontend, the interpreter and
the lowering apply too (tkc/hopper/warpgroup.py); this module reads the ops'
attributes and the kernel's launch shape and asks them.
"""
from __future__ import annotations

from ..dialect.attrs import int_or_text, k_order
from ..dialect.kernel import kernel_blocks, kernel_warps
from ..hopper.warpgroup import (OPS, VARIANTS, mma_problems, negate_problems, register_problems,
                                wait_problems, warps_problems)


def check_op(op, name: str, ins, outs, kernel) -> list[str]:
    """Messages for one warpgroup op (name without "tk."), given the views of
    its operands and results and the enclosing kernel (tk-verify's checker
    signature)."""
    out = warps_problems(name, kernel_warps(kernel))
    if name in VARIANTS:
        out += mma_problems(name, *ins[:3], outs[0] if outs else None, k_order(op)) if len(ins) in (3, 4) else \
            [f"{name}: takes 3 operands (a, b, c) and an optional i1 guard, got {len(ins)}"]
        out += negate_problems(name, op)
    elif name == "warpgroup_mma_wait":
        out += wait_problems(ins, outs, int_or_text(op, "pending"))
    else:
        out += register_problems(name, int_or_text(op, "count"), kernel_warps(kernel), kernel_blocks(kernel))
    return out


# op name (without "tk.") -> checker, for tk-verify's table of op checks
CHECKS = {name: check_op for name in OPS}
