"""The pieces of the RL objective on small hand-computed cases."""

import pytest
import torch

from glm53.data.tasks import frozen_tasks
from glm53.data.tokenizer import ByteTokenizer
from glm53.train.policy_gradient import aggregate_policy_loss, group_advantages, step_advantages
from glm53.train.rl import score_groups
from glm53.train.rl_config import RLConfig
from glm53.train.rl_update import update_policy
from glm53.verify.verifier import Verdict


def test_baselines():
    assert group_advantages([1.0, 0.0, 0.0, 0.0], "leave-one-out") == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    assert group_advantages([1.0, 0.0, 0.0, 0.0], "group-mean") == pytest.approx([0.75, -0.25, -0.25, -0.25])
    # leave-one-out is the group-mean advantage scaled by G / (G - 1)
    r = [0.3, -0.1, 1.0, 0.5, 0.0]
    assert group_advantages(r, "leave-one-out") == pytest.approx([a * 5 / 4 for a in group_advantages(r, "group-mean")])
    with pytest.raises(ValueError, match="unknown advantage baseline"):
        group_advantages(r, "median")


def test_reward_scaling_by_group_and_by_step():
    # rewards [1, 0, 0, 0]: group-mean advantages [0.75, -0.25 x 3], sample std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    (scaled,) = step_advantages([[1.0, 0.0, 0.0, 0.0]], "group-mean", "group-std")
    assert scaled == pytest.approx([0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001])
    # two groups: the step's std is over all 8 rewards [1, 0, 0, 0, 1, 1, 0, 1]: mean 0.5, sample std sqrt(2/7)
    groups = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]]
    by_step = step_advantages(groups, "group-mean", "batch-std")
    std = (2 / 7) ** 0.5
    assert by_step[1] == pytest.approx([0.25 / (std + 1e-4)] * 2 + [-0.75 / (std + 1e-4)] + [0.25 / (std + 1e-4)])
    assert step_advantages(groups) == [group_advantages(g) for g in groups]  # no scaling: as before
    assert step_advantages([[0.5, 0.5]], "group-mean", "group-std") == [[0.0, 0.0]]  # no signal stays zero


def test_each_aggregation_by_hand():
    token_logp = torch.tensor([[-1.0, -2.0, 0.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    adv = torch.tensor([1.0, -1.0])
    expected = {"sequence-mean": -(1 * -1.5 + -1 * -4.0) / 2,   # per-completion mean log-prob, mean over rows
                "token-sum": -(1 * -3.0 + -1 * -4.0) / 2,       # per-completion sum, mean over rows
                "token-mean": -(1 * -3.0 + -1 * -4.0) / 3,      # all 3 completion tokens of the batch (DAPO)
                "max-tokens": -(1 * -3.0 + -1 * -4.0) / (2 * 5)}  # rows x max-new-tokens (Dr. GRPO)
    for name, value in expected.items():
        got = aggregate_policy_loss(token_logp, mask, adv, name, max_new_tokens=5)
        assert float(got) == pytest.approx(value), name
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregate_policy_loss(token_logp, mask, adv, "mean")


def test_gradient_weights_of_token_mean_do_not_depend_on_a_completions_own_length():
    # under token-mean every token's gradient weight is adv / (all tokens); under sequence-mean a long completion's
    # tokens weigh less each
    logits = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[True, True, True, True], [True, False, False, False]])
    for name, per_token in (("token-mean", [0.2] * 4 + [0.2]), ("sequence-mean", [0.125] * 4 + [0.5])):
        logits.grad = None
        aggregate_policy_loss(logits * mask, mask, torch.ones(2), name).backward()
        assert (-logits.grad[mask]).tolist() == pytest.approx(per_token), name


def test_masking_truncated_completions_and_checks():
    tasks = frozen_tasks("rl", 1, "increment")
    passed, failed = Verdict("passed", 5, 5), Verdict("failed", 0, 5)
    sample = lambda capped: {"completion": "x", "token_ids": [5, 6], "hit_token_cap": capped}  # noqa: E731
    judged = [[(sample(False), passed), (sample(True), failed), (sample(False), failed)]]
    for mask, kept in ((False, 3), (True, 2)):
        cfg = RLConfig(out="x", init="y", mask_truncated=mask)
        rollouts, (_, _, advantages) = score_groups(cfg, tasks, judged, 0, ByteTokenizer())
        assert len(advantages) == kept and [r["used"] for r in rollouts] == [True, not mask, True]
    with pytest.raises(ValueError, match="--reward-scaling must be one of"):
        RLConfig(out="x", init="y", reward_scaling="rank")
    with pytest.raises(ValueError, match="--entropy-coef must be >= 0"):
        RLConfig(out="x", init="y", entropy_coef=-0.1)


@pytest.mark.slow
def test_entropy_bonus_lowers_the_loss_by_coef_times_entropy():
    from glm53 import GLM53, ModelConfig

    from ..tiny import TINY

    model = GLM53(ModelConfig(**TINY))
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=0.0)  # the weights stay put between the two calls
    batch = ([[1, 40, 41]], [[42, 43, 2]], [0.7])
    figures = {}
    for coef in (0.0, 0.5):
        cfg = RLConfig(out="x", init="y", entropy_coef=coef)
        figures[coef] = update_policy(model, None, optimizer, params, cfg, "fp32", torch.device("cpu"), *batch, step=0)
    assert figures[0.5]["entropy"] == pytest.approx(figures[0.0]["entropy"])
    assert figures[0.5]["loss"] == pytest.approx(figures[0.0]["loss"] - 0.5 * figures[0.0]["entropy"])


