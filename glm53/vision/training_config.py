"""How the digit task trains (`DigitTraining`) and the full-model pilot's training. Light: no torch, so `glm53 vision
--help` answers without it (train.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.composition import composed, record
from ..runtime.settings import Checks, setting
from ..train.optimization import MUON_SETTINGS, Optimization


@composed
@dataclass(frozen=True)
class DigitTraining:
    """How the digit task trains: AdamW on the answer-only loss (plus the MoE balance loss), in three groups:
    the language model's embedding, the rest of the language model, the tower. `tower_warmup_steps` ramps only
    the tower's learning rate linearly from lr/N to lr. `embedding_eps` is the embedding's Adam epsilon: a
    large one lets rows with a strong gradient move fast while rows with a tiny one (every token the softmax
    barely considers) stay put.

    The optimizer's settings are the Optimization block the other training configs nest (flags --lr,
    --weight-decay, --grad-clip, --lr-schedule, --warmup-steps), with this task's defaults: AdamW's own betas
    (0.9, 0.999) and, under --lr-schedule cosine, a decay down to zero, both fixed here (no flag); no Muon."""

    steps: int = setting(120, "updates", at_least=1)
    batch_size: int = setting(40, "images per update (at most 10,000; memory is estimated before any work)",
                              at_least=1, at_most=10_000)
    optimization: Optimization = setting(
        default_factory=lambda: Optimization(lr=2e-3, betas=(0.9, 0.999), weight_decay=0.01, min_lr_ratio=0.0),
        flatten=True, skip=("betas", "min_lr_ratio", *MUON_SETTINGS),
        helps={"lr": "learning rate", "weight_decay": "AdamW weight decay (every parameter)",
               "warmup_steps": "linear warmup of every group"})
    balance_coef: float = setting(0.01, "weight of the router balance loss", at_least=0)
    label_step: int = setting(1, "update t draws training batch t * label_step", at_least=1, block="data")
    tower_lr_scale: float = setting(1.0, "tower learning rate / lr", at_least=0)
    tower_warmup_steps: int = setting(0, "updates over which the tower's learning rate ramps up", at_least=0)
    embedding_lr_scale: float = setting(1.0, "embedding learning rate / lr", at_least=0)
    embedding_eps: float = setting(1e-8, "the embedding's Adam epsilon", above=0)

    def __post_init__(self) -> None:
        check = Checks("vision training")
        check.declared(self)
        check.done()

    def to_dict(self) -> dict:
        """The flat record receipts hold: the optimizer's settings by their flag names (lr, lr_schedule, ...)."""
        return record(self)


# Peak memory one training image adds to the miniature (fp32 on the CPU): the peak resident size over one step of
# the faithful tower, measured at 500 and 4,000 images on a 2-core AMD EPYC (0.89 and 0.68 MB an image), rounded up.
# Simplification: the pilot's image is counted as the miniature's times its language model's dim x layers over
# the miniature's 32 x 1 (its activations, through every layer, dominate), a rough estimate, not a measurement.
TRAINING_BYTES_PER_IMAGE = 2 ** 20
HELD_OUT_BYTES_PER_IMAGE = 3 * 32 * 32 * 4  # the held-out set is rendered whole: 3 x 32 x 32 float32 an image


def memory_problem(flag: str, batch_size: int, eval_examples: int, scale: float, memory: int | None) -> str | None:
    """Why a run of `batch_size` training images (at `scale` times the miniature's cost each) and `eval_examples`
    held-out ones cannot fit in `memory` bytes, said before any work; None when it fits or memory is unknown."""
    per_image, budget = TRAINING_BYTES_PER_IMAGE * scale, (memory or 0) / 2  # half: the model, optimizer, the rest
    held_out = eval_examples * HELD_OUT_BYTES_PER_IMAGE
    if memory is None or batch_size * per_image + held_out <= budget:
        return None
    where = f"more than half of this machine's {memory / 2**30:,.1f} GiB of memory"
    if held_out > budget / 2:
        return (f"--eval-examples {eval_examples:,} needs about {held_out / 2**30:,.1f} GiB (every held-out image is "
                f"rendered at once), {where}; give --eval-examples {int(budget / 2 // HELD_OUT_BYTES_PER_IMAGE):,} "
                "or less")
    fits = max(1, int((budget - held_out) // per_image))
    return (f"{flag} {batch_size:,} needs about {(batch_size * per_image + held_out) / 2**30:,.1f} GiB (about "
            f"{per_image / 2**20:,.1f} MiB a training image), {where}; give {flag} {fits:,} or less")


# The full-model pilot (see full_model_pilot): 40 updates of 10, the tower ramped over the first half, the
# embedding at 10x with a large Adam epsilon.
PILOT_TRAINING = DigitTraining(steps=40, batch_size=10, lr=1e-3, label_step=3, tower_warmup_steps=20,
                               embedding_lr_scale=10.0, embedding_eps=1e-3)
