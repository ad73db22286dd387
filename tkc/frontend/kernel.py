"""@tkc.kernel: the Kernel object (trace, cache key, build, launch, interpret).

Tracing runs the author's function once with traced arguments in a fresh tk
Context and returns the tile-IR module of docs/tile-ir.md ("Kernels"). The
cache key and the grid expressions need no MLIR, so a GPU machine without it
can find prebuilt artifacts.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path

from ..diagnostics import TkcError, author_python_error
from ..dialect.types import UNIFORM_IDS
from .cluster import check_cluster
from .grid import grid_exprs
from .identity import closure_of, constants_of, helpers_of, source_of
from .tiles import SCALAR_DTYPES, DType, GLSpec


class Param:
    """One kernel argument: a gl (spec) or an f32/i32 scalar (dtype)."""

    def __init__(self, name: str, annotation):
        self.name = name
        if isinstance(annotation, GLSpec):
            self.kind, self.spec, self.dtype = "gl", annotation, annotation.dtype
        else:
            self.kind, self.spec, self.dtype = "scalar", None, str(annotation)

    def describe(self) -> str:
        return repr(self.spec) if self.kind == "gl" else f"tkc.{self.dtype}"


def _where_def(fn) -> str:
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}:1"


def _resolve(fn, name: str, ann, where: str, scope: dict | None = None):
    """An annotation as a GLSpec or scalar DType (string annotations, as
    `from __future__ import annotations` makes them, are evaluated with the
    function's globals, the names of the scope that defined it, and its
    closure)."""
    if isinstance(ann, str) and not isinstance(ann, DType):
        env = dict(fn.__globals__)
        env.update(scope or {})
        env.update(closure_of(fn))
        try:
            ann = eval(ann, env)  # noqa: S307 (the author's own annotation)
        except Exception as e:
            raise TkcError(f"cannot evaluate the annotation of argument {name!r}: {e}", where)
    if isinstance(ann, GLSpec) or (isinstance(ann, DType) and ann in SCALAR_DTYPES):
        return ann
    raise TkcError(f"kernel argument {name!r} must be annotated with gl(dtype, b, d, r, c), "
                   f"tkc.f32 or tkc.i32, got {ann!r}", where)


class Kernel:
    """A ThunderKittens-style kernel written in Python (see tkc.kernel)."""

    def __init__(self, fn, *, warps: int = 1, grid=None, name: str | None = None,
                 divisible: dict | None = None, order: str | None = None,
                 persistent: bool = False, inplace: dict | None = None, scope: dict | None = None,
                 spills: int = 0, blocks_per_sm: int = 1, uniform_ids: str | None = None,
                 ragged: tuple | None = None, cluster=(1, 1, 1)):
        if not callable(fn):
            raise TkcError(f"@tkc.kernel decorates a function, got {fn!r}")
        if isinstance(warps, bool) or not isinstance(warps, int) or warps <= 0:
            raise TkcError(f"warps must be a positive int, got {warps!r}", _where_def(fn))
        if grid is not None and not callable(grid):
            raise TkcError("grid must be a lambda over the kernel's arguments", _where_def(fn))
        self.divisible = _check_divisible(divisible, fn)
        self.inplace = _check_inplace(inplace, fn)
        if isinstance(spills, bool) or not isinstance(spills, int) or spills < 0:
            raise TkcError(f"spills must be a byte count >= 0, got {spills!r}", _where_def(fn))
        self.spills = spills  # the register spill stores `tkc build` accepts (it refuses more)
        if isinstance(blocks_per_sm, bool) or not isinstance(blocks_per_sm, int) or not 1 <= blocks_per_sm <= 32:
            raise TkcError(f"blocks_per_sm must be an int in 1..32, got {blocks_per_sm!r}", _where_def(fn))
        self.blocks_per_sm = blocks_per_sm
        if uniform_ids not in (None, *UNIFORM_IDS):
            raise TkcError(f"uniform_ids must be one of {(None, *UNIFORM_IDS)}, got {uniform_ids!r}",
                           _where_def(fn))
        self.uniform_ids = uniform_ids
        self.order, self.persistent = _check_schedule(order, persistent, fn)
        self.ragged = _check_ragged(ragged, persistent, fn)
        self.cluster = check_cluster(cluster, persistent, order, _where_def(fn))
        self.fn, self.warps, self.grid_fn = fn, warps, grid
        self._scope = scope or {}  # the defining scope's names, for string annotations
        self.name = name or fn.__name__
        self.__doc__ = fn.__doc__
        self._params = None
        self._artifact = None
        self._launcher = None  # the artifact's runtime launcher, kept by __call__

    def __repr__(self):
        return f"<tkc.Kernel {self.name}({', '.join(p.describe() for p in self.params.values())})>"

    # ---------------------------------------------------------- signature
    @property
    def params(self) -> dict[str, Param]:
        if self._params is None:
            where = _where_def(self.fn)
            sig = inspect.signature(self.fn)
            params = {}
            for name, p in sig.parameters.items():
                if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                    raise TkcError(f"kernel argument {name!r}: only plain positional "
                                   "arguments are supported", where)
                params[name] = Param(name, _resolve(self.fn, name, p.annotation, where,
                                                    self._scope))
            self._params = params
        return self._params

    def grid(self) -> list[str]:
        """The three grid expressions (strings of the grid language)."""
        where = _where_def(self.grid_fn) if self.grid_fn is not None else ""
        return grid_exprs(self.grid_fn, self.params, where)

    # ---------------------------------------------------------- tracing
    def trace(self):
        """The kernel as tile IR: an ir.Module in the process's Context (tkc.dialect.context).

        A Python error in the author's code (a typo'd name, a wrong call) is a
        TkcError at the author's line, the original exception chained.
        """
        from .build import trace_kernel
        try:
            return trace_kernel(self)
        except TkcError:
            raise
        except Exception as e:
            located = author_python_error(e, self.fn.__code__.co_filename)
            if located is None:
                raise  # raised inside tkc: an internal error, with its traceback
            raise located from e

    def tile_ir(self, debug_info: bool = False) -> str:
        """The traced tile IR as text (with locations if debug_info)."""
        module = self.trace()
        return module.operation.get_asm(enable_debug_info=debug_info)

    # ---------------------------------------------------------- cache key
    def source(self) -> str:
        """Kernel source, grid lambda source, and sources of helpers it calls."""
        parts = [source_of(self.fn)]
        if self.grid_fn is not None:
            parts.append(source_of(self.grid_fn))
        parts += [source_of(f) for f in helpers_of(self.fn)]
        return "\n".join(parts)

    def specialisation(self) -> str:
        """Decorator arguments, argument types and the constants the source reads."""
        consts = {}
        for f in (self.fn, self.grid_fn, *helpers_of(self.fn)):
            if f is not None:
                consts.update(constants_of(f))
        return json.dumps({
            "name": self.name, "warps": self.warps, "grid": self.grid(),
            "divisible": self.divisible, "order": self.order, "persistent": self.persistent,
            "inplace": self.inplace, "blocks_per_sm": self.blocks_per_sm, "uniform_ids": self.uniform_ids,
            **({"ragged": list(self.ragged)} if self.ragged else {}),
            **({"cluster": list(self.cluster)} if self.cluster != (1, 1, 1) else {}),
            "params": [[p.name, p.describe()] for p in self.params.values()],
            "constants": {k: repr(v) for k, v in sorted(consts.items())},
        }, sort_keys=True)

    def cache_key(self) -> str:
        """sha256 of source + specialisation (no MLIR, no compiler hash)."""
        blob = json.dumps([self.source(), self.specialisation()])
        return hashlib.sha256(blob.encode()).hexdigest()

    def artifact_key(self, target: str = "sm_90a") -> str:
        """The artifact cache's key (adds the compiler hash and target)."""
        from ..runtime import cache
        return cache.make_key(self.source(), self.specialisation(), target)

    # ---------------------------------------------------------- running
    def build(self, force: bool = False):
        """The compiled Artifact: from the cache, else compiled and stored."""
        from ..runtime import cache
        if self._artifact is not None and not force:
            return self._artifact
        key = self.artifact_key()
        art = None if force else cache.lookup(key)
        if art is None:
            if cache.offline():
                raise cache.missing(self.name, key, self.fn.__code__.co_filename)
            try:
                importlib.import_module("mlir.ir")   # tracing and compiling need MLIR's bindings
            except ImportError as e:
                raise cache.missing(self.name, key, self.fn.__code__.co_filename, no_mlir=e) from None
            from ..compiler import compile_kernel
            from ..runtime import reuse
            art = compile_kernel(self.trace(), key=key, spills=self.spills, reuse=not force)
            cache.store(key, art)
            reuse.note(key, art.manifest["source"].get("stages", {}))   # what a later compile may reuse
        self._artifact, self._launcher = art, None
        return art

    def __call__(self, *args, stream=None):
        """Launch on device tensors (build first if needed).

        After the first call the launcher is kept: a call costs the argument
        checks and the launch, never the artifact key (it hashes sources)."""
        launcher = self._launcher
        if launcher is None or len(args) != len(self._params):
            self._check_arg_count(args)
            from ..runtime.launch import launcher as launcher_of
            launcher = self._launcher = launcher_of(self.build())
        launcher(args, stream)

    def prepare(self, *args, bound=(), free=()):
        """Check args and return a prepared launch: a function launching on
        tensors of these layouts that skips the checks (tkc/runtime/launch.py,
        prepared). bound: indices of arguments fixed to these values (the
        launch then takes the others only; the caller keeps bound tensors alive).
        free: indices of tensor arguments whose runtime dims and strides may
        change between launches (a growing KV cache; the caller vouches that
        the kernel takes them)."""
        self._check_arg_count(args)
        return self._loaded().prepare(args, bound, free)

    def resident_blocks(self, device: int = 0) -> int:
        """How many blocks of this kernel one SM of cuda:device holds at once
        (the driver's occupancy calculator: its registers, shared memory and
        threads): the grid a kernel that loops over its work takes to fill
        the GPU is that many times the SMs."""
        return self._loaded().resident(device)

    def _loaded(self):
        """The artifact's runtime launcher (built or fetched first), kept."""
        if self._launcher is None:
            from ..runtime.launch import launcher as launcher_of
            self._launcher = launcher_of(self.build())
        return self._launcher

    def interpret(self, *arrays):
        """Run on numpy arrays with the CPU interpreter (arrays updated in
        place), as compiled: after the tile pipeline (traced and passed once
        a process, interpreted.py)."""
        self._check_arg_count(arrays)
        from ..interpreter import run
        from .interpreted import prepared
        run(prepared(self), list(arrays))

    def interpret_ranks(self, rank_args: list, **options) -> None:
        """Run as len(rank_args) ranks with the CPU interpreter: rank r's
        arguments are rank_args[r]; a pgl argument's arrays, one per rank, are
        its symmetric buffers (docs/multi-gpu.md). options: grid, races, sms, engines."""
        for args in rank_args:
            self._check_arg_count(args)
        from ..interpreter import run_ranks
        from .interpreted import prepared
        run_ranks(prepared(self), [list(a) for a in rank_args], **options)

    def _check_arg_count(self, args) -> None:
        if len(args) != len(self.params):
            from .trace import author_where
            raise TkcError(f"kernel {self.name} takes {len(self.params)} arguments "
                           f"({', '.join(self.params)}), got {len(args)}", author_where())


