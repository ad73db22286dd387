"""The `tkc` driver: mlir-opt for tile IR, plus the ahead-of-time build.

    tkc FILE [--pass-pipeline=P] [--emit=tile|nvvm|llvm|ptx|cubin|sass] [-o OUT]
             [--print-ir-after-all] [--kernel NAME]
    tkc --list-passes
    tkc build [--force] [--filter SUBSTR] [--prune] [-j N] [-v] [--call EXPR ... [--library]] [FILE.py ...]
    tkc tune [FILE.py ...] [--library] [--call EXPR ...] [--filter S] [--rounds R]  (tkc/tune/cli.py)
    tkc fuzz --seed S --count N [--start I] [-j N] [--build DIR | --gpu DIR]

FILE is a .mlir file (tile IR in generic tk syntax, or any later stage) or a
Python file defining kernels (traced with tkc.frontend.kernels_in_file;
--kernel picks one when there are several). Without --pass-pipeline the tile
IR goes through tkc.compiler.TILE_PIPELINE; with it, through exactly the given
pipeline (tk and upstream passes by name, like mlir-opt). Later stages come
from tkc.compiler.compile_to.

Output goes to stdout or -o. A cubin is binary: it is written to -o, or to
stdout only when stdout is not a terminal (`tkc k.mlir --emit=cubin > k.cubin`).

Errors (parse errors, verifier errors, unknown passes, missing files) are
printed as `file:line:col: error: msg` on stderr with exit status 1, never a
traceback; TKC_DEBUG=1 re-raises them to show one.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .building import build_all, quietly
from .diagnostics import TkcError, at_least

EMITS = ("tile", "nvvm", "llvm", "ptx", "cubin", "sass")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["build"]:
            return _build(_build_parser().parse_args(argv[1:]))
        if argv[:1] == ["tune"]:
            from .tune.cli import main as tune
            return tune(argv[1:])
        if argv[:1] == ["fuzz"]:  # the fuzzer of tile programs (docs/fuzz.md)
            from .fuzz.runner import main as fuzz
            return fuzz(argv[1:])
        return _compile(_parser().parse_args(argv))
    except TkcError as e:
        return _fail(e, str(e))
    except FileNotFoundError as e:
        return _fail(e, f"error: {e.filename or e}: no such file")
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001  (a driver prints, it does not trace back)
        msg = _mlir_error(e)
        return _fail(e, msg if msg else f"error: internal error: {type(e).__name__}: {e}\n"
                     "(set TKC_DEBUG=1 for a traceback)")


def _fail(exc: BaseException, message: str) -> int:
    if os.environ.get("TKC_DEBUG") == "1":
        raise exc
    sys.stderr.write(message.rstrip("\n") + "\n")
    return 1


def _mlir_error(e: Exception) -> str | None:
    """An MLIRError as located lines, or None for any other exception."""
    if type(e).__name__ != "MLIRError":
        return None
    from .pass_pipeline import mlir_errors
    return str(mlir_errors(e))


# ---- tkc FILE --------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tkc", description="Compile ThunderKittens-style tile kernels "
        "(tile IR .mlir or a Python kernel file). `tkc build --help` for the "
        "ahead-of-time build of the kernel library.")
    p.add_argument("file", nargs="?", help="a .mlir file or a Python kernel file")
    p.add_argument("--pass-pipeline", metavar="P", default=None,
                   help="comma-separated tk and upstream MLIR passes "
                        "(default: tkc.compiler.TILE_PIPELINE)")
    p.add_argument("--emit", choices=EMITS, default="tile", help="stage to print (default tile)")
    p.add_argument("-o", dest="output", metavar="OUT", help="output file (default stdout)")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR after each pass to stderr")
    p.add_argument("--kernel", metavar="NAME", help="which kernel of a Python file")
    p.add_argument("--list-passes", action="store_true", help="list the tk passes and exit")
    return p


def _compile(args) -> int:
    if args.list_passes:
        return _list_passes()
    if not args.file:
        raise TkcError("no input file (usage: tkc FILE [options], tkc --list-passes, tkc build)")
    module = load_module(args.file, args.kernel)
    from .diagnostics import library_warnings
    with library_warnings():   # asked for this file's compile: its notes, a library file's too
        result = _run_stages(module, args)
    _write(result, args.output)
    return 0


def _run_stages(module, args):
    """Run the pipeline, then lower to the requested stage: text or bytes.
    sass is the cubin disassembled (cuobjdump), to read HGMMA, UTMALDG, LDL."""
    from .compiler import compile_to
    from .pass_pipeline import run_pipeline
    opts = {"print_ir_after_all": args.print_ir_after_all}
    emit = "cubin" if args.emit == "sass" else args.emit
    if args.pass_pipeline is None:
        result = compile_to(module, emit, **opts)
    else:
        # Like mlir-opt: exactly the given pipeline, on IR of any stage.
        run_pipeline(module, args.pass_pipeline, **opts)
        result = str(module) if emit == "tile" else \
            compile_to(module, emit, tile_pipeline="", **opts)
    if args.emit == "sass":
        from .sass import disassemble
        return disassemble(result)
    return result


def load_module(path: str, kernel: str | None = None):
    """An ir.Module from a .mlir file or a Python kernel file."""
    p = Path(path)
    if not p.exists():
        raise TkcError(f"{path}: no such file")
    if p.suffix == ".py":
        return _trace_python(p, kernel)
    return parse_mlir(p)


def parse_mlir(path: Path):
    """Parse a .mlir file into a Context with the tk dialect; located errors."""
    from mlir import ir
    from .dialect import context
    from .pass_pipeline import mlir_errors
    ctx = context()
    try:
        # parseFile (not parse) so that locations name the user's file.
        return ir.Module.parseFile(str(path), ctx)
    except ir.MLIRError as e:
        raise mlir_errors(e) from None


def _trace_python(path: Path, kernel: str | None):
    from .frontend import kernels_in_file
    kernels = kernels_in_file(str(path))
    if not kernels:
        raise TkcError(f"{path}: defines no tkc kernel")
    if kernel is not None:
        chosen = [k for k in kernels if k.name == kernel]
        if not chosen:
            raise TkcError(f"{path}: no kernel named '{kernel}' "
                           f"(it defines: {', '.join(k.name for k in kernels)})")
        return chosen[0].trace()
    if len(kernels) > 1:
        raise TkcError(f"{path}: defines several kernels "
                       f"({', '.join(k.name for k in kernels)}); pick one with --kernel")
    return kernels[0].trace()


def _write(result, output: str | None) -> None:
    if isinstance(result, (bytes, bytearray)):
        if output:
            Path(output).write_bytes(result)
        elif sys.stdout.isatty():
            raise TkcError("a cubin is binary: write it with -o FILE (or redirect stdout)")
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(result)
        return
    text = result if result.endswith("\n") else result + "\n"
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)


def _list_passes() -> int:
    from .pass_pipeline import all_passes
    passes = all_passes()
    width = max((len(n) for n in passes), default=0)
    print("tk passes:")
    for name, info in passes.items():
        print(f"  {name:<{width}}  {info.description}")
    print("Upstream MLIR passes (canonicalize, cse, convert-scf-to-cf, ...) are accepted "
          "by name in --pass-pipeline, nested as in mlir-opt (gpu.module(...)).")
    return 0


# ---- tkc build ---------------------------------------------------------------

def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tkc build", description="Compile every kernel of the library "
        "(tkc.kernels.library()), or with --call what given calls launch, into the artifact "
        "cache (TKC_CACHE_DIR).")
    p.add_argument("--force", action="store_true", help="recompile even if cached")
    p.add_argument("--filter", metavar="SUBSTR", help="only kernels whose name contains SUBSTR")
    p.add_argument("--prune", action="store_true",
                   help="then remove every cache entry this build did not produce or find "
                        "(older builds'), e.g. before carrying the cache to a GPU machine")
    p.add_argument("-j", "--jobs", type=at_least(1), default=None, metavar="N",
                   help="compile in N processes (default: one a core)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="a line per kernel (registers, spills, shared memory, cache path) and "
                        "its warnings as they come, instead of a progress line and a summary")
    p.add_argument("--call", action="append", default=[], metavar="EXPR",
                   help="build what a call of a torch op launches, forward and backward, "
                        "e.g. --call 'layer_norm(bf16[4096, 12288], bf16[12288], bf16[12288])' "
                        "(tensors as DTYPE[dims]; needs torch; tkc/prebuild.py): those kernels "
                        "alone, not the library's (with --library, both)")
    p.add_argument("--library", action="store_true",
                   help="with --call: the library's kernels too (without --call they are built)")
    p.add_argument("files", nargs="*", metavar="FILE.py",
                   help="also build the kernels defined in these Python files (e.g. the GPU "
                        "tests' kernels, so a machine without MLIR can run them)")
    return p


def _build(args) -> int:
    from .frontend import kernels_in_file
    from .kernels import library
    t0 = time.perf_counter()  # the summary's time: the kernels listed, --call's built, all
    # the library, unless the build is for calls (what an offline miss asks for: a few kernels,
    # not the library's ~1,300, which take a 2-core machine most of an hour)
    found = (library() if args.library or not args.call else []) + \
        [k for f in args.files for k in kernels_in_file(f)]
    _EARLY.clear()
    names = {k.name for k in found}   # (a kernel the library or another call lists: built once)
    for k in (k for expr in args.call for k in _kernels_of_call(expr, args.verbose)):
        if k.name not in names:
            names.add(k.name)
            found.append(k)
    kernels = [k for k in found if not args.filter or args.filter in k.name]
    if not kernels and not args.filter and args.call:   # (zero-size tensors: nothing launches)
        print(f"tkc build: no kernel to build: {', '.join(map(repr, args.call))} launches none")
        return 0
    if not kernels:
        raise TkcError(f"no library kernel matches '{args.filter}'")
    if args.prune and (args.filter or args.call and not args.library):
        raise TkcError("--prune keeps only the kernels built now: with --filter, or --call without "
                       "--library, it would remove the others'")
    from .progress import Progress, summary
    progress = Progress(len(kernels), args.verbose)
    try:
        rows = build_all(kernels, args.force, args.jobs, args.files, progress)
    finally:
        progress.close()
    for r in rows:  # what --call compiled on the way (prebuild), this run's too
        early = _EARLY.get(r["kernel"])
        if early is not None and r["error"] is None:  # compiled by prebuild, then found cached
            r["cached"], r["warnings"] = False, early + r["warnings"]
    if args.verbose:
        _print_table(rows)
    sys.stdout.write(summary(rows, time.perf_counter() - t0, args.verbose))
    sys.stdout.flush()
    if args.prune:
        from .runtime import cache, reuse
        n, size = cache.prune({Path(r["cache path"]).name for r in rows if r["cache path"] != "FAILED"})
        reuse.prune()   # (the indexes naming what was pruned)
        sys.stderr.write(f"pruned {n} older cache entries ({size / 2 ** 20:.1f} MiB)\n")
    failed = sum(1 for r in rows if r["cache path"] == "FAILED")
    spilled = sum(1 for r in rows if r["over"])
    serial = sum(1 for r in rows if r["wgmma"] == "serialised")
    if failed or spilled or serial:
        sys.stderr.write(f"error: {failed} kernel(s) failed, {spilled} kernel(s) spilled "
                         f"registers, {serial} kernel(s) have serialised wgmma\n")
        return 1
    return 0


_EARLY: dict[str, list] = {}  # kernel name -> the warnings of its build by --call (prebuild)


def _kernels_of_call(expr: str, verbose: bool = False) -> list:
    """The kernels a torch op's call launches (built on the way: prebuild.py)."""
    from .frontend.kernel import Kernel
    from .runtime import cache
    try:
        from .prebuild import prebuild
    except ImportError as e:
        raise TkcError(f"--call needs torch ({e})") from None
    built, real, real_loaded, real_call = [], Kernel.build, Kernel._loaded, Kernel.__call__

    def note(kernel):
        if all(kernel is not k for k in built):
            built.append(kernel)

    def loaded(kernel):   # a kernel this process loaded before (its launcher kept) builds nothing now
        note(kernel)
        return real_loaded(kernel)

    def call(kernel, *args, **kwargs):
        note(kernel)
        return real_call(kernel, *args, **kwargs)

    def build(kernel, force: bool = False):
        note(kernel)
        if not force and cache.entry_dir(kernel.artifact_key()).is_dir():
            return real(kernel, force)
        warned = _EARLY.setdefault(kernel.name, [])  # compiled now, before the build's own pass
        if verbose:  # its warnings as they come
            return real(kernel, force)
        return quietly(lambda: real(kernel, force), warned)
    Kernel.build, Kernel._loaded, Kernel.__call__ = build, loaded, call
    try:
        prebuild(expr)
    except ValueError as e:
        raise TkcError(str(e)) from None
    finally:
        Kernel.build, Kernel._loaded, Kernel.__call__ = real, real_loaded, real_call
    return built


def _print_table(rows: list[dict]) -> None:
    cols = ["kernel", "registers", "spills", "wgmma", "shared bytes", "cache path"]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols).rstrip())
    for r in rows:
        print("  ".join(r[c].ljust(widths[c]) for c in cols).rstrip())


if __name__ == "__main__":
    sys.exit(main())
