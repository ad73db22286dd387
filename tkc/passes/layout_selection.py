"""tk-layout-selection (v1): choose the swizzle of every shared tile left "auto".

The rule is the paper's (docs/tile-ir.md, "Shared tile memory layout"): the
widest swizzle of 128, 64 and 32 bytes that divides the tile's row width in
bytes (cols * element size), else "none". Tensor-core (wgmma) and TMA
accesses need one of those swizzles, and the widest one spreads a row group's
16-byte chunks over the most banks, so it has the fewest bank conflicts.
A swizzle the author fixed is kept.

The choice changes the `tk.alloc` result's type in place, so every user of
the tile (loads, stores, group copies, loop-carried values are not possible
for st) sees the decided layout.

Not yet here (a later issue): choosing register-tile layouts by propagating
them through the dataflow (inserting swap_layout where needed), and reporting
the bank conflicts each st access pattern would have.
"""
from __future__ import annotations

from ..dialect.types import ST, view
from ..dtypes import itemsize
from .registry import register

WIDTHS = (128, 64, 32)  # swizzle bytes, widest first


def choose_swizzle(st: ST) -> str:
    """The swizzle for an "auto" st: the widest S in WIDTHS dividing cols * E."""
    row_bytes = st.cols * itemsize(st.dtype)
    for s in WIDTHS:
        if row_bytes % s == 0:
            return f"{s}b"
    return "none"


@register("tk-layout-selection",
          "choose each auto shared tile's swizzle: widest of 128b/64b/32b dividing its row bytes")
def run(module_op) -> None:
    for op in _allocs(module_op.operation):
        result = op.results[0]
        try:
            st = view(result.type)
        except ValueError:  # malformed: tk-verify reports it
            continue
        if isinstance(st, ST) and st.swizzle == "auto":
            result.set_type(st.with_(swizzle=choose_swizzle(st)).mlir(result.type.context))


def _allocs(op):
    """Every tk.alloc nested in op, in IR order."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if child.name == "tk.alloc":
                    yield child
                yield from _allocs(child)
