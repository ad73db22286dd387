"""Work-item orders of the grid level (docs/tile-ir.md, "Block level": tk.order).

A kernel's grid (X, Y, Z) is its work-item space. An order maps the linear
work-item number t (0 .. X*Y*Z-1, the order blocks take them in) to the item's
(x, y, z):

- a permutation of "xyz", fastest axis first: "xyz" is the hardware's launch
  order, "zyx" runs z fastest;
- "grouped(y, W)": super-rows. Consecutive items stay inside a group of W
  rows (y values) and walk x slowly, so the blocks running at one time share
  W rows of A and a few columns of B in L2 (the paper's GEMM block order); a
  last group narrower than W takes the rows left. z is outermost.
  "grouped(x, W)" is the same with x and y swapped (super-columns).
  "grouped(y, W, l2)": W at most, narrower at run time when a group's rows
  of tiles over the whole loop would not stay in L2 (tk-grid-ordering).

`decode` is written once over an arithmetic (`PyArith` for Python ints, the
pass's IR builder for index values), so the IR the pass emits and the
reference the tests check against are the same function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

AXES = "xyz"


@dataclass(frozen=True)
class Order:
    axes: str = "xyz"               # fastest first (a permutation of xyz)
    group_axis: str | None = None   # "x" or "y" for a grouped order
    width: int = 0                  # the group width W
    l2: bool = False                # at run time, no wider than a group's panels fit L2

    def text(self) -> str:
        if not self.group_axis:
            return self.axes
        return f"grouped({self.group_axis}, {self.width}{', l2' if self.l2 else ''})"


_GROUPED = re.compile(r"^grouped\(\s*([xy])\s*,\s*(\d+)\s*(,\s*l2\s*)?\)$")


def parse_order(text: str):
    """An Order, or the string "auto"; ValueError naming the language otherwise."""
    t = text.strip()
    if t == "auto":
        return "auto"
    if sorted(t) == sorted(AXES) and len(t) == 3:
        return Order(axes=t)
    m = _GROUPED.match(t)
    if m and int(m[2]) >= 1:
        return Order(group_axis=m[1], width=int(m[2]), l2=bool(m[3]))
    raise ValueError(f"unknown order {text!r}: expected \"auto\", a permutation of \"xyz\" "
                     "(fastest axis first) or \"grouped(y, W)\" / \"grouped(x, W)\" with W >= 1 "
                     "(\"grouped(y, W, l2)\": at most W, fewer when a group's tiles outgrow L2)")


class PyArith:
    """decode's arithmetic on Python ints."""

    @staticmethod
    def add(a, b):
        return a + b

    @staticmethod
    def sub(a, b):
        return a - b

    @staticmethod
    def mul(a, b):
        return a * b

    @staticmethod
    def div(a, b):
        return a // b

    @staticmethod
    def rem(a, b):
        return a % b

    @staticmethod
    def min(a, b):
        return min(a, b)


def decode(order: Order, t, dims, A=PyArith, width=None):
    """(x, y, z) of work item t in the space dims = (X, Y, Z) under `order`
    (`width`: the group width when it is known only at run time)."""
    X, Y, Z = dims
    if order.group_axis is None:
        sizes = dict(zip(AXES, dims))
        out, rest = {}, t
        for i, a in enumerate(order.axes):
            out[a] = rest if i == 2 else A.rem(rest, sizes[a])
            if i < 2:
                rest = A.div(rest, sizes[a])
        return out["x"], out["y"], out["z"]
    # grouped: g is the grouped axis (width W), o the other one; z outermost
    G, O = (Y, X) if order.group_axis == "y" else (X, Y)
    if isinstance(Z, int) and Z == 1:
        z, r = 0, t
    else:
        plane = A.mul(X, Y)
        z, r = A.div(t, plane), A.rem(t, plane)
    w = order.width if width is None else width
    span = A.mul(w, O)                      # items in one full group
    group = A.div(r, span)
    first = A.mul(group, w)                 # the group's first g value
    rows = A.min(w, A.sub(G, first))        # W, or what is left in the last group
    q = A.sub(r, A.mul(group, span))
    g = A.add(first, A.rem(q, rows))
    o = A.div(q, rows)
    x, y = (o, g) if order.group_axis == "y" else (g, o)
    return x, y, z
