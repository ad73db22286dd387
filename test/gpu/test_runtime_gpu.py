"""tkc.runtime on the GPU, with a hand-written PTX kernel (no compiler involved):
`o = a * 2 + s` over gl<f32, 1, 1, -1, 64>, one block per row, one thread per column."""
import hashlib
import shutil
import subprocess

import pytest

from tkc.diagnostics import TkcError
from tkc.runtime import Artifact, driver, launch
from tkc.runtime.launch import launcher

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry scale2(
    .param .u64 a, .param .u32 a_r,
    .param .u64 o, .param .u32 o_r,
    .param .f32 s)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<4>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [o];
    ld.param.f32 %f1, [s];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mad.lo.u32 %r3, %r1, 64, %r2;
    mul.wide.u32 %rd3, %r3, 4;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    add.s64 %rd6, %rd4, %rd3;
    add.s64 %rd7, %rd5, %rd3;
    ld.global.f32 %f2, [%rd6];
    fma.rn.f32 %f3, %f2, 0f40000000, %f1;
    st.global.f32 [%rd7], %f3;
    ret;
}
"""


def manifest(**changes) -> dict:
    gl = {"kind": "gl", "dtype": "f32", "dims": [1, 1, None, 64], "divisible": [1, 1, 1, 64]}
    m = {"version": 1, "kernel": "scale2", "target": "sm_90a", "warps": 2, "block": [64, 1, 1],
         "grid": ["a.r", "1", "1"], "shared_bytes": 0, "cluster": [1, 1, 1], "tensor_maps": [],
         "params": [{"name": "a", **gl}, {"name": "o", **gl}, {"name": "s", "kind": "scalar", "dtype": "f32"}]}
    m.update(changes)
    return m


def image(kind: str, tmp_path) -> bytes:
    if kind == "ptx":  # the driver JIT-compiles NUL-terminated PTX
        return PTX.encode() + b"\0"
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not on PATH")
    (tmp_path / "k.ptx").write_text(PTX)
    subprocess.run(["ptxas", "-arch=sm_90a", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                   check=True)
    return (tmp_path / "k.cubin").read_bytes()


@pytest.fixture(params=["cubin", "ptx"])
def art(request, tmp_path) -> Artifact:
    return Artifact(image(request.param, tmp_path), manifest(), ptx=PTX)


def tensors(rows=96):
    a = torch.randn(rows, 64, device="cuda")
    o = torch.full_like(a, float("nan"))
    return a, o


def test_launch_computes(art):
    a, o = tensors()
    launch(art, [a, o, 0.5])
    torch.cuda.synchronize()
    assert torch.equal(o, a * 2 + 0.5)  # 2a is exact, so fma and mul+add agree


def test_launch_4d_views_and_saved_artifact(art, tmp_path):
    a, o = tensors(32)
    loaded = Artifact.load(art.save(tmp_path / "saved"))
    launch(loaded, [a.view(1, 1, 32, 64), o.view(1, 32, 64), -3])
    torch.cuda.synchronize()
    assert torch.equal(o, a * 2 - 3)


def test_two_launches_reuse_the_module(art):
    a, o = tensors()
    launch(art, [a, o, 1.0])
    sha = hashlib.sha256(art.cubin).hexdigest()
    loaded = [k for k in driver.loaded() if k[0] == sha]
    fn = launcher(art).functions[a.device.index]
    launch(art, [a, o, 2.0])
    twin = Artifact(art.cubin, art.manifest)  # same cubin, another object
    launch(twin, [a, o, 3.0])
    torch.cuda.synchronize()
    assert [k for k in driver.loaded() if k[0] == sha] == loaded and len(loaded) == 1
    assert launcher(art).functions[a.device.index] is fn
    assert launcher(twin).functions[a.device.index].handle is fn.handle
    assert torch.equal(o, a * 2 + 3)


def test_streams(art):
    a, o = tensors()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch's current stream is the default
        launch(art, [a, o, 1.5])
    side.synchronize()
    assert torch.equal(o, a * 2 + 1.5)
    launch(art, [a, o, 2.5], stream=side)  # an explicit torch stream
    launch(art, [a, o, 3.5], stream=side.cuda_stream)  # or its raw handle
    side.synchronize()
    assert torch.equal(o, a * 2 + 3.5)


class DLPackOnly:
    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_dlpack_arguments(art):
    a, o = tensors()
    launch(art, [DLPackOnly(a), DLPackOnly(o), 4.0])
    torch.cuda.synchronize()
    assert torch.equal(o, a * 2 + 4)


def bad_arguments():
    a, o = tensors()
    flat = torch.randn(96 * 64 + 1, device="cuda")
    return [
        ([a.bfloat16(), o, 1.0], "expected dtype f32, found bf16"),
        ([a.cpu(), o, 1.0], "the tensor is on the CPU"),
        ([torch.randn(96, 128, device="cuda")[:, :64], o, 1.0], "contiguous row-major"),
        ([flat[1:].view(96, 64), o, 1.0], "not 16-byte aligned"),
        ([torch.randn(96, 32, device="cuda"), o, 1.0], "must be 64, found 32"),
        ([a, o, "1.0"], "expected a real number"),
        ([a, o], "takes 3 arguments"),
        ([a[:0], o, 1.0], "empty launch"),
    ], o


def test_wrong_arguments_refused_before_launch(art):
    cases, o = bad_arguments()
    for args, message in cases:
        with pytest.raises(TkcError, match=message) as info:
            launch(art, args)
        assert info.value.where.startswith(__file__)
    torch.cuda.synchronize()
    assert o.isnan().all()  # nothing ran


def test_large_dynamic_shared_memory(tmp_path):
    cubin = image("cubin", tmp_path)
    a, o = tensors()
    launch(Artifact(cubin, manifest(shared_bytes=100 * 1024)), [a, o, 1.0])
    torch.cuda.synchronize()
    assert torch.equal(o, a * 2 + 1)
    with pytest.raises(TkcError, match="needs 409600 bytes of shared memory"):
        launch(Artifact(cubin, manifest(shared_bytes=400 * 1024)), [a, o, 1.0])


def test_cluster_launch(tmp_path):
    art = Artifact(image("cubin", tmp_path), manifest(cluster=[2, 1, 1]))
    a, o = tensors(64)
    launch(art, [a, o, 1.0])
    torch.cuda.synchronize()
    assert torch.equal(o, a * 2 + 1)
    a, o = tensors(33)
    with pytest.raises(TkcError, match="not a multiple of its cluster shape"):
        launch(art, [a, o, 1.0])
