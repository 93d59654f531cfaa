"""Learning-rate schedules shared by pretraining and the vision training: linear warmup, then constant or
cosine decay to `min_ratio * lr` at the last step. (Warmup-stable-decay, a speedrun lever, was retired:
runtime/setting_history.py.)"""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine")


def linear_ramp(step: int, ramp_steps: int) -> float:
    """(step + 1) / ramp_steps for 0-based `step`, capped at 1; 1 when there is no ramp."""
    return min(1.0, (step + 1) / ramp_steps) if ramp_steps else 1.0


def scheduled_lr(lr: float, step: int, steps: int, warmup_steps: int = 0, schedule: str = "constant",
                 min_ratio: float = 0.0) -> float:
    """Learning rate of 0-based update `step` out of `steps`."""
    if warmup_steps and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
