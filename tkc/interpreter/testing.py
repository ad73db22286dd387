"""Writing small tile IR kernels by hand, for tests of the interpreter and passes.

    m = kernel_module([("a", "!g"), ("s", "f32")], '''
        %t = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!g, index, index, index, index) -> !r
        ...''', aliases={"g": GL("f32", 1, 1, 16, 16).text(), "r": ...}, warps=2)

The body may use `%c0` .. `%c8` (index constants, predefined), type aliases
(`!g`), and generic tk op syntax; `return` is appended.
"""
from __future__ import annotations

CONSTANTS = 9


def kernel_text(args, body: str, *, name: str = "k", warps: int = 1,
                grid=("1", "1", "1"), aliases: dict | None = None) -> str:
    lines = [f"!{k} = {v}" for k, v in (aliases or {}).items()]
    params = ", ".join(f"%{n}: {t}" for n, t in args)
    names = ", ".join(f'"{n}"' for n, _ in args)
    grid_s = ", ".join(f'"{g}"' for g in grid)
    lines.append(f"func.func @{name}({params}) attributes {{tk.kernel, tk.warps = {warps} : i64, "
                 f"tk.grid = [{grid_s}], tk.arg_names = [{names}]}} {{")
    lines += [f"  %c{i} = arith.constant {i} : index" for i in range(CONSTANTS)]
    lines += [body, "  return", "}"]
    return "\n".join(lines)


def kernel_module(args, body: str, *, ctx=None, **kw):
    """Parse `kernel_text(...)` into an ir.Module (in a new tk context by default)."""
    from mlir import ir

    from ..dialect import context
    return ir.Module.parse(kernel_text(args, body, **kw), ctx or context())
