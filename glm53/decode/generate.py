"""Plain generation: re-run the model over the whole prefix for every new token (no cache).

This is the readable reference that the cached engine (engine.py) must agree with token for token. It samples
from an explicit `torch.Generator` and never touches the global RNG. The shared pieces (the stop rules for
one-function tasks, the sampler, the result record) live here too; `Sampling`, in sampling.py.

Two stop rules, one a task suite names (glm53/data/suites.py):
- `statement` (`function_body_complete`, the reference suite's): stop after the body's first complete statement;
- `function` (`function_ended`, the broad suite's multi-line bodies): stop where the function ends, at the first
  line after the def line that is not indented (blank lines before it are dropped), or at EOS or the token cap.
  That line's first character has been generated when the rule sees it: `cut_to_function` removes it (and the
  blank lines before it) from the completion and its token ids.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable

import torch

from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
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
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # a line nested past the parser's limits ("1+1+...+1" thousands deep) does not end the body: generation
        # goes on to its cap and the verifier judges the program, as it judges any that does not compile
        return False
    return True


def function_end(completion: str) -> int | None:
    """Where the function that `completion` continues (after its def line) ends: the index just past the last
    line before the first line that starts with a character other than a space, a tab or a newline (blank lines
    just before that line are left out); None while no such line has begun."""
    start = 0
    while True:
        newline = completion.find("\n", start)
        if newline < 0 or newline + 1 >= len(completion):
            return None
        if completion[newline + 1] not in " \t\n":
            body = completion[: newline + 1]
            stripped = body.rstrip("\n")
            return len(stripped) + 1 if stripped else 0
        start = newline + 1


def function_ended(prompt: str, completion: str) -> bool:
    """Stop rule for multi-line bodies (the broad suite): the function has ended (see `function_end`)."""
    return function_end(completion) is not None


def cut_to_function(record: dict, tokenizer=None) -> dict:
    """A record stopped by `function_ended`, cut to the function: the dedented line's first character and the
    blank lines before it leave the completion and the token ids. Other records are returned as they are.

    With the byte tokenizer (the default) each dropped character is one token: a newline, or one character that a
    lone byte decodes to. A byte-pair tokenizer (data/bpe_tokenizer.py) starts a token at every newline, so the
    dedented line arrives as one token with its newline ("\\nde"): the ids kept are the longest prefix whose bytes
    fit in the function's text, and the completion is their text, so decode(token_ids) == completion (what RL
    trains on is what the verifier judged). That text may lack the function's last newline, which changes no
    program."""
    end = function_end(record["completion"])
    if end is None:
        return record
    id_bytes = getattr(tokenizer, "id_bytes", None)
    if id_bytes is None:
        dropped = len(record["completion"]) - end
        return {**record, "completion": record["completion"][:end], "token_ids": record["token_ids"][:-dropped]}
    limit = len(record["completion"][:end].encode("utf-8", errors="surrogatepass"))
    kept, size = [], 0
    for token in record["token_ids"]:
        size += len(id_bytes[token])
        if size > limit:
            break
        kept.append(token)
    return {**record, "completion": tokenizer.decode(kept), "token_ids": kept}


STOP_RULES = {"statement": function_body_complete, "function": function_ended}


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
    probs = logits.softmax(dim=-1)
    if not bool(torch.isfinite(probs).all()):  # multinomial would say only "probability tensor contains inf"
        raise ValueError("the model's next-token scores are not finite (inf or NaN), so no token can be drawn: its "
                         "weights or activations overflow; try --precision fp32, or a checkpoint saved before the "
                         "training loss diverged")
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def banned_ids(model: GLM53, tokenizer: Tokenizer, ignore_eos: bool = False) -> list[int]:
    banned = tokenizer.banned_generation_ids + ((tokenizer.eos_id,) if ignore_eos else ())
    return [i for i in banned if i < model.config.vocab_size]


def check_lengths(model: GLM53, encoded: list[list[int]], max_new_tokens: int) -> int:
    longest = max(len(e) for e in encoded)
    if longest + max_new_tokens > model.config.max_sequence_length:
        raise ValueError(f"prompt of {longest} tokens + max_new_tokens {max_new_tokens} exceeds "
                         f"max_sequence_length {model.config.max_sequence_length}")
    return longest + max_new_tokens


def row_caps(model: GLM53, encoded: list[list[int]], max_new_tokens: int, fit_context: bool) -> list[int]:
    """Each prompt's token cap: max_new_tokens, or with `fit_context` at most what the context leaves after the
    prompt (a long prompt has a short body). Without it, a prompt that leaves too little room is an error."""
    if not fit_context:
        check_lengths(model, encoded, max_new_tokens)
        return [max_new_tokens] * len(encoded)
    context = model.config.max_sequence_length
    longest = max(len(e) for e in encoded)
    if longest >= context:
        raise ValueError(f"prompt of {longest} tokens leaves no room in max_sequence_length {context}")
    return [min(max_new_tokens, context - len(e)) for e in encoded]


def result_record(tokenizer: Tokenizer, token_ids: list[int], stopped: bool, max_new_tokens: int) -> dict:
    return {"completion": tokenizer.decode(token_ids), "token_ids": token_ids,
            "hit_token_cap": not stopped and len(token_ids) == max_new_tokens}


@torch.no_grad()
def generate_uncached(model: GLM53, prompts: list[str], group_size: int = 1, sampling: Sampling = Sampling(),
                      generator: torch.Generator | None = None, stop: StopRule | None = None,
                      tokenizer: Tokenizer | None = None, fit_context: bool = False) -> list[list[dict]]:
    """For each prompt, `group_size` completions: [[{"completion", "token_ids", "hit_token_cap"}, ...], ...].

    A row stops at EOS (kept in token_ids, cut from the text) or when `stop(prompt, completion)` is true;
    `sampling.ignore_eos` bans EOS instead, so every row runs to the token cap (for benchmarks). The
    G rows of one prompt run as a batch that is recomputed in full at every step; finished rows ride along
    until all are done, as in the reference. `fit_context`: a prompt's cap is at most what the context leaves.
    """
    tokenizer = tokenizer or tokenizer_for(model.config)
    max_new_tokens = sampling.max_new_tokens
    banned = banned_ids(model, tokenizer, sampling.ignore_eos)
    was_training = model.training
    model.eval()
    results = []
    try:
        for prompt in prompts:
            ids = tokenizer.encode(prompt, bos=True)
            cap = row_caps(model, [ids], max_new_tokens, fit_context)[0]
            sequence = torch.tensor([ids] * group_size, device=model.device)
            new: list[list[int]] = [[] for _ in range(group_size)]
            done = [False] * group_size
            for _ in range(cap):
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
            results.append([result_record(tokenizer, new[r], done[r], cap) for r in range(group_size)])
    finally:
        model.train(was_training)
    return results
