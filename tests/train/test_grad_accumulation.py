"""--grad-accumulation K: K micro-batches of B rows make one step of K x B rows, to rounding (pretraining and RL),
and a resumed accumulated run continues exactly."""

import pytest
import torch

from glm53.checkpoints.format import load_model
from glm53.train.pretrain import pretrain

from ..tiny import TINY
from .test_pretrain import losses, tiny_run


def weights(path):
    return load_model(path).model.state_dict()


def assert_same_weights(a, b):
    for name, tensor in a.items():
        torch.testing.assert_close(tensor, b[name], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_pretrain_two_micro_batches_equal_one_step_of_twice_the_batch(tmp_path):
    # the balance term is a product of per-forward means, averaged over micro-batches (the docstring's
    # simplification), so it is left out here to compare the language loss's gradients alone; fp32, so that
    # rounding is fp32's (a bf16 autocast rounds each micro-batch's activations on its own)
    kw = dict(steps=3, checkpoints=(3,), balance_coef=0.0, precision="fp32")
    pretrain(tiny_run(tmp_path / "k2", batch_size=2, grad_accumulation=2, **kw), dev_tasks=[], log=lambda *_: None)
    pretrain(tiny_run(tmp_path / "k1", batch_size=4, **kw), dev_tasks=[], log=lambda *_: None)
    assert_same_weights(weights(tmp_path / "k2" / "checkpoint-0003"), weights(tmp_path / "k1" / "checkpoint-0003"))
    torch.testing.assert_close(losses(tmp_path / "k2"), losses(tmp_path / "k1"), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_pretrain_accumulated_run_resumes_exactly(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(tiny_run(whole, steps=4, checkpoints=(2, 4), grad_accumulation=2), dev_tasks=[], log=lambda *_: None)
    pretrain(tiny_run(part, steps=2, checkpoints=(2,), grad_accumulation=2), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    pretrain(tiny_run(part, steps=4, checkpoints=(2, 4), grad_accumulation=2, resume=True), dev_tasks=[],
             log=lambda *_: None)
    assert losses(part) == losses(whole)
    assert (whole / "checkpoint-0004" / "model.safetensors").read_bytes() == \
        (part / "checkpoint-0004" / "model.safetensors").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("normalization", ["sequence-mean", "token-mean"])
def test_rl_update_in_micro_batches_equals_the_whole_update(normalization):
    """Two rounds (the second PPO-clipped) with the entropy, KL and replay terms on: the rows in 2 or 3
    micro-batches give the weights one batch gives, to rounding."""
    import copy

    from glm53 import GLM53, ModelConfig
    from glm53.train.rl_config import RLConfig
    from glm53.train.rl_update import set_train_scope, update_policy

    torch.manual_seed(0)
    start = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 160}))
    prompts = [[1, 10, 11], [1, 10, 11], [1, 12], [1, 12], [1, 13, 14, 15], [1, 13, 14, 15]]
    completions = [[20, 21, 22], [23, 2], [24, 25, 26, 27], [28, 2], [29, 30], [31, 32, 33]]
    advantages = [0.5, -0.5, 1.0, -1.0, 0.25, -0.25]
    result = []
    for k in (1, 2, 3):
        model, reference = copy.deepcopy(start), copy.deepcopy(start).requires_grad_(False)
        trainable = set_train_scope(model, "all")
        cfg = RLConfig(init="x", out="y", normalization=normalization, kl_coef=0.1, entropy_coef=0.01,
                       replay_coef=0.5, replay_batch=4, iterations=2, grad_accumulation=k)
        optimizer = torch.optim.AdamW(trainable, lr=1e-3)
        figures = update_policy(model, reference, optimizer, trainable, cfg, "fp32", torch.device("cpu"), prompts,
                                completions, advantages, step=0)
        result.append((figures, model.state_dict()))
    for figures, state in result[1:]:
        assert_same_weights(state, result[0][1])
        for name in ("loss", "policy_loss", "entropy", "kl", "replay_loss", "grad_norm"):
            assert figures[name] == pytest.approx(result[0][0][name], rel=1e-4, abs=1e-6), name
