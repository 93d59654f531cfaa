"""The released model's attention switches: Kimi delta attention, indexer-selected sparse attention, no positions."""

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

from glm53 import GLM53, ModelConfig
from glm53.model.indexer_attention import (choose_blocks, index_scores, indexed_attention_fast, indexed_attention_plain,
                                           indexer_kl, pool_keys, selection_index, selection_mask)
from glm53.model.kimi_delta_attention import (KimiDeltaAttention, causal_conv_fast, causal_conv_plain, kda_fast,
                                              kda_plain, kda_step, unit_lower_inverse)
from tests.tiny import TINY, assert_cached_decoding_matches

SWITCHES = {"kda": dict(linear_attention="kda"), "indexer": dict(sparse_selection="indexer", indexer_top_k=4),
            "indexer-pool": dict(sparse_selection="indexer", indexer_top_k=6, index_pool=3),
            "nope": dict(position="none"),
            "released": dict(linear_attention="kda", sparse_selection="indexer", position="none", indexer_top_k=4)}


def _kda_inputs(B, T, H, d, requires_grad=True):
    q, k = (F.normalize(torch.randn(B, T, H, d, dtype=torch.float64), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, d, dtype=torch.float64)
    g = -5.0 * torch.rand(B, T, H, d, dtype=torch.float64)  # the whole allowed range of log-decay
    beta = torch.rand(B, T, H, dtype=torch.float64)
    return [t.requires_grad_(requires_grad) for t in (q, k, v, g, beta)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 15, 16, 17, 32])