@pytest.mark.parametrize("aggregation", ["sequence-mean", "token-sum", "token-mean", "max-tokens"])
def test_on_policy_the_clipped_objective_has_the_plain_gradient(aggregation):
    from glm53.train.policy_gradient import aggregate_objective, clipped_token_objective

    torch.manual_seed(0)
    logits = torch.randn(3, 5, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    adv = torch.tensor([0.5, -1.0, 2.0])
    token_logp = torch.nn.functional.logsigmoid(logits) * mask
    plain = torch.autograd.grad(aggregate_policy_loss(token_logp, mask, adv, aggregation, 5), logits,
                                retain_graph=True)[0]
    objective, low, high = clipped_token_objective(token_logp, token_logp.detach(), adv, mask, 0.2, 0.28)
    clipped = torch.autograd.grad(aggregate_objective(objective, mask, aggregation, 5), logits)[0]
    torch.testing.assert_close(clipped, plain)
    assert low == high == 0.0


def test_clipping_is_asymmetric_and_stops_the_gradient_outside_the_range():
    from glm53.train.policy_gradient import clipped_token_objective

    token_logp = torch.zeros(1, 4, requires_grad=True)
    # one completion whose 4 tokens have ratios 1.25, 1.35, 0.75, 0.85; its advantage +1, then -1
    old = -torch.log(torch.tensor([[1.25, 1.35, 0.75, 0.85]]))
    mask = torch.ones(1, 4, dtype=torch.bool)
    for adv, expect_low, expect_high, live in ((1.0, 0.0, 0.25, [1, 0, 1, 1]), (-1.0, 0.25, 0.0, [1, 1, 0, 1])):
        objective, low, high = clipped_token_objective(token_logp, old, torch.tensor([adv]), mask, 0.2, 0.28)
        (grad,) = torch.autograd.grad(objective.sum(), token_logp)
        assert (low, high) == (expect_low, expect_high)  # 1.35 > 1.28 clips for A > 0; 0.75 < 0.8 for A < 0
        assert [int(g != 0) for g in grad[0].tolist()] == live


@pytest.mark.slow
def test_several_iterations_log_clip_fractions_and_move_the_weights_each_pass():
    from glm53 import GLM53, ModelConfig

    from ..tiny import TINY

    torch.manual_seed(0)
    model = GLM53(ModelConfig(**TINY))
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    optimizer = torch.optim.SGD(params, lr=1.0)
    cfg = RLConfig(out="x", init="y", iterations=3, clip_low=0.2, clip_high=0.28)
    figures = update_policy(model, None, optimizer, params, cfg, "fp32", torch.device("cpu"),
                      [[1, 40, 41], [1, 50]], [[42, 43, 2], [44, 45, 46, 2]], [0.7, -0.3], step=0)
    assert 0.0 <= figures["clipped_low"] <= 1.0 and 0.0 <= figures["clipped_high"] <= 1.0
    assert any(not torch.equal(a, b) for a, b in zip(before, params))
    with pytest.raises(ValueError, match="--iterations must be >= 1"):
        RLConfig(out="x", init="y", iterations=0)


def test_dynamic_sampling_replaces_groups_without_signal_in_order_within_the_cap(monkeypatch):
    import glm53.train.rl as rl
    from glm53.decode.generate import Sampling

    tasks = frozen_tasks("rl", 8, "increment")
    signal = {t.task_id for t in tasks[5:7]}  # only these fresh tasks give a group with unequal rewards

    def fake_sample_and_verify(model, step_tasks, group_size, sampling, generator, precision, suite="reference"):
        verdicts = lambda t: [Verdict("passed", 5, 5) if t.task_id in signal and i == 0 else  # noqa: E731
                              Verdict("failed", 0, 5) for i in range(group_size)]
        return [[({"completion": "x", "token_ids": [5], "hit_token_cap": False}, v) for v in verdicts(t)]
                for t in step_tasks]

    monkeypatch.setattr(rl, "sample_and_verify", fake_sample_and_verify)
    step_tasks, stream = tasks[:2], tasks[2:]
    judged = fake_sample_and_verify(None, step_tasks, 3, None, None, None)
    cfg = RLConfig(out="x", init="y", group_size=3, dynamic_sampling=True, dynamic_sampling_max_draws=4)
    got, got_judged, dropped, drawn = rl.refill_groups(cfg, None, step_tasks, judged, stream, 0, Sampling(), "fp32",
                                                       torch.device("cpu"))
    # fresh tasks 2, 3 (first draw of 2), 4, 5 (second draw; 5 fills slot 0), 6 (third draw of 1, fills slot 1)
    assert [t.task_id for t in got] == [tasks[5].task_id, tasks[6].task_id] and drawn == 5
    assert all(rl.informative(cfg, task, pairs) for task, pairs in zip(got, got_judged))
    assert sorted(t.task_id for _, t, _ in dropped) == sorted(t.task_id for t in tasks[:5])
    # a cap of 3 x 2 groups in all leaves 4 fresh ones: slot 0 is filled by task 5, slot 1 keeps its group
    capped = RLConfig(out="x", init="y", group_size=3, dynamic_sampling=True, dynamic_sampling_max_draws=3)
    got, _, _, drawn = rl.refill_groups(capped, None, step_tasks, judged, stream, 0, Sampling(), "fp32",
                                        torch.device("cpu"))
    assert drawn == 4 and [t.task_id for t in got] == [tasks[5].task_id, tasks[1].task_id]
    # the stream resumes where the last step stopped
    got, _, _, drawn = rl.refill_groups(capped, None, step_tasks, judged, stream, 3, Sampling(), "fp32",
                                        torch.device("cpu"))
    assert [t.task_id for t in got] == [tasks[5].task_id, tasks[6].task_id] and drawn == 2
