"""launch(artifact, args): check the arguments, evaluate the grid, launch.

Everything that depends only on the artifact (the parameter checks, the
compiled grid expressions, the block, the parameter layout, the loaded
function per device) is prepared once and kept on the artifact.

A launch then reads the arguments' key (tkc.runtime.args, Signature.key): a
key seen before gives the Plan its full checks made (grid, device, runtime
dims), so a repeated launch does no check twice yet lets no changed argument
through; an unseen or unusual key runs every check of Signature.bind, whose
errors are the ones the caller sees. The values are packed into a parameter
frame (frame.py), kept per distinct set of values, and launched. A prepared
launch (the torch ops') skips the key too: its caller vouches for the
arguments' layouts.
"""
from __future__ import annotations

import ctypes
import sys
import weakref
from typing import Callable, NamedTuple

from ..diagnostics import TkcError
from . import driver
from .args import Signature, strides4
from .artifact import Artifact
from .callsite import caller
from .frame import Frame, Layout
from .free import FreeFrames, reader
from .grid import SMS, compile_grid
from .tensormap import MAP_BYTES, TensorMaps


class Plan(NamedTuple):
    """What the full checks found for one key."""
    grid: tuple
    device: int | None  # None: no gl argument, the current device runs it
    values: list        # PTX parameter values (the runtime dims are what they keep)
    shapes: list        # per argument, a tensor's shape (None for a scalar)
    spans: list         # per argument, a tensor's bytes in memory (Signature.spans)
    strides: list       # per argument, a strided gl's 4-D byte strides (else None)


