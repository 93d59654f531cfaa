"""The names of what a training run writes: its checkpoint folders and the files in them and beside them. Light
(no torch), so configs can name a checkpoint folder before anything loads: `glm53 run --print-config`."""

from ..model.saved import METADATA_NAME, WEIGHTS_NAME  # noqa: F401 - a saved model's files, named there

TRAINER_STATE_NAME = "trainer_state.pt"
RUN_CONFIG_NAME = "run.json"  # a training run's settings, written when it starts
RECEIPT_NAME = "training-receipt.json"  # written when it finishes


def checkpoint_name(step: int) -> str:
    return f"checkpoint-{step:04d}"
