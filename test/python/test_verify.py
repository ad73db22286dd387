"""tk-verify on IR built with tkc.dialect.ops: located messages, all errors collected."""
from __future__ import annotations

import pytest

from tkc.dialect import ops
from tkc.dialect.types import GL, RT, RV, ST, SV
from tkc.diagnostics import TkcErrors
from tkc.passes import verify as tkverify
from tkc.passes.layout_selection import choose_swizzle

F32 = RT("f32", 16, 32, "row")


class Kernel:
    """A tk kernel built op by op; op i gets loc("kernel.py":i+10:5)."""

    def __init__(self, args=(), *, warps=4, attrs=None):
        from mlir import ir
        from mlir.dialects import func

        import tkc.dialect as d
        self.ir = ir
        self.ctx = d.context()
        self.line = 10
        with self.ctx, ir.Location.file("kernel.py", 1, 1):
            self.module = ir.Module.create()
            types = [t.mlir() if hasattr(t, "mlir") else ir.Type.parse(t) for t in args]
            with ir.InsertionPoint(self.module.body):
                self.fn = func.FuncOp("k", ir.FunctionType.get(types, []))
            self.fn.attributes["tk.kernel"] = ir.UnitAttr.get()
            self.fn.attributes["tk.warps"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), warps)
            for k, v in (attrs or {}).items():
                self.fn.attributes[k] = ir.Attribute.parse(v)
            self.block = self.fn.add_entry_block()
            self.args = list(self.block.arguments)
            with ir.InsertionPoint(self.block):
                self.c0 = self._arith_index(0)

    def _arith_index(self, n):
        from mlir.dialects import arith
        return arith.ConstantOp(self.ir.IndexType.get(), n).result

    def op(self, build):
        """Run build() at the end of the entry block at the next line; return (result, line)."""
        self.line += 1
        with self.ctx, self.ir.Location.file("kernel.py", self.line, 5), self.ir.InsertionPoint(self.block):
            return build(), self.line

    def errors(self):
        from mlir.dialects import func
        with self.ctx, self.ir.Location.file("kernel.py", 99, 1), self.ir.InsertionPoint(self.block):
            func.ReturnOp([])
        return tkverify.verify(self.module.operation)

    def messages(self):
        return [f"{w}: {m}" for w, m in self.errors()]


def test_valid_kernel_has_no_errors():
    k = Kernel([GL("bf16", 1, 1, -1, 64), "f32"])
    g, s = k.args
    st, _ = k.op(lambda: ops.alloc(ST("bf16", 64, 64)))
    k.op(lambda: ops.group_load(st, g, [k.c0] * 4, warps=4))
    a, _ = k.op(lambda: ops.load(RT("bf16", 16, 64, "row"), st, [k.c0, k.c0]))
    b, _ = k.op(lambda: ops.load(RT("bf16", 64, 32, "col"), st, [k.c0, k.c0]))
    c, _ = k.op(lambda: ops.init("zero", F32))
    d, _ = k.op(lambda: ops.mma("mma_ab", a, b, c))
    m, _ = k.op(lambda: ops.reduce("row_max", d))
    e, _ = k.op(lambda: ops.broadcast("sub_row", d, m))
    f, _ = k.op(lambda: ops.binary("mul", e, s))
    k.op(lambda: ops.swap_layout(ops.unary("copy", f, F32.with_(dtype="bf16"))))
    assert k.errors() == []


def test_mma_layout_error_names_file_line_and_rule():
    k = Kernel()
    a, _ = k.op(lambda: ops.init("zero", RT("bf16", 16, 64, "row")))
    b, _ = k.op(lambda: ops.init("zero", RT("bf16", 64, 32, "row")))
    c, _ = k.op(lambda: ops.init("zero", F32))
    _, line = k.op(lambda: ops.mma("mma_ab", a, b, c))
    assert k.messages() == [f"kernel.py:{line}:5: mma_ab: b must be a col-layout rt, "
                            "got rt<bf16, 64, 32, row>"]


