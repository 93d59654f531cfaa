"""The training loss, written once: a language term plus the auxiliary terms of the model's forward pass (the
router balance loss, the multi-token-prediction loss, the lightning indexer's KL), each with its coefficient.
Pretraining's step (pretrain.py), the expression-data studies' job, the vision training and the benchmarks that
time them (speed/) all take their loss from `training_loss`.

The terms are stacked and weighted in one product, so a data-parallel rank's share of each (pretrain.py's note) and
the log's figures come out of the same tensor. A term a training does not train (no MTP block given, no indexer
coefficient) is a zero with no gradient: the weights it leaves alone get no gradient at all, as before.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..data.pretrain_batches import IGNORE_INDEX
from ..model.model import ModelAux

TERMS = ("language", "mtp", "balance", "indexer")  # the order of training_loss's stacked terms


def language_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean next-token cross-entropy over the targets (PAD never a target)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def language_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The summed next-token cross-entropy (PAD never a target); divided by the global token count, it is this
    rank's share of the batch mean."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX,
                           reduction="sum")


def training_loss(language: torch.Tensor, aux: ModelAux, balance_coef: float, *, mtp: torch.Tensor | None = None,
                  mtp_coef: float = 0.0, indexer_coef: float | None = None,
                  world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss to differentiate, `language + balance_coef * balance (+ mtp_coef * mtp + indexer_coef * indexer)`,
    and its four terms (TERMS order) detached, for the log.

    `language` (and `mtp`) is the language term as the training defines it (pretraining: this rank's share of the
    batch's token mean; the vision task: the answer token's cross-entropy); the balance and indexer terms are
    `aux`'s per-rank means, divided by `world_size` to make this rank's share. `indexer_coef=None`: the indexer's
    KL is not trained (its term is a zero, so the indexer's weights get no gradient)."""
    zero = language.new_zeros(())
    shares = torch.stack([language, zero if mtp is None else mtp, aux.balance_loss.float() / world_size,
                          zero if indexer_coef is None else aux.indexer_loss.float() / world_size])
    weights = torch.tensor([1.0, mtp_coef, balance_coef, indexer_coef or 0.0], device=shares.device)
    return (shares * weights).sum(), shares.detach()