def kernel(fn=None, *, warps: int = 1, grid=None, name: str | None = None,
           divisible: dict | None = None, order: str | None = None, persistent: bool = False,
           inplace: dict | None = None, spills: int = 0, blocks_per_sm: int = 1,
           uniform_ids: str | None = None, ragged: tuple | None = None, cluster=(1, 1, 1)):
    """Decorator: `@tkc.kernel(warps=4, grid=lambda a, b, c: (...))` (or bare).

    divisible={"K": 256}: the named runtime dim K must be a multiple of 256 at
    launch (on top of what the kernel's tile accesses require), e.g. for a K
    loop unrolled by pipeline stages. divisible={"Hq": "Hkv"}: dim Hq must be
    a multiple of dim Hkv (GQA: query heads in groups per KV head).

    order: the order blocks take the grid's work items in (tk-grid-ordering):
    "auto", a permutation of "xyz" (fastest first) or "grouped(y, W)" /
    "grouped(x, W)" (L2-friendly super-rows / super-columns). persistent=True:
    one block per SM, each looping over work items (docs/pipelining.md):
    block b takes items b, b + P, b + 2P, .. (P blocks); "zigzag" deals the
    rounds of P items alternately forwards and backwards (b, 2P - 1 - b,
    2P + b, ..), so that where the items' work falls along the order (causal
    attention's longest query tiles first) every block gets long and short
    ones alike.

    ragged=("count", R) (persistent kernels): the work items are ragged
    groups, MoE's experts: z of the grid is a group, count an i32 gl argument
    whose element z (at (0, 0, 0, z)) is the group's rows in use, and group z
    has only ceil(count[z] / R) y values (at most the grid's Y). The blocks
    stride over the live items alone, counted on the device (CUDA graphs:
    counts change, the launch does not): no block idles on dead ones.

    cluster=(cx, cy, cz): the grid's blocks run in thread-block clusters of
    cx*cy*cz CTAs (at most 8; the grid a multiple of it), which reach each
    other's shared memory: tkc.cluster_ctarank(), tkc.cluster_sync(),
    multicast TMA loads and remote arrivals (docs/dsl.md, "Clusters").

    inplace={"o": "x"}: the output o may be the very tensor x (the kernel
    reads each element of x before writing it, once). Without it, a launch
    whose written argument overlaps another argument in memory is refused.

    spills=N: the kernel is known to spill up to N bytes of registers (ptxas's
    spill stores); `tkc build` reports more, or any spill of a kernel that
    declares none, as an error; compiling warns only beyond it (the user of
    a library op cannot act on its known spills). A declared allowance says
    why at its kernel.

    blocks_per_sm=n: n blocks share an SM (CUDA's __launch_bounds__ minimum
    blocks): ptxas keeps registers to 65536 / (n * threads) a thread and the
    block's shared memory (tk-pipeline-staging's ring included) to an n-th of
    the SM's, so that several independent work items hide each other's
    latency.

    uniform_ids="warpgroup": warpgroupid() is the warp id broadcast from lane
    0 (CUTLASS's canonical_warp_idx_sync), which ptxas knows to be the same
    in every lane of a warp, so what derives from it (a warpgroup's branch,
    the wgmma descriptors of its subtile) stays on the uniform datapath
    instead of moving over from per-lane registers; "warp": warpid() too (a
    warp's rows, its store coordinates). Fewer instructions and per-lane
    registers, but the uniform registers (63) can crowd out other values:
    measure it per kernel. On the H100 the attention backward gains 1.7-5.1%
    with "warp", its forwards up to 4.3% with "warpgroup" (D 128's loses 8%
    with "warp"); the linear attention and hedgehog kernels spill with
    "warpgroup" (neither is the default)."""
    # The defining scope's local names (a kernel defined inside a function
    # may annotate with names imported there): called where the def is.
    scope = dict(sys._getframe(1).f_locals)
    opts = dict(warps=warps, grid=grid, name=name, divisible=divisible, order=order,
                persistent=persistent, inplace=inplace, scope=scope, spills=spills,
                blocks_per_sm=blocks_per_sm, uniform_ids=uniform_ids, ragged=ragged, cluster=cluster)
    if fn is not None:
        return Kernel(fn, **opts)
    return lambda f: Kernel(f, **opts)


