"""Post-training beside the policy gradient: rejection sampling (expert iteration, `--objective
rejection-sampling`) fine-tunes on the programs the verifier passed, weight 1, and leaves the rest out; the
`experts` scope trains every block's experts and nothing else."""

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.data.tasks import frozen_tasks
from glm53.data.tokenizer import ByteTokenizer
from glm53.model.moe import MixtureOfExperts
from glm53.train.completion_batch import completion_batch
from glm53.train.rewards import informative
from glm53.train.rl import rl_train, score_groups
from glm53.train.rl_config import RLConfig
from glm53.train.rl_update import set_train_scope, update_policy
from glm53.verify.verifier import Verdict

from .test_rl import small_rl, start_checkpoint  # noqa: F401 (a fixture)

PASSED, FAILED, INVALID = Verdict("passed", 5, 5), Verdict("failed", 2, 5), Verdict("invalid", 0, 5)


def _sample(ids):
    return {"completion": "x", "token_ids": ids, "hit_token_cap": False}


def test_rejection_sampling_keeps_every_passed_program_and_only_those():
    tasks = frozen_tasks("rl", 2, "increment")
    judged = [[(_sample([5]), PASSED), (_sample([6]), FAILED), (_sample([7]), PASSED), (_sample([8]), INVALID)],
              [(_sample([9]), PASSED), (_sample([10]), PASSED)]]  # all passed: no signal for a policy gradient
    keep = RLConfig(out="x", init="y", objective="rejection-sampling")
    rollouts, (_, completions, weights) = score_groups(keep, tasks, judged, 0, ByteTokenizer())
    assert completions == [[5], [7], [9], [10]] and weights == [1.0] * 4
    assert [r["used"] for r in rollouts] == [True, False, True, False, True, True]
    assert [r["advantage"] for r in rollouts] == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    # the policy gradient on the same rollouts: the all-passed group carries nothing, the failures push down
    _, (_, completions, advantages) = score_groups(RLConfig(out="x", init="y"), tasks, judged, 0, ByteTokenizer())
    assert completions == [[5], [6], [7], [8]] and min(advantages) < 0
    assert informative(keep, tasks[1], judged[1]) and not informative(RLConfig(out="x", init="y"), tasks[1], judged[1])
    assert not informative(keep, tasks[0], [(_sample([6]), FAILED), (_sample([8]), INVALID)])


def test_rejection_sampling_update_is_the_cross_entropy_of_the_kept_programs(tiny_config):
    """Weight 1 on each kept program with the token-mean aggregation: the update's loss is the plain fine-tuning
    loss, the mean cross-entropy of the kept programs' tokens given their prompts."""
    model = GLM53(tiny_config)
    prompts, completions = [[1, 10, 11], [1, 12]], [[20, 21, 22], [23, 2]]
    inputs, targets, mask = completion_batch(prompts, completions, "cpu")
    with torch.no_grad():
        logits = model(inputs)
    expected = float(torch.nn.functional.cross_entropy(logits[mask], targets[mask]))
    trainable = set_train_scope(model, "all")
    cfg = RLConfig(init="x", out="y", objective="rejection-sampling", normalization="token-mean")
    figures = update_policy(model, None, torch.optim.AdamW(trainable, lr=1e-3), trainable, cfg, "fp32",
                            torch.device("cpu"), prompts, completions, [1.0, 1.0], step=0)
    assert figures["policy_loss"] == pytest.approx(expected, rel=1e-5)


def test_the_reward_shape_is_refused_under_rejection_sampling():
    for flag, value in (("reward", "partial"), ("advantage_baseline", "group-mean"), ("reward_scaling", "group-std")):
        with pytest.raises(ValueError, match="has no effect under --objective rejection-sampling"):
            RLConfig(out="x", init="y", objective="rejection-sampling", **{flag: value})
    with pytest.raises(ValueError, match="--objective must be one of"):
        RLConfig(out="x", init="y", objective="sft")


def test_the_experts_scope_trains_the_experts_alone():
    model = GLM53(ModelConfig())
    trainable = {id(p) for p in set_train_scope(model, "experts")}
    experts = [m for m in model.modules() if isinstance(m, MixtureOfExperts)]
    wanted = {id(p) for m in experts for p in (m.expert_up, m.expert_down, *m.shared.parameters())}
    assert trainable == wanted and len(experts) == ModelConfig().layers
    assert not any(id(p) in trainable for m in experts for p in m.router.parameters())
    assert id(model.embedding.weight) not in trainable


def test_a_rejection_sampling_run_on_the_experts_is_reproducible(start_checkpoint, tmp_path):  # noqa: F811
    """The whole loop with the new choices: what passed is used and nothing else; the same seed, the same
    weights."""
    whole = rl_train(small_rl(start_checkpoint, tmp_path / "whole", objective="rejection-sampling",
                              train_scope="experts"), log=lambda *_: None)
    assert all(r["used"] == (r["verdict"]["status"] == "passed") for r in whole["rollouts"])
    assert whole["settings"]["objective"] == "rejection-sampling" and whole["settings"]["train_scope"] == "experts"
    again = rl_train(small_rl(start_checkpoint, tmp_path / "again", objective="rejection-sampling",
                              train_scope="experts"), log=lambda *_: None)
    assert [c["weights_sha256"] for c in again["checkpoints"]] == [c["weights_sha256"] for c in whole["checkpoints"]]


def test_stream_tasks_are_fresh_drawn_like_the_stream_and_never_a_frozen_name():
    from glm53.data.broad.splits import reserved_suffixes
    from glm53.data.suites import RL_STREAM_START

    cfg = RLConfig(out="x", init="y", suite="broad", task_source="stream", tasks_per_family=40, families="all")
    tasks = cfg.training_tasks()
    split = RLConfig(out="x", init="y", suite="broad", tasks_per_family=40, families="all").training_tasks()
    assert len(tasks) == 40 and len({t.task_id for t in tasks}) == 40
    assert tasks[0].task_id == f"broad-pretrain-{RL_STREAM_START:07d}"
    assert not {t.prompt for t in tasks} & {t.prompt for t in split}
    assert not {t.entry_point.rsplit("_", 1)[-1] for t in tasks} & reserved_suffixes()  # no frozen split's name
    assert {t.entry_point.rsplit("_", 1)[-1] for t in split} <= reserved_suffixes()  # (the check can fail)
    # more tasks than a frozen split holds: the stream has no end
    assert RLConfig(out="x", init="y", suite="broad", task_source="stream", tasks_per_family=2048).tasks_per_family
    with pytest.raises(ValueError, match="more than the broad suite's splits hold"):
        RLConfig(out="x", init="y", suite="broad", tasks_per_family=2048)
    for wrong in (dict(suite="reference"), dict(suite="broad", tasks_file="t.jsonl")):
        with pytest.raises(ValueError, match="--task-source stream draws tasks from the broad suite's"):
            RLConfig(out="x", init="y", task_source="stream", **wrong)
