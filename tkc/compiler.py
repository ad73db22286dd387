"""The compiler driver: tile IR -> nvvm -> llvm -> PTX -> cubin + manifest.

Every stage is a function of the module as it stands, so `compile_to` can
resume from IR printed at any stage (`tkc --emit=ptx file.nvvm.mlir` works
like `tkc --emit=ptx file.mlir`):

    tile   func.func {tk.kernel} with tk ops   -> TILE_PIPELINE, tk-lower-to-nvvm
    nvvm   gpu.module with arith/scf/nvvm/llvm -> UPSTREAM_PIPELINE
    llvm   gpu.module with llvm/nvvm only      -> gpu-module-to-binary{format=isa}
    ptx    gpu.binary holding PTX text         -> ptxas
    cubin  bytes
"""
from __future__ import annotations

import functools
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from .diagnostics import TkcError
from .dialect import walk

# Layout selection first: it makes mma operand layouts legal (and picks
# swizzles), then tk-verify checks the result (malformed IR passes through
# layout selection unchanged and is reported by tk-verify). Then the grid
# level before the block level: tk-pipeline-staging splits the work-item loop
# tk-grid-ordering makes into a producer's and the consumers' copies and runs
# its ring counter through it. tk-verify checks what the passes wrote.
TILE_PIPELINE = "tk-layout-selection,tk-verify,tk-grid-ordering,tk-pipeline-staging,tk-verify"
LOWER_PASS = "tk-lower-to-nvvm"
STAGES = ("tile", "nvvm", "llvm", "ptx", "cubin")
TARGETS = ("sm_90a",)

# convert-nvvm-to-llvm first: it turns the nvvm ops that have no LLVM
# intrinsic (wgmma, ...) into inline PTX, which LLVM translation needs.
# convert-to-llvm converts arith and index too (each dialect's interface):
# separate convert-arith/index-to-llvm passes walked the module twice more.
UPSTREAM_PIPELINE = ("gpu.module(convert-scf-to-cf,convert-nvvm-to-llvm,convert-to-llvm,"
                     "reconcile-unrealized-casts)")
TO_PTX_PIPELINE = "gpu-module-to-binary{format=isa}"
_LLVM_DIALECTS = ("llvm", "nvvm")


# ---------------------------------------------------------------- stages

def stage_of(module) -> str:
    """The stage a module is in (one of STAGES but cubin)."""
    top = [op.operation for op in module.body.operations]
    if any(op.name == "gpu.binary" for op in top):
        return "ptx"
    gpu_modules = [op for op in top if op.name == "gpu.module"]
    if not gpu_modules:
        return "tile"
    if any(_dialect(op.name) not in _LLVM_DIALECTS for g in gpu_modules for op in walk(g)):
        return "nvvm"
    return "llvm"


def compile_to(module, emit: str, *, tile_pipeline: str | None = None,
               print_ir_after_all: bool = False, out=sys.stderr, start: str | None = None) -> str | bytes:
    """Advance `module` (in place) to stage `emit` and return that stage's text
    (the IR, or the PTX), or the cubin's bytes for "cubin". start: the stage
    the module is known to be at (else stage_of finds it, a walk of the IR)."""
    advance(module, emit, tile_pipeline=tile_pipeline, print_ir_after_all=print_ir_after_all,
            out=out, start=start)
    if emit in ("tile", "nvvm", "llvm"):
        return str(module)
    ptx = ptx_of(module)
    if emit == "ptx":
        return ptx
    cubin, resources = ptxas(ptx)
    entry = re.search(r"\.entry\s+(\w+)", ptx)
    warn_resources(entry[1] if entry else "?", resources)
    return cubin


def advance(module, to: str, *, tile_pipeline: str | None = None,
            print_ir_after_all: bool = False, out=sys.stderr, start: str | None = None) -> None:
    """Advance `module` (in place) to stage `to` (at most "ptx": the module
    then holds the PTX), printing nothing: the text of a lowered module costs
    40 ms for a GEMM, which compile_kernel has no use for."""
    if to not in STAGES:
        raise TkcError(f"unknown stage '{to}': expected one of {', '.join(STAGES)}")
    start = start or stage_of(module)
    if STAGES.index(to) < STAGES.index(start):
        raise TkcError(f"the input is already at stage '{start}'; it cannot be emitted "
                       f"as '{to}' (stages: {' -> '.join(STAGES)})")
    run = _Runner(print_ir_after_all, out)
    if start == "tile":
        run(module, tile_pipeline if tile_pipeline is not None else TILE_PIPELINE)
        if to == "tile":
            return
        _require_kernels(module)
        run(module, LOWER_PASS)
        start = "nvvm"
    if start == "nvvm" and to != "nvvm":
        run(module, UPSTREAM_PIPELINE)
        start = "llvm"
    if start == "llvm" and to in ("ptx", "cubin"):
        run(module, TO_PTX_PIPELINE)


