"""launch(artifact, args): check the arguments, evaluate the grid, launch.

Everything that depends only on the artifact (the parameter checks, the
compiled grid expressions, the block, the loaded function per device) is
prepared once and kept on the artifact, so a launch does only the checks,
the packing and the driver call.
"""
from __future__ import annotations

import sys

from ..diagnostics import TkcError
from . import driver
from .args import Signature
from .artifact import Artifact
from .callsite import caller
from .grid import compile_grid
from .tensormap import TensorMaps


class Launcher:
    """The per-artifact launch state."""

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
        self.functions: dict[int, driver.Function] = {}

    def __call__(self, args, stream=None) -> None:
        raw_stream = None if stream is None else _stream_handle(stream)
        try:
            bound = self.signature.bind(args, stream=raw_stream)
            grid = self._grid(bound.env)
            values = bound.values
            if self.tensor_maps is not None:  # after the regular parameters, alive until launched
                values = values + self.tensor_maps.values(bound.views)
        except TkcError as e:  # grid errors come unlocated: they are the caller's too
            raise e if e.where else TkcError(e.message, caller()) from None
        device = bound.device if bound.device is not None else _current_device()
        fn = self.functions.get(device)
        if fn is None:
            fn = self.functions[device] = self._load(device)
        if raw_stream is None:
            raw_stream = _default_stream(device)
        driver.launch(fn, grid, self.block, self.shared, raw_stream, values, self.cluster)

    def _grid(self, env: dict) -> tuple:
        grid = self.grid(env)
        if self.cluster != (1, 1, 1) and any(g % c for g, c in zip(grid, self.cluster)):
            raise TkcError(f"kernel '{self.kernel}': grid {grid} is not a multiple of "
                           f"its cluster shape {self.cluster}")
        return grid

    def _load(self, device: int) -> driver.Function:
        major, minor = driver.compute_capability(device)
        if (major, minor) != (9, 0):
            raise TkcError(f"kernel '{self.kernel}' is built for sm_90a (Hopper); "
                           f"cuda:{device} is sm_{major}{minor}", caller())
        return driver.load(self.image, self.kernel, device, self.shared)


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


def _default_stream(device: int) -> int:
    cuda = _torch_cuda()
    return cuda.current_stream(device).cuda_stream if cuda is not None else 0


def _current_device() -> int:
    cuda = _torch_cuda()
    return cuda.current_device() if cuda is not None else 0


def launcher(artifact: Artifact) -> Launcher:
    if artifact._launcher is None:
        artifact._launcher = Launcher(artifact)
    return artifact._launcher


def launch(artifact: Artifact, args, stream=None) -> None:
    """Launch artifact's kernel on args (torch tensors / DLPack objects and numbers)."""
    launcher(artifact)(args, stream)
