import pytest
import torch

from glm53 import GLM53
from glm53.decode.generate import Sampling, function_body_complete, generate_uncached, sample_next


def test_stop_rule_ends_after_the_first_complete_statement():
    prompt = "def f(x):"
    assert not function_body_complete(prompt, "\n    return x")
    assert function_body_complete(prompt, "\n    return x + 1\n")
    assert not function_body_complete(prompt, "\n    return (x\n")
    assert not function_body_complete(prompt, "\n")


def test_sampling_is_reproducible_from_a_generator_and_leaves_global_rng_alone(tiny_config):
    model = GLM53(tiny_config)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    runs = [generate_uncached(model, ["def f(x):"], sampling=Sampling(temperature=1.0, max_new_tokens=8),
                              generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert torch.equal(torch.get_rng_state(), before)
    other = generate_uncached(model, ["def f(x):"], sampling=Sampling(temperature=1.0, max_new_tokens=8),
                              generator=torch.Generator().manual_seed(8))
    assert other != runs[0]


def test_generation_never_emits_banned_ids(tiny_config):
    model = GLM53(tiny_config)
    out = generate_uncached(model, ["x"], sampling=Sampling(temperature=5.0, max_new_tokens=20),
                            generator=torch.Generator().manual_seed(0))
    assert not set(out[0][0]["token_ids"]) & {0, 1, 3, 260, 261, 262}


def test_top_k_and_top_p_restrict_the_candidates():
    logits = torch.tensor([[5.0, 4.0, 0.0, -1.0]])
    g = torch.Generator().manual_seed(0)
    picks = {int(sample_next(logits, Sampling(temperature=1.0, top_k=2), g)) for _ in range(200)}
    assert picks == {0, 1}
    picks = {int(sample_next(logits, Sampling(temperature=1.0, top_p=0.5), g)) for _ in range(200)}
    assert picks == {0}
    assert int(sample_next(logits, Sampling(), None)) == 0


@pytest.mark.parametrize("settings, message", [
    ({"temperature": -0.5}, "--temperature must be >= 0"), ({"top_k": 0}, "--top-k must be >= 1"),
    ({"top_p": 5.0}, "--top-p must be <= 1"), ({"top_p": 0.0}, "--top-p must be > 0"),
    ({"max_new_tokens": 0}, "--max-new-tokens must be >= 1"),
])
def test_sampling_settings_are_validated(settings, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**settings)


def test_the_stop_rule_parses_odd_literals_without_warning_on_stderr():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert function_body_complete("def f(x):\n    return", " 1if x else 2\n")
    assert not [w for w in caught if issubclass(w.category, SyntaxWarning)]
