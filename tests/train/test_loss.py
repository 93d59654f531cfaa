"""The one training loss (train/loss.py): the terms weighted as each training gives them, and a term a training
does not train passes no gradient."""

import torch

from glm53.model.model import ModelAux
from glm53.train.loss import TERMS, training_loss


def test_the_loss_is_the_language_term_plus_the_weighted_auxiliary_terms():
    language = torch.tensor(2.0, requires_grad=True)
    balance, indexer, mtp = (torch.tensor(v, requires_grad=True) for v in (1.5, 0.25, 3.0))
    aux = ModelAux(balance_loss=balance, expert_usage=torch.ones(1, 4), indexer_loss=indexer)
    loss, terms = training_loss(language, aux, 0.01, mtp=mtp, mtp_coef=0.3, indexer_coef=2.0, world_size=2)
    assert torch.isclose(loss, torch.tensor(2.0 + 0.3 * 3.0 + 0.01 * 1.5 / 2 + 2.0 * 0.25 / 2))
    assert dict(zip(TERMS, terms.tolist())) == {"language": 2.0, "mtp": 3.0, "balance": 0.75, "indexer": 0.125}
    assert not terms.requires_grad
    loss.backward()
    assert (language.grad, mtp.grad, indexer.grad) == (1.0, torch.tensor(0.3), torch.tensor(1.0))


def test_a_term_not_trained_passes_no_gradient():
    language, indexer = torch.tensor(2.0, requires_grad=True), torch.tensor(0.25, requires_grad=True)
    aux = ModelAux(balance_loss=torch.tensor(1.0), expert_usage=torch.ones(1, 4), indexer_loss=indexer)
    loss, terms = training_loss(language, aux, 0.01)  # no MTP block given, no indexer coefficient
    assert torch.isclose(loss, torch.tensor(2.01)) and terms[1] == terms[3] == 0
    loss.backward()
    assert indexer.grad is None and language.grad == 1.0
