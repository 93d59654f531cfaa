"""Body loss: how well a model predicts a task's reference body from its prompt, teacher-forced. The mean
cross-entropy, in nats a byte, of the body's tokens and EOS after the prompt, pooled over a split (summed nats
over the summed bytes of the bodies, plus one for each EOS): with the byte tokenizer, the mean over the targets;
with a byte-pair one (data/bpe_tokenizer.py, whose tokens never span the prompt's end) the same unit, so models
that cut text differently compare fairly. A smooth score where greedy pass@1 is still near 0 (a short
pretraining), and one that needs no sandbox. Tasks without a reference body (a task file's) cannot be scored
this way; the broad suite's generated splits carry theirs (BroadTask.body) and the human split its hand-written
`solution`s.

Two forms: `body_loss` (plain: one forward per task, unbatched) and `body_loss_batched` (rows right-padded into
batches of 16: a causal model's outputs at a row's real positions do not depend on the padding after them; it
agrees with the plain form to rounding, tests/evaluate/test_body_loss.py). The speedrun checks its target with the
batched form, several times a minute.
"""

from __future__ import annotations

import torch

from ..data.broad.human import HUMAN_SPLIT, human_rows
from ..data.suites import get_suite
from ..data.bpe_tokenizer import tokenizer_for


def body_units(body: str) -> int:
    """What a body's loss is divided by: its UTF-8 bytes, plus one for the EOS after it."""
    return len(body.encode("utf-8", errors="surrogatepass")) + 1


def body_nats(model, prompt: str, body: str, tokenizer=None) -> tuple[float, int]:
    """Summed cross-entropy of the body's tokens and EOS after the prompt, and its bytes + 1 (body_units)."""
    tokenizer = tokenizer or tokenizer_for(model.config)
    prompt_ids = tokenizer.encode(prompt, bos=True, eos=False)
    body_ids = tokenizer.encode(body, bos=False, eos=True)
    ids = torch.tensor([prompt_ids + body_ids], device=next(model.parameters()).device)
    with torch.no_grad():
        log_probs = torch.log_softmax(model(ids[:, :-1]).float(), dim=-1)[0]
    targets = ids[0, 1:]
    first = len(prompt_ids) - 1  # the position whose next token is the body's first byte
    picked = log_probs[first:, :].gather(1, targets[first:, None])
    return -float(picked.sum()), body_units(body)


def reference_bodies(suite_name: str, split: str, count: int | None) -> list[tuple[str, str, str]]:
    """(task_id, prompt, reference body) of a broad split's first `count` tasks (the human split: all of them)."""
    if suite_name != "broad":
        raise ValueError(f"body loss needs reference bodies, which the {suite_name} suite's splits do not carry; "
                         "use the broad suite")
    if split == HUMAN_SPLIT:
        rows = human_rows()
        return [(r["task_id"], r["prompt"], r["solution"]) for r in (rows if count is None else rows[:count])]
    return [(t.task_id, t.prompt, t.body) for t in get_suite(suite_name).tasks(split, count)]


def body_loss(model, items: list[tuple[str, str, str]]) -> float:
    """Pooled body loss (nats a byte) of `items` as reference_bodies gives them."""
    tokenizer, nats, targets = tokenizer_for(model.config), 0.0, 0
    was_training = model.training
    model.eval()
    try:
        for _, prompt, body in items:
            n, k = body_nats(model, prompt, body, tokenizer)
            nats, targets = nats + n, targets + k
    finally:
        model.train(was_training)
    return nats / targets


def body_loss_batched(model, items: list[tuple[str, str, str]], batch_size: int = 16) -> float:
    """body_loss with `batch_size` tasks a forward, each row right-padded to its batch's longest."""
    tokenizer, nats, targets = tokenizer_for(model.config), 0.0, 0
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for first in range(0, len(items), batch_size):
            rows, spans = [], []
            for _, prompt, body in items[first:first + batch_size]:
                prompt_ids = tokenizer.encode(prompt, bos=True, eos=False)
                body_ids = tokenizer.encode(body, bos=False, eos=True)
                rows.append(prompt_ids + body_ids)
                spans.append((len(prompt_ids) - 1, len(body_ids), body_units(body)))
            width = max(len(r) for r in rows)
            ids = torch.full((len(rows), width), tokenizer.pad_id, dtype=torch.long)
            for r, row in enumerate(rows):
                ids[r, :len(row)] = torch.tensor(row)
            ids = ids.to(device)
            with torch.no_grad():
                log_probs = torch.log_softmax(model(ids[:, :-1]).float(), dim=-1)
            for r, (start, count, units) in enumerate(spans):
                picked = log_probs[r, start:start + count].gather(1, ids[r, start + 1:start + 1 + count, None])
                nats, targets = nats - float(picked.sum()), targets + units
    finally:
        model.train(was_training)
    return nats / targets