class _Runner:
    """run_pipeline with the options of one compile_to call."""

    def __init__(self, print_ir_after_all, out):
        self.print_ir_after_all, self.out = print_ir_after_all, out

    def __call__(self, module, pipeline: str) -> None:
        if not pipeline.strip():
            return
        from .pass_pipeline import run_pipeline
        run_pipeline(module, pipeline, print_ir_after_all=self.print_ir_after_all, out=self.out)


def ptx_of(module) -> str:
    """The PTX text held by the module's gpu.binary."""
    from mlir.dialects import gpu
    for op in module.body.operations:
        op = op.operation
        if op.name == "gpu.binary":
            return avoid_ptxas_bugs(gpu.ObjectAttr(op.attributes["objects"][0]).object.decode())
    raise TkcError("no gpu.binary in the module: nothing was compiled to PTX")


def _require_kernels(module) -> None:
    if stage_of(module) == "tile" and not any(
            op.operation.name == "func.func" and "tk.kernel" in op.operation.attributes
            for op in module.body.operations):
        raise TkcError("no kernel in the input: expected a func.func with the tk.kernel attribute")


# ---------------------------------------------------------------- ptxas

_RESOURCE_PATTERNS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "shared_static": re.compile(r"(\d+) bytes smem"),
}


# ptxas 12.9 and 13.0 (13.5's is right) fuse two signed 32-bit min/max into
# one three-input VIMNMX3 on sm_90a and drop a negation feeding its middle
# operand: max(max(a, -b), c) runs as max(a, b, c), so -row_max(-x) of an i32
# tile came out as -row_max(x). A negation written as not + 1 is left alone
# (and ptxas still folds the + 1 into the min/max: VIADDMNMX), so every
# neg.s32 LLVM emits goes to ptxas in that form.
_NEG_S32 = re.compile(r"^([ \t]*)((?:@!?%p\d+[ \t]+)?)neg\.s32[ \t]+(%r\d+),[ \t]*(%r\d+);", re.M)


def avoid_ptxas_bugs(ptx: str) -> str:
    """PTX rewritten around the ptxas miscompile above (idempotent)."""
    return _NEG_S32.sub(lambda m: f"{m[1]}{m[2]}not.b32 \t{m[3]}, {m[4]};\n"
                                  f"{m[1]}{m[2]}add.s32 \t{m[3]}, {m[3]}, 1;", ptx)


PTXAS_FLAGS = ("-O3", "-v")


@functools.cache
def ptxas_identity() -> str:
    """Which ptxas runs (its path, size and time): part of what a reused cubin
    is keyed by (runtime/reuse.py), so another ptxas assembles anew."""
    path = shutil.which("ptxas")
    if path is None:
        return ""
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


@functools.cache
def mlir_identity() -> str:
    """Which MLIR and LLVM libraries make PTX (names, sizes, times): part of
    what reused PTX is keyed by, so another build of them lowers anew."""
    import mlir._mlir_libs as libs
    here = os.path.dirname(libs.__file__)
    found = sorted(glob.glob(os.path.join(here, "*.so*"))) + \
        sorted(glob.glob(os.path.join(here, "..", "..", "llvm", "lib", "libLLVM*")))   # (the CAPI's RUNPATH's)
    return ";".join(f"{os.path.basename(p)}:{st.st_size}:{st.st_mtime_ns}" for p in found for st in [os.stat(p)])


def ptxas(ptx: str, arch: str = "sm_90a") -> tuple[bytes, dict]:
    """Assemble PTX to a cubin with `ptxas -O3 -v` (after avoid_ptxas_bugs);
    return it and its resources."""
    with tempfile.TemporaryDirectory(prefix="tkc-ptxas-") as tmp:
        src, dst = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as f:
            f.write(avoid_ptxas_bugs(ptx))
        cmd = ["ptxas", f"-arch={arch}", *PTXAS_FLAGS, src, "-o", dst]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except FileNotFoundError:
            raise TkcError("ptxas not found on PATH: install the CUDA toolkit (12.4 or newer)") from None
        from .pass_pipeline import note
        note("ptxas", time.perf_counter() - t0)
        report = (done.stdout + done.stderr).replace(src, "kernel.ptx")
        if done.returncode != 0:
            raise TkcError(f"ptxas failed (exit {done.returncode}):\n{report.strip()}")
        _refuse_ignored_setmaxnreg(report)
        with open(dst, "rb") as f:
            return f.read(), parse_resources(report)


# ptxas codes for a setmaxnreg it dropped, and why.
_SETMAXNREG_IGNORED = {
    "C7507": "the code after a decrease_registers(n) needs more than n registers",
    "C7508": "the kernel needs one block per SM as its launch bound (nvvm.minctasm = 1, "
             "which the lowering of increase/decrease_registers sets)",
}


