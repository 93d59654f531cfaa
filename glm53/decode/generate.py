"""Plain generation: re-run the model over the whole prefix for every new token (no cache).

This is the readable reference that the cached engine (engine.py) must agree with token for token. It samples
from an explicit `torch.Generator` and never touches the global RNG. The shared pieces (the stop rule for
one-function tasks, the sampler, the result record) live here too; `Sampling`, the rules, in sampling.py.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable

import torch

from ..data.tokenizer import ByteTokenizer
from ..model.model import GLM53
from .sampling import Sampling  # noqa: F401 - also imported from here

StopRule = Callable[[str, str], bool]  # (prompt, completion so far) -> stop now?


def function_body_complete(prompt: str, completion: str) -> bool:
    """Stop rule for one-function tasks: the completion ends a line, is not blank, and prompt + completion
    parses as Python. This ends a body after its first complete statement, as the reference did."""
    if not completion.endswith("\n") or not completion.strip():
        return False
    try:
        # odd literals in sampled code ("1if x") make Python warn on stderr; the rule only asks whether it parses
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            ast.parse(prompt + completion)
    except (SyntaxError, ValueError):
        return False
    return True


def sample_next(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> torch.Tensor:
    """logits [N, V] (banned ids already -inf) -> token ids [N]. temperature 0 means greedy."""
    temperature, top_k, top_p = sampling.temperature, sampling.top_k, sampling.top_p
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k is not None and 0 < top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        # drop a token when the tokens ranked above it already reach top_p (the first always survives)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)


def banned_ids(model: GLM53, tokenizer: ByteTokenizer, ignore_eos: bool = False) -> list[int]:
    banned = tokenizer.banned_generation_ids + ((tokenizer.eos_id,) if ignore_eos else ())
    return [i for i in banned if i < model.config.vocab_size]


def check_lengths(model: GLM53, encoded: list[list[int]], max_new_tokens: int) -> int:
    longest = max(len(e) for e in encoded)
    if longest + max_new_tokens > model.config.max_sequence_length:
        raise ValueError(f"prompt of {longest} tokens + max_new_tokens {max_new_tokens} exceeds "
                         f"max_sequence_length {model.config.max_sequence_length}")
    return longest + max_new_tokens


def result_record(tokenizer: ByteTokenizer, token_ids: list[int], stopped: bool, max_new_tokens: int) -> dict:
    return {"completion": tokenizer.decode(token_ids), "token_ids": token_ids,
            "hit_token_cap": not stopped and len(token_ids) == max_new_tokens}


@torch.no_grad()
def generate_uncached(model: GLM53, prompts: list[str], group_size: int = 1, sampling: Sampling = Sampling(),
                      generator: torch.Generator | None = None, stop: StopRule | None = None,
                      tokenizer: ByteTokenizer | None = None) -> list[list[dict]]:
    """For each prompt, `group_size` completions: [[{"completion", "token_ids", "hit_token_cap"}, ...], ...].

    A row stops at EOS (kept in token_ids, cut from the text) or when `stop(prompt, completion)` is true;
    `sampling.ignore_eos` bans EOS instead, so every row runs to the token cap (for benchmarks). The
    G rows of one prompt run as a batch that is recomputed in full at every step; finished rows ride along
    until all are done, as in the reference.
    """
    tokenizer = tokenizer or ByteTokenizer()
    max_new_tokens = sampling.max_new_tokens
    banned = banned_ids(model, tokenizer, sampling.ignore_eos)
    was_training = model.training
    model.eval()
    results = []
    try:
        for prompt in prompts:
            ids = tokenizer.encode(prompt, bos=True)
            check_lengths(model, [ids], max_new_tokens)
            sequence = torch.tensor([ids] * group_size, device=model.device)
            new: list[list[int]] = [[] for _ in range(group_size)]
            done = [False] * group_size
            for _ in range(max_new_tokens):
                logits = model(sequence)[:, -1].float()
                logits[:, banned] = float("-inf")
                tokens = sample_next(logits, sampling, generator)
                sequence = torch.cat([sequence, tokens[:, None]], dim=1)
                for r, t in enumerate(tokens.tolist()):
                    if done[r]:
                        continue
                    new[r].append(t)
                    if t == tokenizer.eos_id or (stop is not None and stop(prompt, tokenizer.decode(new[r]))):
                        done[r] = True
                if all(done):
                    break
            results.append([result_record(tokenizer, new[r], done[r], max_new_tokens) for r in range(group_size)])
    finally:
        model.train(was_training)
    return results
