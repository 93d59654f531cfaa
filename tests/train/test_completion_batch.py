"""The policy update's two forwards agree: every row in full (plain) and each group's prompt once (fast)."""

import pytest
import torch

from glm53.model.model import GLM53
from glm53.train.completion_batch import PlainCompletionBatch, SharedPrefixBatch, make_completion_batch


def token_logp(batch, model):
    logits = batch.logits(model)
    return logits.float().log_softmax(-1).gather(-1, batch.targets[..., None]).squeeze(-1) * batch.mask


def rows(prompt_lengths, completion_lengths, group_size, seed=0):
    """Groups of `group_size` rows sharing a prompt; completion lengths cycle through the given ones."""
    g = torch.Generator().manual_seed(seed)
    prompts, completions, k = [], [], 0
    for p_len in prompt_lengths:
        prompt = [1] + torch.randint(3, 250, (p_len - 1,), generator=g).tolist()
        for _ in range(group_size):
            c_len = completion_lengths[k % len(completion_lengths)]
            k += 1
            prompts.append(prompt)
            completions.append(torch.randint(3, 250, (c_len,), generator=g).tolist())
    return prompts, completions


@pytest.mark.parametrize("prompt_lengths, completion_lengths, group_size", [
    ([7, 12, 7, 20], [5, 1, 9, 3], 3),   # prompts of equal and different lengths, ragged completions
    ([9, 15], [2], 4),                   # every continuation is one token: the cache's single-step path
    ([9, 15], [1], 2),                   # no continuation at all: only the prompt's last position
    ([30], [17, 33], 2),                 # past the sparse window and the linear-attention chunk
])
def test_shared_prefix_logprobs_and_gradients_equal_the_plain_form(tiny_config, prompt_lengths, completion_lengths,
                                                                    group_size):
    torch.manual_seed(0)
    model = GLM53(tiny_config).train()
    prompts, completions = rows(prompt_lengths, completion_lengths, group_size)
    weights = torch.linspace(-1, 1, len(prompts))
    results = []
    for batch in (PlainCompletionBatch(prompts, completions, "cpu"), SharedPrefixBatch(prompts, completions, "cpu")):
        model.zero_grad()
        logp = token_logp(batch, model)
        (weights[:, None] * logp).sum().backward()
        per_row = [logp[i][batch.mask[i]] for i in range(len(prompts))]
        results.append((per_row, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (plain_rows, plain_grads), (fast_rows, fast_grads) = results
    for a, b, c in zip(plain_rows, fast_rows, completions):
        assert a.shape == b.shape == (len(c),)
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert set(plain_grads) == set(fast_grads)
    for name in plain_grads:
        torch.testing.assert_close(fast_grads[name], plain_grads[name], rtol=1e-3, atol=1e-6, msg=name)


def test_unknown_form_is_refused():
    with pytest.raises(ValueError, match="unknown completion batch form"):
        make_completion_batch("quick", [[1, 2]], [[3]], "cpu")


def test_a_long_prompt_beside_a_long_completion_fits_the_context(tiny_config):
    """Each row fits the context, but the longest prompt (one group) plus the longest completion (another) does
    not: the fast form's layout would need more positions than the model has, so the batch takes the plain form,
    and the update's log-probabilities are the plain form's."""
    context = tiny_config.max_sequence_length
    prompts, completions = rows([context - 4, 6], [3, context - 8], 2)
    completions = [c[:3] if len(p) > 6 else c for p, c in zip(prompts, completions)]
    assert all(len(p) + len(c) - 1 <= context for p, c in zip(prompts, completions))
    assert max(map(len, prompts)) + max(map(len, completions)) - 1 > context
    model = GLM53(tiny_config).eval()
    with pytest.raises(ValueError, match="exceeds max_sequence_length"):
        token_logp(SharedPrefixBatch(prompts, completions, "cpu"), model)
    batch = make_completion_batch("fast", prompts, completions, "cpu", context)
    assert isinstance(batch, PlainCompletionBatch)
    with torch.no_grad():
        torch.testing.assert_close(token_logp(batch, model),
                                   token_logp(PlainCompletionBatch(prompts, completions, "cpu"), model))
    assert isinstance(make_completion_batch("fast", prompts[2:], completions[2:], "cpu", context), SharedPrefixBatch)
