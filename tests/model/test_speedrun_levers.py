"""The speedrun's model lever that its screens kept (docs/speedrun.md): QK-norm. It does what it says on a tiny
model, is off by default, and trains and resumes exactly. (The levers the screens dropped are retired; how old
records holding them read: tests/runtime/test_setting_history.py.)"""

import pytest
import torch

from glm53 import ModelConfig
from glm53.model.model import GLM53
from glm53.train.pretrain import pretrain

from ..tiny import TINY
from ..train.test_pretrain import losses, tiny_run


def test_the_lever_is_off_by_default():
    config = ModelConfig()
    assert not config.qk_norm
    assert not any("q_norm" in name for name, _ in GLM53(ModelConfig(**TINY)).named_parameters())


def test_qk_norm_puts_each_heads_q_and_k_at_unit_rms():
    torch.manual_seed(0)
    model = GLM53(ModelConfig(**TINY, qk_norm=True))
    attention = model.layers[0].layer.attention
    x = torch.randn(2, 8, model.config.dim) * 5
    cos, sin = model.rope(8)
    attention.rotary = False  # RoPE keeps the norm of each pair, but look at q and k before it
    q, k, _ = attention.project(x, cos, sin)
    for t in (q, k):
        assert torch.allclose(t.pow(2).mean(-1), torch.ones(t.shape[:-1]), atol=1e-4)


SOFTMAX_ONLY = {**TINY, "sparse_every": 1, "sparse_window": 64}  # every layer softmax attention, as the broad model


@pytest.mark.slow
@pytest.mark.parametrize("base", ["softmax", "reference"])
def test_qk_norm_trains_and_resumes_exactly(tmp_path, base):
    """QK-norm on the broad model's layout (every layer softmax) and on the reference rhythm (linear attention
    layers too)."""
    layout = {**SOFTMAX_ONLY, "sparse_window": 160} if base == "softmax" else dict(TINY)
    model = ModelConfig(**{**layout, "qk_norm": True, "max_sequence_length": 160})
    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(tiny_run(whole, steps=4, checkpoints=(2, 4), model=model), dev_tasks=[], log=lambda *_: None)
    pretrain(tiny_run(part, steps=2, checkpoints=(2,), model=model), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    pretrain(tiny_run(part, steps=4, checkpoints=(2, 4), resume=True, model=model), dev_tasks=[], log=lambda *_: None)
    assert losses(part) == losses(whole)
    plain = tmp_path / "plain"  # the same layout without the lever
    layout_only = ModelConfig(**{**layout, "max_sequence_length": 160})
    pretrain(tiny_run(plain, steps=4, checkpoints=(4,), model=layout_only), dev_tasks=[], log=lambda *_: None)
    assert losses(plain) != losses(whole)  # the switch changes the training
