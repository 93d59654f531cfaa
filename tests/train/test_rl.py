import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.data.tasks import frozen_tasks
from glm53.runtime.cpu import cpu_description
from glm53.train.completion_batch import completion_batch
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl import leave_one_out_advantages, rl_train, step_boundaries, task_schedule
from glm53.train.rl_config import RLConfig
from glm53.train.rl_update import set_train_scope, update_policy

from ..tiny import TINY

SMALL = ModelConfig(**{**TINY, "max_sequence_length": 160})


def test_leave_one_out_advantages():
    adv = leave_one_out_advantages([1.0, 0.0, 0.0, 0.0])
    assert adv == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    assert sum(leave_one_out_advantages([0.3, -0.1, 1.0])) == pytest.approx(0.0)
    assert leave_one_out_advantages([1.0, 1.0]) == [0.0, 0.0]


def test_schedule_uses_each_task_once_per_epoch_and_is_deterministic():
    tasks = frozen_tasks("rl", 4, "increment,double")
    schedule = task_schedule(tasks, 12, seed=31415)
    assert sorted(t.task_id for t in schedule[:8]) == sorted(t.task_id for t in tasks)
    assert schedule == task_schedule(tasks, 12, seed=31415) != task_schedule(tasks, 12, seed=1)


def test_updates_never_cross_a_checkpoint():
    assert step_boundaries(96, 16, (24, 48, 72, 96)) == [(0, 16), (16, 24), (24, 40), (40, 48), (48, 64), (64, 72),
                                                         (72, 88), (88, 96)]


def test_completion_mask_marks_positions_that_predict_completion_tokens():
    inputs, targets, mask = completion_batch([[1, 10, 11], [1, 12]], [[20, 21], [22, 23, 2]], "cpu")
    assert inputs.tolist() == [[1, 10, 11, 20], [1, 12, 22, 23]]
    assert targets[0][mask[0]].tolist() == [20, 21]
    assert targets[1][mask[1]].tolist() == [22, 23, 2]


def test_last_block_head_scope_matches_the_reference_count():
    model = GLM53(ModelConfig())
    trainable = set_train_scope(model, "last-block-head")
    assert sum(p.numel() for p in trainable) == 2_190_152
    assert sum(p.numel() for p in set_train_scope(model, "last-block")) == 2_190_152 - 49_920


@pytest.fixture(scope="module")
def start_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("pre") / "run"
    pretrain(PretrainConfig(out=str(out), steps=2, checkpoints=(2,), batch_size=2, progress=False, device="cpu",
                            model=SMALL), dev_tasks=[], log=lambda *_: None)
    return out / "checkpoint-0002"


def small_rl(start, out, **kw):
    args = dict(init=str(start), out=str(out), groups=4, group_size=4, families="increment,even", tasks_per_family=2,
                temperature=1.0, max_new_tokens=8, checkpoints=(2, 4), groups_per_step=2, dev_per_family=1,
                dev_samples=2, device="cpu", progress=False, lr=1e-3)
    args.update(kw)
    return RLConfig(**args)


@pytest.mark.slow
def test_rl_run_records_every_rollout_and_is_reproducible(start_checkpoint, tmp_path):
    a = rl_train(small_rl(start_checkpoint, tmp_path / "a"), log=lambda *_: None)
    b = rl_train(small_rl(start_checkpoint, tmp_path / "b"), log=lambda *_: None)
    assert len(a["rollouts"]) == 16
    assert {"completion", "reward", "advantage", "verdict", "used"} <= set(a["rollouts"][0])
    assert [c["group"] for c in a["checkpoints"]] == [0, 2, 4]
    assert a["rollouts"] == b["rollouts"]
    assert [c["weights_sha256"] for c in a["checkpoints"]] == [c["weights_sha256"] for c in b["checkpoints"]]
    for g in range(1, 5):
        group = [r for r in a["rollouts"] if r["group"] == g]
        rewards = [r["reward"] for r in group]
        if max(rewards) == min(rewards):  # no signal: counted, not used
            assert not any(r["used"] for r in group)
    assert a["zero_variance_groups"] == sum(1 for g in range(1, 5)
                                            if len({r["reward"] for r in a["rollouts"] if r["group"] == g}) == 1)
    rl_tasks = frozen_tasks("rl", a["settings"]["tasks_per_family"], a["settings"]["families"])
    assert json.loads((tmp_path / "a" / "schedule.json").read_text()) == \
        [t.task_id for t in task_schedule(rl_tasks, 4, a["settings"]["seed"])]
    assert (tmp_path / "a" / "rl_log.jsonl").read_text().count("\n") == 2
    on_disk = json.loads((tmp_path / "a" / "training-receipt.json").read_text())
    assert on_disk["cpu"] == cpu_description() | {"threads": on_disk["cpu"]["threads"]}  # the machine it ran on