@pytest.mark.parametrize("name, a, b, ok", [
    ("mma_ab", RT("f16", 16, 32, "row"), RT("f16", 32, 32, "col"), True),
    ("mma_abt", RT("bf16", 16, 32, "row"), RT("bf16", 32, 32, "row"), True),
    ("mma_atb", RT("bf16", 32, 16, "col"), RT("bf16", 32, 32, "col"), True),
    ("mma_atbt", RT("bf16", 32, 16, "col"), RT("bf16", 32, 32, "row"), True),
    ("mma_abt", RT("bf16", 16, 32, "row"), RT("bf16", 32, 32, "col"), False),
    ("mma_atb", RT("bf16", 16, 32, "row"), RT("bf16", 32, 32, "col"), False),
    ("mma_ab", RT("bf16", 16, 48, "row"), RT("bf16", 32, 32, "col"), False),  # K 48 vs 32
    ("mma_ab", RT("f32", 16, 32, "row"), RT("f32", 32, 32, "col"), False),
])
def test_mma_table(name, a, b, ok):
    k = Kernel()
    av, _ = k.op(lambda: ops.init("zero", a))
    bv, _ = k.op(lambda: ops.init("zero", b))
    c, _ = k.op(lambda: ops.init("zero", RT("f32", 16, 32, "row")))
    k.op(lambda: ops.mma(name, av, bv, c))
    errors = k.errors()
    assert (errors == []) == ok, errors
    assert all(m.startswith(f"{name}: ") for _, m in errors)


@pytest.mark.parametrize("name, operand, share, message", [
    ("exp2", RT("f32", 16, 32, "row"), 0.5, None),
    ("exp", RT("bf16", 16, 32, "row"), 1.0, None),
    ("exp2", RT("f32", 16, 32, "row"), 1.5, "exp2: fma must be a number in [0, 1], got 1.5"),
    ("exp2", RV("f32", 16, "col"), 0.5, "exp2: an fma share needs an rt operand, got rv<f32, 16, col>"),
    ("log2", RT("f32", 16, 32, "row"), 0.5, "log2: only exp and exp2 take an fma share"),
])
def test_fma_share(name, operand, share, message):
    """exp / exp2's share of elements on the FMA pipe: a number in [0, 1], on an rt."""
    k = Kernel()
    x, _ = k.op(lambda: ops.init("zero", operand))
    k.op(lambda: ops.unary(name, x, fma=share))
    assert [m for _, m in k.errors()] == ([message] if message else [])


def test_all_errors_are_collected_in_ir_order():
    k = Kernel([GL("f32", 1, 1, 32, 32)], warps=2)
    g = k.args[0]
    _, l1 = k.op(lambda: ops.init("zero", RT("f32", 16, 24)))
    x, _ = k.op(lambda: ops.init("zero", RT("f32", 16, 32, "col")))
    _, l2 = k.op(lambda: ops.reduce("row_sum", x))
    st, _ = k.op(lambda: ops.alloc(ST("f32", 32, 32)))
    _, l3 = k.op(lambda: ops.group_load(st, g, [k.c0] * 4, warps=4))
    msgs = k.messages()
    assert [m.split(": ", 1)[0] for m in msgs] == [f"kernel.py:{n}:5" for n in (l1, l2, l3)]
    assert "rows and cols must be positive multiples of 16" in msgs[0]
    assert "row_sum: x must be an rt in row or wide layout" in msgs[1]
    assert "group_load: warps = 4 must divide the kernel's tk.warps = 2" in msgs[2]


