"""A pgl at launch (no GPU): the manifest marks it, the PTX parameters of a
Peers argument are its pointer and dims, 8 peer pointers (the local one
repeated past the world), rank and world size; a peer's tensor map is
encoded over that peer's pointer; a plain tensor for a pgl is refused."""
from __future__ import annotations

import numpy as np
import pytest

import tkc
from tkc import bf16, gl, pgl, st, tma
from tkc.runtime.args import Signature
from tkc.runtime.peers import Peers
from tkc.runtime.tensormap import TensorMaps

from helpers import aligned


@tkc.kernel(warps=1, grid=lambda x, y: (1,))
def push(x: pgl(bf16, 1, 1, None, 64), y: gl(bf16, 1, 1, 64, 64)):
    s = st(bf16, 64, 64)
    bar = tkc.barrier()
    tma.expect(bar, s)
    tma.load_async(s, y, (0, 0, 0, 0), bar)
    tkc.wait(bar, 0)
    tma.store_async(x.peer((tkc.rank() + 1) % tkc.world_size()), s, (0, 0, tkc.rank(), 0))
    tma.store_async_wait()


def _lowered_manifest():
    import json
    from tkc.pass_pipeline import run_pipeline
    from tkc.compiler import TILE_PIPELINE, LOWER_PASS
    module = push.trace()
    run_pipeline(module, TILE_PIPELINE + "," + LOWER_PASS)
    for op in module.body.operations:
        for inner in op.regions[0].blocks[0].operations if op.name == "gpu.module" else ():
            if "tkc.manifest" in inner.attributes:
                return json.loads(inner.attributes["tkc.manifest"].value)
    raise AssertionError("no manifest")


def test_pgl_parameters_and_peer_tensor_maps():
    m = _lowered_manifest()
    assert m["params"][0]["peers"] is True and "peers" not in m["params"][1]
    peers = sorted(e["peer"] for e in m["tensor_maps"] if "peer" in e)
    assert peers == list(range(8))
    sig = Signature(m)
    assert sig.kinds == ["u64", "u32"] + ["u64"] * 8 + ["u32", "u32"] + ["u64"]
    x, y = aligned((3 * 64, 64), np.float16), aligned((64, 64), np.float16)
    import ml_dtypes  # noqa: F401  (a bf16 numpy dtype for the views)
    xv, yv = x.view(ml_dtypes.bfloat16), y.view(ml_dtypes.bfloat16)
    ptrs = [xv.ctypes.data, 0x10000, 0x20000]
    bound = sig.bind([Peers(xv, ptrs, 1), yv], host_ok=True)
    values = [v.value for v in bound.values]
    assert values[0] == xv.ctypes.data and values[1] == 3 * 64
    assert values[2:10] == ptrs + [0x10000] * 5     # unused slots: the local (rank 1's) pointer
    assert values[10:12] == [1, 3]
    maps = TensorMaps("push", m["tensor_maps"], m["params"], encoder=lambda a: a.address.to_bytes(128, "little"))
    for n, e in enumerate(m["tensor_maps"]):
        if "peer" in e:
            assert values[sig.slots[0] + maps.offsets[n]] == values[2 + e["peer"]]


def test_a_plain_tensor_for_a_pgl_is_refused():
    sig = Signature(_lowered_manifest())
    x = aligned((64, 64), np.float32)
    with pytest.raises(tkc.diagnostics.TkcError, match="a pgl takes a symmetric buffer"):
        sig.bind([x, x], host_ok=True)


def test_peers_rejects_worlds_past_eight():
    with pytest.raises(ValueError, match="1 to 8 ranks"):
        Peers(None, list(range(9)), 0)


def test_peers_take_the_fast_path_keyed_by_their_pointers():
    """A Peers argument over a torch tensor has a key (a repeated launch skips
    the checks and the tensor maps' encoding); other peers' pointers or
    another rank make another key, since they are in the plan's values."""
    torch = pytest.importorskip("torch")
    sig = Signature(_lowered_manifest())
    x, y = torch.zeros(3 * 64, 64, dtype=torch.bfloat16), torch.zeros(64, 64, dtype=torch.bfloat16)
    ptrs = [x.data_ptr(), 0x10000, 0x20000]
    key, values = sig.key([Peers(x, ptrs, 0), y])
    assert values == [x.data_ptr(), y.data_ptr()]
    assert sig.key([Peers(x, ptrs, 0), y])[0] == key
    assert sig.key([Peers(x, [ptrs[0], 0x30000, 0x20000], 0), y])[0] != key
    assert sig.key([Peers(x, ptrs[:2], 0), y])[0] != key
