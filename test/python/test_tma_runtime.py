"""Tensor maps on the CPU: the cuTensorMapEncodeTiled arguments, their checks,
the aligned 128-byte parameters, the per-tensor cache, and a launch that
appends the maps after the regular parameters (with a recording fake driver)."""
import ctypes
import sys

import numpy as np
import pytest
from helpers import recording_driver

from tkc.diagnostics import TkcError
from tkc.runtime import Artifact, launch, tensors
from tkc.runtime.tensormap import MAP_BYTES, TensorMaps, arguments, param

A = {"param": 0, "name": "a", "dtype": "bf16", "box": [64, 64], "swizzle": "128b"}


def test_arguments_are_innermost_first_with_byte_strides():
    got = arguments("k", A, 0x1000, (3, 5, 96, 256))
    assert got.dtype == "BFLOAT16" and got.swizzle == "128B" and got.address == 0x1000
    assert got.global_dim == (256, 96, 5, 3)
    assert got.global_strides == (256 * 2, 96 * 256 * 2, 5 * 96 * 256 * 2)
    assert got.box == (64, 64, 1, 1) and got.element_strides == (1, 1, 1, 1)


def test_lower_rank_tensors_are_viewed_as_4d():
    got = arguments("k", dict(A, dtype="f32", box=[16, 32], swizzle="none"), 0x40, (40, 48))
    assert got.global_dim == (48, 40, 1, 1) and got.global_strides == (192, 40 * 192, 40 * 192)
    assert got.dtype == "FLOAT32" and got.swizzle == "NONE" and got.box == (32, 16, 1, 1)


def test_8bit_floats_are_moved_as_bytes():
    e4m3 = dict(A, dtype="f8e4m3", box=[64, 128])          # a 128-byte swizzle row: 128 elements
    got = arguments("k", e4m3, 0x1000, (96, 384))
    assert got.dtype == "UINT8" and got.box == (128, 64, 1, 1) and got.global_strides[0] == 384
    assert arguments("k", dict(e4m3, dtype="f8e5m2"), 0x1000, (96, 384)).dtype == "UINT8"
    with pytest.raises(TkcError, match="dim c = 40 of f8e4m3 is 40 bytes"):
        arguments("k", e4m3, 0x1000, (96, 40))


@pytest.mark.parametrize("entry, ptr, shape, message", [
    (A, 0x1008, (64, 64), "16-byte aligned data pointer, found 0x1008"),
    (A, 0x1000, (64, 36), "dim c = 36 of bf16 is 72 bytes"),
    (dict(A, box=[64, 128]), 0x1000, (64, 128), "a 128b swizzle allows box rows of at most 128 bytes, found 256"),
    (dict(A, box=[512, 64]), 0x1000, (64, 128), "box 512x64 must be at most 256 per dim"),
    (A, 0, (0, 64), "TMA cannot map a tensor without elements, found dims (1, 1, 0, 64)"),
    (A, 0, (2, 0, 8, 64), "TMA cannot map a tensor without elements"),
])
def test_arguments_refuse_what_tma_cannot_describe(entry, ptr, shape, message):
    with pytest.raises(TkcError) as info:
        line = sys._getframe().f_lineno + 1
        arguments("k", entry, ptr, shape)
    assert info.value.message.startswith("kernel 'k': argument 0 'a' (tensor map ")
    assert message in info.value.message
    assert info.value.where == f"{__file__}:{line}"


def test_param_is_64_byte_aligned_and_holds_the_map():
    data = bytes(range(128))
    for _ in range(4):  # whatever the allocator returns, the buffer is aligned
        buf = param(data)
        assert ctypes.addressof(buf) % 64 == 0 and bytes(buf) == data and len(buf) == MAP_BYTES


PARAMS = [{"name": "a", "kind": "gl", "dtype": "bf16"}, {"name": "s", "kind": "scalar", "dtype": "f32"}]


def test_maps_are_encoded_once_per_pointer_and_shape():
    calls = []
    maps = TensorMaps("k", [A], PARAMS, encoder=lambda args: calls.append(args) or bytes([len(calls)]) * 128)
    first = maps.map(0, 0x2000, (64, 64))
    again = maps.map(0, 0x2000, (64, 64))
    other = maps.map(0, 0x4000, (64, 64))
    strided = maps.map(0, 0x2000, (64, 64), (0, 0, 256, 2))   # rows 256 bytes apart: another map
    assert len(calls) == 3 and again is first
    assert bytes(first) == b"\x01" * 128 and bytes(other) == b"\x02" * 128 and bytes(strided) == b"\x03" * 128
    assert calls[2].global_strides[0] == 256