@pytest.mark.slow
def test_rl_options_kl_replay_token_sum(start_checkpoint, tmp_path):
    r = rl_train(small_rl(start_checkpoint, tmp_path / "c", kl_coef=0.1, replay_coef=0.5, replay_batch=2,
                          normalization="token-sum", train_scope="all", groups=2, checkpoints=(2,)),
                 log=lambda *_: None)
    step = r["steps"][0]
    assert step["updated"] and step["replay_loss"] > 0
    assert r["settings"]["kl_coef"] == 0.1 and r["settings"]["normalization"] == "token-sum"
    # the KL term and the normalisation themselves: test_update_with_kl_penalty_starts_at_zero_kl and
    # test_policy_loss_normalisation_matches_a_hand_computation


@pytest.mark.slow
@pytest.mark.parametrize("normalization", ["sequence-mean", "token-sum"])
def test_policy_loss_normalisation_matches_a_hand_computation(tiny_config, normalization):
    model = GLM53(tiny_config)
    prompts, completions, advantages = [[1, 10, 11], [1, 12]], [[20, 21, 22], [23, 2]], [0.5, -0.25]
    inputs, targets, mask = completion_batch(prompts, completions, "cpu")
    with torch.no_grad():
        logp = model(inputs).log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)
    sums = [float(logp[i][mask[i]].sum()) for i in range(2)]
    per_row = [s / len(c) for s, c in zip(sums, completions)] if normalization == "sequence-mean" else sums
    expected = -sum(a * x for a, x in zip(advantages, per_row)) / 2
    trainable = set_train_scope(model, "all")
    cfg = RLConfig(init="x", out="y", normalization=normalization)
    figures = update_policy(model, None, torch.optim.AdamW(trainable, lr=1e-3), trainable, cfg, "fp32",
                      torch.device("cpu"), prompts, completions, advantages, step=0)
    assert figures["policy_loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_update_with_kl_penalty_starts_at_zero_kl(tiny_config):
    import copy

    model = GLM53(tiny_config)
    reference = copy.deepcopy(model).requires_grad_(False)
    trainable = set_train_scope(model, "all")
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    cfg = RLConfig(init="x", out="y", kl_coef=0.5, normalization="token-sum")
    figures = update_policy(model, reference, optimizer, trainable, cfg, "fp32", torch.device("cpu"),
                      [[1, 10, 11], [1, 10, 11]], [[20, 21], [22, 2]], [1.0, -1.0], step=0)
    assert figures["kl"] == pytest.approx(0.0, abs=1e-6) and figures["updated"] and figures["grad_norm"] > 0
    again = update_policy(model, reference, optimizer, trainable, cfg, "fp32", torch.device("cpu"),
                    [[1, 10, 11], [1, 10, 11]], [[20, 21], [22, 2]], [1.0, -1.0], step=1)
    assert again["kl"] > 0


def test_rl_refuses_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="--group-size"):
        RLConfig(init="x", out=str(tmp_path), group_size=1)
    with pytest.raises(ValueError, match="--train-scope"):
        RLConfig(init="x", out=str(tmp_path), train_scope="head")


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, {"dynamic_sampling": True}], ids=["plain", "dynamic-sampling"])
def test_rl_resume_continues_exactly(start_checkpoint, tmp_path, extra):
    whole = rl_train(small_rl(start_checkpoint, tmp_path / "whole", **extra), log=lambda *_: None)
    part_cfg = small_rl(start_checkpoint, tmp_path / "part", **extra)
    rl_train(part_cfg, log=lambda *_: None)
    part = tmp_path / "part"
    # pretend the run died right after checkpoint 2: drop what came later
    import shutil

    shutil.rmtree(part / "checkpoint-0004")
    (part / "training-receipt.json").unlink()
    resumed = rl_train(small_rl(start_checkpoint, part, resume=True, **extra), log=lambda *_: None)
    assert resumed["rollouts"] == whole["rollouts"]
    assert [c["weights_sha256"] for c in resumed["checkpoints"]] == [c["weights_sha256"] for c in whole["checkpoints"]]
    with pytest.raises(ValueError, match="settings differ"):
        (part / "training-receipt.json").unlink()
        rl_train(small_rl(start_checkpoint, part, resume=True, lr=5e-4, **extra), log=lambda *_: None)
