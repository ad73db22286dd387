"""A kernel's identity: the source text and the constants its artifact is
keyed by (Kernel.source, Kernel.specialisation), read from the author's
functions without running them: the kernel's own, its grid lambda's and the
plain helpers of its module that it calls."""
from __future__ import annotations

import inspect
import textwrap
import types

__all__ = ["closure_of", "constants_of", "helpers_of", "source_of"]


def closure_of(fn) -> dict:
    """The names fn's closure holds, with their values (empty cells left out)."""
    cells = fn.__closure__ or ()
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return out


_SIMPLE = (int, float, str, bool, type(None))


def _simple(v) -> bool:
    if isinstance(v, tuple):
        return all(_simple(x) for x in v)
    return isinstance(v, _SIMPLE)


_SOURCES: dict = {}  # id(code object) -> (that code object, its source)


def source_of(f) -> str:
    """f's source, kept per code object: inspect tokenizes the file from the
    function's first line to find its end (1.3 ms a function), and the
    library's 233 kernel keys name 1,360 functions, few of them distinct,
    each key asked for twice or more by a build. (Kept by identity: equal
    code objects of two files may differ in source.)"""
    code = f.__code__
    kept = _SOURCES.get(id(code))
    if kept is None or kept[0] is not code:
        kept = _SOURCES[id(code)] = (code, _read_source(f))
    return kept[1]


def _read_source(f) -> str:
    try:
        return textwrap.dedent(inspect.getsource(f))
    except (OSError, TypeError):
        # No source file (e.g. exec'd code): the bytecode is the next best identity.
        return repr(f.__code__.co_code) + repr(f.__code__.co_consts)


def _names(code) -> set[str]:
    """Global names a code object (and nested ones, e.g. lambdas) reads."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


def constants_of(f) -> dict:
    """Closure variables and read module globals with int/float/str/bool/tuple values."""
    out = {}
    for name, v in closure_of(f).items():
        if _simple(v):
            out[f"{f.__qualname__}:{name}"] = v
    for name in sorted(_names(f.__code__)):
        if name in f.__globals__ and _simple(f.__globals__[name]):
            # by name only: the same file imported under another module name keeps its key
            out[f"global:{name}"] = f.__globals__[name]
    return out


def helpers_of(fn) -> list:
    """Plain Python functions of the author's module that the kernel calls (transitively)."""
    seen, out, todo = {fn}, [], [fn]
    while todo:
        f = todo.pop()
        env = {**f.__globals__, **closure_of(f)}
        for name in sorted(_names(f.__code__) | set(f.__code__.co_freevars)):
            g = env.get(name)
            if isinstance(g, types.FunctionType) and g not in seen \
                    and g.__module__ == fn.__module__:
                seen.add(g)
                out.append(g)
                todo.append(g)
    return out
