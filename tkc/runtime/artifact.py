"""An artifact: a kernel's cubin and its manifest (docs/tile-ir.md, "Manifest").

On disk it is a folder: kernel.cubin, manifest.json, and when present
kernel.ptx and tile.mlir (for reading and debugging, never needed to run).
The manifest is checked whenever an artifact is made or loaded, so a
malformed one is a clear error here rather than a bad launch later.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..diagnostics import TkcError
from ..dtypes import GL_DTYPES
from .grid import DIMS, SMS, Grid

VERSION = 1
CUBIN, MANIFEST, PTX, TILE_IR = "kernel.cubin", "manifest.json", "kernel.ptx", "tile.mlir"
_REQUIRED = ("version", "kernel", "target", "warps", "block", "grid", "shared_bytes", "params")
_DEFAULTS = {"cluster": [1, 1, 1], "tensor_maps": [], "inplace": [], "multiples": [],
             "resources": {}, "source": {},
             "persistent": False}
SCALAR_DTYPES = ("f32", "i32")


class Artifact:
    """cubin bytes + manifest dict (+ optional PTX and tile IR text)."""

    def __init__(self, cubin: bytes, manifest: dict, ptx: str | None = None,
                 tile_ir: str | None = None):
        if not isinstance(cubin, (bytes, bytearray)) or not cubin:
            raise TkcError("an artifact needs non-empty cubin bytes")
        self.cubin = bytes(cubin)
        self.manifest = validate_manifest(manifest)
        self.ptx, self.tile_ir = ptx, tile_ir
        self._launcher = None  # tkc.runtime.launch's per-artifact state, made on first launch

    @property
    def name(self) -> str:
        return self.manifest["kernel"]

    def __repr__(self) -> str:
        return f"Artifact({self.name!r}, {len(self.cubin)} bytes of cubin)"

    def save(self, folder) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CUBIN).write_bytes(self.cubin)
        (folder / MANIFEST).write_text(json.dumps(self.manifest, indent=1, sort_keys=True) + "\n")
        if self.ptx is not None:
            (folder / PTX).write_text(self.ptx)
        if self.tile_ir is not None:
            (folder / TILE_IR).write_text(self.tile_ir)
        return folder

    @classmethod
    def load(cls, folder) -> "Artifact":
        folder = Path(folder)
        try:
            cubin = (folder / CUBIN).read_bytes()
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise TkcError(f"cannot load the artifact in {folder}: {e}") from None
        if not isinstance(manifest, dict):
            raise TkcError(f"cannot load the artifact in {folder}: {MANIFEST} is not a JSON object")
        optional = [_read_text(folder / name) for name in (PTX, TILE_IR)]
        try:
            return cls(cubin, manifest, *optional)
        except TkcError as e:
            raise TkcError(f"bad artifact in {folder}: {e.message}") from None


def _read_text(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def validate_manifest(manifest: dict) -> dict:
    """Check a manifest's shape and fill optional keys; raises TkcError naming the problem."""
    if not isinstance(manifest, dict):
        raise TkcError(f"a manifest is a dict, found {type(manifest).__name__}")
    name = manifest.get("kernel", "?")

    def bad(what: str) -> TkcError:
        return TkcError(f"manifest of kernel '{name}': {what}")

    missing = [key for key in _REQUIRED if key not in manifest]
    if missing:
        raise bad(f"missing keys {missing}")
    if manifest["version"] != VERSION:
        raise bad(f"version {manifest['version']!r}, this runtime reads version {VERSION}")
    m = {**_DEFAULTS, **manifest}
    _check_launch_shape(m, bad)
    _check_params(m["params"], bad)
    _check_inplace(m, bad)
    _check_multiples(m, bad)
    _check_grid(m, bad)
    return m


def _is_int(x, least: int = 0) -> bool:
    return type(x) is int and x >= least


def _check_launch_shape(m: dict, bad) -> None:
    if not isinstance(m["kernel"], str) or not m["kernel"].isidentifier():
        raise bad(f"'kernel' must be a symbol name, found {m['kernel']!r}")
    if not isinstance(m["target"], str):
        raise bad(f"'target' must be a string, found {m['target']!r}")
    if not _is_int(m["warps"], 1) or m["warps"] > 32:
        raise bad(f"'warps' must be 1..32, found {m['warps']!r}")
    if m["block"] != [32 * m["warps"], 1, 1]:
        raise bad(f"'block' must be [32 * warps, 1, 1] = [{32 * m['warps']}, 1, 1], found {m['block']!r}")
    if not _is_int(m["shared_bytes"]):
        raise bad(f"'shared_bytes' must be an int >= 0, found {m['shared_bytes']!r}")
    cluster = m["cluster"]
    if not (isinstance(cluster, list) and len(cluster) == 3 and all(_is_int(c, 1) for c in cluster)):
        raise bad(f"'cluster' must be three ints >= 1, found {cluster!r}")
    if not isinstance(m["tensor_maps"], list):
        raise bad(f"'tensor_maps' must be a list, found {m['tensor_maps']!r}")


