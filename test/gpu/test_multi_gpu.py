"""Several GPUs under torchrun (docs/multi-gpu.md): test/gpu/multi/run_peers.py
on every GPU of the host (2 to 8) checks the ring kernel against numpy and
tkc.all_gather_matmul / tkc.matmul_reduce_scatter against NCCL + torch.matmul;
skipped with fewer than 2 GPUs. NVLink multicast stays off in the child
processes."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).parent / "multi" / "run_peers.py"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _gpus() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except ImportError:
        return 0


@pytest.mark.skipif(_gpus() < 2, reason="needs 2 GPUs of one host (torchrun --nproc-per-node=2 or more)")
def test_peers_and_fused_collective_gemms_on_every_gpu():
    world = min(_gpus(), 8)
    env = {**os.environ, **NO_MULTICAST}
    root = Path(__file__).parents[2]
    env["PYTHONPATH"] = f"{root}{os.pathsep}{env.get('PYTHONPATH', '')}"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}",
                          str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert run.stdout.count(": ok") == world, run.stdout
