"""A kernel with some launch arguments fixed: what an autotuned builder
returns when a schedule choice is a launch argument, not a build parameter.

    @tkc.autotune(space={"consumers": [4, 3], "pairs": [1, 2, 4, 8]}, ...)
    def schedule(consumers, pairs):
        return Bound(fftconv(1024, 1024, consumers), pairs=pairs)

Tuning builds, runs and times a candidate as `kernel(*args)` (measure.py);
a choice like tkc.fftconv's batch pairs a block only changes the launch, so
its candidates are one Kernel each launched with another value. Bound runs
like that Kernel with the named arguments filled in: a call, `prepare` (the
fixed values become bound arguments of the prepared launch, as a plan binds
its constants) and `interpret` take the other arguments in order; everything
else (name, build, artifact_key, spills: what building and the tables read)
is the Kernel's. Candidates that differ only in bound values share one
Kernel, so they are built once.
"""
from __future__ import annotations

from ..diagnostics import TkcError

__all__ = ["Bound"]


class Bound:
    """kernel with the named arguments `values` fixed (see the module docstring)."""

    def __init__(self, kernel, **values):
        names = list(kernel.params)
        unknown = [n for n in values if n not in names]
        if unknown:
            from ..runtime.callsite import caller
            raise TkcError(f"Bound: kernel {kernel.name} has no argument {unknown[0]!r} "
                           f"(it takes {', '.join(names)})", caller())
        self.kernel = kernel
        self.values = {names.index(n): v for n, v in values.items()}  # argument index -> value

    def __repr__(self):
        names = list(self.kernel.params)
        fixed = ", ".join(f"{names[i]}={v!r}" for i, v in sorted(self.values.items()))
        return f"<Bound {self.kernel.name}({fixed})>"

    def __getattr__(self, name):  # name, build, artifact_key, spills, trace ...: the kernel's
        if name == "kernel":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.kernel, name)

    def full(self, args) -> list:
        """The kernel's argument list: args in order around the fixed values."""
        n = len(self.kernel.params)
        if len(args) + len(self.values) != n:
            from ..runtime.callsite import caller
            raise TkcError(f"{self!r} takes {n - len(self.values)} arguments (the kernel's "
                           f"{n} less the bound ones), got {len(args)}", caller())
        rest = iter(args)
        return [self.values[i] if i in self.values else next(rest) for i in range(n)]

    def __call__(self, *args, stream=None):
        self.kernel(*self.full(args), stream=stream)

    def prepare(self, *args, bound=(), free=()):
        """The prepared launch: the fixed values bound, `bound` indices (of
        the kernel's full argument list) too; `free` as Kernel.prepare's."""
        return self.kernel.prepare(*self.full(args), bound=(*bound, *self.values), free=free)

    def interpret(self, *arrays):
        self.kernel.interpret(*self.full(arrays))
