"""The "88 structures" expression data of the pretraining-data studies (reference-system.md §3.5).

A structure is three operations applied to x in order, from OPS = (add, sub, mul, neg, abs), with at least two
distinct operations: 125 - 5 = 120 structures, shuffled with Random(1701); the first 88 are the training pool,
the other 32 are held out. An example describes the structure in words and answers with the expression:

    Task: start with x. Increase it by 5. Add 4. Make the result nonnegative.
    Python: abs(((x + 5) + 4))

`render_example` follows the reference draw for draw (constants for every operation first, then an unused
value, then one phrase per operation), so the same (structure, index, seed) gives the same text.

Data orders of the studies (`item_order`), over the run's steps x batch items, item i having example index i:
- "repeated-8": structure train_pool[i % 8];  "diverse-88": train_pool[i % 88] (round-robin interleaving);
- "diverse-blocked": the same items as diverse-88 sorted by (structure rank, i): ~55-example blocks;
- "curriculum-8-to-88": the first half of the items cycle over train_pool[:8], the rest train_pool[i % 88].

Held-out evaluation (`heldout_metrics`): one example of each of the 32 held-out structures (index 100000 + i,
data seed + 999), teacher-forced; the targets are the answer's bytes plus EOS.
"""

from __future__ import annotations

import itertools
import math
import random

import torch
import torch.nn.functional as F

from .pretrain_batches import IGNORE_INDEX, encode_documents
from .tokenizer import ByteTokenizer

OPS = ("add", "sub", "mul", "neg", "abs")
PHRASES = {
    "add": ("Add {c}.", "Increase it by {c}."),
    "sub": ("Subtract {c}.", "Decrease it by {c}."),
    "mul": ("Multiply by {c}.", "Scale it by {c}."),
    "neg": ("Negate it.", "Flip its sign."),
    "abs": ("Take its absolute value.", "Make the result nonnegative."),
}
STRUCTURE_SHUFFLE_SEED = 1701
TRAIN_STRUCTURES = 88
HELDOUT_INDEX_OFFSET = 100_000
HELDOUT_SEED_OFFSET = 999
PROMPT_END = "\nPython: "
DATA_ORDERS = ("repeated-8", "diverse-88", "diverse-blocked", "curriculum-8-to-88")

Structure = tuple[str, str, str]


def all_structures() -> list[Structure]:
    """The 120 structures in the reference's shuffled order."""
    structures = [s for s in itertools.product(OPS, repeat=3) if len(set(s)) >= 2]
    random.Random(STRUCTURE_SHUFFLE_SEED).shuffle(structures)
    return structures


STRUCTURES = all_structures()
TRAIN_POOL, HELDOUT_POOL = STRUCTURES[:TRAIN_STRUCTURES], STRUCTURES[TRAIN_STRUCTURES:]


def _apply(op: str, expr: str, c: int) -> str:
    if op == "neg":
        return f"(-{expr})"
    if op == "abs":
        return f"abs({expr})"
    return f"({expr} {dict(add='+', sub='-', mul='*')[op]} {c})"


def render_example(structure: Structure, index: int, seed: int) -> str:
    key = sum((pos + 1) * (OPS.index(op) + 1) * 101 for pos, op in enumerate(structure))
    rng = random.Random(seed * 1_000_003 + index * 9176 + key)
    constants = [rng.choice((2, 3, 4, 5)) for _ in structure]
    rng.randint(-5, 5)  # drawn and unused by the reference; kept so the later draws match
    phrases = [rng.choice(PHRASES[op]).format(c=c) for op, c in zip(structure, constants)]
    expr = "x"
    for op, c in zip(structure, constants):
        expr = _apply(op, expr, c)
    return f"Task: start with x. {' '.join(phrases)}{PROMPT_END}{expr}\n"


def item_order(order: str, steps: int, batch_size: int) -> list[tuple[Structure, int]]:
    """(structure, example index) for every item of a run, in training order."""
    n = steps * batch_size
    if order == "repeated-8":
        return [(TRAIN_POOL[i % 8], i) for i in range(n)]
    if order == "diverse-88":
        return [(TRAIN_POOL[i % TRAIN_STRUCTURES], i) for i in range(n)]
    if order == "diverse-blocked":
        ranked = sorted(range(n), key=lambda i: (i % TRAIN_STRUCTURES, i))
        return [(TRAIN_POOL[i % TRAIN_STRUCTURES], i) for i in ranked]
    if order == "curriculum-8-to-88":
        switch = (steps // 2) * batch_size
        return [(TRAIN_POOL[i % 8] if i < switch else TRAIN_POOL[i % TRAIN_STRUCTURES], i) for i in range(n)]
    raise ValueError(f"unknown data order {order!r}; choose one of {', '.join(DATA_ORDERS)}")


def batch_texts(items: list[tuple[Structure, int]], step: int, batch_size: int, seed: int) -> list[str]:
    return [render_example(s, i, seed) for s, i in items[step * batch_size:(step + 1) * batch_size]]


def heldout_batch(seed: int, sequence_length: int):
    """Inputs and labels of the 32 held-out examples, with only the answer bytes and EOS as targets."""
    tokenizer = ByteTokenizer()
    texts = [render_example(s, HELDOUT_INDEX_OFFSET + i, seed + HELDOUT_SEED_OFFSET)
             for i, s in enumerate(HELDOUT_POOL)]
    inputs, labels = encode_documents(texts, sequence_length, tokenizer)
    for r, text in enumerate(texts):
        prompt_tokens = 1 + len(text[: text.index(PROMPT_END) + len(PROMPT_END)].encode())  # BOS + prompt
        labels[r, : prompt_tokens - 1] = IGNORE_INDEX  # label j is token j + 1
    return inputs, labels


@torch.no_grad()
def heldout_metrics(model, seed: int, sequence_length: int) -> dict[str, float]:
    """Teacher-forced target byte accuracy (pooled), target loss, perplexity exp(min(20, loss)) and exact match."""
    inputs, labels = heldout_batch(seed, sequence_length)
    device = next(model.parameters()).device
    logits = model(inputs.to(device)).float().cpu()
    mask = labels != IGNORE_INDEX
    loss = F.cross_entropy(logits[mask], labels[mask]).item()
    correct = (logits.argmax(-1) == labels) & mask
    exact = (correct.sum(1) == mask.sum(1)).float().mean().item()
    return {"target_byte_accuracy": correct.sum().item() / mask.sum().item(), "target_loss": loss,
            "perplexity": math.exp(min(20.0, loss)), "exact_match": exact}
