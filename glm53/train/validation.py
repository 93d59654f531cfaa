"""Pretraining's validation loss: the mean next-byte cross-entropy over a held-out slice of the stream the run
trains on (the corpus's held-out documents, or generated documents that training never reads: see
data/pretrain_batches.py `validation_batch`; with --loss-on completion, their bodies' targets alone, as in
training), every --eval-every steps and at every checkpoint, by rank 0.

It leaves training exactly as it was: the rows are built once before the first step, the forward runs without
gradients (so the sigmoid-bias routers count no load) and draws from no RNG, and nothing of the model changes;
so the checkpoints' weights are the same with validation on or off (tests/train/test_validation.py checks it).
Simplifications: the language loss alone (no multi-token-prediction or balance term), on the model as the last
step left it (an indexer in its dense warm-up is validated dense), on the uncompiled model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..data.bpe_tokenizer import tokenizer_for
from ..data.pretrain_batches import IGNORE_INDEX, VALIDATION_FIRST_INDEX, validation_batch
from ..decode.sampling import Sampling
from ..runtime.device import autocast


@dataclass
class Validation:
    """The held-out rows, and how many the forward takes at once."""
    inputs: torch.Tensor
    labels: torch.Tensor
    batch_size: int
    source: str

    @torch.no_grad()
    def loss(self, model, device: torch.device, precision: str) -> float:
        """Summed cross-entropy over every target of every row, divided by the number of targets: the same
        mean whatever the batch size."""
        total, targets = 0.0, 0
        for start in range(0, len(self.inputs), self.batch_size):
            inputs = self.inputs[start:start + self.batch_size].to(device)
            labels = self.labels[start:start + self.batch_size].to(device)
            with autocast(device, precision):
                logits = model(inputs)
                total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                                               ignore_index=IGNORE_INDEX, reduction="sum"))
            targets += int((labels != IGNORE_INDEX).sum())
        return total / targets

    def to_dict(self) -> dict:
        return {"rows": len(self.inputs), "targets": int((self.labels != IGNORE_INDEX).sum()), "source": self.source}

    @staticmethod
    def describe(validation: Validation | None) -> str:
        """The log line that says what the validation loss averages over (or that there is none)."""
        if validation is None:
            return "validation: none (--validation-rows 0, or a corpus of one document holds nothing out)"
        return f"validation: {len(validation.inputs)} rows of {validation.source}"


def validation_set(cfg, corpus=None) -> Validation | None:
    """The run's validation rows (`cfg` a PretrainConfig), or None when --validation-rows is 0 or the corpus
    held nothing out (a corpus of one document). A run long enough to read the generated stream's validation
    documents is refused (a ValueError, before anything is written)."""
    if cfg.validation_rows == 0 or (corpus is not None and len(corpus.validation) == 0):
        return None
    # + 8: bucketing's window
    if corpus is None and (cfg.steps + 8) * cfg.batch_size * cfg.grad_accumulation >= VALIDATION_FIRST_INDEX:
        raise ValueError("pretrain: --steps x --batch-size reaches 2^40 rows, where the generated stream's validation "
                         "documents begin; use fewer steps, or --validation-rows 0")
    inputs, labels = validation_batch(cfg.validation_rows, cfg.sequence_length, cfg.seed, cfg.suite, corpus,
                                      cfg.loss_on, tokenizer_for(cfg.model), getattr(cfg, "docstring_share", 0.0),
                                      getattr(cfg, "stream_primitives", ""),
                                      getattr(cfg, "stream_primitives_share", 1.0))
    source = ("the corpus's held-out documents" if corpus is not None else
              f"generated documents from index 2^40 of the {cfg.suite} stream (seed {cfg.seed})"
              + (", their bodies' targets (--loss-on completion)" if cfg.loss_on == "completion" else ""))
    # a forward without gradients holds far less than a training step, so small batches are grouped up to 32
    return Validation(inputs, labels, max(cfg.batch_size, 32), source)


CORPUS_SAMPLES = 4  # held-out corpus prompts each checkpoint of a corpus run completes


def corpus_samples(model, corpus, max_new_tokens: int) -> list[dict]:
    """A corpus run's checkpoint samples: greedy completions (stopped at EOS or the token cap) of the first bytes of
    up to CORPUS_SAMPLES held-out rows (data/corpus.py `sample_prompts`), which training never read; as many
    bytes as leave room for the completion in the context, 48 at most. Simplification: no verdict, since corpus
    text has no cases; the validation loss is its measure."""
    room = min(48, model.config.max_sequence_length - max_new_tokens - 1)
    prompts = corpus.sample_prompts(CORPUS_SAMPLES, room) if room > 0 else []
    if not prompts:
        return []
    was_training = model.training
    model.eval()
    generations = model.generate(prompts, Sampling(max_new_tokens=max_new_tokens), stop="eos")
    model.train(was_training)
    return [{"prompt": g.prompt, "completion": g.completion, "hit_token_cap": g.hit_token_cap} for g in generations]


def validation_due(cfg, step: int) -> bool:
    """Whether the model after `step` updates is validated: at every checkpoint, and every --eval-every steps."""
    return step in cfg.checkpoints or (cfg.eval_every > 0 and step % cfg.eval_every == 0)
