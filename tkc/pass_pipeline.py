"""The tk passes by name, and a textual pass pipeline that mixes them with
upstream MLIR passes.

This module sits above tkc.passes and tkc.lowering: `all_passes` is the
registry of both (the passes register themselves with passes/registry.py's
`register`; the lowering is registered here, so that tkc.lowering imports
nothing from tkc.passes).

A pipeline is a comma-separated list of entries, like mlir-opt's
`--pass-pipeline` without the `builtin.module(...)` wrapper (which is accepted
and stripped). An entry that names a registered tk pass runs the Python pass
on the module; any other entry is upstream MLIR text (`canonicalize`,
`gpu.module(convert-scf-to-cf)`, `cse{...}`) run through a PassManager
anchored on the module. Entries run one after the other, so tk passes and
upstream passes interleave freely.
"""
from __future__ import annotations

import contextlib
import re
import sys
import time

from .diagnostics import TkcError, TkcErrors  # noqa: F401  (TkcErrors re-exported)
from .lowering import lower_module
from .passes.registry import PASSES, PassInfo, register

register("tk-lower-to-nvvm", "lower tk kernels to per-thread NVVM/LLVM in gpu.module @tkc")(lower_module)


def all_passes() -> dict[str, PassInfo]:
    """Every registered tk pass (importing the modules that define them)."""
    from . import passes  # noqa: F401  (registers verify, layout selection, ...)
    from .passes import grid_ordering, pipeline_staging  # noqa: F401  (need MLIR: imported here)
    return dict(sorted(PASSES.items()))

_OPEN = {"(": ")", "{": "}", "[": "]"}
_WRAPPER = "builtin.module("


def split_pipeline(pipeline: str) -> list[str]:
    """Top-level comma-separated entries, respecting nested (), {} and []."""
    entries, depth, start = [], [], 0
    for i, ch in enumerate(pipeline):
        if ch in _OPEN:
            depth.append(_OPEN[ch])
        elif ch in _OPEN.values():
            if not depth or depth.pop() != ch:
                raise TkcError(f"unbalanced '{ch}' in pass pipeline '{pipeline}'")
        elif ch == "," and not depth:
            entries.append(pipeline[start:i])
            start = i + 1
    if depth:
        raise TkcError(f"unbalanced brackets in pass pipeline '{pipeline}'")
    entries.append(pipeline[start:])
    return [e.strip() for e in entries if e.strip()]


def _unwrap(pipeline: str) -> str:
    """Strip one `builtin.module(...)` around the whole pipeline, if present."""
    p = pipeline.strip()
    if p.startswith(_WRAPPER) and p.endswith(")") and len(split_pipeline(p)) == 1:
        return p[len(_WRAPPER):-1]
    return p


def run_pipeline(module, pipeline: str, *, print_ir_after_all: bool = False,
                 out=sys.stderr) -> None:
    """Run `pipeline` on `module` (an ir.Module) in place; TkcError on failure.

    With print_ir_after_all, the IR after each entry goes to `out` under a
    `// -----// IR Dump After <entry> //----- //` header, like mlir-opt.
    """
    passes = all_passes()
    for entry in split_pipeline(_unwrap(pipeline)):
        info = passes.get(entry)
        t0 = time.perf_counter()
        if info is not None:
            _run_tk_pass(module, info)
        else:
            _run_upstream(module, entry)
        note(entry, time.perf_counter() - t0)
        if print_ir_after_all:
            out.write(f"// -----// IR Dump After {entry} //----- //\n{module}\n")


_record: list | None = None


@contextlib.contextmanager
def timed():
    """Collect (phase, seconds) of every pipeline entry and ptxas run inside
    the block, in order (tkc.bench.compile_time). Process-wide: a thread
    compiling meanwhile would add its phases too."""
    global _record
    outer, _record = _record, []
    try:
        yield _record
    finally:
        _record = outer


def note(phase: str, seconds: float) -> None:
    if _record is not None:
        _record.append((phase, seconds))


def _run_tk_pass(module, info) -> None:
    from mlir import ir
    with module.context:
        info.run(module.operation)
        # A Python pass can build IR that no verifier checked; catch it here,
        # next to the pass that did it, not in a later stage.
        try:
            module.operation.verify()
        except ir.MLIRError as e:
            raise mlir_errors(e, f"IR invalid after {info.name}: ") from None


def _run_upstream(module, entry: str) -> None:
    from mlir import ir, passmanager
    with module.context:
        try:
            pm = passmanager.PassManager.parse(f"builtin.module({entry})")
        except ValueError as e:
            raise TkcError(f"unknown pass or bad pipeline entry '{entry}' "
                           f"(tkc --list-passes lists the tk passes): "
                           f"{_first_line(str(e))}") from None
        try:
            pm.run(module.operation)
        except ir.MLIRError as e:
            raise mlir_errors(e, f"{entry}: ") from None


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else text


def mlir_errors(e, prefix: str = "") -> TkcErrors:
    """A TkcErrors from an MLIRError's diagnostics (each message prefixed)."""
    from .diagnostics import where
    diags = getattr(e, "error_diagnostics", None) or []
    errors = [(where(d.location), prefix + _name_op(d)) for d in diags]
    return TkcErrors(errors or [("", prefix + _first_line(str(e)))])


_CURRENT_OP = re.compile(r'see current operation: (?:.* = )?"(\w+)\.(\w+)"')


def _name_op(diag) -> str:
    """IRDL's messages do not say which op failed ("op expects exactly 1
    operands"); prefix the op's name, taken from the diagnostic's note."""
    msg = diag.message
    for note in diag.notes:
        m = _CURRENT_OP.search(str(note.message))
        if m and f"{m[1]}.{m[2]}" not in msg:
            name = m[2] if m[1] == "tk" else f"{m[1]}.{m[2]}"
            return f"{name}: {msg.removeprefix('op ')}"
    return msg
