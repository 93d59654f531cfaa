"""Several splits scored in one evaluation: every split's tasks decoded together (larger decoding batches), then
the result cut back into one receipt per split (`subset`). `glm53 run` on a suite with several evaluation splits
and the sweep's split jobs score this way."""

from __future__ import annotations

from ..model.model import GLM53
from .eval_config import EvalConfig
from .evaluate import evaluate, subset


def per_split(result: dict, tasks: dict[str, list]) -> dict[str, dict]:
    """An evaluation of every task of `tasks` ({split: tasks}) cut into one result per split."""
    return {split: subset(result, [t.task_id for t in split_tasks]) for split, split_tasks in tasks.items()}


def evaluate_splits(model: GLM53, tasks: dict[str, list], cfg: EvalConfig,
                    accepted_partial: bool = False) -> tuple[dict, dict[str, dict]]:
    """`model` scored on the tasks of every split in one call of `evaluate`: (the whole result, {split: result})."""
    whole = evaluate(model, [t for split_tasks in tasks.values() for t in split_tasks], cfg,
                     accepted_partial=accepted_partial)
    return whole, per_split(whole, tasks)
