"""Learning-rate schedules shared by pretraining and the vision training: linear warmup, then constant, cosine
decay to `min_ratio * lr` at the last step, or warmup-stable-decay (wsd: constant, then a linear decay to
`min_ratio * lr` over the last `decay_fraction` of the steps, as the public speedruns schedule it)."""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine", "wsd")


def linear_ramp(step: int, ramp_steps: int) -> float:
    """(step + 1) / ramp_steps for 0-based `step`, capped at 1; 1 when there is no ramp."""
    return min(1.0, (step + 1) / ramp_steps) if ramp_steps else 1.0


def scheduled_lr(lr: float, step: int, steps: int, warmup_steps: int = 0, schedule: str = "constant",
                 min_ratio: float = 0.0, decay_fraction: float = 0.2) -> float:
    """Learning rate of 0-based update `step` out of `steps`."""
    if warmup_steps and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    if schedule == "wsd":  # the decay's last update (step = steps - 1) runs at min_ratio * lr
        decay_steps = max(1, round(decay_fraction * (steps - warmup_steps)))
        into = step - (steps - decay_steps)
        if into < 0:
            return lr
        return lr * (1 - (1 - min_ratio) * (into + 1) / decay_steps)
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
