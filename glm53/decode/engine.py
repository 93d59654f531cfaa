"""The generation engine: cached, batched group sampling.

For each distinct prompt the prefix is run once (prompts of equal length share one prefill batch); its cache
(recurrent state of every linear layer, keys and values of every sparse layer) is copied to the G rows of its
group; the groups of all prompts are then decoded together, one token per step, each row at its own position.
Rows that end (EOS or the caller's stop rule) leave the batch once a quarter of it has ended (`COMPACT_BELOW`: each
departure copies the cache), so later steps mostly pay for live rows; the rows still running sample alone, so the
draws are those of a batch of running rows. The rows equal those of leaving at once up to floating-point rounding
(a row's logits can move by about 1e-7 with the batch's size, as they did when rows left one at a time): equal in
the tests and on HumanEval's 164 prompts x 4 samples.

`generate_uncached` in generate.py is the plain reference; with temperature 0 both give the same tokens.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import torch

from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
from ..model.cache import InferenceCache
from ..model.model import GLM53
from ..runtime.device import resolve_precision
from .generate import StopRule, banned_ids, result_record, row_caps, sample_next
from .sampling import Sampling


@torch.no_grad()
def generate_groups(model: GLM53, prompts: list[str], group_size: int = 1, sampling: Sampling = Sampling(),
                    generator: torch.Generator | None = None, stop: StopRule | None = None,
                    precision: str = "fp32", tokenizer: Tokenizer | None = None,
                    fit_context: bool = False) -> list[list[dict]]:
    """Same contract as `generate_uncached`: per prompt, `group_size` records
    {"completion", "token_ids", "hit_token_cap"}.

    precision: "fp32" (default; token-for-token equal to the plain generator), "bf16" (decode with a bf16 copy
    of the weights: faster, slightly different numbers) or "auto" (bf16 where the hardware has native bf16).
    fit_context: a prompt's rows stop at the token cap or where the context ends, whichever comes first (without
    it, a prompt that leaves less room than the cap is an error)."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    max_new_tokens = sampling.max_new_tokens
    tokenizer = tokenizer or tokenizer_for(model.config)
    device = model.device
    encoded = [tokenizer.encode(p, bos=True) for p in prompts]
    caps = row_caps(model, encoded, max_new_tokens, fit_context)
    max_length = max(len(e) + c for e, c in zip(encoded, caps))
    banned = torch.tensor(banned_ids(model, tokenizer, sampling.ignore_eos), device=device)
    precision = resolve_precision(precision, device, purpose="decode")
    was_training = model.training
    if precision == "bf16":
        # Decode with a bf16 copy of the weights rather than autocast: no per-step weight casts, and no
        # expert-row padding, which would waste most of the work at decode batch sizes.
        model = copy.deepcopy(model).to(torch.bfloat16)
    model.eval()
    try:
        cache, logits = _prefill(model, encoded, max_length, group_size)
        rows = len(prompts) * group_size
        live = list(range(rows))  # original row number of each batch row
        running = [True] * rows  # whether each batch row is still generating (finished rows wait for a compaction)
        tokens: list[list[int]] = [[] for _ in range(rows)]
        stopped = [False] * rows
        for step in range(max(caps)):
            active = [j for j, on in enumerate(running) if on]
            logits = logits.float() if len(active) == len(live) else logits[torch.tensor(active, device=device)].float()
            logits[:, banned] = float("-inf")
            chosen = sample_next(logits, sampling, generator)  # drawn for the running rows alone, in order
            keep = []
            for j, t in zip(active, chosen.tolist()):
                r = live[j]
                tokens[r].append(t)
                prompt = prompts[r // group_size]
                if t == tokenizer.eos_id or (stop is not None and stop(prompt, tokenizer.decode(tokens[r]))):
                    stopped[r] = True
                elif len(tokens[r]) < caps[r // group_size]:
                    keep.append(j)
            if not keep:
                break
            step_tokens = torch.full((len(live),), tokenizer.pad_id, dtype=torch.long, device=device)  # finished: pad
            step_tokens[torch.tensor(active, device=device)] = chosen
            running = [False] * len(live)
            for j in keep:
                running[j] = True
            if _compact_now(cache, len(keep), running):
                index = torch.tensor(keep, device=device)
                cache, step_tokens = cache.select(index), step_tokens[index]
                live, running = [live[j] for j in keep], [True] * len(keep)
            logits = model(step_tokens[:, None], cache=cache)[:, -1]
    finally:
        model.train(was_training)
    return [[result_record(tokenizer, tokens[p * group_size + g], stopped[p * group_size + g], caps[p])
             for g in range(group_size)] for p in range(len(prompts))]


# Finished rows leave the batch when no more than this share of it still runs. Dropping them at once copied the whole
# cache (every sparse layer's keys and values, up to the longest row's length) each time a row ended: 30% of a
# HumanEval evaluation's time. Waiting bounds the copies to about log(rows) / log(4/3), plus those the cache's end asks
# for, and the wasted rows to a quarter.
COMPACT_BELOW = 0.75


def _compact_now(cache: InferenceCache, running: int, running_rows: list[bool]) -> bool:
    """Whether to drop the finished rows before the next step: few enough run, or a finished row's next token would
    fall past the cache (rows keep consuming a pad token after they finish)."""
    if running == len(running_rows):
        return False
    if running <= COMPACT_BELOW * len(running_rows):
        return True
    finished = torch.tensor([not on for on in running_rows], device=cache.positions.device)
    return int(cache.positions[finished].max()) >= cache.max_length


def _prefill(model: GLM53, encoded: list[list[int]], max_length: int,
             group_size: int) -> tuple[InferenceCache, torch.Tensor]:
    """Run each prompt once (prompts of equal length in one batch); returns the cache and last-position logits with
    each prompt's row copied to the `group_size` rows of its group, groups in prompt order. The copies are one
    gather from the length batches' rows (row by row selects, a concatenation and a repeat took a sixth of a
    HumanEval evaluation's decoding)."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, ids in enumerate(encoded):
        by_length[len(ids)].append(i)
    caches, last, order = [], [], []
    for members in by_length.values():
        cache = model.new_cache(len(members), max_length)
        last.append(model(torch.tensor([encoded[i] for i in members], device=model.device), cache=cache)[:, -1])
        caches.append(cache)
        order.extend(members)
    cache = caches[0] if len(caches) == 1 else InferenceCache.concat(caches)
    logits = torch.cat(last) if len(last) > 1 else last[0]
    row_of = torch.empty(len(order), dtype=torch.long, device=model.device)  # prompt -> its row in the batches
    row_of[torch.tensor(order, device=model.device)] = torch.arange(len(order), device=model.device)
    if group_size == 1 and order == sorted(order):
        return cache, logits
    rows = row_of.repeat_interleave(group_size)
    return cache.select(rows), logits.index_select(0, rows)