def _check_params(params, bad) -> None:
    if not isinstance(params, list):
        raise bad(f"'params' must be a list, found {params!r}")
    seen = set()
    for i, p in enumerate(params):
        if not (isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"].isidentifier()):
            raise bad(f"param {i} must be a dict with a 'name', found {p!r}")
        if p["name"] in seen:
            raise bad(f"param name '{p['name']}' appears twice")
        seen.add(p["name"])
        if p.get("kind") == "gl":
            _check_gl_param(p, bad)
        elif p.get("kind") == "scalar":
            if p.get("dtype") not in SCALAR_DTYPES:
                raise bad(f"scalar param '{p['name']}': dtype must be one of {SCALAR_DTYPES}, "
                          f"found {p.get('dtype')!r}")
        else:
            raise bad(f"param '{p['name']}': kind must be 'gl' or 'scalar', found {p.get('kind')!r}")


def _check_inplace(m: dict, bad) -> None:
    gls = [i for i, p in enumerate(m["params"]) if p.get("kind") == "gl"]
    pairs = m["inplace"]
    if not (isinstance(pairs, list) and all(
            isinstance(p, list) and len(p) == 2 and all(i in gls for i in p) and p[0] != p[1]
            for p in pairs)):
        raise bad(f"'inplace' must be [output, input] pairs of gl param indices, found {pairs!r}")


def _check_multiples(m: dict, bad) -> None:
    names = {n for p in m["params"] if p.get("kind") == "gl" for n in p.get("names", ()) if n}
    pairs = m["multiples"]
    if not (isinstance(pairs, list) and all(
            isinstance(p, list) and len(p) == 2 and all(n in names for n in p) and p[0] != p[1]
            for p in pairs)):
        raise bad(f"'multiples' must be [dim name, dim name] pairs of the params' dim names, "
                  f"found {pairs!r}")


def _check_gl_param(p: dict, bad) -> None:
    where = f"gl param '{p['name']}'"
    if p.get("dtype") not in GL_DTYPES:
        raise bad(f"{where}: dtype must be one of {GL_DTYPES}, found {p.get('dtype')!r}")
    dims, divisible = p.get("dims"), p.get("divisible", [1, 1, 1, 1])
    if not (isinstance(dims, list) and len(dims) == 4 and all(d is None or _is_int(d, 1) for d in dims)):
        raise bad(f"{where}: 'dims' must be 4 entries, each an int >= 1 or null, found {dims!r}")
    if not (isinstance(divisible, list) and len(divisible) == 4 and all(_is_int(d, 1) for d in divisible)):
        raise bad(f"{where}: 'divisible' must be 4 ints >= 1, found {divisible!r}")
    if not isinstance(p.get("writes", False), bool):
        raise bad(f"{where}: 'writes' must be true or false, found {p['writes']!r}")
    names = p.get("names", [None] * 4)
    if not (isinstance(names, list) and len(names) == 4
            and all(n is None or (isinstance(n, str) and n) for n in names)):
        raise bad(f"{where}: 'names' must be 4 entries, each a non-empty string or null, "
                  f"found {names!r}")
    for axis, n, d in zip(DIMS, names, dims):
        if n is not None and d is not None:
            raise bad(f"{where}: dim {axis} is static ({d}) but named {n!r}: "
                      "names are for runtime dims")


def _check_grid(m: dict, bad) -> None:
    try:
        grid = Grid(m["grid"])
    except TkcError as e:
        raise bad(e.message) from None
    known = {f"{p['name']}.{d}" for p in m["params"] if p["kind"] == "gl" for d in DIMS}
    known |= {p["name"] for p in m["params"] if p["kind"] == "scalar" and p["dtype"] == "i32"}
    known.add(SMS)
    unknown = sorted(grid.names - known)
    if unknown:
        raise bad(f"grid {m['grid']} uses {unknown}, which are not gl dims or i32 scalar parameters")
