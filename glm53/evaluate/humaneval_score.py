"""HumanEval as `glm53 run` and the sweeps' split jobs score it: `evaluate` with a stricter fit. `evaluate` (and so
`glm53 eval --suite humaneval`) fails a prompt that leaves no room at all and decodes one with partial room to the
room left; here a problem whose prompt plus the whole token cap does not fit the model's context fails without
being decoded (verdict rule "context") and is named, so every problem scored had the whole token cap. Never
truncated silently."""

from __future__ import annotations

from ..data.bpe_tokenizer import prompt_tokens
from ..decode.task_completions import evaluation_completions
from ..verify.verifier import Verdict
from .eval_config import EvalConfig
from .evaluate import judge


def score_humaneval(model, tasks: list, cfg: EvalConfig, accepted_partial: bool = False) -> dict:
    """`evaluate` of HumanEval problems with the stricter fit of the module docstring: the problems past the context
    are in the result's `prompts_past_context`."""
    cap, context = cfg.decoding.sampling.max_new_tokens, model.config.max_sequence_length
    past = {t: n for t, n in prompt_tokens(model.config, tasks).items() if n + cap > context}
    kept = [t for t in tasks if t.task_id not in past]
    completions, precision = evaluation_completions(model, kept, cfg.decoding)
    refusals = {task_id: Verdict("invalid", 0, 1, f"the prompt is {n} tokens, and with the token cap of {cap} it "
                                                  f"needs {n + cap}, more than the model's context of {context}",
                                 "context") for task_id, n in past.items()}
    result = judge(tasks, dict(zip((t.task_id for t in kept), completions)), cfg, None, accepted_partial, refusals)
    result["settings"]["precision"] = precision
    return result
