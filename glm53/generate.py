"""Plain generation: re-run the model over the whole prefix for every new token (no cache).

This is the readable reference that a cached engine must agree with token for token. It samples from an
explicit `torch.Generator` and never touches the global RNG.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import torch

from .model import GLM53
from .tokenizer import ByteTokenizer

StopRule = Callable[[str, str], bool]  # (prompt, completion so far) -> stop now?


def function_body_complete(prompt: str, completion: str) -> bool:
    """Stop rule for one-function tasks: the completion ends a line, is not blank, and prompt + completion
    parses as Python. This ends a body after its first complete statement, as the reference did."""
    if not completion.endswith("\n") or not completion.strip():
        return False
    try:
        ast.parse(prompt + completion)
    except (SyntaxError, ValueError):
        return False
    return True


def sample_next(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None,
                generator: torch.Generator | None) -> torch.Tensor:
    """logits [N, V] (banned ids already -inf) -> token ids [N]. temperature 0 means greedy."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k > 0 and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # drop a token when the tokens ranked above it already reach top_p (the first always survives)
        drop_sorted = (cumulative - sorted_logits.softmax(dim=-1)) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate_uncached(model: GLM53, prompts: list[str], max_new_tokens: int = 48, temperature: float = 0.0,
                      top_k: int | None = None, top_p: float | None = None,
                      generator: torch.Generator | None = None, stop: StopRule | None = None,
                      tokenizer: ByteTokenizer | None = None) -> list[dict]:
    """Complete each prompt. Returns per prompt {"completion", "token_ids", "hit_token_cap"}.

    A row stops at EOS (kept in token_ids, cut from the text) or when `stop(prompt, completion)` is true.
    Prompts of different lengths are run one row at a time, since there is no padding mask here.
    """
    tokenizer = tokenizer or ByteTokenizer()
    was_training = model.training
    model.eval()
    results = []
    banned = torch.tensor([i for i in tokenizer.banned_generation_ids if i < model.config.vocab_size])
    try:
        for prompt in prompts:
            ids = tokenizer.encode(prompt, bos=True)
            if len(ids) + max_new_tokens > model.config.max_sequence_length:
                raise ValueError(f"prompt of {len(ids)} tokens + max_new_tokens {max_new_tokens} exceeds "
                                 f"max_sequence_length {model.config.max_sequence_length}")
            sequence = torch.tensor([ids], device=model.device)
            new: list[int] = []
            stopped = False
            for _ in range(max_new_tokens):
                logits = model(sequence)[:, -1].float()
                logits[:, banned] = float("-inf")
                token = sample_next(logits, temperature, top_k, top_p, generator)
                new.append(int(token))
                sequence = torch.cat([sequence, token.view(1, 1).to(sequence.device)], dim=1)
                if new[-1] == tokenizer.eos_id or (stop is not None and stop(prompt, tokenizer.decode(new))):
                    stopped = True
                    break
            results.append({"completion": tokenizer.decode(new), "token_ids": new,
                            "hit_token_cap": not stopped and len(new) == max_new_tokens})
    finally:
        model.train(was_training)
    return results
