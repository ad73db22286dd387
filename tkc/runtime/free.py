"""Prepared launches with free arguments: gl tensors whose runtime dims and
strides may change from call to call (a decode step's KV cache, one key
longer each step, often in new memory).

`reader` makes the per-call reading of such an argument (its pointer,
runtime dims and strides, as the full path packs them); `FreeFrames` the
parameter frames such a launch packs for them.

A growing cache's every step is a set of values never seen again, so its
frames are not kept as the launcher keeps its others (one per distinct set
of values): each thread has a few, packed in turn, and the tensor maps of
the free arguments are encoded straight into them, not kept. Reusing a
frame also skips making one: a new 1 KB ctypes buffer and the void*[] into
it cost ~6 µs of this 2-core machine's host, a third of a step's repacking.
A frame is rewritten only by its own thread (cuLaunchKernelEx copies the
parameters it reads before it returns), so no lock is needed.
"""
from __future__ import annotations

import ctypes
import threading

from ..diagnostics import TkcError
from .args import strides_4d
from .callsite import caller
from .frame import Frame
from .tensormap import MAP_BYTES

__all__ = ["FEW", "FreeFrames", "reader"]

FEW = 8   # frames a thread keeps per prepared launch with free arguments


def reader(launcher, index: int, shapes: list) -> tuple:
    """(values(t), count): free argument `index`'s PTX values read from a
    tensor of the prepared one's rank (its data pointer, runtime dims, a
    strided gl's element strides, as GlParam.pack writes them), and how many
    they are; a TkcError where the launch cannot read them per call."""
    params = launcher.signature.params
    param = params[index] if 0 <= index < len(params) else None
    where = f"kernel '{launcher.kernel}': argument {index} '{getattr(param, 'name', '?')}' cannot be free"
    if not hasattr(param, "runtime_axes") or param.peers or shapes[index] is None:
        raise TkcError(f"{where}: only a gl tensor's dims can change between prepared launches", caller())
    if launcher.grid.names & set(param.env_names):
        raise TkcError(f"{where}: the grid reads its dims", caller())
    if any(param.divisible[a] != 1 for a in param.runtime_axes):
        raise TkcError(f"{where}: its dims must be multiples of {param.divisible}", caller())
    rank = len(shapes[index])
    axes, e, strided = [a - (4 - rank) for a in param.runtime_axes], param.itemsize, param.strided

    if rank == 4 and strided and axes == [0, 1, 2]:   # a [B, H, L, D] cache: its reads spelt out
        def values(t) -> tuple:
            (n0, n1, n2, n3), (s0, s1, s2, s3) = t.shape, t.stride()
            s3 = 1 if n3 == 1 else s3   # a size-1 dim's stride as if contiguous (strides4)
            s2 = s3 * n3 if n2 == 1 else s2
            s1 = s2 * n2 if n1 == 1 else s1
            return t.data_ptr(), n0, n1, n2, s1 * n1 if n0 == 1 else s0, s1, s2
    else:
        def values(t) -> tuple:
            shape = t.shape
            out = (t.data_ptr(), *(shape[a] if a >= 0 else 1 for a in axes))
            if strided:
                out += tuple(s // e for s in strides_4d(shape, [s * e for s in t.stride()], e)[:3])
            return out
    return values, 1 + len(axes) + 3 * strided


class FreeFrames:
    """get(values) -> the packed frame (driver.Params) of one prepared
    launch's parameter values, for a launch with free arguments; `frames()`
    this thread's {values: frame} (for tests)."""

    def __init__(self, launcher, plan, free: frozenset):
        self.layout, self._local = launcher.layout, threading.local()
        maps, sig = launcher.tensor_maps, launcher.signature
        # per tensor map: (n, where its pointer is among the values, the free
        # argument's shape and strides from the values, or None: another
        # argument's, whose shape and strides the plan fixes)
        self._maps = []
        for n, (i, offset) in enumerate(zip(maps.params, maps.offsets) if maps else ()):
            at = sig.slots[i] + offset
            self._maps.append((n, at, _layout(sig.params[i], sig.slots[i]) if i in free else None,
                               plan.shapes[i], plan.strides[i]))
        self.tensor_maps = maps

    def frames(self) -> dict:
        return getattr(self._local, "frames", {})

    def get(self, values: tuple):
        local = self._local
        try:
            params = local.frames.get(values)
        except AttributeError:   # this thread's first launch
            local.frames, local.ring, local.turn = {}, [], 0
            params = None
        if params is None:
            params = self._repack(local, values)
        return params

    def _repack(self, local, values: tuple):
        """values packed into this thread's next frame in turn (a new one
        while it has fewer than FEW), which forgets the values it held."""
        if len(local.ring) < FEW:
            frame = Frame(self.layout)
            local.ring.append([frame, values])
        else:
            slot = local.ring[local.turn]
            local.turn = (local.turn + 1) % FEW
            frame = slot[0]
            local.frames.pop(slot[1], None)
            slot[1] = values
        maps = self.tensor_maps
        for (n, at, free, shape, strides), address in zip(self._maps, frame.map_addresses):
            if free is None:
                ctypes.memmove(address, maps.map(n, values[at], shape, strides), MAP_BYTES)
            else:
                maps.write(n, address, values[at], *free(values))
        params = local.frames[values] = frame.pack(values)
        return params


def _layout(param, slot: int):
    """shape_and_strides(values): a free gl's 4-D shape and byte strides (a
    strided one's; else None) in a launch's values, where its runtime dims
    follow its pointer at `slot`, then its element strides (GlParam.pack)."""
    take = [slot + 1 + k for k in range(len(param.runtime_axes))]
    at, e = slot + 1 + len(take), param.itemsize
    place = []   # per dim: the value's index, or -1 - the static dim
    it = iter(take)
    for d in param.dims:
        place.append(next(it) if d is None else -1 - d)
    if param.strided:
        def shape_and_strides(values):
            return ([values[p] if p >= 0 else -1 - p for p in place],
                    (values[at] * e, values[at + 1] * e, values[at + 2] * e, e))
    else:
        def shape_and_strides(values):
            return [values[p] if p >= 0 else -1 - p for p in place], None
    return shape_and_strides
