"""The completions of tasks, as evaluation judges them, RL rolls them out and `glm53 generate --tasks` writes
them: one function, so they cannot drift.

Generation stops a completion at EOS, or where the task suite's stop rule says (glm53/data/suites.py): in the
reference suite at the first newline after which the function is complete and passes the verifier's static check
(its first statement); in the broad suite where the function ends (its first line that is not indented), cut
there. The engine is called with at most `MAX_ROWS_PER_BATCH` rows at a time.
"""

from __future__ import annotations

import torch

from ..data.bpe_tokenizer import tokenizer_for
from ..data.suites import DEFAULT_SUITE, get_suite
from ..data.tasks import Task
from ..model.model import GLM53
from ..runtime.device import resolve_precision
from ..verify.static_check import is_valid
from .engine import generate_groups
from .generate import STOP_RULES, cut_to_function, function_body_complete
from .sampling import Sampling, TaskDecoding

MAX_ROWS_PER_BATCH = 256


def task_stop_rule(tasks: list[Task], suite: str = DEFAULT_SUITE):
    """The suite's stop rule. Reference: stop once the completion ends a line and prompt + completion is a
    complete, statically valid function. Broad: stop where the function ends."""
    rule = get_suite(suite).stop
    if rule != "statement":
        return STOP_RULES[rule]
    entry_points = {t.prompt: t.entry_point for t in tasks}

    def stop(prompt: str, completion: str) -> bool:
        return function_body_complete(prompt, completion) and is_valid(prompt + completion, entry_points[prompt])

    return stop


def sample_completions(model: GLM53, tasks: list[Task], group_size: int, sampling: Sampling,
                       generator: torch.Generator, precision: str = "fp32", max_rows: int | None = None,
                       suite: str = DEFAULT_SUITE) -> list[list[dict]]:
    """For each task, `group_size` completions from the cached engine (at most `max_rows` rows per engine
    call), stopped, capped and cut as `suite` says: [[{"completion", "token_ids", "hit_token_cap"}, ...] per task].
    What evaluation and RL judge, and what `glm53 generate --tasks` writes (one function, so they cannot drift)."""
    stop, fit = task_stop_rule(tasks, suite), get_suite(suite).fit_context
    per_batch = len(tasks) if max_rows is None else max(1, max_rows // group_size)
    completions: list[list[dict]] = []
    for start in range(0, len(tasks), per_batch):
        chunk = tasks[start : start + per_batch]
        completions.extend(generate_groups(model, [t.prompt for t in chunk], group_size, sampling,
                                           generator=generator, stop=stop, precision=precision, fit_context=fit))
    if get_suite(suite).stop == "function":
        tokenizer = tokenizer_for(model.config)
        completions = [[cut_to_function(s, tokenizer) for s in group] for group in completions]
    return completions


def evaluation_completions(model: GLM53, tasks: list[Task], cfg: TaskDecoding) -> tuple[list[list[dict]], str]:
    """Evaluation's completions of `tasks` under `cfg` (its seed, precision, suite; at most MAX_ROWS_PER_BATCH rows
    an engine call), and the precision they were decoded at: `glm53 eval` judges them, `glm53 generate --tasks`
    writes them."""
    precision = resolve_precision(cfg.precision, model.device, purpose="decode")
    generator = torch.Generator(device=model.device).manual_seed(cfg.seed)
    return sample_completions(model, tasks, cfg.samples, cfg.sampling, generator, precision, MAX_ROWS_PER_BATCH,
                              cfg.suite), precision
