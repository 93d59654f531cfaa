"""The released model's streams, router and head as switches: mHC, sigmoid routing with bias balancing, untied head."""

import dataclasses

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.model.hyper_connections import HyperConnection
from glm53.model.manifold_hyper_connections import ManifoldHyperConnection, composite_gain, sinkhorn_knopp
from glm53.model.moe import MixtureOfExperts
from tests.tiny import TINY, assert_cached_decoding_matches

SWITCHES = {"mhc": dict(residual="mhc"), "sigmoid-bias": dict(router="sigmoid-bias"),
            "untied": dict(tie_embeddings=False)}


def test_sinkhorn_gives_doubly_stochastic_matrices():
    logits = torch.randn(50, 4, 4)
    row_error = {}
    for iterations in (1, 5, 20):
        m = sinkhorn_knopp(logits, iterations)
        assert (m > 0).all()
        torch.testing.assert_close(m.sum(-2), torch.ones(50, 4))  # columns are normalised last: exact
        row_error[iterations] = float((m.sum(-1) - 1).abs().max())
    assert row_error[20] < 1e-4 and row_error[20] < row_error[5] < row_error[1]


def test_mhc_with_identity_mixing_and_static_weights_is_todays_hyper_connection():
    torch.manual_seed(0)
    S, D = 4, 8
    block = lambda x: (torch.tanh(x) * 2.0, torch.tensor(0.5))  # noqa: E731 - any layer returning (update, aux)
    hc = HyperConnection(S, block)
    mhc = ManifoldHyperConnection(S, D, block, iterations=3)
    with torch.no_grad():
        mhc.gates.zero_()  # static: no input-dependent part
        read, write = hc.input_logits.softmax(0), hc.output_logits.softmax(0)
        mhc.pre_bias.copy_(torch.logit(read - 1e-6))
        mhc.post_bias.copy_(torch.logit(write / 2))
        mhc.res_bias.copy_(torch.full((S, S), -1e4).fill_diagonal_(0.0))  # exp() is the identity
    streams = torch.randn(2, 5, S, D)  # mHC holds its streams token-major, today's stream-major
    (a, aux_a), (b, aux_b) = hc(streams.permute(2, 0, 1, 3)), mhc(streams)
    torch.testing.assert_close(b, a.permute(1, 2, 0, 3))
    assert aux_a == aux_b


def test_mhc_gradients_stay_finite_over_a_long_stack_and_the_composite_gain_stays_one():
    cfg = ModelConfig(**{**TINY, "layers": 24}, residual="mhc")
    model = GLM53(cfg)
    with torch.no_grad():  # large input-dependent mixing, far from the gentle initialisation
        for layer in model.layers:
            layer.gates.fill_(3.0)
    ids = torch.randint(4, 260, (2, 20))
    model(ids).logsumexp(-1).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    gain = composite_gain(model, ids)
    assert gain["layers"] == 24 and gain["max"] == pytest.approx(1.0, abs=1e-3)
    assert gain["unconstrained_mean"] > 10  # without the projection the same 24 mixings grow with depth
    assert composite_gain(GLM53(ModelConfig(**TINY)), ids) == {"layers": 0, "mean": 1.0, "max": 1.0,
                                                              "unconstrained_mean": 1.0, "unconstrained_max": 1.0}


def _moe(**over) -> MixtureOfExperts:
    torch.manual_seed(0)
    return MixtureOfExperts(ModelConfig(**{**TINY, **over}, router="sigmoid-bias"))


