"""The speedrun's model levers (docs/speedrun.md): QK-norm, zero-initialised output projections, the experts'
ReLU-squared gate and value embeddings. Each does what it says on a tiny model, is off by default, and trains and
resumes exactly."""

import dataclasses

import pytest
import torch

from glm53 import ModelConfig
from glm53.model.model import GLM53
from glm53.model.moe import MixtureOfExperts, swiglu
from glm53.train.pretrain import pretrain

from ..tiny import TINY, assert_cached_decoding_matches
from ..train.test_pretrain import losses, tiny_run


def test_the_levers_are_off_by_default():
    config = ModelConfig()
    assert not config.qk_norm and not config.zero_init_projections and config.expert_activation == "silu"
    assert config.value_embeddings == 0
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


def test_zero_init_makes_every_block_start_as_the_identity():
    torch.manual_seed(0)
    plain, zeroed = GLM53(ModelConfig(**TINY)), GLM53(ModelConfig(**TINY, zero_init_projections=True))
    x = torch.randint(4, 200, (2, 12))
    # with every block's update zero, the logits are those of the embedding through the final norm and the head
    hidden = zeroed.final_norm(zeroed.embedding(x))
    assert torch.allclose(zeroed(x), hidden @ zeroed.head_weight.T, atol=1e-5)
    assert not torch.allclose(plain(x), plain.final_norm(plain.embedding(x)) @ plain.head_weight.T, atol=1e-3)


def test_relu2_gates_with_relu_squared_and_its_fast_form_equals_the_plain_one():
    torch.manual_seed(0)
    config = ModelConfig(**TINY, expert_activation="relu2")
    fast = MixtureOfExperts(config).double()
    plain = MixtureOfExperts(dataclasses.replace(config, moe_impl="plain")).double()
    plain.load_state_dict(fast.state_dict())
    x = torch.randn(2, 7, config.dim, dtype=torch.float64)
    assert torch.allclose(fast(x)[0], plain(x)[0], atol=1e-10)
    # one expert by hand: down(relu(gate)^2 * value), and it differs from SwiGLU on the same weights
    up, down = fast.expert_up[0], fast.expert_down[0]
    gate, value = (x[0] @ up.T).chunk(2, dim=-1)
    by_hand = (torch.relu(gate) ** 2 * value) @ down.T
    assert torch.allclose(swiglu(x[0], up, down, "relu2"), by_hand, atol=1e-10)
    assert not torch.allclose(swiglu(x[0], up, down), by_hand, atol=1e-6)


SOFTMAX_ONLY = {**TINY, "sparse_every": 1, "sparse_window": 64}  # every layer softmax attention, as the broad model


def test_value_embeddings_add_a_token_table_to_the_first_layers_values():
    torch.manual_seed(0)
    plain = GLM53(ModelConfig(**SOFTMAX_ONLY))
    with_tables = GLM53(ModelConfig(**SOFTMAX_ONLY, value_embeddings=2))
    assert [name for name, _ in with_tables.named_parameters() if "value_embeddings" in name] == [
        "value_embeddings.0.weight", "value_embeddings.1.weight"]
    with_tables.load_state_dict(plain.state_dict(), strict=False)
    x = torch.randint(4, 200, (2, 12))
    for table in with_tables.value_embeddings:
        torch.nn.init.zeros_(table.weight)
    assert torch.allclose(with_tables(x), plain(x), atol=1e-6)  # zero tables: the model without them
    for table in with_tables.value_embeddings:  # each table reaches the model on its own
        torch.nn.init.normal_(table.weight)
        assert not torch.allclose(with_tables(x), plain(x), atol=1e-3)
        torch.nn.init.zeros_(table.weight)
    # layer 2 has no table: its values are its projection's alone
    assert len(with_tables.value_embeddings) == 2 and with_tables.config.layers == 4
    for table in with_tables.value_embeddings:
        torch.nn.init.normal_(table.weight)
    assert_cached_decoding_matches(with_tables, torch.randint(4, 200, (2, 32)))  # the cached path adds them too


def test_value_embeddings_are_refused_where_they_cannot_apply():
    with pytest.raises(ValueError, match="reach layer 0, a linear attention layer: set --sparse-every 1"):
        ModelConfig(**TINY, value_embeddings=1)  # layer 0 is linear attention in the reference rhythm
    with pytest.raises(ValueError, match="--sparse-selection fixed"):
        ModelConfig(**SOFTMAX_ONLY, value_embeddings=1, sparse_selection="indexer")
    with pytest.raises(ValueError, match="at most layers"):
        ModelConfig(**SOFTMAX_ONLY, value_embeddings=5)
    with pytest.raises(ValueError, match="input_ids"):
        GLM53(ModelConfig(**SOFTMAX_ONLY, value_embeddings=1))(inputs_embeds=torch.zeros(1, 3, 32))


def test_value_embeddings_are_not_decayed_like_the_embedding():
    from glm53.train.optimizers import decay_groups

    model = GLM53(ModelConfig(**SOFTMAX_ONLY, value_embeddings=2))
    decayed = {id(p) for p in decay_groups(model, 0.1)[0]["params"]}
    assert not any(id(t.weight) in decayed for t in model.value_embeddings)
    assert id(model.embedding.weight) not in decayed and id(model.layers[0].layer.attention.qkv.weight) in decayed


@pytest.mark.parametrize("base", ["softmax", "reference"])
def test_the_levers_train_and_resume_exactly(tmp_path, base):
    """Every lever at once on the broad model's layout (every layer softmax), and QK-norm, zero init and ReLU2 on the
    reference rhythm (linear attention layers too; value embeddings need softmax layers)."""
    layout = ({**SOFTMAX_ONLY, "sparse_window": 160, "value_embeddings": 2} if base == "softmax" else dict(TINY))
    levers = {"qk_norm": True, "zero_init_projections": True, "expert_activation": "relu2"}
    model = ModelConfig(**{**layout, **levers, "max_sequence_length": 160})
    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(tiny_run(whole, steps=4, checkpoints=(2, 4), model=model), dev_tasks=[], log=lambda *_: None)
    pretrain(tiny_run(part, steps=2, checkpoints=(2,), model=model), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    pretrain(tiny_run(part, steps=4, checkpoints=(2, 4), resume=True, model=model), dev_tasks=[], log=lambda *_: None)
    assert losses(part) == losses(whole)
    plain = tmp_path / "plain"  # the same layout without the levers
    layout_only = ModelConfig(**{**layout, "value_embeddings": 0, "max_sequence_length": 160})
    pretrain(tiny_run(plain, steps=4, checkpoints=(4,), model=layout_only), dev_tasks=[], log=lambda *_: None)
    assert losses(plain) != losses(whole)  # the switches change the training
