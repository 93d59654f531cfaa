import dataclasses

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.model.config import IMPL_FIELDS


def test_default_config_has_exact_reference_parameter_counts():
    counts = GLM53(ModelConfig()).parameter_counts()
    assert counts == {"total": 25_730_592, "active": 9_805_344}


def test_layer_pattern_is_three_linear_then_one_sparse():
    cfg = ModelConfig()
    assert cfg.layer_pattern == "LLLSLLLSLLLS"
    model = GLM53(ModelConfig(dim=16, layers=8, heads=2, expert_hidden=8, experts=2, top_k=1))
    assert [block.layer.sparse for block in model.layers] == [False, False, False, True] * 2
    names = [type(block.layer.attention).__name__ for block in model.layers]
    assert names[:4] == ["LinearAttention"] * 3 + ["SparseAttention"]


def test_forward_shapes_and_aux(tiny_config):
    model = GLM53(tiny_config)
    ids = torch.randint(4, 260, (2, 12))
    logits, aux = model(ids, return_aux=True)
    assert logits.shape == (2, 12, 260)
    assert aux.expert_usage.shape == (tiny_config.layers, tiny_config.experts)
    torch.testing.assert_close(aux.expert_usage.sum(dim=1), torch.ones(tiny_config.layers))
    assert aux.balance_loss.ndim == 0 and aux.balance_loss.item() >= 1.0 - 1e-6
    assert torch.equal(model(ids), logits)


@pytest.mark.parametrize("plain", [False, True])
def test_changing_later_tokens_never_changes_earlier_logits(tiny_config, plain):
    cfg = tiny_config.plain() if plain else tiny_config
    model = GLM53(cfg)
    ids = torch.randint(4, 260, (2, 40))
    changed = ids.clone()
    changed[:, 25:] = torch.randint(4, 260, (2, 15))
    a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :25], b[:, :25], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, 25:], b[:, 25:])


def test_fast_and_plain_kernels_give_the_same_model_output(tiny_config):
    fast = GLM53(tiny_config)
    plain = GLM53(tiny_config.plain())
    assert {getattr(plain.config, name) for name in IMPL_FIELDS} == {"plain"}
    plain.load_state_dict(fast.state_dict())
    ids = torch.randint(4, 260, (3, 50))
    torch.testing.assert_close(fast(ids), plain(ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("top_k", [1, 2])
def test_balance_loss_gradient_reaches_every_router(tiny_config, top_k):
    model = GLM53(dataclasses.replace(tiny_config, top_k=top_k))
    _, aux = model(torch.randint(4, 260, (2, 16)), return_aux=True)
    aux.balance_loss.backward()
    for i, block in enumerate(model.layers):
        grad = block.layer.moe.router.weight.grad
        assert grad is not None, f"layer {i}: router has no gradient"
        assert torch.all(grad.abs().sum(dim=1) > 0), f"layer {i}: some expert's router row has zero gradient"


def test_save_load_round_trip_gives_equal_logits(tiny_config, tmp_path):
    model = GLM53(tiny_config)
    ids = torch.randint(4, 260, (2, 20))
    model.save_pretrained(tmp_path)
    loaded = GLM53.from_pretrained(tmp_path, strict=True)
    assert loaded.config == tiny_config
    assert torch.equal(model(ids), loaded(ids))
    # the head is the embedding itself, also after the round trip: a change to one embedding row moves the
    # logit of that token and no other at a position whose final hidden state is unchanged
    assert [name for name, _ in loaded.named_parameters() if "embedding" in name] == ["embedding.weight"]
    hidden = loaded.final_norm(torch.randn(1, 1, tiny_config.dim))
    before = torch.nn.functional.linear(hidden, loaded.embedding.weight)
    with torch.no_grad():
        loaded.embedding.weight[5].add_(1.0)
    after = torch.nn.functional.linear(hidden, loaded.embedding.weight)
    changed = (after - before).abs()[0, 0] > 0
    assert changed.nonzero().flatten().tolist() == [5]
    assert not torch.equal(model(ids), loaded(ids))


def test_single_stream_is_a_plain_residual_network(tiny_config):
    model = GLM53(dataclasses.replace(tiny_config, streams=1))
    ids = torch.randint(4, 260, (1, 10))
    x = model.embedding(ids)
    cos, sin = model.rope(10)
    for block in model.layers:
        update, *_ = block.layer(x, cos, sin)
        x = x + update
    expected = torch.nn.functional.linear(model.final_norm(x), model.embedding.weight)
    torch.testing.assert_close(model(ids), expected)


@pytest.mark.parametrize("impl", ["plain", "fast"])
@pytest.mark.parametrize("double", [False, True])
def test_hyper_connection_writes_the_update_or_input_plus_update(tiny_config, double, impl):
    from glm53.model.hyper_connections import HyperConnection

    layer = lambda x: (2 * x + 1, "aux")  # noqa: E731 - a stand-in block with a known update
    hc = HyperConnection(3, layer, double_residual=double, impl=impl)
    streams = torch.randn(3, 2, 5, 4)  # [S, B, T, D]
    out, aux = hc(streams)
    read, write = hc.input_logits.softmax(0), hc.output_logits.softmax(0)
    mixed = sum(read[s] * streams[s] for s in range(3))
    written = (mixed + 2 * mixed + 1) if double else (2 * mixed + 1)
    torch.testing.assert_close(out, torch.stack([streams[s] + write[s] * written for s in range(3)]))
    assert aux == "aux"


def test_checkpoints_with_the_old_kernel_names_still_load(tiny_config):
    old = {**tiny_config.to_dict(), "linear_attention_impl": "cumulative", "sparse_attention_impl": "masked",
           "moe_impl": "grouped"}
    cfg = ModelConfig.from_dict(old)
    assert (cfg.linear_attention_impl, cfg.sparse_attention_impl, cfg.moe_impl) == ("plain", "fast", "fast")


def test_bad_inputs_get_clear_errors(tiny_config):
    model = GLM53(tiny_config)
    with pytest.raises(ValueError, match="input_ids must lie in"):
        model(torch.tensor([[5, 400]]))
    with pytest.raises(ValueError, match="exceeds max_sequence_length"):
        model(torch.randint(4, 260, (1, tiny_config.max_sequence_length + 1)))
    with pytest.raises(ValueError, match="divisible by heads"):
        ModelConfig(dim=30, heads=4)
    with pytest.raises(ValueError, match="top_k"):
        ModelConfig(top_k=9)