def test_the_selection_bias_changes_which_experts_are_chosen_but_never_the_gradient():
    moe = _moe()
    x = torch.randn(64, TINY["dim"])
    chosen = moe.route(x)[0]
    with torch.no_grad():
        moe.selection_bias[int(chosen[0, 0])] = -10.0  # that expert can no longer win
    assert not torch.equal(moe.route(x)[0], chosen)
    # a bias that keeps the same choice (the same shift for every expert) leaves every gradient as it was
    grads = []
    for shift in (0.0, 0.3):
        moe.zero_grad()
        with torch.no_grad():
            moe.selection_bias.fill_(shift)
        out, _, _ = moe(x[None])
        out.square().sum().backward()
        grads.append([p.grad.clone() for p in moe.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert "selection_bias" not in dict(moe.named_parameters())


def test_bias_balancing_evens_out_a_skewed_load():
    moe = _moe(top_k=1, experts=4)
    moe.router_kind, moe.bias_rate = "sigmoid-bias", 0.01
    x = torch.randn(256, TINY["dim"]) + 20.0 * moe.router.weight[0]  # inputs that mostly prefer expert 0

    def spread():
        with torch.no_grad():
            usage = moe.route(x)[3]
        return float(usage.std() / usage.mean())

    before = spread()
    for _ in range(300):
        moe.route(x)  # a training forward (gradients on) counts the load
        moe.update_selection_bias()
    assert before > 1.0 and spread() < 0.25 * before, (before, spread())


def test_sigmoid_router_weights_are_renormalised_unbiased_scores_times_the_scale():
    moe = _moe(router_scale=2.5)
    x = torch.randn(10, TINY["dim"])
    with torch.no_grad():
        moe.selection_bias.copy_(torch.tensor([0.5, -0.5, 0.0, 0.2]))
        idx, weights, balance, _ = moe.route(x)
    scores = torch.sigmoid(moe.router(x)).gather(-1, idx)
    torch.testing.assert_close(weights, 2.5 * scores / scores.sum(-1, keepdim=True))
    assert balance.item() == 0.0


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_plain_and_fast_forms_and_cached_decoding_agree_with_each_switch(switch):
    cfg = ModelConfig(**TINY, **SWITCHES[switch])
    model = GLM53(cfg).double()
    plain = GLM53(cfg.plain()).double()
    plain.load_state_dict(model.state_dict())
    ids = torch.randint(4, 260, (2, 30))
    full = model(ids)
    torch.testing.assert_close(plain(ids), full, rtol=1e-9, atol=1e-9)
    assert_cached_decoding_matches(model, ids, (7, 15), 12)


def test_untied_head_is_its_own_tensor_and_counted():
    tied, untied = GLM53(ModelConfig(**TINY)), GLM53(ModelConfig(**TINY, tie_embeddings=False))
    assert untied.parameter_counts()["total"] - tied.parameter_counts()["total"] == 260 * TINY["dim"]
    assert untied.head.weight.data_ptr() != untied.embedding.weight.data_ptr() and tied.head is None


def test_released_preset_counts_and_the_info_line(capsys):
    from glm53.cli import main

    assert GLM53(ModelConfig.named("released")).parameter_counts() == {"total": 28_848_320, "active": 11_595_968}
    assert main(["info", "--preset", "released"]) == 0
    out = capsys.readouterr().out
    assert "28,848,320 total" in out and "+3,117,728 (+12.1%)" in out and "mtp_depth=1" in out
    assert main(["info", "--residual", "mhc"]) == 0 and "+230,628 (+0.9%) from residual=mhc" in capsys.readouterr().out


@pytest.mark.slow
def test_router_bias_is_saved_and_pretraining_resumes_exactly(tmp_path):
    from glm53.checkpoints.format import read_metadata
    from glm53.train.pretrain import pretrain
    from glm53.train.pretrain_config import PretrainConfig

    def run(out, steps, checkpoints, **kw):
        model = ModelConfig(**{**TINY, "max_sequence_length": 160}, router="sigmoid-bias", residual="mhc",
                            tie_embeddings=False, router_bias_rate=0.05)
        return PretrainConfig(out=str(out), steps=steps, checkpoints=checkpoints, batch_size=3, sequence_length=128,
                              lr=1e-3, progress=False, device="cpu", model=model, **kw)

    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(run(whole, 4, (2, 4)), dev_tasks=[], log=lambda *_: None)
    pretrain(run(part, 2, (2,)), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    pretrain(run(part, 4, (2, 4), resume=True), dev_tasks=[], log=lambda *_: None)
    assert (read_metadata(part / "checkpoint-0004")["weights_sha256"]
            == read_metadata(whole / "checkpoint-0004")["weights_sha256"])
    from glm53.checkpoints.format import load_model

    biases = [layer.layer.moe.selection_bias for step in ("0002", "0004")
              for layer in load_model(whole / f"checkpoint-{step}").model.layers]
    assert max(float(b.abs().max()) for b in biases) > 0  # the biases moved, and were saved


@pytest.mark.parametrize("field,value", [("sinkhorn_iterations", 0), ("router_bias_rate", -0.1), ("router", "softmax"),
                                         ("residual", "dense"), ("router_scale", 0.0), ("tie_embeddings", "no")])
def test_bad_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=field.replace("_", "[_-]")):  # the field, or its flag --field-name
        ModelConfig(**{field: value})


def test_rl_balances_only_the_routers_it_trains():
    from glm53.train.rl_update import set_train_scope

    model = GLM53(ModelConfig(**TINY, router="sigmoid-bias"))
    set_train_scope(model, "last-block")
    model(torch.randint(4, 260, (2, 12))).sum().backward()
    model.update_router_biases()
    moved = [bool(layer.layer.moe.selection_bias.any()) for layer in model.layers]
    assert moved == [False] * (TINY["layers"] - 1) + [True]
    assert dataclasses.asdict(model.config)["router"] == "sigmoid-bias"