class Launcher:
    """The per-artifact launch state."""

    PLAN_LIMIT = 256  # keys remembered per kernel (all forgotten when full)
    # packed parameter frames kept per kernel (likewise): one per distinct set of
    # pointers, so a model's step needs one per call site of the kernel (a layer's
    # weights and activations: 80 layers of a matmul are 80 frames, which a limit of 64
    # forgot every step, packing and encoding anew at each call: 28 against 10-12 µs of
    # host a call for 128 call sites, fake driver); ~1 KB a frame
    FRAME_LIMIT = 2048

    def __init__(self, artifact: Artifact):
        m = artifact.manifest
        self.image, self.kernel = artifact.cubin, m["kernel"]
        self.signature = Signature(m)
        self.tensor_maps = TensorMaps(m["kernel"], m["tensor_maps"], m["params"]) \
            if m["tensor_maps"] else None
        self.grid = compile_grid(tuple(m["grid"]))
        self.block = tuple(m["block"])
        self.shared = m["shared_bytes"]
        self.cluster = tuple(m["cluster"])
        self.layout = Layout(self.signature.kinds, len(m["tensor_maps"]))
        self.functions: dict[int, driver.Function] = {}
        self.residents: dict[int, int] = {}   # device -> blocks an SM holds (resident)
        self.plans: dict = {}
        self.frames: dict = {}
        _launchers.add(self)

    def reset(self) -> None:
        """Forget what the driver made: loaded functions and packed frames
        (their tensor maps). For a change of driver (tkc.bench.fake_driver)."""
        self.functions.clear()
        self.residents.clear()
        self.frames.clear()

    def __call__(self, args, stream=None) -> None:
        raw_stream = None if stream is None else _stream_handle(stream)
        fast = self.signature.key(args, raw_stream)
        plan = None if fast is None else self.plans.get(fast[0])
        if plan is None:
            plan = self._plan(args, raw_stream, fast)
            values = plan.values
        else:  # the plan's values, with this call's pointers and scalars
            self.signature.check_aliasing(fast[1], plan.spans)
            values = plan.values.copy()
            for slot, x in zip(self.signature.slots, fast[1]):
                values[slot] = x
        self._launch(plan, values, raw_stream)

    def prepare(self, args, bound=(), free=()) -> Callable:
        """Every check on args now; the prepared launch takes later calls whose
        tensors have these shapes, strides, dtypes and device (see `prepared`),
        without the arguments at the indices `bound`, fixed to these values;
        the tensors at the indices `free` may change their runtime dims and
        strides from call to call (see `prepared`)."""
        fast = self.signature.key(args, None)
        plan = self._plan(args, None, None)
        if fast is None:
            raise TkcError(f"kernel '{self.kernel}': only torch tensors and plain numbers can be "
                           f"prepared", caller())
        return prepared(self, plan, frozenset(bound), frozenset(free))

    def _launch(self, plan: Plan, values: list, raw_stream) -> None:
        device = plan.device if plan.device is not None else _current_device()
        fn = self.functions.get(device) or self._load(device)
        # the context first: encoding a tensor map needs a current one, which a
        # thread torch never touched lacks (autograd's backward threads)
        driver.context(device)
        if raw_stream is None:
            raw_stream = _default_stream(device)
        driver.launch(fn, plan.grid, self.block, self.shared, raw_stream,
                      self._params(values, plan), self.cluster, current=True)

    def _params(self, values: list, plan: Plan) -> driver.Params:
        """The packed parameters of these values: kept per distinct values (the
        pointers of an eager loop repeat, as torch's allocator hands the same
        blocks back), so a repeated launch neither encodes nor packs. Values fix
        the shapes (static dims are the kernel's, runtime ones are values), so
        they fix the tensor maps too; cuLaunchKernelEx copies the parameters, so
        a kept frame is never written again and threads may share it."""
        key = tuple(values)
        params = self.frames.get(key)
        if params is None:
            params = self._pack(values, plan)
            if len(self.frames) >= self.FRAME_LIMIT:
                self.frames.clear()
            self.frames[key] = params
        return params

    def _pack(self, values: list, plan: Plan) -> driver.Params:
        """A new frame of these values, its tensor maps encoded."""
        frame = Frame(self.layout)
        if self.tensor_maps is not None:
            self._maps(frame, values, plan)
        return frame.pack(values)

    def _plan(self, args, stream, fast) -> Plan:
        """Every check, the grid; the Plan is kept under the call's key (if any)."""
        try:
            bound = self.signature.bind(args, stream=stream)
            if SMS in self.grid.names:  # a persistent kernel: one block per SM
                device = bound.device if bound.device is not None else _current_device()
                bound.env[SMS] = driver.multiprocessors(device)
            grid = self._grid(bound.env)
        except TkcError as e:  # grid errors come unlocated: they are the caller's too
            raise e if e.where else TkcError(e.message, caller()) from None
        plan = Plan(grid, bound.device, [v.value for v in bound.values],
                    [None if v is None else tuple(v.shape) for v in bound.views],
                    self.signature.spans(bound.views),
                    [strides4(v) if v is not None and getattr(p, "strided", False) else None
                     for p, v in zip(self.signature.params, bound.views)])
        if fast is not None:
            if len(self.plans) >= self.PLAN_LIMIT:
                self.plans.clear()
            self.plans[fast[0]] = plan
        return plan

    def _maps(self, frame: Frame, values: list, plan: Plan) -> None:
        """The tensor maps, copied into the frame's slots after the regular parameters."""
        slots, maps = self.signature.slots, self.tensor_maps
        for n, (i, address) in enumerate(zip(maps.params, frame.map_addresses)):
            ptr = values[slots[i] + maps.offsets[n]]
            ctypes.memmove(address, maps.map(n, ptr, plan.shapes[i], plan.strides[i]), MAP_BYTES)

    def _grid(self, env: dict) -> tuple:
        grid = self.grid(env)
        if self.cluster != (1, 1, 1) and any(g % c for g, c in zip(grid, self.cluster)):
            raise TkcError(f"kernel '{self.kernel}': grid {grid} is not a multiple of "
                           f"its cluster shape {self.cluster}")
        return grid

    def resident(self, device: int) -> int:
        """Blocks of the kernel one SM of the device holds at once (kept)."""
        n = self.residents.get(device)
        if n is None:
            fn = self.functions.get(device) or self._load(device)
            threads = self.block[0] * self.block[1] * self.block[2]
            n = self.residents[device] = driver.resident(fn, threads, self.shared)
        return n

    def _load(self, device: int) -> driver.Function:
        major, minor = driver.compute_capability(device)
        if (major, minor) != (9, 0):
            raise TkcError(f"kernel '{self.kernel}' is built for sm_90a (Hopper); "
                           f"cuda:{device} is sm_{major}{minor}", caller())
        fn = self.functions[device] = driver.load(self.image, self.kernel, device, self.shared)
        return fn


_CODE: dict = {}   # a prepared launch's source -> its compiled code (the plans of one op's every
                   # shape share it: parsing the same source again cost ~0.2 ms a plan)


