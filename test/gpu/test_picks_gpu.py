"""row_pick / col_pick (x[:, j], x[i, :]) on the GPU: the shuffles pick the
same elements on the hardware as in lanesim (test_lowering_compute), for
f32 and bf16 tiles, at constant and run-time indices."""
import pytest

import tkc
from tkc import bf16, f32, gl, rt
from tkc.ops import load, store

pytestmark = pytest.mark.gpu


def _picker(dtype):
    @tkc.kernel(warps=2, name=f"picks_{dtype}")
    def picks(x: gl(dtype, 1, 1, 32, 48), cols: gl(f32, 1, 1, 6, 32), rows: gl(f32, 1, 1, 6, 48)):
        """Warp w: columns 13, 40 and the run-time 5 + 20 w + block; rows 17, 30
        and the run-time 3 + 24 w + block (block = blockIdx.x = 0)."""
        w, blk = tkc.warpid(), tkc.block_idx.x
        t = load(rt(f32, 32, 48), x, (0, 0, 0, 0)) if dtype == f32 else \
            load(rt(bf16, 32, 48), x, (0, 0, 0, 0)).to(f32)
        for n, j in enumerate((13, 40, w * 20 + 5 + blk)):
            store(cols, t[:, j], (0, 0, 3 * w + n, 0))
        for n, i in enumerate((17, 30, w * 24 + 3 + blk)):
            store(rows, t[i, :], (0, 0, 3 * w + n, 0))
    return picks


PICKS = {dtype: _picker(dtype) for dtype in (f32, bf16)}
KERNELS = list(PICKS.values())   # for `tkc build`


@pytest.mark.parametrize("dtype", [f32, bf16])
def test_picks(dtype):
    torch = pytest.importorskip("torch")
    x = torch.randn(1, 1, 32, 48, device="cuda",
                    dtype=torch.float32 if dtype == f32 else torch.bfloat16)
    cols = torch.full((1, 1, 6, 32), float("nan"), device="cuda")
    rows = torch.full((1, 1, 6, 48), float("nan"), device="cuda")
    PICKS[dtype](x, cols, rows)
    torch.cuda.synchronize()
    xf = x[0, 0].float()
    want_cols = torch.stack([xf[:, j] for w in range(2) for j in (13, 40, 20 * w + 5)])
    want_rows = torch.stack([xf[i, :] for w in range(2) for i in (17, 30, 24 * w + 3)])
    assert torch.equal(cols[0, 0], want_cols) and torch.equal(rows[0, 0], want_rows)
