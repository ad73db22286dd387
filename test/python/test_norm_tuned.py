"""The norms' tuned split of a row over warps (tkc/torchops/norm_tuned.py) on
the CPU: the spaces and their keys, the shipped table (the library's rule at
every example key, so the kernels are the library's), a pick splitting every
D of its bucket, and tkc.layer_norm / tkc.rms_norm running a picked split
through the interpreter (values and gradients against torch)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import grads_match
from helpers import interpreted as _interpreted

from tkc.kernels.layernorm import layernorm_bwd, layernorm_fwd, row_split
from tkc.kernels.rmsnorm import rmsnorm_bwd, rmsnorm_fwd

pytest.importorskip("mlir")
torch = pytest.importorskip("torch")
import tkc  # noqa: E402

BF = torch.bfloat16


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))
@pytest.fixture
def norm_tables(monkeypatch, tmp_path):
    """The package's tables as shipped, read for the H200, no machine's own picks;
    the spaces' memos forgotten before and after."""
    from tkc.torchops import norm_tuned
    from tkc.tune import tables
    monkeypatch.setenv("TKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tables, "device_name", lambda: tables.REFERENCE_GPU)
    forget = lambda: [norm_tuned.space(*args).forget() for args in norm_tuned.SPACE_KEYS]  # noqa: E731
    forget()
    yield norm_tuned
    forget()


def test_norm_spaces_and_keys():
    """A space per norm, direction, D bucket and dropout: the library's rule
    first, then splits at 8 to 32 values a lane; with dropout those above
    DROPOUT_LANE_VALUES pruned (they spill), as are splits over more than
    ROW_WARPS warps (none was picked; a backward over 32 spilled); a
    backward at D <= SPLIT_AT kept on one warp a row; the key (kind, D
    bucket, dropout) of a call's x (dy)."""
    from tkc.kernels.layernorm import DROPOUT_LANE_VALUES, LANE_CHOICES
    from tkc.torchops import norm_tuned
    assert len(norm_tuned.SPACES) == 2 * 2 * 5 * 2 * 2   # norm, kind, D, dropout, residual
    assert norm_tuned.space(False, "fwd", 8192, False, False).name == "tkc.layer_norm.fwd.d8192.nores"
    t = norm_tuned.space(False, "fwd", 8192, False)
    assert t.name == "tkc.layer_norm.fwd.d8192" and t is norm_tuned.space(False, "fwd", 8192, False)
    assert [c["lane_values"] for c in t.configs] == [None, 8, 16, 32] == list(LANE_CHOICES)
    assert [c["lane_values"] for c in t.candidates()] == [None, 16, 32]   # 8 a lane: 32 warps a row
    drop = norm_tuned.space(True, "bwd", 4096, True)
    assert drop.name == "tkc.rms_norm.bwd.d4096.dropout"
    assert [c["lane_values"] for c in drop.candidates()] == [None, 8, 16] and DROPOUT_LANE_VALUES == 16
    assert [c["lane_values"] for c in norm_tuned.space(False, "bwd", 1024, False).candidates()] == [None]
    wide = norm_tuned.space(False, "fwd", 16384, False)   # 8 and 16 a lane: 64 and 32 warps a row
    assert [c["lane_values"] for c in wide.candidates()] == [None, 32]
    assert len(wide.kernels()) == 2
    assert t.key([np.zeros((3, 6144), np.float32)]) == ("fwd", 8192, False)
    assert drop.key([np.zeros((3, 4096), np.float32)]) == ("bwd", 4096, True)
    k16 = t.kernel({"lane_values": 16})   # built at the bucket's D, with a residual
    assert (k16.name, k16.warps) == ("layernorm_fwd_8192_split16", 16)
    assert norm_tuned.space(False, "fwd", 1024, False).kernel({"lane_values": 16}).warps == 2   # split below SPLIT_AT
    assert t.kernel({"lane_values": None}).name == layernorm_fwd(8192).name


def test_the_shipped_picks_are_candidates_the_library_holds(norm_tables):
    """Every pick the shipped tables hold is a candidate of its space, and at
    the library's widths its kernel is prebuilt (with and without a
    residual): an offline call never meets a pick it cannot run."""
    from tkc.kernels import NORM_WIDTHS, library
    from tkc.torchops.norm_tuned import lane_split
    built = {k.artifact_key() for k in library()}
    picked = 0
    for rms in (False, True):
        for kind, build in (("fwd", rmsnorm_fwd if rms else layernorm_fwd),
                            ("bwd", rmsnorm_bwd if rms else layernorm_bwd)):
            for D in NORM_WIDTHS:
                for dropout in (False, True):
                    for residual in (True, False):
                        split = lane_split(rms, kind, D, dropout, residual)
                        picked += bool(split)
                        assert build(D, dropout, 4, residual, **split).artifact_key() in built
    assert picked > 0   # the H200's table splits some widths another way than the rule


def test_a_tuned_pick_sets_the_split(norm_tables, monkeypatch):
    """A table's pick for a bucket splits every D of it at that many values a
    lane (a key no table holds: the library's rule)."""
    from tkc.tune import tables
    picks = {("tkc.layer_norm.fwd.d2048", repr(("fwd", 2048, False))): {"lane_values": 16}}
    monkeypatch.setattr(tables, "lookup", lambda name, key: picks.get((name, repr(key))))
    lane_split = norm_tables.lane_split
    assert lane_split(False, "fwd", 1280, False) == {"split_at": 0, "lane_values": 16}
    assert lane_split(False, "fwd", 2048, False) == {"split_at": 0, "lane_values": 16}
    assert lane_split(False, "fwd", 2048, True) == {} == lane_split(True, "fwd", 2048, False)
    assert row_split(1280, "fwd", **lane_split(False, "fwd", 1280, False)) == (3, 512)


# ---------------------------------------------------------------- the ops

@pytest.fixture
def cpu_norms(monkeypatch):
    """CPU tensors pass the ops' device checks; 2 SMs."""
    from tkc.torchops import checks, norm_plans
    from tkc.kernels.norm_grads import norm_grads
    monkeypatch.setattr(checks, "DEVICE_TYPE", "cpu")
    monkeypatch.setattr(norm_plans, "sms", lambda device: 2)
    monkeypatch.setattr(norm_plans, "resident", lambda kernel, device: 2)   # blocks an SM holds
    monkeypatch.setattr(norm_plans, "norm_grads", lambda planes: _interpreted(norm_grads(planes)))
    return norm_plans


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_norms_run_their_tuned_split(cpu_norms, monkeypatch, rms):
    """The norms build the kernels of their D bucket's tuned pick (here 8
    values a lane at D 512: rows split over 2 warps, forward and backward,
    where the library's rule runs one warp a row): values and gradients."""
    from tkc.torchops import norm_tuned
    from tkc.tune import tables
    norm_plans = cpu_norms
    norm = "rms_norm" if rms else "layer_norm"
    monkeypatch.setattr(tables, "lookup", lambda name, key: {"lane_values": 8} if name in (
        f"tkc.{norm}.fwd.d512.nores", f"tkc.{norm}.bwd.d512.nores") else None)
    made = []

    def kernels(D, dropout, residual=True):  # norm_plans' own (uncached), interpreted
        ks = norm_plans.picked_kernels(rms, D, dropout, residual)
        made.extend(k.name for k in ks)
        return tuple(_interpreted(k) for k in ks)
    monkeypatch.setattr(norm_plans, "rms_kernels" if rms else "ln_kernels", kernels)
    for args in norm_tuned.SPACE_KEYS + [(rms, kind, 512, False, r) for kind in ("fwd", "bwd")
                                         for r in (True, False)]:
        norm_tuned.space(*args).forget()
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 512, generator=g).to(BF).requires_grad_()
    w = (1 + 0.1 * torch.randn(512, generator=g)).to(BF).requires_grad_()
    b = (0.1 * torch.randn(512, generator=g)).to(BF).requires_grad_()
    try:
        y = tkc.rms_norm(x, w) if rms else tkc.layer_norm(x, w, b)
    finally:
        for kind in ("fwd", "bwd"):
            for r in (True, False):
                norm_tuned.space(rms, kind, 512, False, r).forget()
    stem = "rmsnorm" if rms else "layernorm"
    assert made == [f"{stem}_fwd_512_nores_split2", f"{stem}_bwd_512_nores_split2"]
    ref = x.double() * torch.rsqrt(x.double().square().mean(-1, keepdim=True) + 1e-6) * w.double() if rms \
        else torch.nn.functional.layer_norm(x.double(), (512,), w.double(), b.double())
    assert _rel(y, ref) < 1e-2
    dy = torch.randn(3, 512, generator=g).to(BF)
    assert grads_match(y, ref, dy, (x, w) if rms else (x, w, b), 2e-2)


def test_the_library_prebuilds_every_split_a_table_may_pick():
    """Offline (TKC_OFFLINE=1) a norm call runs its bucket's pick, so the
    library holds every candidate of the spaces at its widths: a table can
    pick nothing that was not built ahead."""
    from tkc.kernels import NORM_WIDTHS, library
    from tkc.torchops import norm_tuned
    built = {k.artifact_key() for k in library()}
    for rms, kind, D, dropout, residual in norm_tuned.SPACE_KEYS:
        if D in NORM_WIDTHS:
            for k in norm_tuned.space(rms, kind, D, dropout, residual).kernels():
                assert k.artifact_key() in built, k.name