def test_run_raises_one_error_listing_every_message():
    k = Kernel()
    k.op(lambda: ops.init("zero", RT("f32", 16, 8)))
    k.op(lambda: ops.init("ones", RV("f32", 20)))
    k.errors()
    with pytest.raises(TkcErrors) as info:
        tkverify.run(k.module.operation)
    lines = str(info.value).splitlines()
    assert lines == [f"kernel.py:11:5: error: zero: result: rt<f32, 16, 8, row>: "
                     "rows and cols must be positive multiples of 16 (rows may be 8)",
                     f"kernel.py:12:5: error: ones: result: rv<f32, 20, col>: "
                     "length must be a positive multiple of 16 (or 8 for a \"col\" rv: an 8-row tile's rows)"]
    assert info.value.where == "kernel.py:11:5" and len(info.value.errors) == 2


def test_tile_scalar_binary_needs_f32():
    k = Kernel(["i32", "f32"])
    n, s = k.args
    x, _ = k.op(lambda: ops.init("zero", F32))
    k.op(lambda: ops.binary("add", x, s))
    _, line = k.op(lambda: ops.binary("add", x, n))
    assert k.messages() == [f"kernel.py:{line}:5: add: y must have x's type rt<f32, 16, 32, row> "
                            "or be an f32 scalar, got i32"]


def test_load_store_kinds_and_index_counts():
    k = Kernel([GL("f32", 1, 1, -1, 64)])
    g = k.args[0]
    sv, _ = k.op(lambda: ops.alloc(SV("f32", 64)))
    st, _ = k.op(lambda: ops.alloc(ST("f32", 32, 64)))
    k.op(lambda: ops.load(RV("f32", 64, "row"), sv))
    k.op(lambda: ops.load(RV("f32", 64, "row"), g, [k.c0] * 4))
    _, l1 = k.op(lambda: ops.load(RT("f32", 16, 64), g, [k.c0] * 3))
    _, l2 = k.op(lambda: ops.load(RT("f32", 16, 48), st, [k.c0] * 2))
    x, _ = k.op(lambda: ops.init("zero", RT("f32", 16, 64)))
    _, l3 = k.op(lambda: ops.store(sv, x))
    msgs = k.messages()
    assert msgs == [
        f"kernel.py:{l1}:5: load: a gl takes 4 indices, got 3",
        f"kernel.py:{l2}:5: load: rt<f32, 16, 48, row> is not a subtile of st<f32, 32, 64, auto> "
        "(the st's shape must be a multiple of the rt's)",
        f"kernel.py:{l3}:5: store: x must be an rv with an sv, got rt<f32, 16, 64, row>",
    ]


def test_atomic_add_operands():
    """tk.atomic_add: an i32 gl counter, an sv<f32> scratch, 4 coordinates,
    gl arguments after them (gls of any types: argument numbers), an integer
    value, tk.sync's id / warps."""
    k = Kernel([GL("i32", 1, 1, 1, 16), GL("f32", 1, 1, 1, 16), GL("bf16", 1, 2, 32, 64), "f32"])
    count, f, h, x = k.args
    s, _ = k.op(lambda: ops.atomic_add(count, ops.alloc(SV("f32", 16)), [k.c0] * 4, [f, h]))
    scratch = s.owner.operands[1]
    assert str(s.owner.attributes["after"]) == "array<i64: 1, 2>"
    _, l1 = k.op(lambda: ops.atomic_add(f, scratch, [k.c0] * 4))
    _, l2 = k.op(lambda: ops.atomic_add(count, scratch, [k.c0] * 4, [f, x]))
    _, l3 = k.op(lambda: ops.atomic_add(count, scratch, [k.c0] * 4, warps=5))
    _, l4 = k.op(lambda: ops.atomic_add(count, scratch, [k.c0] * 4, [f]))
    l4_op = list(k.block.operations)[-1]
    l4_op.attributes["after"] = k.ir.Attribute.parse("array<i64: 7>", k.ctx)
    msgs = k.messages()
    assert msgs == [
        f"kernel.py:{l1}:5: atomic_add: adds into an i32 gl (a counter), got gl<f32, 1, 1, 1, 16>",
        f"kernel.py:{l2}:5: atomic_add: after= takes gl arguments, got argument 3 (f32)",
        f"kernel.py:{l3}:5: sync: warps must be an integer in 1..4 (the kernel's warps), got 5 : i64",
        f"kernel.py:{l4}:5: atomic_add: after= takes gl arguments, got argument 7 (none)",
    ]


