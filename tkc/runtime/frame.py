"""The kernel-parameter block of a launch, packed in place.

cuLaunchKernel takes kernelParams, a void*[] with one pointer per PTX
parameter. Making a ctypes object per value and the array per launch costs
microseconds, so a `Layout` fixes every parameter's offset in one buffer
once per artifact, and each thread gets a `Frame`: the 64-byte aligned
buffer, ctypes views of its slots and the void*[] pointing at them, all made
once. A launch packs the values with one struct call and copies the tensor
maps into their slots. cuLaunchKernel copies the parameters before it
returns, so the next launch from the thread may overwrite them; threads
never share a frame.
"""
from __future__ import annotations

import ctypes
import struct
import threading

from . import driver

MAP_BYTES, MAP_ALIGN = 128, 64  # a CUtensorMap parameter (tensormap.py)
# PTX parameter kinds: (ctypes type, struct code); each is aligned to its size.
KINDS = {"u64": (ctypes.c_uint64, "Q"), "u32": (ctypes.c_uint32, "I"),
         "f32": (ctypes.c_float, "f"), "i32": (ctypes.c_int32, "i")}


def _align(pos: int, alignment: int) -> int:
    return -(-pos // alignment) * alignment


class Layout:
    """Where each parameter lives: `kinds` in PTX order, then `maps` tensor maps."""

    def __init__(self, kinds: list[str], maps: int = 0):
        self.kinds = list(kinds)
        self.offsets, fmt, pos = [], ["<"], 0
        for kind in self.kinds:
            ctype, code = KINDS[kind]
            offset = _align(pos, ctypes.sizeof(ctype))
            fmt.append(f"{offset - pos}x{code}")
            self.offsets.append(offset)
            pos = offset + ctypes.sizeof(ctype)
        self.struct = struct.Struct("".join(fmt))  # packs the regular parameters only
        self.map_offsets = []
        for _ in range(maps):
            self.map_offsets.append(_align(pos, MAP_ALIGN))
            pos = self.map_offsets[-1] + MAP_BYTES
        self.size = pos
        self._local = threading.local()

    def frame(self) -> "Frame":
        """This thread's frame (made on its first launch)."""
        try:
            return self._local.frame
        except AttributeError:
            self._local.frame = Frame(self)
            return self._local.frame


class Frame:
    """One thread's parameter buffer; `params` is what driver.launch takes."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.raw = ctypes.create_string_buffer(layout.size + MAP_ALIGN)
        self.pad = -ctypes.addressof(self.raw) % MAP_ALIGN  # tensor maps want 64-byte alignment
        views = [KINDS[kind][0].from_buffer(self.raw, self.pad + offset)
                 for kind, offset in zip(layout.kinds, layout.offsets)]
        views += [(ctypes.c_ubyte * MAP_BYTES).from_buffer(self.raw, self.pad + offset)
                  for offset in layout.map_offsets]
        base = ctypes.addressof(self.raw) + self.pad
        self.map_addresses = [base + offset for offset in layout.map_offsets]
        array = (ctypes.c_void_p * len(views))(*(ctypes.addressof(v) for v in views))
        self.params = driver.Params(views, array)

    def pack(self, values: list, maps=()) -> driver.Params:
        """Write values (Python numbers in PTX order) and the maps' 128-byte buffers."""
        self.layout.struct.pack_into(self.raw, self.pad, *values)
        for address, data in zip(self.map_addresses, maps):
            ctypes.memmove(address, data, MAP_BYTES)
        return self.params
