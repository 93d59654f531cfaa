"""The cached engine against the plain uncached generator and the full forward pass."""

import pytest
import torch

from glm53 import GLM53
from glm53.decode.engine import generate_groups
from glm53.decode.generate import Sampling, function_body_complete, generate_uncached
from tests.tiny import assert_cached_decoding_matches

PROMPTS = ["def f(x):", "# Return x.\ndef g(x):", "ab"]


def test_cached_forward_matches_full_forward_for_rows_at_different_positions(tiny_config):
    # row 0 is prefilled with 10 tokens, row 1 with 17, then both decode one token at a time
    assert_cached_decoding_matches(GLM53(tiny_config).double(), torch.randint(4, 260, (2, 30)), (10, 17), 12)


@pytest.mark.parametrize("stop", [None, function_body_complete])
def test_cached_greedy_equals_uncached_greedy(tiny_config, stop):
    model = GLM53(tiny_config)
    cached = generate_groups(model, PROMPTS, group_size=2, sampling=Sampling(max_new_tokens=20), stop=stop)
    plain = generate_uncached(model, PROMPTS, group_size=2, sampling=Sampling(max_new_tokens=20), stop=stop)
    assert cached == plain
    for prompt, group in zip(PROMPTS, cached):
        for s in group:  # every row ended for a reason: the cap, EOS, or the stop rule
            by_rule = stop is not None and stop(prompt, s["completion"])
            assert s["hit_token_cap"] == (len(s["token_ids"]) == 20 and s["token_ids"][-1] != 2 and not by_rule)
            assert s["hit_token_cap"] or s["token_ids"][-1] == 2 or by_rule


def test_sampling_is_reproducible_from_a_seed_and_groups_differ(tiny_config):
    model = GLM53(tiny_config)
    torch.manual_seed(5)
    before = torch.get_rng_state()
    runs = [generate_groups(model, PROMPTS, group_size=4, sampling=Sampling(temperature=1.0, max_new_tokens=12),
                            generator=torch.Generator().manual_seed(11)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert torch.equal(torch.get_rng_state(), before)
    samples = [s["completion"] for s in runs[0][0]]
    assert len(set(samples)) > 1, "samples of a group should differ at temperature 1"


def test_rows_stop_on_eos_or_the_stop_rule():
    from glm53 import ModelConfig

    model = GLM53(ModelConfig(dim=16, layers=4, heads=2, expert_hidden=8, experts=2, top_k=1, max_sequence_length=64))
    with torch.no_grad():
        model.embedding.weight.zero_()
        model.embedding.weight[2] = 1.0  # EOS has the only non-zero row: greedy picks EOS at once
    out = generate_groups(model, ["abc"], group_size=3, sampling=Sampling(max_new_tokens=10))
    assert all(s["token_ids"] == [2] and s["completion"] == "" and not s["hit_token_cap"] for s in out[0])
    assert generate_uncached(model, ["abc"], group_size=3, sampling=Sampling(max_new_tokens=10)) == out


def test_too_long_prompt_is_a_clear_error(tiny_config):
    model = GLM53(tiny_config)
    with pytest.raises(ValueError, match="exceeds max_sequence_length"):
        generate_groups(model, ["x" * 60], sampling=Sampling(max_new_tokens=10))


def test_bf16_decoding_runs_and_is_deterministic(tiny_config):
    model = GLM53(tiny_config)
    runs = [generate_groups(model, PROMPTS, group_size=2, sampling=Sampling(temperature=0.7, max_new_tokens=8),
                            precision="bf16", generator=torch.Generator().manual_seed(3)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert all(len(s["token_ids"]) >= 1 for group in runs[0] for s in group)
    assert model.embedding.weight.dtype == torch.float32  # the caller's model is left as it was


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_finished_rows_waiting_for_a_compaction_change_no_row(tiny_config, monkeypatch, temperature):
    """Rows leave the batch once a quarter has finished (engine.COMPACT_BELOW); leaving at once (1.0, the form before
    it) gives the same rows, sampled ones included: the running rows draw alone, in the same order."""
    from glm53.decode import engine

    model = GLM53(tiny_config)
    # caps from 13 to 40 (fit_context: what the 64-token context leaves), and a stop rule that ends rows at random
    prompts = ["def f(x):", "ab", "x" * 30, "y" * 40, "z" * 45, "x = [" * 5]
    stop = lambda prompt, completion: any(c in completion for c in "aeiou0123456789")  # noqa: E731
    runs = []
    for share in (1.0, engine.COMPACT_BELOW):
        monkeypatch.setattr(engine, "COMPACT_BELOW", share)
        runs.append(generate_groups(model, prompts, group_size=3, stop=stop, fit_context=True,
                                    sampling=Sampling(temperature=temperature, max_new_tokens=40),
                                    generator=torch.Generator().manual_seed(4)))
    assert runs[0] == runs[1]
    lengths = {len(s["token_ids"]) for group in runs[1] for s in group}
    assert len(lengths) > 2  # rows did finish at different steps


def test_a_finished_row_at_the_cache_end_leaves_before_it_would_write_past_it(tiny_config):
    """A long prompt's row ends where the context does (fit_context) while 4 of 5 rows run on: too many for the
    share rule, so it must leave because its next token has no room (the cache holds 64 positions)."""
    model = GLM53(tiny_config)
    prompts = ["x" * 50, "ab", "cd", "ef", "gh"]
    sampling = Sampling(max_new_tokens=20, ignore_eos=True)  # every row runs to its cap
    cached = generate_groups(model, prompts, sampling=sampling, fit_context=True)
    assert [len(group[0]["token_ids"]) for group in cached] == [13, 20, 20, 20, 20]
    assert cached == generate_uncached(model, prompts, sampling=sampling, fit_context=True)