def _check_schedule(order, persistent, fn) -> tuple[str | None, bool]:
    """order and persistent, checked; a persistent kernel without an order gets "auto"."""
    if not (isinstance(persistent, bool) or persistent == "zigzag"):
        raise TkcError(f"persistent must be True, False or \"zigzag\", got {persistent!r}",
                       _where_def(fn))
    if order is None:
        return ("auto" if persistent else None), persistent
    from ..passes.orders import parse_order
    try:
        parse_order(order if isinstance(order, str) else repr(order))
    except ValueError as e:
        raise TkcError(f"order: {e}", _where_def(fn)) from None
    return order, persistent


def _check_ragged(ragged, persistent, fn) -> tuple | None:
    """ragged=(count argument's name, rows a y value), for a persistent kernel."""
    if ragged is None:
        return None
    ok = isinstance(ragged, tuple) and len(ragged) == 2 and isinstance(ragged[0], str) \
        and isinstance(ragged[1], int) and not isinstance(ragged[1], bool) and ragged[1] >= 1
    if not ok:
        raise TkcError(f"ragged must be (count, rows): the name of an i32 gl argument and the rows of "
                       f"a y value (an int >= 1), got {ragged!r}", _where_def(fn))
    if ragged[0] not in inspect.signature(fn).parameters:
        raise TkcError(f"ragged: {ragged[0]!r} is not an argument of the kernel", _where_def(fn))
    if not persistent:
        raise TkcError("ragged needs persistent=True (or \"zigzag\"): its blocks loop over the live "
                       "work items, whose number only the device knows", _where_def(fn))
    return ragged


