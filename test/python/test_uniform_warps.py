"""tkc.kernel(uniform_ids=...): the warpgroup id ("warpgroup") or the warp
id too ("warp") broadcast from lane 0, so that ptxas keeps what derives
from them on the uniform datapath. The lowering's IR is checked by lit
(workers-uniform.mlir), the SASS here. Bad values are refused at the
kernel's definition, a bad attribute in the IR at its lowering."""
from __future__ import annotations

import re

import pytest

import tkc
from tkc import bf16, f32, gl, rt, st, tma, warpgroup
from tkc.diagnostics import TkcError
from tkc.ops import store, subtile, zero

pytest.importorskip("mlir")


def _kernel(uniform):
    """Each warpgroup a wgmma on its 64 rows of A, each warp its 16 rows of C."""
    @tkc.kernel(warps=8, grid=lambda a, b, c: (1,), uniform_ids=uniform, name=f"rows_{uniform}")
    def rows(a: gl(bf16, 1, 1, 128, 64), b: gl(bf16, 1, 1, 64, 128), c: gl(f32, 1, 1, 128, 128)):
        wg, w = tkc.warpgroupid(), tkc.warpid()
        a_s, b_s = st(bf16, 128, 64), st(bf16, 64, 128)
        tma.load(a_s, a, (0, 0, 0, 0))
        tma.load(b_s, b, (0, 0, 0, 0))
        tkc.sync()
        acc = zero(rt(f32, 16, 128))
        warpgroup.mma_AB(acc, subtile(a_s, 64, 64, (wg, 0)), b_s)
        warpgroup.mma_async_wait(acc)
        store(c, acc, (0, 0, w, 0))
    return rows


def _ops(kernel) -> dict[str, int]:
    from tkc.sass import cuobjdump, disassemble, opcodes
    if cuobjdump() is None:
        pytest.skip("cuobjdump not installed")
    return opcodes(disassemble(kernel.build().cubin))


def test_uniform_ids_reach_the_uniform_datapath():
    """No broadcast by default; one with either value; with "warp" the
    warp's store coordinates need fewer moves from per-lane registers
    (R2UR) than with the warpgroup id alone."""
    plain, group, warp = (_ops(_kernel(u)) for u in (None, "warpgroup", "warp"))
    assert plain.get("SHFL", 0) == 0 and group.get("SHFL", 0) == warp.get("SHFL", 0) == 1
    assert warp.get("R2UR", 0) < group.get("R2UR", 0)
    assert '"uniform_ids": "warp"' in _kernel("warp").specialisation()


@pytest.mark.parametrize("bad", [True, "lane", 1])
def test_bad_uniform_ids_refused(bad):
    with pytest.raises(TkcError, match="uniform_ids must be one of"):
        tkc.kernel(warps=4, uniform_ids=bad)(lambda: None)


def test_bad_uniform_ids_attribute_refused(tmp_path, capsys):
    from tkc.cli import main
    src = tmp_path / "bad.mlir"
    src.write_text('func.func @k(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes '
                   '{tk.kernel, tk.warps = 8 : i64, tk.uniform_ids = "lanes"} {\n'
                   '  %w = "tk.warpid"() : () -> index\n  %c0 = arith.constant 0 : index\n'
                   '  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">\n'
                   '  "tk.store"(%g, %v, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, '
                   '!tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()\n  return\n}\n')
    assert main([str(src), "--emit=nvvm"]) != 0
    assert re.search(r'bad.mlir:1:1: error: tk.uniform_ids must be "warpgroup" or "warp", found "lanes"',
                     capsys.readouterr().err)
