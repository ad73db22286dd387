"""The three checks of a generated program.

- passes: the interpreter runs the traced tile IR, whose float outputs must lie
  in the intervals the generator's analysis gave them (values.py: the GPU
  check's tolerances rest on them; a value carried through a loop unseen grew
  past its bound), then the IR after each
  entry of tkc.compiler.TILE_PIPELINE in turn (that changed it: an IR the
  pass left as it was gives the same outputs); every run must give the same
  outputs, bit for bit. No pass may change a value (layout selection and the
  verifier change none; grid ordering and pipeline staging reorder work and
  memory traffic, not arithmetic: each output element is computed by the same
  ops in the same order), so there is no tolerance. A well-typed program that
  is refused, or that crashes, fails too.
- refusal: an ill-typed program (refusals.py) must be refused with a TkcError
  located at the line the generator broke, never another exception.
- gpu: the compiled kernel's outputs against the interpreter's, within each
  output's error bound (values.py): |gpu - interp| <= 4 * tol + 1e-5.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass

import numpy as np

from ..diagnostics import TkcError
from .core import Program
from .program import arrays, kernel_of, outputs


@dataclass
class Failure:
    program: Program
    check: str      # "passes", "refusal" or "gpu"
    stage: str      # the pass (or "trace", "interpret", "compile", ...) where it went wrong
    message: str

    def report(self) -> str:
        return (f"FAIL {self.check} seed={self.program.seed} index={self.program.index} "
                f"at {self.stage}: {self.message}\n--- {self.program.filename}\n{self.program.source}")


def _crash(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:]).rstrip()


def interpret(module, p: Program) -> list[np.ndarray]:
    """The program's outputs after running `module` in the interpreter."""
    from ..interpreter import run
    xs = arrays(p)
    run(module, xs)
    return outputs(p, xs)


def out_of_bounds(p: Program, outs: list) -> str:
    """'' if every float output lies in its interval (widened by its error bound and
    float rounding: 2^-6 relative, a bf16 value's two roundings), or the 0.5 no store
    reached; else where one does not."""
    for j, (a, x) in enumerate(zip([a for a in p.args if a.output], outs)):
        if a.bounds is None:
            continue
        lo, hi = a.bounds
        slack = a.tol + 2.0 ** -6 * max(abs(lo), abs(hi)) + 1e-6
        x = np.asarray(x, np.float64)
        bad = ~(((x >= lo - slack) & (x <= hi + slack)) | (x == 0.5))
        if bad.any():
            i = tuple(int(t) for t in np.argwhere(bad)[0])
            return (f"output o{j}: {int(bad.sum())} elements outside the interval [{lo:.4g}, {hi:.4g}] the "
                    f"generator allows; first {i}: {x[i]!r}")
    return ""


def differ(a: list, b: list) -> str:
    """'' if the outputs are bit-identical, else where they first differ."""
    for j, (x, y) in enumerate(zip(a, b)):
        if not np.array_equal(x, y, equal_nan=True):
            bad = np.argwhere(~((x == y) | (np.isnan(x) & np.isnan(y))))
            i = tuple(int(t) for t in bad[0])
            return (f"output o{j} differs at {len(bad)} elements, first {i}: "
                    f"{x[i]!r} before, {y[i]!r} after")
    return ""


def check_passes(p: Program) -> tuple[Failure | None, list | None]:
    """(failure or None, the outputs after the whole pipeline)."""
    from ..compiler import TILE_PIPELINE
    from ..pass_pipeline import run_pipeline, split_pipeline
    stage = "trace"
    try:
        module = kernel_of(p).trace()
        entries = split_pipeline(TILE_PIPELINE)
        if "mma_relayout" in p.features:  # the interpreter runs legal mma layouts only
            stage = entries[0]
            run_pipeline(module, entries.pop(0))
        stage = "interpret (traced IR)"
        before = interpret(module, p)
        problem = out_of_bounds(p, before)
        if problem:
            return Failure(p, "passes", "intervals", problem), None
        after, text = before, str(module)
        for entry in entries:
            stage = entry
            run_pipeline(module, entry)
            now = str(module)   # printed once: printing is a tenth of a check
            if now == text:  # the pass changed nothing (tk-verify, say): same outputs
                continue
            stage, text = f"interpret (after {entry})", now
            after = interpret(module, p)
            diff = differ(before, after)
            if diff:
                return Failure(p, "passes", entry, diff), None
        return None, after
    except TkcError as e:
        return Failure(p, "passes", stage, f"a well-typed program was refused: {e}"), None
    except Exception as e:  # noqa: BLE001  (a crash is what we look for)
        return Failure(p, "passes", stage, f"crash: {_crash(e)}"), None


def check_refusal(p: Program) -> Failure | None:
    """The ill-typed program p is refused with a TkcError at p.bad_line."""
    from ..compiler import TILE_PIPELINE
    from ..pass_pipeline import run_pipeline
    want = f"{p.filename}:{p.bad_line}:"
    try:
        module = kernel_of(p).trace()
        run_pipeline(module, TILE_PIPELINE)
    except TkcError as e:
        located = [w for w, _ in getattr(e, "errors", [(e.where, e.message)])]
        if not any(w.startswith(want) for w in located):
            return Failure(p, "refusal", "located", f"{p.bad_what}: refused at {located}, "
                                                    f"not at line {p.bad_line}: {e}")
        return None
    except Exception as e:  # noqa: BLE001
        return Failure(p, "refusal", "crash", f"{p.bad_what}: crash instead of a located error: {_crash(e)}")
    return Failure(p, "refusal", "accepted", f"{p.bad_what}: the ill-typed program was accepted")


def compare_gpu(p: Program, got: list, want: list) -> Failure | None:
    """GPU outputs `got` against the interpreter's `want`, within tolerance."""
    tols = [a.tol for a in p.args if a.output]
    for j, (x, y, tol) in enumerate(zip(got, want, tols)):
        if np.asarray(y).dtype.kind == "i":  # integers are exact: bit for bit
            x, y = np.asarray(x), np.asarray(y)
            if x.shape != y.shape or not np.array_equal(x, y):
                bad = int((x != y).sum()) if x.shape == y.shape else -1
                return Failure(p, "gpu", "compare", f"o{j}: {bad} integer elements differ")
            continue
        x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
        if x.shape != y.shape:
            return Failure(p, "gpu", "compare", f"o{j}: shape {x.shape} vs {y.shape}")
        err = np.abs(x - y)
        bound = 4 * tol + 1e-5
        bad = ~((err <= bound) | (x == y))   # equal infinities agree (inf - inf is NaN); NaN fails
        if bad.any():
            i = tuple(int(t) for t in np.argwhere(bad)[0])
            return Failure(p, "gpu", "compare",
                           f"o{j}: {int(bad.sum())} of {x.size} elements off by more than {bound:.3g}; "
                           f"first {i}: gpu {x[i]!r}, interpreter {y[i]!r}")
    return None
