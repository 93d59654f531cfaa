"""The log-probabilities a policy update needs: the model's logits at the positions that predict each
completion token, for rows of (prompt, completion), with gradients.

Two forms, equal up to floating-point rounding (tests/test_completion_batch.py):
- `PlainCompletionBatch`: every row is prompt + completion, right-padded, one full forward. Logits are laid out
  [rows, prompt + completion length - 1]; the mask marks the completion positions.
- `SharedPrefixBatch`: the rows of an RL step come in groups that share one prompt (G samples of a task). Each
  distinct prompt runs once, into the decoding cache; the cache is copied to its rows, which then run only
  their completion tokens from it. With prompts about twice as long as completions and G = 8 or 16, this
  removes most of the forward and backward work. Gradients flow through the copied cache into the prompt's
  single forward (the copy's backward sums the rows' contributions), so nothing is approximated. Logits are
  laid out [rows, longest completion]. Both layouts sum the same masked terms, and every loss in
  policy_gradient.py reduces over the mask, so either feeds it unchanged.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from ..model.cache import InferenceCache
from .rl_config import UPDATE_IMPLS as FORMS



def completion_batch(prompt_ids: list[list[int]], completion_ids: list[list[int]], device):
    """Right-padded inputs [R, L] and a mask [R, L] that marks the positions predicting completion tokens."""
    rows = [p + c for p, c in zip(prompt_ids, completion_ids)]
    length = max(len(r) for r in rows) - 1
    inputs = torch.zeros(len(rows), length, dtype=torch.long)
    targets = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for i, (row, p) in enumerate(zip(rows, prompt_ids)):
        n = len(row) - 1
        inputs[i, :n] = torch.tensor(row[:-1])
        targets[i, :n] = torch.tensor(row[1:])
        mask[i, len(p) - 1 : n] = True
    return inputs.to(device), targets.to(device), mask.to(device)


class PlainCompletionBatch:
    """One full forward over every row (the reference form)."""

    def __init__(self, prompt_ids: list[list[int]], completion_ids: list[list[int]], device):
        self.inputs, self.targets, self.mask = completion_batch(prompt_ids, completion_ids, device)

    def logits(self, model) -> torch.Tensor:
        return model(self.inputs)


class SharedPrefixBatch:
    """Each distinct prompt once, its cache copied to the rows that share it, then the completions alone."""

    def __init__(self, prompt_ids: list[list[int]], completion_ids: list[list[int]], device):
        if not prompt_ids:
            raise ValueError("a completion batch needs at least one row")
        self.device = device
        self.prompts: list[list[int]] = []
        index: dict[tuple[int, ...], int] = {}
        row_prompt = []
        for p in prompt_ids:
            key = tuple(p)
            if key not in index:
                index[key] = len(self.prompts)
                self.prompts.append(list(p))
            row_prompt.append(index[key])
        longest = max(1, max(len(c) for c in completion_ids))
        # the first completion token is predicted at the prompt's last position; the rest from the cache
        self.continuation = torch.zeros(len(prompt_ids), longest - 1, dtype=torch.long)
        self.targets = torch.zeros(len(prompt_ids), longest, dtype=torch.long)
        self.mask = torch.zeros(len(prompt_ids), longest, dtype=torch.bool)
        for i, c in enumerate(completion_ids):
            if c:
                self.targets[i, : len(c)] = torch.tensor(c)
                self.mask[i, : len(c)] = True
                self.continuation[i, : len(c) - 1] = torch.tensor(c[:-1])
        self.continuation, self.targets, self.mask = (t.to(device) for t in (self.continuation, self.targets,
                                                                              self.mask))
        self.row_prompt = torch.tensor(row_prompt, device=device)
        self.max_length = self.positions_needed(prompt_ids, completion_ids)

    @staticmethod
    def positions_needed(prompt_ids: list[list[int]], completion_ids: list[list[int]]) -> int:
        """Cache positions of this layout: the longest prompt, then the longest completion but its last token."""
        return max(len(p) for p in prompt_ids) + max(1, max(len(c) for c in completion_ids)) - 1

    def logits(self, model) -> torch.Tensor:
        cache, last = self._prefill(model)
        cache = cache.select(self.row_prompt)
        first = last.index_select(0, self.row_prompt)[:, None]
        if self.continuation.shape[1] == 0:
            return first
        return torch.cat((first, model(self.continuation, cache=cache)), dim=1)

    def _prefill(self, model) -> tuple[InferenceCache, torch.Tensor]:
        """Prompts of equal length run together; returns the cache and last-position logits in prompt order."""
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, p in enumerate(self.prompts):
            by_length[len(p)].append(i)
        order, caches, lasts = [], [], []
        for members in by_length.values():
            cache = model.new_cache(len(members), self.max_length)
            logits = model(torch.tensor([self.prompts[i] for i in members], device=self.device), cache=cache)
            order += members
            caches.append(cache)
            lasts.append(logits[:, -1])
        back = torch.empty(len(order), dtype=torch.long)
        back[torch.tensor(order)] = torch.arange(len(order))
        back = back.to(self.device)
        return InferenceCache.concat(caches).select(back), torch.cat(lasts).index_select(0, back)


def make_completion_batch(form: str, prompt_ids: list[list[int]], completion_ids: list[list[int]], device,
                          context: int | None = None):
    """The batch of `form`. The shared-prefix layout puts every row's completion after the longest prompt's
    cache positions, so a long prompt in one group and a long completion in another can need more positions
    than the model's `context` although every row fits; such a batch takes the plain form, whose rows are each
    their own length (the two forms are equal up to rounding)."""
    if form == "plain":
        return PlainCompletionBatch(prompt_ids, completion_ids, device)
    if form == "fast":
        if context is not None and SharedPrefixBatch.positions_needed(prompt_ids, completion_ids) > context:
            return PlainCompletionBatch(prompt_ids, completion_ids, device)
        return SharedPrefixBatch(prompt_ids, completion_ids, device)
    raise ValueError(f"unknown completion batch form {form!r}; choose one of {', '.join(FORMS)}")
