"""The core of the program generator: a tile kernel as DSL source text.

A program has 1-2 input gls and 1-3 outputs, with dims that are not multiples
of 16 (ragged loads with fill=, clipped stores), runs on a grid of 1-2 x 1-2
blocks of 1, 2 or 4 warps, and each warp writes its own tiles of each output
(at its tile row `by * warps + w`, tile column `bx`). Its body is a sequence
of statements (statements.py) over the register values in scope, with
tkc.range loops that carry accumulators (sum, max, mma) and tkc.if_ branches
that rebind values; warpgroup.py writes the wgmma / pipelined / persistent
programs. The source is printed as a file that imports tkc, so a failing
program reads (and pastes into a test) as an ordinary kernel.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from . import block as B
from . import integers as I
from . import outputs as O
from . import scalars as SC
from . import statements as S
from . import values as V
from .gls import Arg
from .values import Val

HEADER = """import tkc
from tkc import bf16, f8e4m3, f8e5m2, f32, gl, i32, i64, rt, rv, st, sv, tma, warpgroup
from tkc.ops import *

"""


@dataclass
class Program:
    seed: int
    index: int
    name: str
    source: str
    args: list
    grid: tuple
    features: set = field(default_factory=set)
    bad_line: int = 0   # a refusal program: the line its error must name (refusals.py)
    bad_what: str = ""
    body_line: int = 0  # the source line of the body's first statement

    @property
    def filename(self) -> str:
        """Where tracebacks and located errors say the program lives."""
        return f"tkc-fuzz/{self.name}.py"


STRIDED_SHARE = 0.25   # of the float gls: views of wider rows (strided=True)


def _strided(args: list, seed: int, index: int) -> bool:
    """Make some float gls strided: their arrays views of rows 8, 16 or 24
    elements wider (16-byte steps). An rng of its own, so the program's other
    draws, and so its statements, stay as they were."""
    rng = random.Random(f"{seed}-{index}-strided")
    for a in args:
        if a.dtype in ("f32", "bf16") and a.shape[3] % 8 == 0 and rng.random() < STRIDED_SHARE:
            a.pad = 8 * rng.randrange(1, 4)
    return any(a.pad for a in args)


def rng_of(seed: int, index: int, what: str = "program") -> random.Random:
    """A generator seeded by (seed, index) alone (a string seed hashes with
    sha512: the same numbers on every machine and Python)."""
    return random.Random(f"tkc-fuzz:{what}:{seed}:{index}")


class Gen:
    """The state of one program being written."""

    def __init__(self, rng: random.Random, name: str):
        self.rng, self.name = rng, name
        self.warps = rng.choice((1, 2, 2, 4))
        self.grid = (rng.choice((1, 1, 2)), rng.choice((1, 1, 2)))
        self.lines: list[str] = []
        self.top: list[str] = []          # shared allocations, at the kernel's top level
        self.depth = 1
        self.scopes: list[list[Val]] = [[]]
        self.busy: set[str] = set()       # carried values a loop body may not read
        self.loop_vars: list[str] = []
        self.loop_scopes: list[int] = []  # the scope index each open loop's body starts at
        self.in_if = False
        self.groups = 0                   # ragged groups (ragged.py): the grid's z, the outputs' d
        self.out_d = "0"                  # an output's d coordinate ("bz": its group)
        self.kernel_opts = ""             # tkc.kernel's options past warps and grid
        self.after_loop = False           # warpgroup.py: output tiles may lie over the loop's ring
        self.bad_at_def = False           # refusals.py: the error names the kernel's decorator
        self.features: set[str] = set()
        self.count = 0
        self.inputs, self.input_dtype, self.args = [], {}, []
        self.int_inputs, self.wide_input = [], None
        for i in range(rng.choice((1, 2, 2))):
            dtype = ("f32", "bf16")[i] if rng.random() < 0.7 else rng.choice(("f32", "bf16"))
            rows = rng.randrange(8, 16 * self.warps * self.grid[1] * 2 + 9)
            cols = 8 * rng.randrange(1, 8 * self.grid[0] + 3)
            self.inputs.append(f"x{i}")
            self.input_dtype[f"x{i}"] = dtype
            self.args.append(Arg(f"x{i}", dtype, (1, 1, rows, cols)))
        if rng.random() < 0.3:  # an i32 gl: small values, or any i32 (sums and products wrap)
            ints = (-100, 100) if rng.random() < 0.8 else (-2 ** 31, 2 ** 31 - 1)
            self.int_inputs.append("n0")
            self.args.append(Arg("n0", "i32", (1, 1, 16 * self.warps * self.grid[1] + 5,
                                               8 * rng.randrange(2, 8 * self.grid[0] + 3)), ints=ints))
        if rng.random() < 0.1:  # an i64 gl of values past i32's range
            base = 2 ** 40 + 3
            self.wide_input = ("w0", base)
            self.args.append(Arg("w0", "i64", (1, 1, 1, 8 * self.grid[0] + 8), ints=(base, base + 64)))

    # ------------------------------------------------------------ writing
    def emit(self, line: str, feature: str | None = None) -> None:
        self.lines.append("    " * self.depth + line)
        if feature:
            self.features.add(feature)

    def side(self, what: str, *more: str) -> random.Random:
        """A generator of its own for an optional draw (`what`, and `more` to
        tell draws of one program apart): the program's other draws, from
        self.rng, stay those of before the option existed."""
        return random.Random(":".join(("tkc-fuzz", what, self.name, *more)))

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def alloc(self, text: str) -> str:
        name = f"s{len(self.top)}"
        self.top.append(f"    {name} = {text}")
        return name

    def whole_input(self, dtype: str, shape: tuple) -> str:
        """An input gl of static dims `shape` (whole tiles, for group_load)."""
        name = f"y{sum(a.name.startswith('y') for a in self.args)}"
        self.args.append(Arg(name, dtype, (1, 1) + shape, static=True))
        return name

    def define(self, v: Val) -> None:
        self.scopes[-1].append(v)
        if v.kind == "rt" and v.shape[0] == 8:
            self.features.add("rows8")     # an 8-row tile (fragments.HALF)

    def rebind(self, v: Val) -> None:
        """v's name now holds v (an update of an outer value)."""
        for scope in self.scopes:
            for i, u in enumerate(scope):
                if u.name == v.name:
                    scope[i] = v

    def out_shape(self, rows: int, cols: int) -> tuple:
        """An output gl's shape: one (rows, cols) matrix a group (one if not ragged)."""
        return (1, max(self.groups, 1), rows, cols)

    def tile_row_expr(self) -> str:
        """This warp's tile row (in a loop, sometimes shifted by the loop variable)."""
        base = "tr"
        if self.loop_vars and self.rng.random() < 0.4:
            return f"{base} + {self.loop_vars[-1]}"
        return base

    def tile_col_expr(self) -> str:
        if self.loop_vars and self.rng.random() < 0.5:
            return self.loop_vars[-1]
        return "bx"

    def block_row_expr(self) -> str:
        return "by"

    # ------------------------------------------------------------ operands
    def values(self) -> list[Val]:
        return [v for scope in self.scopes for v in scope if v.name not in self.busy]

    def writable(self) -> list[Val]:
        """The values a statement here may rebind (a branch's target, an inner loop's
        carried ones): inside a loop only those its body made, which each iteration
        makes anew. Rebinding an outer one would carry it through the loop, whose
        body the interval analysis follows once: exp2 of its own doubled value grew
        to 2.3e6 on the second trip where 21 was allowed (seed 3902, program 1190)."""
        start = self.loop_scopes[-1] if self.loop_scopes else 0
        return [v for scope in self.scopes[start:] for v in scope if v.name not in self.busy]

    def pick(self, kinds=("rt", "rv"), like: Val | None = None, exact: bool = False, exclude=(),
             **want) -> Val | None:
        """A value in scope of one of `kinds` (of like's type; with the given
        dtype/shape/layout/rows/cols), the recent ones likelier."""
        out = []
        for v in self.values():
            if like is not None and not v.same_type(like):
                continue
            if like is None and v.kind not in kinds:
                continue
            if exact and not v.exact:
                continue
            if any(getattr(v, k) != x for k, x in want.items() if k in ("dtype", "shape", "layout")):
                continue
            if "rows" in want and (v.kind != "rt" or v.shape[0] != want["rows"]):
                continue
            if "cols" in want and (v.kind != "rt" or v.shape[1] != want["cols"]):
                continue
            out.append(v)
        if not out:
            return None
        return out[-1 - min(int(self.rng.expovariate(0.4)), len(out) - 1)]

    # ------------------------------------------------------------ statements
    def statement(self) -> Val | None:
        names = list(STATEMENTS)
        weights = [STATEMENTS[n][0] for n in names]
        for _ in range(8):
            name = self.rng.choices(names, weights)[0]
            v = STATEMENTS[name][1](self)
            if v is not None:
                self.define(v)
                return v
        return None

    def body(self, n: int, control: bool = True) -> None:
        for _ in range(n):
            r = self.rng.random()
            if control and r < 0.12 and len(self.loop_vars) < 2:
                self.loop()
            elif control and r < 0.2 and not self.in_if:
                self.branch()
            else:
                self.statement()

    def loop(self) -> None:
        """A tkc.range loop whose body updates 1-2 outer values in place."""
        carried = [v for v in self.writable() if v.kind in ("rt", "rv")]
        self.rng.shuffle(carried)
        carried = carried[: self.rng.choice((1, 1, 2))]
        if not carried:
            return
        n = self.rng.randrange(1, 4)
        scalar = SC.carry_start(self) if self.rng.random() < 0.3 else None
        var = f"i{len(self.loop_vars)}"
        self.emit(f"for {var} in tkc.range({n}):", "range")
        self.depth += 1
        self.loop_vars.append(var)
        self.scopes.append([])
        self.loop_scopes.append(len(self.scopes) - 1)
        self.busy |= {v.name for v in carried + [scalar] if v is not None}
        self.body(self.rng.randrange(1, 4))
        updated = [self.accumulate(v, n) for v in carried]
        if scalar is not None:
            updated.append(SC.carry_step(self, scalar, n))
        self.busy -= {v.name for v in carried + [scalar] if v is not None}
        self.scopes.pop()
        self.loop_scopes.pop()
        self.loop_vars.pop()
        self.depth -= 1
        if not any(updated):
            self.emit("    pass")
        for v in updated:
            if v is not None:
                self.rebind(v)

    def accumulate(self, acc: Val, n: int) -> Val | None:
        """acc = acc + e, max(acc, e), an mma into acc or a reduction onto it;
        acc as it may be after the loop (values.accumulated)."""
        r = self.rng
        if acc.kind == "rt" and acc.dtype == "f32" and acc.layout == "row" and r.random() < 0.4:
            step = S.mma(self, acc=replace(acc, lo=0.0, hi=0.0, err=0.0))
            if step is None:
                return None
            self.lines[-1] = self.lines[-1].replace(f"{step.name} = ", f"{acc.name} = ", 1)
            return V.accumulated(acc, step, n)
        if acc.kind == "rv" and r.random() < 0.5:
            op = r.choice(("row_sum", "row_max") if acc.layout == "col" else ("col_sum", "col_max"))
            want = {"rows": acc.shape[0]} if acc.layout == "col" else {"cols": acc.shape[0]}
            x = self.pick(kinds=("rt",), dtype=acc.dtype, **want)
            if x is not None:
                step = S.reduce(self, x, init=replace(acc, lo=0.0, hi=0.0, err=0.0), op=op)
                if step is not None:
                    self.lines[-1] = self.lines[-1].replace(f"{step.name} = ", f"{acc.name} = ", 1)
                    return V.accumulated(acc, step, n) if op.endswith("sum") else V.union(acc.name, acc, step)
        e = self.pick(like=acc) or (S.load(self, acc.dtype, acc.shape, acc.layout)
                                    if acc.kind == "rt" and (acc.dtype != "i32" or self.int_inputs) else None)
        if e is None:
            return None
        op = r.choice(("add", "add", "max", "min"))
        self.emit(f"{acc.name} = " + (f"{acc.name} + {e.name}" if op == "add" else f"{op}({acc.name}, {e.name})"),
                  f"carry_{op}")
        return V.accumulated(acc, e, n) if op == "add" else V.union(acc.name, acc, e)

    def branch(self) -> None:
        """tkc.if_ (and maybe tkc.else_) rebinding an outer value."""
        targets = [v for v in self.writable() if v.kind in ("rt", "rv", "f32", "index")]
        if not targets:
            return
        x = self.rng.choice(targets)
        conds = ["tkc.warpid() % 2 == 0", "bx == 0", "tr > 0"] + [f"{i} % 2 == 1" for i in self.loop_vars]
        scalar_cond = SC.condition(self) if self.rng.random() < 0.4 else None
        self.emit(f"with tkc.if_({scalar_cond or self.rng.choice(conds)}):", "if_scalar" if scalar_cond else "if")
        result = self.arm(x)
        if self.rng.random() < 0.4:
            self.emit("with tkc.else_():", "else")
            other = self.arm(x)
            result = V.union(x.name, result, other)
        self.rebind(V.union(x.name, x, result))

    def arm(self, x: Val) -> Val:
        self.depth += 1
        self.in_if = True
        self.scopes.append([])
        self.body(self.rng.randrange(0, 3), control=False)
        y = self.pick(like=x)
        c = S.const_for(self, x)
        new = V.binary("mul", y or x, float(c), x.name)
        self.emit(f"{x.name} = {(y or x).name} * {c}")
        self.scopes.pop()
        self.in_if = False
        self.depth -= 1
        return new

    # ------------------------------------------------------------ the end
    def outputs(self) -> list[Val]:
        """1-3 register tiles to store; vectors become tiles by a broadcast."""
        tiles = [v for v in self.values() if v.kind == "rt"]
        vecs = [v for v in self.values() if v.kind == "rv"]
        out = tiles[-self.rng.choice((1, 2, 2, 3)):]
        if vecs and (self.rng.random() < 0.5 or not out):
            vec = vecs[-1]
            zero = f"zero(rt({vec.dtype}, {vec.shape[0]}, 16))" if vec.layout == "col" else \
                f"zero(rt({vec.dtype}, 16, {vec.shape[0]}))"
            t = Val(self.fresh(), "rt", vec.dtype, (vec.shape[0], 16) if vec.layout == "col" else (16, vec.shape[0]),
                    "row", min(vec.lo, 0.0), max(vec.hi, 0.0), vec.err)
            self.emit(f"{t.name} = add_{'row' if vec.layout == 'col' else 'col'}({zero}, {vec.name})", "broadcast")
            out = out[-2:] + [t]
        return out

    def store_output(self, v: Val) -> None:
        """A clipped store of v's tile of every warp into a new output gl, whose
        dims leave the last tile row and column ragged."""
        rows, cols = v.shape
        j = sum(a.output for a in self.args)
        r = self.warps * self.grid[1] * rows - self.rng.randrange(0, rows)
        c = self.grid[0] * cols - 8 * self.rng.randrange(0, cols // 8)
        self.args.append(Arg(f"o{j}", v.dtype, self.out_shape(r, c), output=True, tol=v.err,
                             block_rows=self.warps * rows, block_cols=cols,
                             bounds=None if v.dtype == "i32" else (v.lo, v.hi)))
        if not O.tma_store(self, v, f"o{j}"):
            self.emit(f"store(o{j}, {v.name}, (0, {self.out_d}, tr, bx), clip=True)", "store_clip")

    def finish(self, seed: int, index: int, **kw) -> Program:
        for v in self.outputs():
            self.store_output(v)
        O.scalar_outputs(self)
        O.counter(self)
        return self.program(seed, index, **kw)

    def program(self, seed: int, index: int, prologue: list[str] | None = None,
                kernel_opts: str | None = None) -> Program:
        if prologue is None:
            prologue = ["bx, by = tkc.block_idx.x, tkc.block_idx.y", f"tr = by * {self.warps} + tkc.warpid()"]
        kernel_opts = self.kernel_opts if kernel_opts is None else kernel_opts
        if _strided(self.args, seed, index):
            self.features.add("strided")
        params = ", ".join(f"{a.name}: gl({a.dtype}, 1, {a.shape[1]}, {self.dim(a.shape[2], a.static)}, "
                           f"{self.dim(a.shape[3], a.static)}{', strided=True' if a.pad else ''})"
                           for a in self.args)
        names = ", ".join(a.name for a in self.args)
        grid = tuple(self.grid) + ((self.groups,) if self.groups else ())
        head = (f"@tkc.kernel(warps={self.warps}, grid=lambda {names}: {grid}{kernel_opts})\n"
                f"def {self.name}({params}):\n")
        top = ["    " + p for p in prologue] + self.top
        body = "\n".join(top + self.lines)
        p = Program(seed, index, self.name, HEADER + head + body + "\n", self.args, self.grid, self.features)
        p.body_line = (HEADER + head).count("\n") + len(top) + 1
        return p

    def dim(self, n: int, static: bool = False) -> str:
        """A gl dim: static (the int) or known at launch (None), at random."""
        return str(n) if static or self.rng.random() < 0.5 else "None"


def core(rng: random.Random, name: str, seed: int, index: int) -> Program:
    """A core program (no warpgroup main loop)."""
    g = Gen(rng, name)
    g.define(S.load(g))
    g.body(rng.randrange(3, 12))
    return g.finish(seed, index)


# name -> (weight, statement): the core statements (statements.py), the
# integer ones (integers.py), scalars (scalars.py) and block reductions (block.py)
STATEMENTS = {**S.STATEMENTS, "init_i32": (1, I.init_i32), "index": (1, I.index), "element": (1, SC.element),
              "scalar_arith": (2, SC.arith), "scalar_convert": (1, SC.convert), "block": (2, B.block)}