def _check_inplace(inplace, fn) -> dict[str, str]:
    if inplace is None:
        return {}
    if not isinstance(inplace, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k != v for k, v in inplace.items()):
        raise TkcError(f"inplace maps an output argument's name to the input it may be, "
                       f"got {inplace!r}", _where_def(fn))
    return dict(inplace)


def _check_divisible(divisible, fn) -> dict[str, int | str]:
    if divisible is None:
        return {}
    if not isinstance(divisible, dict) or not all(
            isinstance(k, str) and k and (isinstance(v, int) and not isinstance(v, bool) and v > 0
                                          or isinstance(v, str) and v and v != k and "." not in k + v)
            for k, v in divisible.items()):
        raise TkcError(f"divisible must map dim names to positive ints or to other dim names, "
                       f"got {divisible!r}", _where_def(fn))
    return dict(divisible)


# -------------------------------------------------------------- key helpers

# -------------------------------------------------------------- files

def kernels_in_file(path) -> list[Kernel]:
    """Import a Python file by path; the Kernels among its globals and in KERNELS
    (an autotuned builder's: every candidate's)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise TkcError(f"no such kernel file: {path}")
    mod_name = f"_tkc_file_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # dataclasses and inspect look modules up by name
    try:
        spec.loader.exec_module(module)
    except TkcError:
        raise
    except Exception as e:
        raise TkcError(f"importing {path} failed: {type(e).__name__}: {e}") from e
    found = []
    values = list(vars(module).values())
    extra = vars(module).get("KERNELS", ())
    if isinstance(extra, (list, tuple)):
        values += list(extra)
    for v in values:
        # an autotuned builder (tkc.autotune) stands for its candidates' kernels
        for k in v.kernels() if hasattr(v, "kernels") and hasattr(v, "configs") else (v,):
            if isinstance(k, Kernel) and all(k is not f for f in found):
                found.append(k)
    return found