def test_a_fresh_map_is_encoded_into_its_slot_and_not_kept():
    """write(): a growing KV cache's map goes straight into the frame's slot
    (no buffer of its own) and is encoded anew each time."""
    calls = []
    maps = TensorMaps("k", [A], PARAMS, encoder=lambda args: calls.append(args) or bytes([len(calls)]) * 128)
    slot = param(bytes(128))
    for n in (1, 2):
        maps.write(0, ctypes.addressof(slot), 0x2000, (64, 64))
        assert bytes(slot) == bytes([n]) * 128
    assert len(calls) == 2 and not maps._cache
    with pytest.raises(TkcError, match="16-byte aligned data pointer"):
        maps.write(0, ctypes.addressof(slot), 0x2008, (64, 64))


def test_the_bindings_map_is_read_while_it_lives(monkeypatch):
    """encode() and write() read a CUtensorMap's 128 bytes at its getPtr()
    while a name holds the object: its storage goes with it. Here the
    stand-in's storage is poisoned when it goes (as freed memory may be
    reused): bytes read from a dropped temporary would be the poison (the
    H200 ran such maps into illegal instructions, now and then)."""
    from types import SimpleNamespace

    from tkc.runtime import driver, tensormap

    class Map:
        def __init__(self, address):
            self.raw = ctypes.create_string_buffer(address.to_bytes(8, "little") * 16, MAP_BYTES)

        def getPtr(self):  # noqa: N802 (cuda-bindings' name)
            return ctypes.addressof(self.raw)

        def __del__(self):
            ctypes.memset(self.raw, 0xEE, MAP_BYTES)

    any_enum = type("E", (), {"__getattr__": lambda self, name: 0})()
    fake = SimpleNamespace(CUresult=SimpleNamespace(CUDA_SUCCESS=0), cuuint64_t=int, cuuint32_t=int,
                           CUtensorMapDataType=any_enum,
                           CUtensorMapInterleave=any_enum, CUtensorMapSwizzle=any_enum,
                           CUtensorMapL2promotion=any_enum, CUtensorMapFloatOOBfill=any_enum,
                           cuTensorMapEncodeTiled=lambda dtype, rank, address, *rest: (0, Map(address)))
    monkeypatch.setattr(driver, "_cuda", fake)
    want = (0x2000).to_bytes(8, "little") * 16
    assert tensormap.encode(arguments("k", A, 0x2000, (64, 64))) == want
    slot = param(bytes(128))
    TensorMaps("k", [A], PARAMS).write(0, ctypes.addressof(slot), 0x2000, (64, 64))
    assert bytes(slot) == want


@pytest.mark.parametrize("entry, message", [
    ({"param": 1, "name": "s", "dtype": "f32", "box": [16, 16], "swizzle": "none"}, "must name a gl parameter"),
    (dict(A, dtype="f16"), "must have the name and dtype of parameter 0"),
    (dict(A, box=[64]), "needs 'box': [rows, cols]"),
    (dict(A, swizzle="16b"), "needs 'swizzle' in"),
])
def test_malformed_entries_are_refused(entry, message):
    with pytest.raises(TkcError, match="kernel 'k' uses TMA tensor maps, but its manifest's entry 0") as info:
        TensorMaps("k", [entry], PARAMS)
    assert message in info.value.message


# ---- the launch appends one map per entry after the regular parameters

MANIFEST = {
    "version": 1, "kernel": "copy", "target": "sm_90a", "warps": 1, "block": [32, 1, 1],
    "grid": ["a.r // 64", "1", "1"], "shared_bytes": 16392,
    "params": [{"name": "a", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64]},
               {"name": "o", "kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64]}],
    "tensor_maps": [{"param": 1, "name": "o", "dtype": "f32", "box": [64, 32], "swizzle": "128b"},
                    {"param": 0, "name": "a", "dtype": "f32", "box": [64, 32], "swizzle": "128b"}],
}


def test_launch_passes_tensor_maps_after_the_parameters(monkeypatch):
    launches, encoded = recording_driver(monkeypatch)
    real_view = tensors.view
    monkeypatch.setattr("tkc.runtime.args.view",
                        lambda obj, stream=None: (v := real_view(obj, stream)) and v._replace(device="cuda"))
    a, o = np.ones((128, 64), np.float32), np.zeros((128, 64), np.float32)
    launch(Artifact(b"cubin", MANIFEST), [a, o])
    (grid, values), = launches
    assert grid == (2, 1, 1)
    assert values[:4] == [a.ctypes.data, 128, o.ctypes.data, 128]
    assert values[4] == o.ctypes.data.to_bytes(8, "little") * 16  # entry order, not param order
    assert values[5] == a.ctypes.data.to_bytes(8, "little") * 16
    assert [e.global_dim for e in encoded] == [(64, 128, 1, 1)] * 2