def prepared(launcher: Launcher, plan: Plan, bound: frozenset = frozenset(),
             free: frozenset = frozenset()) -> Callable:
    """One kernel's launch for one argument signature, checked once: a
    function of the kernel's arguments.

    A later call passes, per argument, a torch tensor (only its data pointer
    is read: it may be the base tensor of the view that was prepared) or a
    scalar. The caller owns the promise that makes the checks unnecessary:
    each tensor has the memory layout of the prepared one (shape, strides,
    dtype, device, 16-byte alignment), a scalar the grid reads keeps its value,
    and no written tensor overlaps another argument. tkc's torch ops keep one
    per argument signature, which their cache key fixes, for outputs they have
    just allocated. What is left per launch: the data pointers, a lookup of
    the packed frame (made once per distinct set of values), cuLaunchKernelEx.

    The function is generated for the plan (as dataclasses and namedtuple
    generate theirs): its parameter values are one tuple display, the plan's
    constants and the arguments in place, so a launch builds no list and
    runs no loop. This is the hot path of every torch op. Arguments in
    `bound` keep the prepare-time values (the plan's): constants in the code,
    left out of the function's parameters.

    Arguments in `free` (gl tensors) may differ from the prepared ones in
    their runtime dims and strides (a decode step's KV cache, one key longer
    each step): the launch reads them per call, and a new set of them is
    packed into one of the thread's few frames, its tensor maps encoded for
    them (free.py, FreeFrames). The caller owns the
    promise that the kernel takes them (the divisibility and the stride and
    alignment rules the checks apply; the same dims where two arguments share
    a name); the grid must not read them, and the dims must not be divisible
    by anything but 1, which `prepared` checks."""
    device = plan.device if plan.device is not None else _current_device()
    fn = launcher.functions.get(device) or launcher._load(device)
    slots = dict(zip(launcher.signature.slots, enumerate(plan.shapes)))
    if free & bound:
        raise TkcError(f"kernel '{launcher.kernel}': arguments {sorted(free & bound)} cannot be both bound "
                       f"and free", caller())
    readers = {arg: reader(launcher, arg, plan.shapes) for arg in free}
    values, i = [], 0
    while i < len(plan.values):
        arg, shape = slots.get(i, (None, None))
        if arg in free:   # the pointer, runtime dims and strides, read per call
            values.append(f"*f{arg}(a{arg})")
            i += readers[arg][1]
            continue
        if arg is None or arg in bound:
            values.append(f"c{i}")
        else:
            values.append(f"a{arg}.data_ptr()" if shape is not None else f"a{arg}")
        i += 1
    names = ", ".join(f"a{i}" for i in range(len(plan.shapes)) if i not in bound)
    source = (f"def launch({names}):\n"
              f"    context(device)  # first: a new frame's tensor maps need it\n"
              f"    key = ({', '.join(values)},)\n"
              f"    go(stream(device), frames.get(key) or miss(key))\n")
    scope = {f"c{i}": v for i, v in enumerate(plan.values) if i not in slots or slots[i][0] in bound}
    frames, miss = (launcher.frames, lambda key: launcher._params(list(key), plan)) if not free else \
        (FreeFrames(launcher, plan, free), None)   # (whose get packs what it lacks)
    scope.update({f"f{arg}": read for arg, (read, _) in readers.items()})
    scope.update(context=driver.context, device=device, frames=frames, stream=_default_stream, miss=miss,
                 go=driver.launcher(fn, plan.grid, launcher.block, launcher.shared, launcher.cluster))
    code = _CODE.get(source)
    if code is None:   # a source depends on the argument kinds, not the values: compiled once
        if len(_CODE) >= Launcher.PLAN_LIMIT:
            _CODE.clear()
        code = _CODE[source] = compile(source, "<prepared launch>", "exec")
    exec(code, scope)
    launch = scope["launch"]
    launch.__qualname__ = f"prepared[{launcher.kernel}]"
    return launch


def _stream_handle(stream) -> int:
    """An int CUstream from a torch.cuda.Stream, a CUstream or an int."""
    handle = getattr(stream, "cuda_stream", stream)
    try:
        return int(handle)
    except (TypeError, ValueError):
        raise TkcError(f"stream must be a torch.cuda.Stream, a CUstream or an int, "
                       f"found {type(stream).__name__}", caller()) from None


def _torch_cuda():
    # torch's current stream only matters if the caller uses torch, in which
    # case it is imported already; importing it here would cost a second.
    torch = sys.modules.get("torch")
    return torch.cuda if torch is not None and torch.cuda.is_initialized() else None


_current_stream = None  # device -> torch's current raw stream, once torch's CUDA is up


def _default_stream(device: int) -> int:
    """torch's current stream on device (0, the legacy default, without torch)."""
    global _current_stream
    if _current_stream is None:
        cuda = _torch_cuda()
        if cuda is None:
            return 0
        # The raw getter skips building a torch.cuda.Stream object per launch.
        import torch
        _current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
            (lambda d: cuda.current_stream(d).cuda_stream)
    return _current_stream(device)


def _current_device() -> int:
    cuda = _torch_cuda()
    return cuda.current_device() if cuda is not None else 0


_launchers: "weakref.WeakSet[Launcher]" = weakref.WeakSet()   # every live Launcher (reset_all)


def reset_all() -> None:
    """Every launcher's Launcher.reset: the driver changed under them."""
    for ln in list(_launchers):
        ln.reset()


def launcher(artifact: Artifact) -> Launcher:
    if artifact._launcher is None:
        artifact._launcher = Launcher(artifact)
    return artifact._launcher


def launch(artifact: Artifact, args, stream=None) -> None:
    """Launch artifact's kernel on args (torch tensors / DLPack objects and numbers)."""
    launcher(artifact)(args, stream)
