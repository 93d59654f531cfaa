"""scripts/gpu_speedrun.sh's path, run on the CPU with a tiny config (its CUDA run needs a lent GPU): one seed, two
steps; the record folder packed and the record row printed."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_speedrun_script_runs_its_path_on_the_cpu(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"), "DEVICE": "cpu", "SEEDS": "7",
           "RUN_LIMIT": "120", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    tiny = ["--pretrain.steps", "2", "--pretrain.warmup-steps", "1", "--pretrain.batch-size", "2", "--pretrain.layers",
            "2", "--pretrain.dim", "32", "--pretrain.heads", "2", "--pretrain.expert-hidden", "32",
            "--check-every-steps", "1", "--threads", "1"]
    done = subprocess.run(["bash", "scripts/gpu_speedrun.sh", "muon-qk-bpe-dense", *tiny], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seed 7: exit 1" in done.stdout  # two steps miss the target: the speedrun says so with exit 1
    assert "| muon-qk-bpe-dense |" in done.stdout and "missed" in done.stdout  # the record row, printed
    with tarfile.open(tmp_path / "out" / "gpu-speedrun.tgz") as packed:
        names = packed.getnames()
    assert "./machine.txt" in names and "./muon-qk-bpe-dense-seed7/speedrun.json" in names
