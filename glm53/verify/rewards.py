"""Rewards built from verifier verdicts."""

from __future__ import annotations

from .verifier import Verdict

REWARD_MODES = ("binary", "partial")


def binary_reward(verdict: Verdict, invalid_penalty: float = -0.1) -> float:
    """1 when every hidden case passes, 0 for a valid but wrong program, `invalid_penalty` for an invalid one."""
    if verdict.status == "passed":
        return 1.0
    if verdict.status == "invalid":
        return invalid_penalty
    return 0.0


def partial_reward(verdict: Verdict, exact_bonus: float = 0.0, invalid_penalty: float = -0.1) -> float:
    """Fraction of hidden cases passed, plus `exact_bonus` when all pass, or `invalid_penalty` if invalid."""
    if verdict.status == "invalid":
        return invalid_penalty
    fraction = verdict.passed_cases / verdict.total_cases if verdict.total_cases else 0.0
    return fraction + (exact_bonus if verdict.status == "passed" else 0.0)


def reward(verdict: Verdict, mode: str = "binary", invalid_penalty: float = -0.1, exact_bonus: float = 0.0) -> float:
    if mode == "binary":
        return binary_reward(verdict, invalid_penalty)
    if mode == "partial":
        return partial_reward(verdict, exact_bonus, invalid_penalty)
    raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
