"""Body loss: how well a model predicts a task's reference body from its prompt, teacher-forced. The mean
cross-entropy, in nats a byte, of the body's bytes and EOS after the prompt, pooled over a split (summed nats over
summed bytes). A smooth score where greedy pass@1 is still near 0 (a short pretraining), and one that needs no
sandbox. Tasks without a reference body (a task file's) cannot be scored this way; the broad suite's generated
splits carry theirs (BroadTask.body) and the human split its hand-written `solution`s.

Simplification: one forward per task, unbatched (a split of 64 tasks takes about a second for the broad model).
"""

from __future__ import annotations

import torch

from ..data.tokenizer import ByteTokenizer


def body_nats(model, prompt: str, body: str, tokenizer: ByteTokenizer | None = None) -> tuple[float, int]:
    """Summed cross-entropy of the body's bytes and EOS after the prompt, and how many targets that is."""
    tokenizer = tokenizer or ByteTokenizer()
    prompt_ids = tokenizer.encode(prompt, bos=True, eos=False)
    body_ids = tokenizer.encode(body, bos=False, eos=True)
    ids = torch.tensor([prompt_ids + body_ids], device=next(model.parameters()).device)
    with torch.no_grad():
        log_probs = torch.log_softmax(model(ids[:, :-1]).float(), dim=-1)[0]
    targets = ids[0, 1:]
    first = len(prompt_ids) - 1  # the position whose next token is the body's first byte
    picked = log_probs[first:, :].gather(1, targets[first:, None])
    return -float(picked.sum()), len(body_ids)


def reference_bodies(suite_name: str, split: str, count: int | None) -> list[tuple[str, str, str]]:
    """(task_id, prompt, reference body) of a broad split's first `count` tasks (the human split: all of them)."""
    from ..data.broad.human import HUMAN_SPLIT, human_rows
    from ..data.suites import get_suite

    if suite_name != "broad":
        raise ValueError(f"body loss needs reference bodies, which the {suite_name} suite's splits do not carry; "
                         "use the broad suite")
    if split == HUMAN_SPLIT:
        rows = human_rows()
        return [(r["task_id"], r["prompt"], r["solution"]) for r in (rows if count is None else rows[:count])]
    return [(t.task_id, t.prompt, t.body) for t in get_suite(suite_name).tasks(split, count)]


def body_loss(model, items: list[tuple[str, str, str]]) -> float:
    """Pooled body loss (nats a byte) of `items` as reference_bodies gives them."""
    tokenizer, nats, targets = ByteTokenizer(), 0.0, 0
    was_training = model.training
    model.eval()
    try:
        for _, prompt, body in items:
            n, k = body_nats(model, prompt, body, tokenizer)
            nats, targets = nats + n, targets + k
    finally:
        model.train(was_training)
    return nats / targets
