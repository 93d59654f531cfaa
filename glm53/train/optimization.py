"""How a training run optimizes: `Optimization`, the one block of optimizer settings that pretraining, the
expression-data studies, RL and the vision pilot nest (flattened, so their flags keep their plain names: --lr,
--betas, --weight-decay, --grad-clip, --lr-schedule, --warmup-steps, --min-lr-ratio). Each use gives its own
defaults (the field's default instance) and skips what it does not offer (RL: a constant rate, no decay).
Light: no torch, so the configs that nest it load without it.

The choice of optimizer is a field here too: AdamW for every parameter (the reference), or Muon on the blocks'
matrices beside AdamW on the rest (pretraining only: optimizers.py, muon.py; the other uses skip those fields,
MUON_SETTINGS).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.composition import composed
from ..runtime.settings import Checks, setting
from .schedule import SCHEDULES, scheduled_lr

OPTIMIZERS = ("adamw", "muon")  # muon.py: Muon on the blocks' matrices, AdamW on the rest
MUON_SETTINGS = ("optimizer", "muon_lr", "muon_momentum", "muon_weight_decay")  # skipped where only AdamW runs


@composed
@dataclass
class Optimization:
    """The optimizer's settings and the learning rate's schedule."""

    lr: float = setting(3e-4, "peak learning rate (AdamW)", above=0)
    betas: tuple[float, float] = setting((0.9, 0.95), "AdamW betas")
    weight_decay: float = setting(0.1, "AdamW weight decay on matrices", at_least=0)
    grad_clip: float = setting(1.0, "gradient-norm clip", above=0)
    optimizer: str = setting("adamw", "adamw (every parameter, the reference) or muon (Muon on the blocks' "
                                      "matrices and experts at --muon-lr, AdamW at --lr on the rest: train/muon.py)",
                             choices=OPTIMIZERS)
    muon_lr: float = setting(0.02, "--optimizer muon: Muon's peak learning rate (the schedule scales it as --lr)",
                             above=0)
    muon_momentum: float = setting(0.95, "--optimizer muon: Muon's momentum (Nesterov)", at_least=0, below=1)
    muon_weight_decay: float = setting(0.0, "--optimizer muon: Muon's decoupled weight decay (times the lr)",
                                       at_least=0)
    lr_schedule: str = setting("constant", "after warmup", choices=SCHEDULES)
    warmup_steps: int = setting(0, "linear warmup steps", at_least=0)
    min_lr_ratio: float = setting(0.1, "cosine schedule: final lr / peak lr", at_least=0, at_most=1)

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        check = Checks("optimization")
        check.declared(self)
        check.require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                      f"--betas must be two numbers in [0, 1), got {self.betas}")
        check.done()

    def lr_at(self, step: int, steps: int) -> float:
        """The learning rate of 0-based update `step` of `steps`: linear warmup, then constant or cosine down to
        min_lr_ratio * lr (schedule.py)."""
        return scheduled_lr(self.lr, step, steps, self.warmup_steps, self.lr_schedule, self.min_lr_ratio)
