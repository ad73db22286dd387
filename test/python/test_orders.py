"""Work-item orders (tkc/passes/orders.py) and tk-grid-ordering's auto width:
every order visits every work item exactly once, in the order it promises."""
import itertools

import pytest

from tkc.passes.orders import Order, decode, parse_order

SPACES = [(1, 1, 1), (7, 1, 1), (1, 9, 1), (4, 6, 1), (5, 13, 2), (16, 33, 3), (3, 2, 4)]
ORDERS = [Order(axes=p) for p in ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")] + \
    [Order(group_axis=a, width=w) for a in "xy" for w in (1, 2, 4, 5, 8, 16, 64)]


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: o.text())
@pytest.mark.parametrize("dims", SPACES, ids=str)
def test_every_item_once(order, dims):
    X, Y, Z = dims
    seen = [decode(order, t, dims) for t in range(X * Y * Z)]
    assert sorted(seen) == sorted(itertools.product(range(X), range(Y), range(Z)))


def test_permutation_runs_the_first_axis_fastest():
    dims = (3, 4, 2)
    assert [decode(Order(axes="xyz"), t, dims) for t in range(4)] == \
        [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)]
    assert [decode(Order(axes="zyx"), t, dims) for t in range(3)] == \
        [(0, 0, 0), (0, 0, 1), (0, 1, 0)]


def test_grouped_rows_stay_inside_a_group_of_w_rows():
    """Super-rows: W consecutive items share an x and walk y inside the group,
    so S concurrent items touch W rows and S / W columns."""
    X, Y, W = 10, 12, 4
    items = [decode(Order(group_axis="y", width=W), t, (X, Y, 1)) for t in range(X * Y)]
    assert items[:W] == [(0, y, 0) for y in range(W)]
    assert items[W] == (1, 0, 0)
    wave = items[:20]
    assert {y for _, y, _ in wave} == set(range(W)) and len({x for x, _, _ in wave}) == 5
    # the last group is narrower (12 = 4 + 4 + 4: exact here; 13 rows leave 1)
    tail = [decode(Order(group_axis="y", width=W), t, (X, 13, 1)) for t in range(X * 12, X * 13)]
    assert tail == [(x, 12, 0) for x in range(X)]


def test_grouped_columns_are_the_transpose():
    X, Y, W = 9, 5, 3
    rows = [decode(Order(group_axis="y", width=W), t, (Y, X, 1)) for t in range(X * Y)]
    cols = [decode(Order(group_axis="x", width=W), t, (X, Y, 1)) for t in range(X * Y)]
    assert cols == [(y, x, z) for x, y, z in rows]


@pytest.mark.parametrize("text,want", [
    ("auto", "auto"), ("xyz", Order()), ("zyx", Order(axes="zyx")),
    ("grouped(y, 8)", Order(group_axis="y", width=8)), (" grouped( x,12 ) ", Order(group_axis="x", width=12)),
    ("grouped(y, 16, l2)", Order(group_axis="y", width=16, l2=True)),
])
def test_parse(text, want):
    assert parse_order(text) == want
    if want != "auto":
        assert parse_order(want.text()) == want


@pytest.mark.parametrize("text", ["", "xy", "xxy", "grouped(z, 4)", "grouped(y, 0)", "grouped(y)", "rows",
                                  "grouped(y, 4, l3)"])
def test_parse_rejects(text):
    with pytest.raises(ValueError, match="unknown order"):
        parse_order(text)


def test_auto_width_minimises_a_waves_bytes():
    from tkc.passes.grid_ordering import group_width
    # the GEMM's 128x64 A tile (16 KiB, per y) and 64x256 B tile (32 KiB, per x)
    w = group_width(32768, 16384)
    assert w == 16

    def wave(w, bx=32768, by=16384, s=132):
        return w * by + s / w * bx
    assert all(wave(w) <= wave(v) for v in range(1, 133))
    # equal tiles: sqrt(132) ~ 11.5
    assert group_width(8192, 8192) == 11
    # an L2 too small to hold 32 steps of the wave keeps the hardware order
    from tkc.passes.grid_ordering import fits_l2
    assert fits_l2(16, 32768, 16384) and not fits_l2(16, 32768, 16384, l2=8 * 2**20)


@pytest.mark.parametrize("width", [1, 2, 3, 7])
def test_run_time_width_visits_every_item_once(width):
    """grouped(y, W, l2) decodes with the width the kernel computes."""
    order, dims = Order(group_axis="y", width=16, l2=True), (5, 13, 2)
    seen = [decode(order, t, dims, width=width) for t in range(5 * 13 * 2)]
    assert sorted(seen) == sorted(itertools.product(range(5), range(13), range(2)))
    assert seen[:width] == [(0, y, 0) for y in range(width)]
