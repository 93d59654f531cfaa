"""The policy-gradient objective of `glm53 rl`, piece by piece, in the vocabulary of the RL literature.

- Advantages from a group of G rewards for one prompt: the baseline is the mean of the *other* rewards
  (leave-one-out, RLOO: A_i = r_i - (sum_j r_j - r_i) / (G - 1)) or the group mean (GRPO: A_i = r_i - mean r);
  then optionally scaled by the group's reward std (GRPO) or by the std of all rewards of the step ("batch"),
  both the sample std (n - 1), as TRL computes it. Without scaling, leave-one-out equals the group mean scaled
  by G / (G - 1).
- Aggregation of the per-token terms A_i * log p(token) into one loss over the step's completions:
  "sequence-mean" (each completion's mean log-prob, then the mean over completions: the reference),
  "token-sum" (each completion's summed log-prob, then the mean), "token-mean" (the sum over every completion
  token of the batch divided by their number: DAPO) and "max-tokens" (the same sum divided by completions x
  max-new-tokens, a constant: Dr. GRPO), so no completion's length changes its own weight.
- Several optimisation passes over one batch of rollouts (PPO): each token's term becomes
  min(rho A, clip(rho, 1 - clip_low, 1 + clip_high) A) with rho = p_now / p_when_sampled, clipped asymmetrically
  ("clip-higher", DAPO). On the first pass rho = 1, so the clipped objective has the plain one's gradient.

Every aggregation is a sum over the batch divided by a count of the whole step (completions, tokens), so a data-
parallel rank passes the step's totals (`rows`, `tokens`) and its loss is its share of the step's loss.
"""

from __future__ import annotations

import statistics

import torch

from .rl_config import AGGREGATIONS, BASELINES, REWARD_SCALINGS

STD_EPS = 1e-4  # added to a std before dividing (TRL's choice), so a near-constant group is not blown up


def group_advantages(rewards: list[float], baseline: str = "leave-one-out") -> list[float]:
    g = len(rewards)
    if baseline == "leave-one-out":
        total = sum(rewards)
        return [r - (total - r) / (g - 1) for r in rewards]
    if baseline == "group-mean":
        mean = sum(rewards) / g
        return [r - mean for r in rewards]
    raise ValueError(f"unknown advantage baseline {baseline!r}; choose one of {', '.join(BASELINES)}")


def step_advantages(groups: list[list[float]], baseline: str = "leave-one-out",
                    scaling: str = "none") -> list[list[float]]:
    """Advantages of every group of a step, scaled as asked."""
    if scaling not in REWARD_SCALINGS:
        raise ValueError(f"unknown reward scaling {scaling!r}; choose one of {', '.join(REWARD_SCALINGS)}")
    advantages = [group_advantages(rewards, baseline) for rewards in groups]
    if scaling == "none":
        return advantages
    if scaling == "batch-std":
        every = [r for rewards in groups for r in rewards]
        std = statistics.stdev(every) if len(every) > 1 else 0.0
        return [[a / (std + STD_EPS) for a in adv] for adv in advantages]
    return [[a / (statistics.stdev(rewards) + STD_EPS) for a in adv] for rewards, adv in zip(groups, advantages)]


def aggregate_policy_loss(token_logp: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor,
                          aggregation: str = "sequence-mean", max_new_tokens: int | None = None,
                          rows: int | None = None, tokens: int | None = None) -> torch.Tensor:
    """-objective. token_logp [R, L] (already zero where mask is False), mask [R, L] bool, advantages [R]; `rows`
    and `tokens`: the step's completions and completion tokens when this batch is a share of it."""
    if aggregation in ("sequence-mean", "token-sum"):
        counts = mask.sum(dim=1).clamp_min(1)
        seq_logp = token_logp.sum(dim=1) / (counts if aggregation == "sequence-mean" else 1)
        return -(advantages * seq_logp).sum() / (rows or token_logp.shape[0])
    weighted = (advantages[:, None] * token_logp * mask).sum()
    return -weighted / _token_divisor(aggregation, mask, max_new_tokens, rows, tokens)


def _token_divisor(aggregation: str, mask: torch.Tensor, max_new_tokens: int | None, rows: int | None,
                   tokens: int | None):
    if aggregation == "token-mean":
        return tokens or mask.sum().clamp_min(1)
    if aggregation == "max-tokens":
        if not max_new_tokens:
            raise ValueError("the max-tokens aggregation needs max_new_tokens")
        return (rows or mask.shape[0]) * max_new_tokens
    raise ValueError(f"unknown loss aggregation {aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")


def clipped_token_objective(token_logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                            mask: torch.Tensor, clip_low: float, clip_high: float):
    """Per-token PPO objective [R, L] (zero off the mask) and the fractions of completion tokens clipped below
    (rho < 1 - clip_low with A < 0) and above (rho > 1 + clip_high with A > 0), where clipping stops the gradient."""
    ratio = torch.exp(token_logp - old_logp)
    adv = advantages[:, None]
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip_low, 1 + clip_high) * adv
    objective = torch.minimum(unclipped, clipped) * mask
    with torch.no_grad():
        tokens = mask.sum().clamp_min(1)
        low = float(((ratio < 1 - clip_low) & (adv < 0) & mask).sum() / tokens)
        high = float(((ratio > 1 + clip_high) & (adv > 0) & mask).sum() / tokens)
    return objective, low, high


def aggregate_objective(objective: torch.Tensor, mask: torch.Tensor, aggregation: str = "sequence-mean",
                        max_new_tokens: int | None = None, rows: int | None = None,
                        tokens: int | None = None) -> torch.Tensor:
    """-objective from per-token terms [R, L] (zero off the mask), aggregated as `aggregate_policy_loss` does."""
    if aggregation == "sequence-mean":
        return -(objective.sum(dim=1) / mask.sum(dim=1).clamp_min(1)).sum() / (rows or objective.shape[0])
    if aggregation == "token-sum":
        return -objective.sum(dim=1).sum() / (rows or objective.shape[0])
    return -objective.sum() / _token_divisor(aggregation, mask, max_new_tokens, rows, tokens)
