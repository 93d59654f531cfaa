"""Pretraining batches: one generated function per row, BOS + bytes + EOS, right-padded, PAD never a target.

Row r of step t (0-based) is document t * batch_size + r, so the data order is a pure function of the seed
and the step: resuming at step t needs no data-loader state. No packing, as in the reference. The documents
come from a task suite's stream (glm53/data/suites.py; the reference suite's by default).
"""

from __future__ import annotations

import torch

from .suites import DEFAULT_SUITE, get_suite
from .tokenizer import ByteTokenizer

IGNORE_INDEX = -100


def encode_documents(texts: list[str], sequence_length: int, tokenizer: ByteTokenizer | None = None):
    """texts -> (inputs [B, sequence_length], labels [B, sequence_length]) with PAD labels set to -100."""
    tokenizer = tokenizer or ByteTokenizer()
    rows = torch.full((len(texts), sequence_length + 1), tokenizer.pad_id, dtype=torch.long)
    for r, text in enumerate(texts):
        ids = tokenizer.encode(text, bos=True, eos=True)
        if len(ids) > sequence_length + 1:
            raise ValueError(f"document {r} is {len(ids)} tokens with BOS/EOS, longer than sequence_length + 1 = "
                             f"{sequence_length + 1}; raise --sequence-length")
        rows[r, : len(ids)] = torch.tensor(ids)
    inputs = rows[:, :-1].clone()
    labels = rows[:, 1:].clone()
    labels[labels == tokenizer.pad_id] = IGNORE_INDEX
    return inputs, labels


def pretraining_batch(step: int, batch_size: int, sequence_length: int, seed: int = 42, suite: str = DEFAULT_SUITE):
    """The batch for 0-based optimizer step `step`, from `suite`'s stream."""
    stream = get_suite(suite)
    texts = [stream.pretraining_text(step * batch_size + r, seed) for r in range(batch_size)]
    return encode_documents(texts, sequence_length)
