"""Post-training beside the policy gradient: rejection sampling (expert iteration, `--objective
rejection-sampling`) fine-tunes on the programs the verifier passed, weight 1, and leaves the rest out; the
`experts` scope trains every block's experts and nothing else."""

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.data.tasks import frozen_tasks
from glm53.data.tokenizer import ByteTokenizer
from glm53.train.completion_batch import completion_batch
from glm53.train.rl import rl_train
from glm53.train.rl_config import RLConfig
from glm53.train.rl_scoring import informative, score_groups
from glm53.train.rl_update import set_train_scope, update_policy
from glm53.verify.verifier import Verdict

from .test_rl import SMALL, small_rl, start_checkpoint  # noqa: F401 (a fixture)

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


@pytest.mark.slow
def test_rejection_sampling_update_is_the_cross_entropy_of_the_kept_programs():
    """From the verdicts to the update: with the token-mean aggregation the loss is the plain fine-tuning loss,
    the mean cross-entropy of the passed programs' tokens given their prompts; the failed one is not in it."""
    model = GLM53(SMALL)
    tasks = frozen_tasks("rl", 1, "increment")
    judged = [[(_sample([20, 21, 22]), PASSED), (_sample([23, 24]), FAILED), (_sample([25, 2]), PASSED)]]
    cfg = RLConfig(init="x", out="y", objective="rejection-sampling", normalization="token-mean")
    _, (prompts, completions, weights) = score_groups(cfg, tasks, judged, 0, ByteTokenizer())
    assert completions == [[20, 21, 22], [25, 2]]
    inputs, targets, mask = completion_batch(prompts, completions, "cpu")
    with torch.no_grad():
        logits = model(inputs)
    expected = float(torch.nn.functional.cross_entropy(logits[mask], targets[mask]))
    trainable = set_train_scope(model, "all")
    figures = update_policy(model, None, torch.optim.AdamW(trainable, lr=1e-3), trainable, cfg, "fp32",
                            torch.device("cpu"), prompts, completions, weights, step=0)
    assert figures["policy_loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_the_reward_settings_are_refused_under_rejection_sampling(start_checkpoint, tmp_path):  # noqa: F811
    for flag, value in (("reward", "partial"), ("invalid_penalty", -1.0), ("exact_bonus", 0.5),
                        ("allow_unordered_reward", True), ("advantage_baseline", "group-mean"),
                        ("reward_scaling", "group-std")):
        with pytest.raises(ValueError, match="has no effect under --objective rejection-sampling"):
            RLConfig(out="x", init="y", objective="rejection-sampling", **{flag: value})
    with pytest.raises(ValueError, match="--objective must be one of"):
        RLConfig(out="x", init="y", objective="sft")
    with pytest.raises(ValueError, match="reward_funcs would have no effect"):
        rl_train(small_rl(start_checkpoint, tmp_path / "r", objective="rejection-sampling"),
                 reward_funcs=["binary"], log=lambda *_: None)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("mtp_depth", [0, 1])
def test_the_experts_scope_trains_the_experts_alone(mtp_depth):
    """By name: every block's expert_up, expert_down and shared experts, nothing else (not the routers, not the MTP
    block, which RL gives no loss)."""
    model = GLM53(ModelConfig(mtp_depth=mtp_depth))
    trainable = {id(p) for p in set_train_scope(model, "experts")}
    wanted = {name for name, _ in model.named_parameters() if name.startswith("layers.") and
              (name.endswith((".expert_up", ".expert_down")) or ".shared." in name)}
    assert {name for name, p in model.named_parameters() if id(p) in trainable} == wanted
    assert len([n for n in wanted if n.endswith(".expert_up")]) == ModelConfig().layers
    assert (mtp_depth == 0) == (not any(n.startswith("mtp.") for n, _ in model.named_parameters()))


@pytest.mark.slow
def test_a_rejection_sampling_run_trains_on_what_passed_and_is_reproducible(start_checkpoint, tmp_path,  # noqa: F811
                                                                              monkeypatch):
    """The whole loop, with the verifier's verdicts replaced so that each group's first program passes (the tiny
    start passes nothing): exactly those are used, the experts move and nothing else does, and the same seed gives
    the same weights."""
    import glm53.train.rl as rl_module
    from glm53.checkpoints.format import load_model

    real = rl_module.sample_groups

    def first_passes(*args, **kwargs):
        return [[(s, PASSED if i == 0 else FAILED) for i, (s, _) in enumerate(pairs)]
                for pairs in real(*args, **kwargs)]

    monkeypatch.setattr(rl_module, "sample_groups", first_passes)
    runs = [rl_train(small_rl(start_checkpoint, tmp_path / name, objective="rejection-sampling",
                              train_scope="experts", groups=2, checkpoints=(2,)), log=lambda *_: None)
            for name in ("a", "b")]
    a = runs[0]
    assert [r["used"] for r in a["rollouts"]] == [True, False, False, False] * 2
    assert a["updated_groups"] == 2 and a["zero_variance_groups"] == 0 and a["steps"][0]["updated"]
    assert a["algorithm"].startswith("rejection sampling")
    assert [c["weights_sha256"] for c in runs[1]["checkpoints"]] == [c["weights_sha256"] for c in a["checkpoints"]]
    start = load_model(tmp_path / "a" / "checkpoint-0000", "cpu").model.state_dict()
    after = load_model(tmp_path / "a" / "checkpoint-0002", "cpu").model.state_dict()
    moved = {k for k in start if not torch.equal(start[k], after[k])}
    assert moved and all(k.endswith((".expert_up", ".expert_down")) or ".shared." in k for k in moved)


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


def test_an_rl_run_started_before_these_settings_resumes(tmp_path):
    """A run folder whose run.json predates --objective and --task-source held what they now default to."""
    import json

    from glm53.train.run_folder import check_resume_settings

    now = RLConfig(out=str(tmp_path), init="y").to_dict()
    older = {k: v for k, v in now.items() if k not in ("objective", "task_source")}
    (tmp_path / "run.json").write_text(json.dumps(older))
    check_resume_settings(tmp_path, now, ())  # no difference
    with pytest.raises(ValueError, match="objective"):
        check_resume_settings(tmp_path, {**now, "objective": "rejection-sampling"}, ())
