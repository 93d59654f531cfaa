"""Behaviour unchanged by the house's third step (issue 45): the same seed gives the same weights, byte for byte,
for a tiny pretraining, a tiny RL run and a tiny sweep, driven through the command line (whose flags the moves
keep). The hashes were recorded by running this file's `run_tiny_jobs` on commit 8b0004b, before any of the moves,
on torch 2.13.0+cpu, once with the AVX512 kernels (an AMD EPYC, Zen 4) and once on a CPU with AMX as well (an Intel
Xeon, 2026-12-04), whose bf16 products round differently; another torch or another CPU kernel family may round
differently again, so there the test skips and says how to record them again. The RL run has an entropy bonus and a
replay term so its update moves the weights even though no completion of the untrained model earns a reward.

The vision pilot's training (its optimizer settings nested as the Optimization block since) is checked the same
way: a miniature digit run with every optimizer setting off its default and the cosine schedule, hashed after
training (`run_tiny_vision`, recorded on 8b0004b too).

Record again: `git worktree add /tmp/old 8b0004b`, copy this file there, and run
`PYTHONPATH=/tmp/old python tests/test_same_weights.py /tmp/out`."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

from glm53.cli import main

RECORDED_TORCH = "2.13.0+cpu"
# by the CPU's kernel family (kernel_family()): the three runs' weights and the vision run's, recorded on 8b0004b
RECORDED = {
    "AVX512": {
        "pretrain": "d60c2e88eae87586f63c91567d0361a09e994efabc03c3f1c222c1d1461a0032",
        "rl": "be73ed8169525955ec56c1e9b032a86719a6db6b71fdb3752970b505b47cdfbf",
        "sweep": "e1df604bc8d50ecd0d37b575d983b14aaddaf3dd8b4d13cb72decb74ba5c4186",
        "vision": "27f5b1b5c3a22568eda20e39de0baf03725f585f056ce660f6bba89b601fa897",
    },
    "AVX512+AMX": {
        "pretrain": "b624d6f93731851f3b5640e54f627eaaa3517cc0e5b35115a0a8c905d0836923",
        "rl": "36abe719ee82feec591fc564a39b83285f3527df51c022e8d81af6808d0a592c",
        "sweep": "aee69cfa5df391ecf295a245dfa766371cd5b23323136e4dbdb9f842e4fe83a7",
        "vision": "72654b60a5bda7d143b8c94304cea692090160e202a82b3efaa73b360f0300f6",
    },
}
MODEL = ["--dim", "32", "--layers", "4", "--heads", "4", "--expert-hidden", "48", "--experts", "4", "--top-k", "2",
         "--streams", "4", "--sparse-window", "8", "--sparse-stride", "8", "--max-sequence-length", "160"]
SPEC = """name = "tiny"
job = "expression-pretrain"
seeds = [1]
checkpoints = [2, 4]
metrics = ["target_byte_accuracy", "target_loss"]
baseline = "diverse-88"
[base]
steps = 4
batch_size = 4
dim = 16
heads = 2
expert_hidden = 16
[arms.diverse-88]
data_order = "diverse-88"
"""


def run_tiny_jobs(out: Path) -> dict[str, str]:
    """The three runs, one thread each; returns the weights sha256 each ends with."""
    assert main(["pretrain", "--out", str(out / "pre"), "--steps", "3", "--checkpoints", "3", "--batch-size", "2",
                 "--no-progress", "--device", "cpu", "--threads", "1", "--seed", "7", "--dev-max-new-tokens", "4",
                 *MODEL]) == 0
    assert main(["rl", "--init", str(out / "pre" / "checkpoint-0003"), "--out", str(out / "rl"), "--groups", "4",
                 "--group-size", "4", "--families", "increment,even", "--tasks-per-family", "2", "--temperature", "1.0",
                 "--max-new-tokens", "8", "--checkpoints", "2,4", "--groups-per-step", "2", "--dev-per-family", "1",
                 "--dev-samples", "2", "--device", "cpu", "--threads", "1", "--no-progress", "--lr", "1e-3",
                 "--entropy-coef", "0.05", "--replay-coef", "0.5", "--replay-batch", "2"]) == 0
    (out / "tiny.toml").write_text(SPEC)
    assert main(["sweep", str(out / "tiny.toml"), "--out", str(out / "sweep"), "--workers", "1", "--no-progress"]) == 0

    def recorded(folder: Path) -> str:
        return json.loads((folder / "metadata.json").read_text())["weights_sha256"]

    job = json.loads((out / "sweep" / "runs" / "diverse-88" / "seed-1" / "receipt.json").read_text())
    return {"pretrain": recorded(out / "pre" / "checkpoint-0003"), "rl": recorded(out / "rl" / "checkpoint-0004"),
            "sweep": job["metrics"]["4"]["weights_sha256"]}


def run_tiny_vision() -> str:
    """A miniature digit run (faithful tower, one thread), every optimizer setting off its default and the cosine
    schedule; the sha256 of its weights after training (names, shapes, dtypes, bytes)."""
    from glm53.vision.digits import held_out_set
    from glm53.vision.train import DigitTraining, build, train_digits

    schedule = "lr_schedule" if "optimization" in DigitTraining.__dataclass_fields__ else "schedule"  # 8b0004b
    training = DigitTraining(steps=4, batch_size=6, lr=3e-3, weight_decay=0.05, warmup_steps=1, grad_clip=0.5,
                             tower_warmup_steps=2, tower_lr_scale=0.5, embedding_lr_scale=2.0, embedding_eps=1e-4,
                             balance_coef=0.02, label_step=2, **{schedule: "cosine"})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = build("faithful", 3)
        train_digits(model, training, 3, *held_out_set(10, 3))
    finally:
        torch.set_num_threads(threads)
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        h.update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def kernel_family() -> str:
    """torch's CPU capability (AVX512, AVX2, ...), with +AMX where the CPU has AMX tiles: oneDNN runs bf16 products
    on them, which round differently from AVX512's (torch's capability string does not tell the two apart)."""
    cpuinfo = Path("/proc/cpuinfo")
    amx = cpuinfo.is_file() and "amx_tile" in cpuinfo.read_text()
    return torch.backends.cpu.get_cpu_capability() + ("+AMX" if amx else "")


def recorded_here() -> dict[str, str]:
    """This machine's recorded hashes, or skip: they were recorded for torch 2.13.0+cpu on two kernel families."""
    here = {"torch": torch.__version__, "cpu": kernel_family()}
    if here["torch"] != RECORDED_TORCH or here["cpu"] not in RECORDED:
        pytest.skip(f"hashes recorded on torch {RECORDED_TORCH} with {', '.join(RECORDED)}, this is {here}: record "
                    "them again (see the docstring)")
    return RECORDED[here["cpu"]]


@pytest.mark.slow
def test_the_same_seed_gives_the_vision_weights_it_gave_before_the_moves():
    assert run_tiny_vision() == recorded_here()["vision"]


@pytest.mark.slow
def test_the_same_seed_gives_the_weights_it_gave_before_the_moves(tmp_path):
    recorded = recorded_here()
    threads = torch.get_num_threads()
    try:
        hashes = run_tiny_jobs(tmp_path)
    finally:
        torch.set_num_threads(threads)  # --threads 1 set it for this process
    assert hashes == {job: recorded[job] for job in ("pretrain", "rl", "sweep")}
    # and the RL update did move the weights (else its hash would check nothing of the update)
    start = json.loads((tmp_path / "rl" / "checkpoint-0000" / "metadata.json").read_text())["weights_sha256"]
    assert start == recorded["pretrain"] != recorded["rl"]


if __name__ == "__main__":
    print(json.dumps({**run_tiny_jobs(Path(sys.argv[1])), "vision": run_tiny_vision()}, indent=1))
