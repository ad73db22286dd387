"""What the runtime must check before launch: the manifest's `divisible`.

Global accesses are not bounds-checked in the kernel, so each gl dim must be
a multiple of every tile extent the kernel reads or writes it with. A tile
rt/st<R, C> at coordinate (b, d, r, c) covers rows r*R.. and cols c*C.., so
it needs r % R == 0 and c % C == 0; a vector rv/sv<L> needs c % L == 0.
A ragged access (tk.load {fill}, tk.store {clip}) is bounds-checked per
memory access, so it needs only that each access stays aligned and whole:
c a multiple of its access width (8 bf16 for a wide tile's 16 bytes, 16
one-byte elements for its byte stores (lanes.byte_pairs), 2 for the row
layout's pairs, 1 for the col layout).
Dims named alike (tk.dim_names) have one size, so they share one requirement;
tk.divisible adds the author's own (e.g. a K loop unrolled by stages).
"""
from __future__ import annotations

from math import lcm

from ..dialect import gl_root, walk
from ..dialect.kernel import (arg_index, arg_names, declared_divisible, declared_multiples, dim_names,
                              gl_arg_names, parallel_args, strided_args, written)
from ..dialect.types import GL, view
from ..hopper.lanes import byte_pairs, extents

# op name -> (operand index of the gl, how to find the tile's type)
_ACCESSES = {
    "tk.load": (0, lambda op: op.results[0].type),
    "tk.store": (0, lambda op: op.operands[1].type),
    "tk.group_load": (1, lambda op: op.operands[0].type),
    "tk.group_store": (0, lambda op: op.operands[1].type),
    "tk.load_split": (0, lambda op: op.results[0].type),
    "tk.store_join": (0, lambda op: op.operands[1].type),
}
_PAIRED = ("tk.load_split", "tk.store_join")  # their gl tile is twice the rt's width
# TMA accesses add no requirement: TMA zero-fills past the end on load and
# clips on store, so a kernel with a cdiv grid handles ragged edges. Whole
# tiles are required where the kernel counts them by floor division instead:
# a grid `a.r // 64`, or a loop `tkc.range(a.c // 64)` (tk.divisible "a.c").


def divisible(func_op) -> dict[int, list[int]]:
    """For every gl argument index of the kernel: per dim (b, d, r, c), the
    LCM of the extents its accesses use (1 where none), unified over dims that
    share a name (they have one size at launch, so each needs every extent)."""
    op = getattr(func_op, "operation", func_op)
    args = op.regions[0].blocks[0].arguments
    out = {i: [1, 1, 1, 1] for i, a in enumerate(args) if isinstance(view(a.type), GL)}
    for inner in walk(op):
        access = _ACCESSES.get(inner.name)
        if access is None or not isinstance(view(inner.operands[access[0]].type), GL):
            continue
        index = arg_index(inner, inner.operands[access[0]], args)
        gl = view(inner.operands[access[0]].type)
        ragged = "fill" in inner.attributes or "clip" in inner.attributes
        k = 2 if inner.name in _PAIRED else 1
        run = 4 if "packed" in inner.attributes else None   # a lane's 16-byte red.v4
        if inner.name == "tk.store" and "add" not in inner.attributes and byte_pairs(view(access[1](inner)), gl.dtype):
            run = 16                                    # 16 bytes a lane (lanes.byte_pairs)
        sliced = gl_root(inner.operands[access[0]])[1]  # a slice's own edges bound these
        for dim, extent in enumerate(extents(view(access[1](inner)), gl.dtype, ragged, k, run)):
            if "bdrc"[dim] not in sliced:
                out[index][dim] = lcm(out[index][dim], extent)
    declared, gls = declared_divisible(op), gl_arg_names(op)
    for ref, n in (*declared.items(), *_grid_divisors(op)):
        arg, _, axis = ref.partition(".")
        if axis and arg in gls:  # "a.c": one gl argument's dim ("K" is a dim name)
            i = gls[arg]
            out[i]["bdrc".index(axis)] = lcm(out[i]["bdrc".index(axis)], n)
    _unify(out, dim_names(op), {k: v for k, v in declared.items() if "." not in k})
    return out


# ops whose gl operand a tensor map describes: (op name, operand index of the gl)
_TMA = {"tk.tma_load": 1, "tk.tma_load_multicast": 1, "tk.pipeline_load": 1, "tk.tma_prefetch": 1, "tk.tma_store": 0,
        "tk.tma_store_add": 0, "tk.pipeline_store": 0}


def params(func_op, names: list[str]) -> list[dict]:
    """The manifest's `params` (what the runtime checks each argument against)."""
    op = getattr(func_op, "operation", func_op)
    div, dims, writes = divisible(op), dim_names(op), written(op)
    parallel, strided = parallel_args(op), strided_args(op)
    out = []
    for i, a in enumerate(op.regions[0].blocks[0].arguments):
        v = view(a.type)
        if isinstance(v, GL):
            out.append({"name": names[i], "kind": "gl", "dtype": v.dtype,
                        "dims": [None if d == -1 else d for d in v.dims], "names": dims[i],
                        "divisible": list(div.get(i, [1, 1, 1, 1])), "writes": i in writes})
            if i in parallel:   # a symmetric buffer: its peers' pointers, rank, world size too
                out[-1]["peers"] = True
            if i in strided:    # its b, d, r strides are parameters too
                out[-1]["strided"] = True
        else:
            out.append({"name": names[i], "kind": "scalar", "dtype": str(a.type)})
    return out


def multiples(func_op) -> list[list[str]]:
    """The manifest's `multiples`: [dim name, dim name] pairs, the first dim's
    size a multiple of the second's at launch (tk.divisible {Hq = "Hkv"})."""
    return declared_multiples(getattr(func_op, "operation", func_op))


def inplace(func_op) -> list[list[int]]:
    """tk.inplace as argument index pairs [output, input]: the output may be the input."""
    op = getattr(func_op, "operation", func_op)
    if "tk.inplace" not in op.attributes:
        return []
    index = {n: i for i, n in enumerate(arg_names(op))}
    return [[index[pair[0].value], index[pair[1].value]] for pair in op.attributes["tk.inplace"]]


def tma_params(func_op) -> set[int]:
    """The gl arguments a TMA op moves (each gets a tensor map at launch)."""
    op = getattr(func_op, "operation", func_op)
    args = op.regions[0].blocks[0].arguments
    return {arg_index(inner, inner.operands[_TMA[inner.name]], args)
            for inner in walk(op) if inner.name in _TMA}


def _grid_divisors(op) -> list[tuple[str, int]]:
    """("a.c", 64) for each `a.c // 64` in tk.grid: a grid of whole blocks
    leaves a remainder unprocessed, so the dim must be a multiple."""
    from ..runtime.grid import compile_grid
    if "tk.grid" not in op.attributes:
        return []
    grid = compile_grid(tuple(e.value for e in op.attributes["tk.grid"]))
    return grid.whole_blocks


def _unify(div: dict[int, list[int]], names: list[list], declared: dict[str, int]) -> None:
    """Every dim named N gets the LCM over all dims named N (and the multiple
    the kernel declares for N: tkc.kernel(divisible={"K": 256}))."""
    by_name: dict[str, int] = dict(declared)
    for i, dims in div.items():
        for axis, n in enumerate(names[i]):
            if n is not None:
                by_name[n] = lcm(by_name.get(n, 1), dims[axis])
    for i, dims in div.items():
        for axis, n in enumerate(names[i]):
            if n is not None:
                dims[axis] = by_name[n]


