"""Self-speculative greedy decoding: the model's own MTP block drafts a token, the model checks it.

One prompt at a time (speculation is about the latency of one sequence). After the main model has consumed the
tokens up to t and chosen a = token t+1 (its greedy choice, always kept), the MTP block drafts b = token t+2 from
(h_t, a). The main model then reads [a, b] in one forward: if its choice after a is b, both are kept and its
choice after b comes free; if not, the cache is rolled back to just after t and a is read alone, so every kept
token is the main model's own greedy choice and the output equals plain greedy decoding token for token (up to
rounding between a one-token and a two-token forward, which never decided an argmax in our tests).

`generate_greedy_plain` is the reference it is compared with: the same loop, one token per forward, no draft.
"""

from __future__ import annotations

import time

import torch

from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
from ..model.model import GLM53
from .generate import StopRule, banned_ids, check_lengths, result_record


def _pick(logits: torch.Tensor, banned: list[int]) -> int:
    logits = logits.float().clone()
    logits[..., banned] = float("-inf")
    return int(logits.argmax(dim=-1))


def _ended(token: int, tokens: list[int], prompt: str, stop: StopRule | None, tokenizer: Tokenizer) -> bool:
    return token == tokenizer.eos_id or (stop is not None and stop(prompt, tokenizer.decode(tokens)))


@torch.no_grad()
def generate_greedy_plain(model: GLM53, prompts: list[str], max_new_tokens: int, stop: StopRule | None = None,
                          tokenizer: Tokenizer | None = None) -> tuple[list[dict], dict]:
    """Greedy decoding one prompt and one token per forward, with the cache: the baseline of the speculative
    decoder (same batch size, same bookkeeping). Returns (records, {"seconds", "tokens", "forwards"})."""
    tokenizer = tokenizer or tokenizer_for(model.config)
    banned = banned_ids(model, tokenizer, False)
    records, forwards, started = [], 0, time.perf_counter()
    was_training = model.training
    model.eval()
    try:
        for prompt in prompts:
            ids = tokenizer.encode(prompt, bos=True)
            length = check_lengths(model, [ids], max_new_tokens)
            cache = model.new_cache(1, length)
            logits = model(torch.tensor([ids], device=model.device), cache=cache)[:, -1]
            forwards += 1
            tokens, stopped = [], False
            while len(tokens) < max_new_tokens:
                token = _pick(logits[0], banned)
                tokens.append(token)
                if _ended(token, tokens, prompt, stop, tokenizer):
                    stopped = True
                    break
                if len(tokens) == max_new_tokens:
                    break
                logits = model(torch.tensor([[token]], device=model.device), cache=cache)[:, -1]
                forwards += 1
            records.append(result_record(tokenizer, tokens, stopped, max_new_tokens))
    finally:
        model.train(was_training)
    return records, {"seconds": time.perf_counter() - started, "tokens": sum(len(r["token_ids"]) for r in records),
                     "forwards": forwards}


@torch.no_grad()
def generate_greedy_speculative(model: GLM53, prompts: list[str], max_new_tokens: int, stop: StopRule | None = None,
                                tokenizer: Tokenizer | None = None) -> tuple[list[dict], dict]:
    """Greedy decoding with the MTP block as a one-token draft. Returns (records, stats): stats holds seconds,
    tokens, main-model forwards, drafts checked and drafts accepted (acceptance rate = accepted / drafted)."""
    if model.mtp is None:
        raise ValueError("speculative decoding needs a model with an MTP block (ModelConfig mtp_depth = 1)")
    tokenizer = tokenizer or tokenizer_for(model.config)
    banned = banned_ids(model, tokenizer, False)
    was_training = model.training
    model.eval()
    records, forwards, drafted, accepted, started = [], 0, 0, 0, time.perf_counter()
    device = model.device
    try:
        for prompt in prompts:
            ids = tokenizer.encode(prompt, bos=True)
            length = check_lengths(model, [ids], max_new_tokens)
            cache, mtp_cache = model.new_cache(1, length), model.new_mtp_cache(1, length)
            prompt_ids = torch.tensor([ids], device=device)
            logits, hidden = model(prompt_ids, cache=cache, return_hidden=True)
            forwards += 1
            if len(ids) > 1:  # the MTP block reads every committed pair (h_t, token t+1) of the prompt
                model.mtp_step(hidden[:, :-1], prompt_ids[:, 1:], mtp_cache)
            tokens, stopped = [], False
            a, h_last = _pick(logits[0, -1], banned), hidden[:, -1:]
            while True:
                tokens.append(a)
                if _ended(a, tokens, prompt, stop, tokenizer):
                    stopped = True
                    break
                if len(tokens) == max_new_tokens:
                    break
                a_ids = torch.tensor([[a]], device=device)
                b = _pick(model.mtp_step(h_last, a_ids, mtp_cache)[0, -1], banned)
                drafted += 1
                before = cache.snapshot()
                logits, hidden = model(torch.tensor([[a, b]], device=device), cache=cache, return_hidden=True)
                forwards += 1
                if _pick(logits[0, 0], banned) == b:
                    accepted += 1
                    tokens.append(b)
                    if _ended(b, tokens, prompt, stop, tokenizer):
                        stopped = True
                        break
                    if len(tokens) == max_new_tokens:
                        break
                    model.mtp_step(hidden[:, :1], torch.tensor([[b]], device=device), mtp_cache)  # pair (h_{t+1}, b)
                    a, h_last = _pick(logits[0, 1], banned), hidden[:, 1:]
                else:  # roll back to just after t and read a alone: its logits are what plain greedy sees
                    cache = before
                    logits, hidden = model(a_ids, cache=cache, return_hidden=True)
                    forwards += 1
                    a, h_last = _pick(logits[0, -1], banned), hidden[:, -1:]
            records.append(result_record(tokenizer, tokens, stopped, max_new_tokens))
    finally:
        model.train(was_training)
    return records, {"seconds": time.perf_counter() - started, "tokens": sum(len(r["token_ids"]) for r in records),
                     "forwards": forwards, "drafted": drafted, "accepted": accepted,
                     "acceptance_rate": accepted / drafted if drafted else 0.0}
