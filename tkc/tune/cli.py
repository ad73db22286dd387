"""`tkc tune`: tune autotuned kernels (tkc.autotune) for given shapes.

    tkc tune FILE.py --call "scale(f32[4096, 64], f32[4096, 64])"   # a file's, at a call
    tkc tune --call "matmul(bf16[777, 4096], bf16[4096, 1536])"     # what a torch op's call picks
    tkc tune --library [--filter matmul]                            # the library's, its examples
    tkc tune --library --filter tkc.matmul.tile --missing           # ... only keys no table holds
    tkc tune --library --missing --budget 600                       # ... for at most ~10 minutes
    tkc tune --ship TUNED.json --source "how"                       # its rows into the package's table
    tkc tune --library --missing --dry-run                          # the keys it would tune (no GPU)
    tkc tune --library --filter tkc.matmul.tile --challenge sliced=True --warm
                                                # a new schedule against each key's pick

Each autotuned builder found (a FILE's globals, or the library's: the torch
ops' picks) is tuned at every call given for it by name (--call, in the
language of `tkc build --call`: tensors as DTYPE[dims], made random on the
GPU; the builder's name and its kernel's arguments, e.g. --call
"tkc.matmul.tile(bf16[1, 1, 777, 4096], bf16[1, 1, 4096, 1536], bf16[1, 1, 777, 1536])";
with calls, only the builders they name, and a call naming none is an
error; a call of one of tkc's torch ops instead tunes each key it picks from,
at an example that makes it: op_calls.py), else at its own examples
(autotune(examples=...)); with --missing
only the keys that neither this machine's table nor the package's holds
(a space whose key grew finer: its new keys). One line per key as it is
tuned, then a summary table (best configuration, its µs, the
default's, and how many candidates were pruned or rejected) and the table
file the picks went into. Needs torch and a GPU; without MLIR
(TKC_OFFLINE=1) only candidates already built are timed. `--ship` copies
the rows a GPU machine tuned (the table file it wrote, brought back) into
the package's table of that GPU: how the shipped tables are made.
`--challenge NAME=VALUE` (repeatable: all must hold) times, at each key,
only the configurations with those values against the one the key runs
now (its table's pick), which a challenger must beat; `--warm` then also
requires the winner to be no slower with a warm L2 (measure.py).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from ..diagnostics import TkcError, at_least
from . import op_calls, tables
from .configs import config_text
from .space import fake_tensors, registry

WON = 0.02   # --ship counts the rows this much faster than their untuned configuration


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tkc tune", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", metavar="FILE.py", help="tune the autotuned builders of these files")
    p.add_argument("--library", action="store_true", help="tune the library's autotuned picks")
    p.add_argument("--call", action="append", default=[], metavar="EXPR",
                   help='a call to tune at, e.g. "scale(f32[4096, 64], f32[4096, 64])"')
    p.add_argument("--filter", default="", help="only builders whose name contains this")
    p.add_argument("--missing", action="store_true", help="only keys that no table holds yet")
    p.add_argument("--ship", metavar="TUNED.json", help="copy a machine's tuned rows (tkc tune's table) into "
                   "the package's table of its GPU (with --filter: those spaces only), and stop")
    p.add_argument("--source", help="with --ship: how the rows were tuned (each row's source)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no key after this many seconds (the picks so far are kept: run again with "
                        "--missing for the rest)")
    p.add_argument("--rounds", type=at_least(1), default=5,
                   help="interleaved timing rounds (default 5; the finalists then run 2 x as many more)")
    p.add_argument("--challenge", action="append", default=[], metavar="NAME=VALUE",
                   help="time only the configurations with NAME=VALUE (repeatable: all of them) against what "
                        "each key runs now, e.g. sliced=True")
    p.add_argument("--warm", action="store_true", help="a winner must also be no slower than what the key runs "
                   "now with a warm L2 (for spaces timed with a cold one)")
    p.add_argument("-j", "--jobs", type=at_least(1), default=None, help="build processes (default: one a core)")
    p.add_argument("--dry-run", action="store_true", help="list the keys it would tune (with --missing: those "
                   "no table holds) and stop; needs no GPU (the examples made as fake tensors)")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.ship:
        path, count, held, gains = tables.ship(args.ship, args.source, args.filter)
        sys.stdout.write(f"{count} row(s) of {args.ship} in {path}"
                         + (f" ({held} the table held already: left as they were)" if held else "") + "\n")
        if gains:   # what the rows change: how much faster than what their keys ran untuned
            won = sorted(g for g in gains if g >= WON)
            sys.stdout.write(f"{len(won)} of the {len(gains)} naming their untuned configuration run "
                             f"{WON:.0%} or more faster than it"
                             + (f" ({won[0]:.0%} to {won[-1]:.0%}, median {won[len(won) // 2]:.0%})"
                                if won else "") + "\n")
        return 0
    parsed = [(expr, _parse(expr)) for expr in args.call]
    ops = [expr for expr, (name, _) in parsed if op_calls.is_op(name)]   # a torch op's call: the library's
    if not args.files and not args.library and not ops:
        raise TkcError("tkc tune: name FILE.py files, --library or a --call of a torch op")
    found = _builders(args.files, args.library or bool(ops))
    found = [t for t in found if args.filter in t.name]
    if not found:
        raise TkcError(f"tkc tune: no autotuned builder{' matches ' + repr(args.filter) if args.filter else ''}")
    kernel_calls = [(expr, call) for expr, call in parsed if expr not in ops]
    _called(found, kernel_calls, args.filter)
    calls, lacking = [call for _, call in kernel_calls], 0
    if not args.dry_run:   # (an op's call below is made on the GPU too)
        _need_gpu()
    for expr in ops:   # each key the op picks from, as an example of its space that makes it
        keyed, missed = op_calls.expand(expr, found, args.dry_run, faked)
        calls, lacking = calls + keyed, lacking + missed
    if args.call:   # tune at the calls given, and only the builders they name
        found = [t for t in found if any(name in _names(t) for name, _ in calls)]
        if not found and not lacking:
            raise TkcError("tkc tune: the calls pick from no autotuned space"
                           + (f" matching --filter {args.filter!r}" if args.filter else ""))
    # (checked before a dry run too: a misspelt challenge shows on the CPU, not on the GPU machine)
    challenge = {t.name: _challengers(t, args.challenge) for t in found} if args.challenge else {}
    if args.dry_run:
        return _dry_run(found, calls, args.missing) or int(lacking > 0)
    rows, failed, held, left, t0 = [], [], 0, 0, time.perf_counter()
    with _terminable(), tables.batched():   # (the rows written every few seconds, and at a SIGTERM)
        for tuned in found:
            examples = _examples(tuned, calls)
            for i, example in enumerate(examples):
                if args.budget is not None and time.perf_counter() - t0 > args.budget:
                    left += 1
                    continue
                try:   # a key whose example or default cannot be made (offline: not built) is skipped
                    made = example() if callable(example) else example
                    if args.missing and tables.lookup(tuned.name, tuned.key(made)) is not None:
                        held += 1
                        continue
                    result = tuned.tune(*made, rounds=args.rounds, jobs=args.jobs,
                                        challengers=challenge.get(tuned.name),
                                        warm=args.warm)
                except (TkcError, MemoryError, RuntimeError) as e:   # this key cannot be tuned: the rest can
                    if isinstance(e, RuntimeError) and type(e).__name__ != "OutOfMemoryError":
                        raise   # (torch's OutOfMemoryError: an example larger than the GPU's free memory)
                    failed.append(f"{tuned.name}: {type(e).__name__ + ': ' if not isinstance(e, TkcError) else ''}{e}")
                    sys.stderr.write(f"[-] {failed[-1]}\n")
                    continue
                finally:
                    made = None   # (before the next example is made: two at once filled the H200 at D 256)
                rows.append((tuned, result))
                sys.stderr.write(f"[{len(rows)}] {tuned.name} {result.key!r}: {config_text(result.best)}\n")
    if rows:
        sys.stdout.write(summary(rows, time.perf_counter() - t0))
    if held:
        sys.stdout.write(f"{held} key(s) a table holds: not tuned again (--missing)\n")
    if left:
        sys.stdout.write(f"{left} example(s) left when the budget ran out (--budget {args.budget:g}; examples "
                         "can share a key: --missing --dry-run lists the keys left)\n")
    if failed:
        sys.stdout.write(f"{len(failed)} key(s) not tuned:\n" + "".join(f"  {f}\n" for f in failed))
    return 1 if failed or lacking or not (rows or held or left) else 0


def _challengers(tuned, pairs: list) -> Callable:
    """--challenge's NAME=VALUE pairs as a predicate on `tuned`'s configurations
    (VALUE a Python literal: True, 128, "auto"); a name its space lacks, or a
    value none of its configurations has, is an error."""
    want = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        try:
            value = ast.literal_eval(text) if sep else None
        except (ValueError, SyntaxError):
            value = text   # (a bare word: a string value)
        if not sep or not name:
            raise TkcError(f"tkc tune --challenge {pair!r}: expected NAME=VALUE, e.g. sliced=True")
        values = {c.get(name, _ABSENT) for c in tuned.configs}
        if _ABSENT in values:
            raise TkcError(f"tkc tune --challenge {pair!r}: {tuned.name}'s configurations have no {name!r} "
                           f"(they have {', '.join(sorted(tuned.configs[0]))})")
        if value not in values:
            raise TkcError(f"tkc tune --challenge {pair!r}: no configuration of {tuned.name} has "
                           f"{name}={value!r} (its values: {', '.join(map(repr, sorted(values, key=repr)))})")
        want[name] = value
    return lambda config: all(config[k] == v for k, v in want.items())


_ABSENT = object()


def _called(found: list, calls: list, only: str) -> None:
    """Refuse a --call (expr, (name, make)) that names none of `found`'s
    builders (tuning every example instead of the one call is not what was
    asked), listing the names a call may take."""
    names = {n for t in found for n in _names(t)}
    for expr, (name, _) in calls:
        if name not in names:   # (those whose name holds the call's first: matmul -> tkc.matmul.tile)
            known = sorted(t.name for t in found)
            known = [n for n in known if name.split(".")[-1] in n] or known
            raise TkcError(f"tkc tune: --call {expr!r} names no autotuned builder"
                           + (f" matching --filter {only!r}" if only else "")
                           + f": a call names a builder (one of {', '.join(known[:6])}"
                           + (f" and {len(known) - 6} more" if len(known) > 6 else "")
                           + ") and gives its kernel's arguments, as `tkc tune --dry-run` lists its keys, "
                           "or names a torch op and gives its arguments")


def _gpu() -> bool:
    """Whether torch sees a CUDA device (tuning times candidates on one)."""
    import torch
    return torch.cuda.is_available()


def _need_gpu() -> None:
    if not _gpu():
        raise TkcError("tkc tune: tuning times the candidates on a GPU, and torch sees none here "
                       "(--dry-run lists the keys it would tune on any machine)")


def _names(tuned) -> tuple:
    """The names a --call may give a builder: its space's, and its function's
    (a functools.partial has none)."""
    return tuned.name, getattr(tuned.builder, "__name__", tuned.name)


def _examples(tuned, calls: list) -> list:
    """The argument lists (or thunks making them) to tune `tuned` at: its
    --call ones, else its own examples; none, said on stderr."""
    mine = [c for c in calls if c[0] in _names(tuned)]
    examples = [c[1] for c in mine] if mine else list(tuned.examples() if tuned.examples else ())
    if not examples:
        sys.stderr.write(f"tkc tune: {tuned.name}: no --call for it and no examples: skipped\n")
    return examples


@contextlib.contextmanager
def _terminable():
    """SIGTERM (`timeout`'s, a batch system's) as SystemExit within it, so the
    rows batched() holds are written before the process ends."""
    def end(signum, frame):
        raise SystemExit(128 + signum)
    try:
        old = signal.signal(signal.SIGTERM, end)
    except ValueError:   # (not the main thread: as it was)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def faked():
    """Examples made within it are fake tensors (torch's FakeTensorMode:
    shapes without memory) and what they ask the driver (an SM count, say)
    the fake driver answers: how a machine without a GPU makes them."""
    from ..bench.fake_driver import fake_driver
    with fake_driver(), fake_tensors():
        yield


def _dry_run(found: list, calls: list, missing: bool) -> int:
    """--dry-run: each builder's keys its examples (or calls) would tune, made
    as fake tensors through the fake driver (faked), so any machine can list
    them; with missing, those no table holds. An example its kernel cannot
    take (Autotuned.misfit) is an error: 1."""
    total, spaces, unlisted, misfits = 0, 0, [], []
    for tuned in found:
        keys, held = [], 0
        try:
            with faked():
                for example in _examples(tuned, calls):
                    args = example() if callable(example) else example
                    why = tuned.misfit(args)
                    if why is not None:
                        misfits.append(f"{tuned.name}: {why}")
                        break
                    key = tuned.key(args)
                    if missing and tables.lookup(tuned.name, key) is not None:
                        held += 1
                    elif key not in keys:
                        keys.append(key)
        except Exception as e:  # noqa: BLE001  (examples or a key that need real tensors or the driver)
            unlisted.append(f"{tuned.name} ({type(e).__name__}: {str(e).splitlines()[0]})")
        else:
            if keys:
                sys.stdout.write("".join(f"{tuned.name} {k!r}\n" for k in keys) + f"{tuned.name}: {len(keys)} "
                                 f"key(s) to tune" + (f", {held} a table holds" if held else "") + "\n")
            total += len(keys)
            spaces += bool(keys)
    sys.stdout.write(f"{total} key(s) to tune in {spaces} of {len(found) - len(unlisted)} space(s)\n")
    for line in unlisted:
        sys.stdout.write(f"not listed, its examples need a GPU: {line}\n")
    for line in misfits:
        sys.stderr.write(f"tkc tune: {line}\n")
    return 1 if misfits else 0


def summary(rows: list, seconds: float) -> str:
    lines = [f"{'builder':28} {'key':44} {'best':28} {'µs':>9} {'spread':>7} {'default µs':>11} "
             f"{'pruned':>6} {'rejected':>8}"]
    for tuned, r in rows:
        by = {config_text(x["config"]): x for x in r.rows}
        best, default = by[config_text(r.best)], by[config_text(tuned.default)]
        count = lambda s: sum(1 for x in r.rows if x["status"] == s)  # noqa: E731
        lines.append(f"{tuned.name[-28:]:28} {repr(r.key)[:44]:44} {config_text(r.best)[:28]:28} "
                     f"{best['us']:9.2f} {best['spread']:7.1%} {default['us']:11.2f} {count('pruned'):6} "
                     f"{count('rejected'):8}")
    lines.append(f"{len(rows)} key(s) tuned in {seconds:.0f} s; picks in {tables.user_path()}")
    return "\n".join(lines) + "\n"


def _builders(files: list, library: bool) -> list:
    """The autotuned builders of these files (and the library's), in order found."""
    from ..frontend.kernel import kernels_in_file
    before = set(registry)
    for f in files:
        kernels_in_file(f)   # imports the file: its autotune decorators register (again, if imported before)
    paths = {str(Path(f).resolve()) for f in files}
    names = [n for n in registry if n not in before or registry[n].where.rsplit(":", 2)[0] in paths]
    if library:
        import tkc.torchops  # noqa: F401  (the torch ops declare the library's picks)
        names += [n for n in registry if n.startswith("tkc.") and n not in names]
    return [registry[n] for n in names]


def _parse(expr: str) -> tuple:
    """(name, thunk making the call's arguments on the GPU) of a --call expression."""
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as e:
        raise TkcError(f"--call {expr!r}: not an expression ({e.msg})") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))):
        raise TkcError(f"--call {expr!r}: expected name(arguments)")
    name = ast.unparse(node.func)

    def make():
        import torch

        from ..torchops.calls import DTYPES
        out = []
        for a in node.args:
            if isinstance(a, ast.Subscript) and isinstance(a.value, ast.Name) and a.value.id in DTYPES:
                dims = ast.literal_eval(a.slice)
                dims = dims if isinstance(dims, tuple) else (dims,)
                dtype = DTYPES[a.value.id]
                out.append(torch.randn(dims, device="cuda").to(dtype) if dtype.is_floating_point
                           else torch.zeros(dims, dtype=dtype, device="cuda"))
            else:
                out.append(ast.literal_eval(a))
        return out
    return name, make
