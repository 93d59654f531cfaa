"""The RL step's groups scored: each (sample, verdict) pair's reward (verify/rewards.py: the weighted sum of the
run's reward functions), whether a group carries signal, the advantages, and the rollout records and update batch
they make. Every reward is computed, and checked, before any is used.
"""

from __future__ import annotations

import math

from ..data.bpe_tokenizer import Tokenizer
from ..verify.rewards import RewardError, WeightedReward, reward_terms, total_reward
from .policy_gradient import step_advantages
from .rl_config import RLConfig


def group_rewards(cfg: RLConfig, task, pairs: list, terms: list[WeightedReward] | None = None) -> list[float]:
    """The reward of each (sample, verdict) pair of a task's group (terms: the run's; default: cfg.reward's)."""
    terms = terms or reward_terms(cfg)
    return [total_reward(terms, task, sample["completion"], verdict) for sample, verdict in pairs]


def informative(cfg: RLConfig, task, pairs: list, terms: list[WeightedReward] | None = None) -> bool:
    """A group carries signal when its rewards are not all equal (rejection sampling: when a program passed)."""
    if cfg.objective == "rejection-sampling":
        return any(verdict.status == "passed" for _, verdict in pairs)
    rewards = group_rewards(cfg, task, pairs, terms)
    return max(rewards) - min(rewards) > 1e-8


def kept_weights(pairs: list) -> list[float]:
    """Rejection sampling's weights: 1 for a program the verifier passed, 0 (left out) for the rest."""
    return [1.0 if verdict.status == "passed" else 0.0 for _, verdict in pairs]


def score_groups(cfg: RLConfig, tasks: list, judged: list, first: int, tokenizer: Tokenizer,
                 terms: list[WeightedReward] | None = None):
    """Rewards and advantages (cfg.advantage_baseline, cfg.reward_scaling; under rejection sampling, weight 1 for
    each passed program and none for the rest) for each group of (sample, verdict) pairs. Returns the rollout
    records and the update's batch (prompt ids, completion ids, advantages) of the groups with signal (under
    rejection sampling, of the passed programs), less any capped completions when cfg.mask_truncated. Every
    reward is computed, and checked, before any is used."""
    terms = terms or reward_terms(cfg)
    rollouts, prompt_ids, completion_ids, advantages = [], [], [], []
    rewards_of = [group_rewards(cfg, task, pairs, terms) for task, pairs in zip(tasks, judged)]
    keeping = cfg.objective == "rejection-sampling"
    advantages_of = [kept_weights(pairs) for pairs in judged] if keeping else \
        step_advantages(rewards_of, cfg.advantage_baseline, cfg.reward_scaling)
    for task, rewards, group in zip(tasks, rewards_of, advantages_of):
        if max(rewards) - min(rewards) > 1e-8 and not all(math.isfinite(a) for a in group):  # sums that overflow
            shown = ", ".join(f"{r:g}" for r in rewards)
            raise RewardError(f"rl: the rewards of task {task.task_id}'s group ({shown}) are too large to compute "
                              f"their advantages (they overflow); lower the reward's weights or values (the run "
                              f"stopped before any update used them)")
    for g, (task, pairs) in enumerate(zip(tasks, judged)):
        rewards = rewards_of[g]
        used = max(rewards) - min(rewards) > 1e-8  # all-equal rewards carry no signal
        task_prompt_ids = tokenizer.encode(task.prompt, bos=True)
        for (s, v), r, a in zip(pairs, rewards, advantages_of[g]):
            masked = cfg.mask_truncated and s["hit_token_cap"]
            kept = (a > 0) if keeping else used  # rejection sampling: a passed program, whatever its group
            rollouts.append({"group": first + g + 1, "task_id": task.task_id, "completion": s["completion"],
                             "token_ids": s["token_ids"], "hit_token_cap": s["hit_token_cap"],
                             "verdict": v.to_json(), "reward": r, "advantage": a if kept else 0.0,
                             "used": kept and not masked})
            if kept and not masked:
                prompt_ids.append(task_prompt_ids)
                completion_ids.append(s["token_ids"])
                advantages.append(a)
    return rollouts, (prompt_ids, completion_ids, advantages)
