"""The kernel-parameter block of a launch.

cuLaunchKernelEx takes kernelParams, a void*[] with one pointer per PTX
parameter. Making a ctypes object per value and the array per launch costs
microseconds, so a `Layout` fixes every parameter's offset in one buffer
once per artifact, and a `Frame` is one 64-byte aligned buffer holding the
parameters, the tensor maps and the void*[] pointing at them (written by one
struct call when the frame is made), packed with one struct call and a copy
per tensor map. The launcher keeps a frame per distinct set of values
(launch.py): cuLaunchKernelEx copies the parameters, so a packed frame is
only read again, by any thread.
"""
from __future__ import annotations

import ctypes
import struct

from . import driver
from .tensormap import MAP_ALIGN, MAP_BYTES   # a CUtensorMap parameter
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
        # the void*[] after them: one pointer a parameter, each the base plus its offset
        self.slots = (*self.offsets, *self.map_offsets)
        self.array_offset = _align(pos, 8)
        self.pointers = struct.Struct(f"<{len(self.slots)}Q")
        self.buffer_size = self.array_offset + self.pointers.size + MAP_ALIGN   # (+ the alignment pad)


def _address(buffer: bytearray) -> int:
    """The address of a bytearray's memory, which stays put while it is not resized."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


class Packed(driver.Params):
    """A frame's parameters as a launch takes them, and what they hold (for
    tests and debugging: `decoded`), without the Frame: a launcher keeps one
    per distinct set of values, so a kept frame is one object the collector
    tracks, over a bytearray it does not (ctypes objects and lists made five,
    in a cycle: where pointers move, kept frames paced Python's collections)."""

    __slots__ = ("layout", "pad")

    def __init__(self, storage: bytearray, address: int, layout: Layout, pad: int):
        super().__init__(storage, address)
        self.layout, self.pad = layout, pad

    def decoded(self) -> list:
        """The regular values as Python numbers, then each tensor map's 128 bytes."""
        raw, pad = self.storage, self.pad
        return list(self.layout.struct.unpack_from(raw, pad)) + \
            [bytes(raw[pad + o:pad + o + MAP_BYTES]) for o in self.layout.map_offsets]


class Frame:
    """One parameter buffer; `params` is what driver.launch takes. The buffer
    also holds the void*[] into itself (no ctypes object per parameter, no
    second allocation: a frame is cheap enough to make one per cached launch,
    and per step of a growing KV cache, whose new memory is a new frame)."""

    __slots__ = ("layout", "raw", "pad", "map_addresses", "params")

    def __init__(self, layout: Layout):
        self.layout = layout
        self.raw = raw = bytearray(layout.buffer_size)
        address = _address(raw)
        self.pad = pad = -address % MAP_ALIGN  # tensor maps want 64-byte alignment
        base = address + pad
        self.map_addresses = [base + offset for offset in layout.map_offsets]
        layout.pointers.pack_into(raw, pad + layout.array_offset, *[base + offset for offset in layout.slots])
        self.params = Packed(raw, base + layout.array_offset, layout, pad)

    def pack(self, values: list, maps=()) -> driver.Params:
        """Write values (Python numbers in PTX order) and the maps' 128-byte buffers."""
        self.layout.struct.pack_into(self.raw, self.pad, *values)
        for address, data in zip(self.map_addresses, maps):
            ctypes.memmove(address, data, MAP_BYTES)
        return self.params

    def decoded(self) -> list:
        """What the frame holds: the regular values as Python numbers, then each
        tensor map's 128 bytes (for tests and debugging)."""
        return self.params.decoded()
