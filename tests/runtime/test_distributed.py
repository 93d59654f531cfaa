"""Data parallelism: 2 gloo ranks on the CPU compute what one process computes on the same global batch.

One test starts the real command under torchrun; the others start two ranks with torch.multiprocessing and call
the training step and the RL update directly, so they can shape the model (an expert no token reaches) and the
rows (a rank that holds none)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from glm53.model.config import ModelConfig
from glm53.model.model import GLM53
from glm53.runtime.distributed import SINGLE, DataParallel, shut_down
from glm53.train.pretrain import data_parallel_forward, make_optimizer, pretrain, train_step
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig
from glm53.train.rl_update import set_train_scope, update_policy
from tests.tiny import TINY

CPU = torch.device("cpu")
TINY_FLAGS = ["--dim", "32", "--layers", "4", "--heads", "4", "--expert-hidden", "48", "--experts", "4", "--top-k", "2",
              "--sparse-window", "8", "--sparse-stride", "8"]
RUN_FLAGS = ["--steps", "5", "--batch-size", "4", "--sequence-length", "128", "--checkpoints", "5", "--no-progress",
             "--device", "cpu", "--dev-max-new-tokens", "4", "--kernels", "config", "--precision", "fp32"]
torchrun = pytest.mark.skipif(shutil.which("torchrun") is None
                              and not Path(sys.executable).with_name("torchrun").exists(),
                              reason="torchrun is not installed beside this Python")


def torchrun_command(*args: str) -> list[str]:
    runner = Path(sys.executable).with_name("torchrun")
    return [str(runner) if runner.exists() else "torchrun", "--nproc-per-node", "2", "-m", "glm53", *args]


def quiet_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
@torchrun
def test_torchrun_pretraining_equals_one_process(tmp_path):
    two = subprocess.run(torchrun_command("pretrain", "--out", str(tmp_path / "two"), *TINY_FLAGS, *RUN_FLAGS),
                         capture_output=True, text=True, env=quiet_env(), timeout=240)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("saved checkpoint-0005") == 1  # rank 0 alone writes and speaks
    cfg = PretrainConfig(out=str(tmp_path / "one"), steps=5, batch_size=4, sequence_length=128, checkpoints=(5,),
                         progress=False, device="cpu", dev_max_new_tokens=4, kernels="config", precision="fp32",
                         model=ModelConfig(**{**TINY, "max_sequence_length": 192}))
    pretrain(cfg, log=lambda *_: None)
    rows = {n: [json.loads(line) for line in (tmp_path / n / "train_log.jsonl").read_text().splitlines()]
            for n in ("one", "two")}
    for a, b in zip(rows["one"], rows["two"], strict=True):
        for key in ("loss", "balance_loss", "grad_norm", "tokens", "expert_load_cv"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), key
    one, two = weights(tmp_path / "one" / "checkpoint-0005"), weights(tmp_path / "two" / "checkpoint-0005")
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-4, atol=1e-5)
    receipt = json.loads((tmp_path / "two" / "training-receipt.json").read_text())
    assert receipt["data_parallel"]["world_size"] == 2 and receipt["data_parallel"]["backend"] == "gloo"


@torchrun
def test_torchrun_refuses_a_batch_that_does_not_divide(tmp_path):
    out = tmp_path / "odd"
    result = subprocess.run(torchrun_command("pretrain", "--out", str(out), *TINY_FLAGS, *RUN_FLAGS,
                                             "--batch-size", "5"),
                            capture_output=True, text=True, env=quiet_env(), timeout=240)
    assert result.returncode != 0
    said = [line for line in result.stderr.splitlines() if line.startswith("glm53 pretrain: error")]
    assert said == ["glm53 pretrain: error: pretrain: --batch-size 5 does not divide among 2 ranks; use a multiple "
                    "of 2 or another --nproc-per-node"]
    assert not out.exists()


def _ranks(worker, tmp_path: Path, *args) -> None:
    """Run worker(rank, dp, tmp_path, *args) in 2 processes joined in a gloo group."""
    mp.spawn(_join, args=(worker, str(tmp_path), args), nprocs=2, join=True)


def _join(rank: int, worker, tmp: str, args) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=2)
    dp = DataParallel(rank, 2, 2, "gloo")
    try:
        worker(rank, dp, Path(tmp), *args)
    except BaseException:
        shut_down(dp, finished=False)
        raise
    shut_down(dp)


# ---------------------------------------------------------------- pretraining: an expert no token reaches

IDLE = 3  # the expert whose selection bias keeps every token away


def _idle_expert_model(moe_impl: str) -> GLM53:
    torch.manual_seed(0)
    model = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 192}, router="sigmoid-bias", moe_impl=moe_impl))
    for moe in routers(model):
        moe.selection_bias[IDLE] = -1e4
    return model


def routers(model: GLM53) -> list:
    from glm53.model.moe import MixtureOfExperts

    return [m for m in model.modules() if isinstance(m, MixtureOfExperts)]


def _pretrain_steps(model: GLM53, dp: DataParallel, steps: int = 3) -> list[dict]:
    cfg = PretrainConfig(steps=steps, batch_size=4, sequence_length=128, model=model.config)
    optimizer = make_optimizer(model, cfg)
    forward = data_parallel_forward(model, dp, CPU)
    rows = [train_step(cfg, s, model, forward, optimizer, CPU, "fp32", dp) for s in range(steps)]
    model.set_load_sum(None)
    return rows


def _idle_expert_worker(rank: int, dp: DataParallel, tmp: Path, moe_impl: str) -> None:
    model = _idle_expert_model(moe_impl)
    rows = _pretrain_steps(model, dp)
    if rank == 0:
        torch.save({"rows": rows, "state": model.state_dict()}, tmp / "two.pt")


@pytest.mark.slow
@pytest.mark.parametrize("moe_impl", ["plain", "fast"])
def test_an_idle_expert_does_not_break_gradient_reduction(tmp_path, moe_impl):
    _ranks(_idle_expert_worker, tmp_path, moe_impl)
    two = torch.load(tmp_path / "two.pt")
    model = _idle_expert_model(moe_impl)
    rows = _pretrain_steps(model, SINGLE)
    for a, b in zip(rows, two["rows"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    state = model.state_dict()
    for name, value in state.items():
        torch.testing.assert_close(two["state"][name], value, rtol=1e-4, atol=1e-5, msg=name)
    # the idle expert stayed idle, its weights untouched by the update but for weight decay, and the router biases
    # (moved by the load summed over both ranks) equal the single process's
    assert all(moe.selection_bias[IDLE] < -1e3 for moe in routers(model))
    biases = [n for n in state if n.endswith("selection_bias")]
    assert biases and all(torch.equal(two["state"][n], state[n]) for n in biases)


def _idle_on_one_rank_worker(rank: int, dp: DataParallel, tmp: Path) -> None:
    model = _idle_expert_model("fast")
    if rank == 0:  # rank 0 routes to every expert, rank 1 never to IDLE
        for moe in routers(model):
            moe.selection_bias.zero_()
    before = [moe.expert_up[IDLE].clone() for moe in routers(model)]
    _pretrain_steps(model, dp, steps=2)
    torch.save({"before": before, "after": [moe.expert_up[IDLE].detach().clone() for moe in routers(model)]},
               tmp / f"rank-{rank}.pt")


@pytest.mark.slow
def test_an_expert_idle_on_one_rank_still_learns_from_the_other(tmp_path):
    _ranks(_idle_on_one_rank_worker, tmp_path)
    ranks = [torch.load(tmp_path / f"rank-{r}.pt") for r in (0, 1)]
    for layer, (after0, after1) in enumerate(zip(ranks[0]["after"], ranks[1]["after"])):
        assert torch.equal(after0, after1), layer  # reduced gradients: the ranks' weights stay equal
        cfg = PretrainConfig()
        opt = cfg.optimization
        decayed_only = ranks[1]["before"][layer] * (1 - opt.lr * opt.weight_decay) ** 2  # what no gradient gives
        assert (after1 - decayed_only).abs().max() > 1e-5  # rank 1 moved it by rank 0's gradient


# ---------------------------------------------------------------- RL: the update of one step's rollouts

RL_CASES = {
    "reference": dict(rows=5, settings={}),
    "dapo-kl-replay": dict(rows=5, settings=dict(normalization="token-mean", iterations=2, clip_high=0.28,
                                                 kl_coef=0.05, entropy_coef=0.01, replay_coef=0.1, replay_batch=3)),
    "one-row": dict(rows=1, settings=dict(normalization="max-tokens", replay_coef=0.1, replay_batch=2)),
}


def _rl_rollouts(rows: int):
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(4, 200, (int(n),), generator=g).tolist()
               for n in torch.randint(3, 9, (rows,), generator=g)]
    completions = [torch.randint(4, 200, (int(n),), generator=g).tolist()
                   for n in torch.randint(1, 7, (rows,), generator=g)]
    advantages = torch.randn(rows, generator=g).tolist()
    return prompts, completions, advantages


def _rl_update(case: str, dp: DataParallel):
    torch.manual_seed(0)
    model = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 192}))
    cfg = RLConfig(init="unused", out="unused", max_new_tokens=8, **RL_CASES[case]["settings"])
    reference = None
    if cfg.kl_coef > 0:
        import copy

        reference = copy.deepcopy(model).eval().requires_grad_(False)
        with torch.no_grad():  # a reference that differs from the policy, so the KL term has a gradient
            for p in model.parameters():
                p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    trainable = set_train_scope(model, "last-block-head")
    # SGD: the update is the gradient itself (Adam's first step, g / (|g| + eps), would blow up rounding in
    # near-zero gradients into differences of the learning rate's size)
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    figures = update_policy(model, reference, optimizer, trainable, cfg, "fp32", CPU,
                            *_rl_rollouts(RL_CASES[case]["rows"]), 0, dp)
    return figures, model.state_dict()


def _rl_worker(rank: int, dp: DataParallel, tmp: Path, case: str) -> None:
    figures, state = _rl_update(case, dp)
    if rank == 0:
        torch.save({"figures": figures, "state": state}, tmp / "two.pt")


@pytest.mark.slow
@pytest.mark.parametrize("case", list(RL_CASES))
def test_an_rl_update_over_two_ranks_equals_one_process(tmp_path, case):
    _ranks(_rl_worker, tmp_path, case)
    two = torch.load(tmp_path / "two.pt")
    figures, state = _rl_update(case, SINGLE)
    for key, value in figures.items():
        if isinstance(value, float):
            assert two["figures"][key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
        else:
            assert two["figures"][key] == value, key
    for name, value in state.items():
        torch.testing.assert_close(two["state"][name], value, rtol=1e-4, atol=1e-6, msg=name)
    initial = _rl_initial_state()
    changed = sum(not torch.equal(initial[n], state[n]) for n in state)
    assert changed > 0  # the update moved weights, so agreeing means something


def _rl_initial_state() -> dict:
    torch.manual_seed(0)
    return GLM53(ModelConfig(**{**TINY, "max_sequence_length": 192})).state_dict()


@pytest.mark.slow
@torchrun
def test_torchrun_rl_gathers_every_group_and_updates_like_one_process(tmp_path):
    """A fresh model's programs are all invalid, so no group has signal and the step's update is the replay term
    alone: the same for 2 ranks as for one, while the rollouts (sampled per rank) are all gathered."""
    from glm53.train.rl import rl_train

    start = PretrainConfig(out=str(tmp_path / "start"), steps=1, batch_size=2, sequence_length=128, checkpoints=(1,),
                           progress=False, device="cpu", dev_max_new_tokens=1, kernels="config", precision="fp32",
                           model=ModelConfig(**{**TINY, "max_sequence_length": 192}))
    pretrain(start, dev_tasks=[], log=lambda *_: None)
    settings = dict(init=str(tmp_path / "start" / "checkpoint-0001"), groups=3, group_size=2, groups_per_step=3,
                    tasks_per_family=1, families="all", max_new_tokens=6, dev_per_family=0, checkpoints=(3,),
                    replay_coef=0.5, replay_batch=3, lr=1e-2, device="cpu", precision="fp32")
    flags = [f"--{k.replace('_', '-')}={','.join(map(str, v)) if isinstance(v, tuple) else v}"
             for k, v in settings.items()]
    two = subprocess.run(torchrun_command("rl", "--out", str(tmp_path / "two"), "--no-progress", *flags),
                         capture_output=True, text=True, env=quiet_env(), timeout=240)
    assert two.returncode == 0, two.stderr[-3000:]
    rl_train(RLConfig(out=str(tmp_path / "one"), progress=False, **settings), log=lambda *_: None)
    logs = {n: json.loads((tmp_path / n / "rl_log.jsonl").read_text()) for n in ("one", "two")}
    assert logs["two"]["rollouts"] == 6
    assert logs["two"]["zero_variance_groups"] == logs["one"]["zero_variance_groups"] == 3
    assert logs["two"]["replay_loss"] == pytest.approx(logs["one"]["replay_loss"], rel=1e-5)
    assert len((tmp_path / "two" / "rollouts.jsonl").read_text().splitlines()) == 6
    one, two_w = weights(tmp_path / "one" / "checkpoint-0003"), weights(tmp_path / "two" / "checkpoint-0003")
    # Adam normalises each element's step, so an element whose gradient is near zero moves by a visible fraction of
    # lr (1e-2) under the rounding differences of two ranks' reductions (seen: 2.6e-6 on one element of 12,288);
    # a missing or doubled gradient would move many elements by about lr
    for name in one:
        torch.testing.assert_close(two_w[name], one[name], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@torchrun
def test_a_one_process_run_resumes_under_two_ranks(tmp_path):
    """Stop after 3 steps in one process, resume to 5 under torchrun: the same losses and weights as 5 steps in
    one process (the batch of a step never depended on the world size)."""
    base = dict(batch_size=4, sequence_length=128, progress=False, device="cpu", dev_max_new_tokens=4,
                kernels="config", precision="fp32", model=ModelConfig(**{**TINY, "max_sequence_length": 192}))
    pretrain(PretrainConfig(out=str(tmp_path / "whole"), steps=5, checkpoints=(3, 5), **base), log=lambda *_: None)
    pretrain(PretrainConfig(out=str(tmp_path / "split"), steps=3, checkpoints=(3,), **base), log=lambda *_: None)
    (tmp_path / "split" / "training-receipt.json").unlink()  # as a run stopped right after its step-3 checkpoint
    resumed = subprocess.run(torchrun_command("pretrain", "--out", str(tmp_path / "split"), *TINY_FLAGS, *RUN_FLAGS,
                                              "--resume"), capture_output=True, text=True, env=quiet_env(), timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = {n: [json.loads(line) for line in (tmp_path / n / "train_log.jsonl").read_text().splitlines()]
            for n in ("whole", "split")}
    assert [r["step"] for r in rows["split"]] == [1, 2, 3, 4, 5]
    for a, b in zip(rows["whole"], rows["split"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    whole, split = weights(tmp_path / "whole" / "checkpoint-0005"), weights(tmp_path / "split" / "checkpoint-0005")
    for name in whole:
        torch.testing.assert_close(split[name], whole[name], rtol=1e-4, atol=1e-5)