def _refuse_ignored_setmaxnreg(report: str) -> None:
    """ptxas drops a setmaxnreg with only an info line: the kernel would run,
    silently without the register split its warpgroups asked for. Make that
    an error."""
    for code, why in _SETMAXNREG_IGNORED.items():
        if code in report:
            raise TkcError(f"ptxas ignored setmaxnreg ({code}): {why}:\n{report.strip()}")


def parse_resources(report: str) -> dict:
    """Registers, spills, stack and static shared memory from `ptxas -v` output
    (0 where ptxas does not mention them), and the report itself."""
    out = {}
    for key, pattern in _RESOURCE_PATTERNS.items():
        m = pattern.search(report)
        out[key] = int(m[1]) if m else 0
    # C7509-C7515: "Potential Performance Loss: wgmma.mma_async instructions are serialized"
    out["wgmma_serialized"] = "wgmma.mma_async instructions are serialized" in report
    out["ptxas"] = report.strip()
    return out


# ---------------------------------------------------------------- artifacts

def compile_kernel(module, *, key: str = "", target: str = "sm_90a", spills: int = 0, reuse: bool = True):
    """Compile a module holding one tk kernel to an Artifact (cubin + manifest).
    spills: the spill stores the kernel declares (tkc.kernel(spills=N)), which
    get no warning: a user of a library op that declares them cannot act on it.
    reuse: an earlier build's PTX and cubin where the lowered module, or the
    PTX, is the same (runtime/reuse.py); the keys go into the manifest
    (source.stages), under which the caller indexes the stored artifact."""
    from .runtime import reuse as stages
    from .runtime.artifact import Artifact
    from .runtime.cache import compiler_hash
    if target not in TARGETS:
        raise TkcError(f"unsupported target '{target}': tkc targets {', '.join(TARGETS)}")
    # the stage found once (stage_of walks the IR) and each later one known;
    # the tile passes run once (tile_pipeline="": already run, lower next)
    start = stage_of(module)
    tile_ir = compile_to(module, "tile", start="tile") if start == "tile" else None
    advance(module, "llvm", start=start, tile_pipeline="" if start == "tile" else None)
    manifest = read_manifest(module)
    lowered = stages.key("ptx", _bytecode(module), TO_PTX_PIPELINE, mlir_identity())
    ptx = stages.ptx(lowered) if reuse else None
    if ptx is None:
        advance(module, "ptx", start="llvm")
        ptx = ptx_of(module)
    assembled = stages.key("cubin", ptx, target, *PTXAS_FLAGS, ptxas_identity())
    made = stages.cubin(assembled) if reuse else None   # (the same ptxas too: the key says)
    cubin, resources = made if made is not None else ptxas(ptx, target)
    warn_resources(manifest.get("kernel"), resources, spills)
    manifest.update(resources=resources, source={"key": key, "compiler": compiler_hash(),
                                                 "stages": {"ptx": lowered, "cubin": assembled}})
    manifest.setdefault("version", 1)
    manifest.setdefault("target", target)
    return Artifact(cubin, manifest, ptx, tile_ir)


def warn_resources(kernel: str, resources: dict, spills: int = 0, out=None) -> None:
    """Warn of serialised wgmma and of spills past the `spills` bytes a kernel declares:
    not errors (the kernel runs), but performance bugs worth seeing, wherever a cubin
    is made (the build, a first call, `tkc --emit=cubin|sass`)."""
    out = out or sys.stderr
    if resources["wgmma_serialized"]:
        print(f"tkc: warning: kernel '{kernel}': ptxas serialises its wgmma instructions (C7514: "
              f"something reads an accumulator while its wgmma runs)", file=out)
    if resources["spill_stores"] > spills or resources["spill_loads"] and not spills:
        print(f"tkc: warning: kernel '{kernel}' spills registers ({resources['spill_stores']} bytes "
              f"stored, {resources['spill_loads']} loaded{f'; it declares {spills}' if spills else ''})",
              file=out)


def read_manifest(module) -> dict:
    """The `tkc.manifest` JSON that tk-lower-to-nvvm put on the one kernel."""
    kernels = [op.operation for g in module.body.operations if g.operation.name == "gpu.module"
               for op in g.operation.regions[0].blocks[0].operations   # functions are its top level
               if op.operation.name == "llvm.func" and "tkc.manifest" in op.operation.attributes]
    if len(kernels) != 1:
        raise TkcError(f"expected exactly one tk kernel in the module, found {len(kernels)}")
    from mlir import ir
    return json.loads(ir.StringAttr(kernels[0].attributes["tkc.manifest"]).value)


# ---------------------------------------------------------------- helpers

def _bytecode(module) -> bytes:
    """The module as MLIR bytecode: what reuse keys a lowered module by (2 ms
    for the library GEMM, where its text takes 19)."""
    out = io.BytesIO()
    module.operation.write_bytecode(out)
    return out.getvalue()


def _dialect(name: str) -> str:
    return name.split(".", 1)[0]