def test_kernel_attributes():
    k = Kernel([GL("f32", 1, 1, -1, 64), "f64"],
               attrs={"tk.grid": '["1", "1"]', "tk.arg_names": '["a"]'})
    msgs = k.messages()
    assert any("tk.grid must be an array of 3 strings" in m for m in msgs)
    assert any("tk.arg_names must be an array of 2 strings" in m for m in msgs)
    assert any("argument 1 must be a !tk.gl, f32 or i32, got f64" in m for m in msgs)
    assert all(m.startswith("kernel.py:") for m in msgs)


def test_alloc_outside_entry_block():
    from mlir.dialects import scf
    k = Kernel()

    def loop():
        c1 = k._arith_index(1)
        f = scf.ForOp(k.c0, c1, c1)
        with k.ir.InsertionPoint(f.body):
            ops.alloc(ST("bf16", 16, 16))
            scf.YieldOp([])
        return f
    _, line = k.op(loop)
    assert k.messages() == [f"kernel.py:{line}:5: alloc: must be in the kernel function's "
                            "entry block (not in a loop or branch)"]


@pytest.mark.parametrize("dtype, cols, want", [
    ("bf16", 64, "128b"), ("bf16", 32, "64b"), ("bf16", 16, "32b"), ("bf16", 48, "32b"),
    ("f16", 96, "64b"), ("f32", 16, "64b"), ("f32", 32, "128b"), ("f32", 80, "64b"),
    ("bf16", 192, "128b"),
])
def test_choose_swizzle(dtype, cols, want):
    assert choose_swizzle(ST(dtype, 16, cols)) == want


def test_chosen_swizzle_always_verifies():
    """Whatever layout selection picks, tk-verify accepts (width divisible by S)."""
    for dtype in ("bf16", "f16", "f32"):
        for cols in range(16, 272, 16):
            k = Kernel()
            k.op(lambda: ops.alloc(ST(dtype, 16, cols, choose_swizzle(ST(dtype, 16, cols)))))
            assert k.errors() == [], (dtype, cols)


def test_packed_store_operands():
    """tk.store {packed}: an f32 row-layout rt added (add) into an f32 gl (or
    an 8-bit one stored into a gl of its dtype), not through a slice of its
    columns (16 or 4 aligned bytes a lane)."""
    k = Kernel([GL("f32", 1, 1, -1, 64)])
    g = k.args[0]
    x, _ = k.op(lambda: ops.init("zero", F32))
    k.op(lambda: ops.store(g, x, [k.c0] * 4, clip=True, add=True, packed=True))
    _, l1 = k.op(lambda: ops.store(g, x, [k.c0] * 4, clip=True, packed=True))
    sliced, _ = k.op(lambda: ops.gl_slice(GL("f32", 1, 1, -1, -1), g, "c", k.c0, k.c0))
    _, l2 = k.op(lambda: ops.store(sliced, x, [k.c0] * 4, clip=True, add=True, packed=True))
    msgs = k.messages()
    assert msgs == [
        f"kernel.py:{l1}:5: store: packed (red.global.add.v4.f32) adds an f32 row-layout rt into an f32 gl, "
        "or (st.global.b32) stores an 8-bit one into a gl of its dtype, got rt<f32, 16, 32, row> into "
        "gl<f32, 1, 1, -1, 64> without add",
        f"kernel.py:{l2}:5: store: packed writes 4 or 16 aligned bytes a lane: not through a gl sliced "
        "along its columns (the slice's start may not be a multiple of 4)",
    ]