def test_unit_lower_inverse_inverts_i_plus_a_strictly_lower(size):
    A = torch.randn(3, size, size, dtype=torch.float64).tril(-1) / size ** 0.5
    eye = torch.eye(size, dtype=torch.float64)
    expected = torch.linalg.solve_triangular(eye + A, eye.expand(3, size, size), upper=False, unitriangular=True)
    torch.testing.assert_close(unit_lower_inverse(A), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("T,kernel", [(1, 4), (5, 4), (40, 4), (7, 1), (7, 2), (3, 6)])
def test_short_convolution_fast_equals_plain_in_values_and_gradients(T, kernel):
    history = torch.randn(3, T + kernel - 1, 10, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(10, 1, kernel, dtype=torch.float64, requires_grad=True)
    ref, fast = causal_conv_plain(history, weight), causal_conv_fast(history, weight)
    torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(ref)
    expected = torch.autograd.grad(ref, (history, weight), grad)
    for got, want in zip(torch.autograd.grad(fast, (history, weight), grad), expected):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    # under bf16 autocast the fast form computes in fp32 from the bf16 history: closer to fp32 than conv1d in bf16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = history.detach().float().bfloat16()
        fast_bf16, plain_bf16 = causal_conv_fast(low, weight.float()), causal_conv_plain(low, weight.float())
    assert fast_bf16.dtype == torch.float32 and plain_bf16.dtype == torch.bfloat16
    exact = causal_conv_plain(low.double(), weight.detach())
    assert (fast_bf16.double() - exact).abs().max() <= (plain_bf16.double() - exact).abs().max()


@pytest.mark.parametrize("T", [1, 5, 16, 17, 40, 64])
@pytest.mark.parametrize("chunk", [3, 4, 16])
def test_kda_fast_equals_plain_in_values_and_gradients(T, chunk):
    inputs = _kda_inputs(2, T, 3, 8)
    ref, S_ref = kda_plain(*inputs)
    fast, S_fast = kda_fast(*inputs, chunk=chunk)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(S_fast, S_ref, rtol=1e-10, atol=1e-10)
    g_out, g_state = torch.randn_like(ref), torch.randn_like(S_ref)
    grads_ref = torch.autograd.grad((ref * g_out).sum() + (S_ref * g_state).sum(), inputs)
    grads_fast = torch.autograd.grad((fast * g_out).sum() + (S_fast * g_state).sum(), inputs)
    for a, b in zip(grads_fast, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("split", [1, 7, 16])
def test_kda_state_carries_across_calls_and_decoding_steps(split):
    q, k, v, g, beta = _kda_inputs(2, 30, 2, 4, requires_grad=False)
    whole, S_whole = kda_plain(q, k, v, g, beta)
    first, S = kda_fast(q[:, :split], k[:, :split], v[:, :split], g[:, :split], beta[:, :split], chunk=8)
    outputs = [first]
    for t in range(split, 30):  # then one token at a time, in place
        outputs.append(kda_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1], beta[:, t:t + 1], S))
    torch.testing.assert_close(torch.cat(outputs, dim=1), whole)
    torch.testing.assert_close(S, S_whole)


def test_kda_delta_rule_stores_a_key_value_pair_exactly():
    # beta = 1, no decay, orthonormal keys: after writing, reading with the same key returns the value
    d = 4
    k = torch.eye(d, dtype=torch.float64)[None, :, None, :]  # 4 tokens, one key each
    v = torch.randn(1, d, 1, d, dtype=torch.float64)
    out, S = kda_plain(k, k, v, torch.zeros_like(k), torch.ones(1, d, 1, dtype=torch.float64))
    torch.testing.assert_close(out, v)
    # writing the same key again replaces the value (the delta rule), it does not add to it
    v2 = torch.randn(1, 1, 1, d, dtype=torch.float64)
    out2, _ = kda_plain(k[:, :1], k[:, :1], v2, torch.zeros_like(k[:, :1]), torch.ones(1, 1, 1, dtype=torch.float64), S)
    torch.testing.assert_close(out2, v2)


def test_kda_layer_decay_stays_within_its_bounds_and_forgets_slowly_at_the_start():
    cfg = ModelConfig(**TINY, linear_attention="kda")
    layer = KimiDeltaAttention(cfg)
    g = layer.decay(torch.randn(2, 9, cfg.dim) * 10)
    assert (g < 0).all() and (g > cfg.kda_decay_lower_bound).all()
    kept = layer.decay(torch.zeros(1, 1, cfg.dim)).exp()
    assert kept.min() > 0.9 - 1e-6 and kept.max() < 0.999 + 1e-6


def _index_inputs(B, T, J=3, d=4, seed=0):
    torch.manual_seed(seed)
    return torch.randn(B, T, J, d), torch.randn(B, T, J), torch.randn(B, T, d)


@pytest.mark.parametrize("T,top_k", [(1, 4), (6, 4), (30, 4), (30, 32)])
def test_indexer_keeps_its_top_k_earlier_keys_plus_itself(T, top_k):
    q_idx, w, k_idx = _index_inputs(2, T)
    scores = index_scores(q_idx, w, k_idx)
    positions = torch.arange(T).expand(2, T)
    mask = selection_mask(*choose_blocks(scores, positions, 1, top_k), positions, 1, T)
    for b in range(2):
        for t in range(T):
            earlier = sorted(range(t), key=lambda s: -scores[b, t, s].item())[:top_k]
            assert set(torch.nonzero(mask[b, t]).flatten().tolist()) == set(earlier) | {t}


def test_indexer_with_pooling_keeps_whole_earlier_blocks_and_its_own_block():
    T, pool, top_k = 20, 4, 6  # ceil(6 / 4) = 2 blocks
    q_idx, w, k_idx = _index_inputs(1, T)
    block_scores = index_scores(q_idx, w, pool_keys(k_idx, pool))
    torch.testing.assert_close(pool_keys(k_idx, pool)[0, 1], k_idx[0, 4:8].mean(0))
    positions = torch.arange(T).expand(1, T)
    mask = selection_mask(*choose_blocks(block_scores, positions, pool, top_k), positions, pool, T)
    for t in range(T):
        own = t // pool
        best = sorted(range(own), key=lambda b: -block_scores[0, t, b].item())[:2]
        expected = {s for b in best for s in range(b * pool, b * pool + pool)} | set(range(own * pool, t + 1))
        assert set(torch.nonzero(mask[0, t]).flatten().tolist()) == expected


@pytest.mark.parametrize("T,top_k,pool", [(1, 4, 1), (23, 4, 1), (40, 8, 1), (40, 6, 3), (17, 32, 4)])
def test_indexed_attention_fast_equals_plain_in_values_and_gradients(T, top_k, pool):
    q_idx, w, k_idx = _index_inputs(2, T)
    positions = torch.arange(T).expand(2, T)
    chosen, valid = choose_blocks(index_scores(q_idx, w, pool_keys(k_idx, pool)), positions, pool, top_k)
    q, k, v = (torch.randn(2, 3, T, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    ref = indexed_attention_plain(q, k, v, *selection_index(chosen, valid, positions, pool, T))
    fast = indexed_attention_fast(q, k, v, selection_mask(chosen, valid, positions, pool, T))
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    g = torch.randn_like(ref)
    for a, b in zip(torch.autograd.grad(fast, (q, k, v), g), torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_indexer_kl_is_zero_when_the_indexer_matches_the_attention_and_positive_otherwise():
    B, H, T, d = 1, 2, 6, 4
    q, k = torch.randn(B, H, T, d), torch.randn(B, H, T, d)
    causal = torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-1).expand(B, T, T)
    probs = ((q @ k.transpose(-1, -2)) / d ** 0.5).masked_fill(~causal[:, None], float("-inf")).softmax(-1).mean(1)
    matching = probs.clamp_min(1e-30).log().requires_grad_(True)  # softmax over kept blocks of log p = p renormalised
    assert indexer_kl(q, k, causal, matching, earlier, 1).item() == pytest.approx(0.0, abs=1e-6)
    other = torch.randn(B, T, T, requires_grad=True)
    loss = indexer_kl(q, k, causal, other, earlier, 1)
    assert loss.item() > 1e-3
    loss.backward()
    assert other.grad.abs().sum() > 0


def test_only_the_indexer_learns_from_its_kl_and_the_language_loss_never_reaches_it():
    model = GLM53(ModelConfig(**TINY, **SWITCHES["indexer"]))
    logits, aux = model(torch.randint(4, 260, (2, 24)), return_aux=True)
    assert aux.indexer_loss.item() > 0
    indexer = {n for n, _ in model.named_parameters() if ".indexer." in n}
    assert indexer
    grads = torch.autograd.grad(aux.indexer_loss, list(model.parameters()), allow_unused=True)
    for (name, _), grad in zip(model.named_parameters(), grads):
        assert (grad is not None and grad.abs().sum() > 0) == (name in indexer), name
    grads = torch.autograd.grad(logits.square().mean(), list(model.parameters()), allow_unused=True)
    for (name, _), grad in zip(model.named_parameters(), grads):
        if name in indexer:
            assert grad is None or grad.abs().sum() == 0, name


def test_dense_warmup_attends_to_every_earlier_key():
    cfg = ModelConfig(**TINY, sparse_selection="indexer", indexer_top_k=1)
    # a window that covers everything
    dense_reference = ModelConfig(**{**TINY, "sparse_window": 64, "sparse_stride": 64})
    model, full = GLM53(cfg).double(), GLM53(dense_reference).double()
    full.load_state_dict(model.state_dict(), strict=False)  # the same weights; full has no indexer
    ids = torch.randint(4, 260, (2, 30))
    assert not torch.allclose(model(ids), full(ids))
    model.set_indexer_dense(True)
    torch.testing.assert_close(model(ids), full(ids))


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_plain_and_fast_models_agree_with_each_switch(switch):
    cfg = ModelConfig(**TINY, **SWITCHES[switch])
    fast = GLM53(cfg).double()
    with torch.no_grad():  # larger weights than the init, so the attention layers matter to the output
        for p in fast.parameters():
            p.mul_(5.0) if p.dim() > 1 else None
    plain = GLM53(cfg.plain()).double()
    plain.load_state_dict(fast.state_dict())
    ids = torch.randint(4, 260, (2, 37))
    a, b = fast(ids), plain(ids)
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
    ga = torch.autograd.grad(a.square().mean(), list(fast.parameters()), allow_unused=True)
    gb = torch.autograd.grad(b.square().mean(), list(plain.parameters()), allow_unused=True)
    for x, y in zip(ga, gb):
        assert (x is None) == (y is None)
        if x is not None:
            torch.testing.assert_close(x, y, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_cached_decoding_equals_the_full_forward_with_each_switch(switch):
    model = GLM53(ModelConfig(**TINY, **SWITCHES[switch])).double()
    ids = torch.randint(4, 260, (2, 40))
    assert_cached_decoding_matches(model, ids, (9, 21), 15)  # rows at different positions, one token at a time
    full = model(ids)
    # a multi-token continuation from the cache (a prefill after a prefill) agrees as well
    cache = model.new_cache(2, 48)
    model(ids[:, :11], cache=cache)
    torch.testing.assert_close(model(ids[:, 11:35], cache=cache), full[:, 11:35])


def test_released_greedy_decoding_with_the_cache_equals_uncached_greedy():
    from glm53.decode.engine import generate_groups
    from glm53.decode.generate import Sampling, generate_uncached

    model = GLM53(ModelConfig(**TINY, **SWITCHES["released"]))
    prompts = ["def f(x):", "# Return x.\ndef g(x):"]
    sampling = Sampling(max_new_tokens=16)
    assert generate_groups(model, prompts, 2, sampling) == generate_uncached(model, prompts, 2, sampling)


@pytest.mark.parametrize("position", ["rope", "none"])
def test_without_positions_the_prefix_is_a_bag_of_tokens(position):
    # one elu-linear layer: with NoPE nothing tells the last token the order of the earlier ones (its attention
    # sums over them), so its logits cannot change when they are shuffled; with RoPE they do
    model = GLM53(ModelConfig(**{**TINY, "layers": 1}, position=position)).double()
    ids = torch.randint(4, 260, (1, 20))
    shuffled = torch.cat([ids[:, :-1][:, torch.randperm(19)], ids[:, -1:]], dim=1)
    same = torch.allclose(model(ids)[0, -1], model(shuffled)[0, -1], rtol=1e-9, atol=1e-12)
    assert same == (position == "none")


def test_released_attention_parameter_counts():
    counts = GLM53(ModelConfig(linear_attention="kda", sparse_selection="indexer", position="none")).parameter_counts()
    assert counts == {"total": 26_300_598, "active": 10_375_350}  # +475,542 from KDA, +94,464 from the indexers
    assert ModelConfig.named("released").layer_pattern == "LLLSLLLSLLLS"


@pytest.mark.parametrize("field,value,message", [
    ("indexer_top_k", 0, "indexer_top_k"), ("position", "alibi", "position"),
    ("linear_attention", "mamba", "linear_attention"),
    ("sparse_selection", "random", "sparse_selection"), ("index_pool", 0, "index_pool"), ("kda_chunk", 32, "kda_chunk"),
    ("kda_decay_lower_bound", 0.5, "kda_decay_lower_bound"), ("kda_conv_kernel", 0, "kda_conv_kernel")])
def test_bad_switch_values_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message.replace("_", "[_-]")):  # the field, or its flag --field-name
        ModelConfig(**{field: value})


def test_a_checkpoint_with_other_switches_is_refused(tmp_path):
    from glm53.checkpoints.format import load_model, save_checkpoint

    cfg = ModelConfig(**TINY, position="none")
    save_checkpoint(tmp_path / "ckpt", GLM53(cfg), {"step": 0})
    assert load_model(tmp_path / "ckpt", expect=dataclasses.replace(cfg, linear_attention_impl="plain")).verified
    with pytest.raises(ValueError, match="position: 'none' != 'rope'"):
        load_model(tmp_path / "ckpt", expect=ModelConfig(**TINY))
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["position"] == "none"
