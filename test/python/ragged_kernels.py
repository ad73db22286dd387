"""Test kernels over ragged groups (tkc.kernel's ragged=), shared by the
interpreter test (test_ragged_items.py) and the GPU's (test/gpu/test_ragged_items_gpu.py):
imports tkc only, so a GPU machine without MLIR imports it too.

Each work item adds 1 to its own element o[z, y, x], so o counts the visits:
1 on the live items (y < ceil(count[z] / ROWS)), 0 on the dead ones."""
import tkc
from tkc import gl, i32
from tkc.ops import load, store

ROWS = 3   # a y value's rows of a group's count


def _visits(name, persistent=True, order=None):
    def visits(count: gl(i32, 1, 1, 1, "E"), o: gl(i32, 1, "E", "Y", "X")):
        x, y, z = tkc.block_idx.x, tkc.block_idx.y, tkc.block_idx.z
        n = load(i32, o, at=(0, z, y, x), fill=0)
        store(o, n + 1, at=(0, z, y, x), clip=True)
    return tkc.kernel(visits, name=name, warps=1, persistent=persistent, order=order,
                      ragged=("count", ROWS), grid=lambda count, o: (o.c, o.r, o.d))


ragged_visits = _visits("ragged_visits", order="xyz")
ragged_visits_grouped = _visits("ragged_visits_grouped", order="grouped(y, 2)")
ragged_visits_zigzag = _visits("ragged_visits_zigzag", persistent="zigzag", order="yxz")


def expected_visits(counts, Y, X):
    """The reference: 1 where y < min(max(ceil(count / ROWS), 0), Y), as a list [E][Y][X]."""
    return [[[int(y < min(max(-(-n // ROWS), 0), Y)) for _ in range(X)] for y in range(Y)] for n in counts]
