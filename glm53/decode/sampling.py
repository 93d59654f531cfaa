"""How tokens are drawn (`Sampling`), how a task's completions are drawn (`TaskDecoding`: how many, the seed, the
precision, the suite's stop rule), and the sampling defaults every stage shares, each written once here. Light:
no torch, so the configs that nest them load without it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..data.suites import DEFAULT_SUITE, EVAL_SUITE_NAMES
from ..runtime.composition import composed
from ..runtime.config import DECODE_PRECISION, PRECISIONS
from ..runtime.settings import MAX_SEED, Checks, setting

# sampling divides float32 scores by the temperature: above float32's largest number it becomes inf, and a banned
# token's -inf / inf is NaN (torch: "probability tensor contains either `inf`, `nan` or element < 0"); any
# temperature above ~100 samples nearly uniformly already
MAX_TEMPERATURE = 3.4028234663852886e38
# ... and below this floor the division overflows instead: 1e-300 is 0 in float32, so every score becomes inf. At
# 1e-3 a score would have to pass 3.4e35 to overflow (a model whose scores do has diverged, which sample_next then
# says), and sampling there is greedy already: a score gap of 0.1 gives odds of e^100. So a temperature is 0
# (greedy) or at least this.
MIN_TEMPERATURE = 1e-3
SAMPLED_TEMPERATURE = 0.35  # the temperature of sampled completions: RL rollouts, dev and sampled evaluations
MAX_NEW_TOKENS = 48  # token cap of a completion (every task's body fits well within it)
# the stop rules by the names `glm53 generate --stop` and `GLM53.generate(stop=...)` give them -> generate.py's
# STOP_RULES: function: the first complete statement; end: the function's end (cut there); eos: EOS or the cap only
STOP_NAMES = {"function": "statement", "end": "function", "eos": None}
EVAL_SEED = 8675309  # the seed of sampled evaluations: `glm53 eval`, RL's dev scores, a sweep's eval jobs


def temperature_problem(flag: str, temperature: float) -> str | None:
    """Why a temperature between 0 and MIN_TEMPERATURE cannot be sampled at (None for any other value)."""
    if not 0 < temperature < MIN_TEMPERATURE:
        return None
    return (f"{flag} {temperature:g} is too small to sample at: the scores divided by it overflow float32 (inf), and "
            f"below {MIN_TEMPERATURE:g} sampling is greedy already (a score gap of 0.1 gives odds of e^100); give 0 "
            f"for greedy decoding, or a temperature of at least {MIN_TEMPERATURE:g}")


@composed
@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn, for both generators and evaluation. temperature 0 is greedy."""

    temperature: float = setting(0.0, "sampling temperature; 0 = greedy", at_least=0)
    top_k: int | None = setting(None, "keep only the k most likely tokens", at_least=1)
    top_p: float | None = setting(None, "keep the smallest set of tokens with this mass", above=0, at_most=1)
    max_new_tokens: int = setting(MAX_NEW_TOKENS, "token cap per completion", at_least=1)
    ignore_eos: bool = setting(False, "ban EOS so every row runs to the cap (benchmarks)")

    def __post_init__(self) -> None:
        check = Checks("sampling")
        check.declared(self)
        check.require(self.temperature <= MAX_TEMPERATURE, f"--temperature must be a finite number at most 3.4e38 "
                      f"(float32's largest; above ~100 sampling is already uniform), got {self.temperature}")
        check.require(temperature_problem("--temperature", self.temperature) is None,
                      str(temperature_problem("--temperature", self.temperature)))
        check.done()

    def to_dict(self) -> dict:
        return asdict(self)


@composed
@dataclass
class TaskDecoding:
    """How the completions of tasks are drawn (task_completions.py): samples per task, how each is sampled, the
    generator's seed, the precision, and the suite whose stop rule and context fit apply. Evaluation nests it."""

    samples: int = setting(1, "samples per task (1 = greedy pass@1)", at_least=1)
    sampling: Sampling = setting(default_factory=Sampling, flatten=True)
    seed: int = setting(EVAL_SEED, "seed of the sampling generator", at_least=0, at_most=MAX_SEED)
    precision: str = setting(DECODE_PRECISION, "decoding precision", choices=PRECISIONS)
    suite: str = setting(DEFAULT_SUITE, "task suite, reference, broad or humaneval: its splits, stop rule and "
                                        "token cap (reference: 48 tokens, first statement; broad: 192, to the "
                                        "function's end; humaneval: 512, to the function's end)",
                         choices=EVAL_SUITE_NAMES, block="command")

    def __post_init__(self) -> None:
        check = Checks("decoding")
        check.require(self.samples == 1 or self.sampling.temperature > 0,
                      "several --samples per task need a --temperature > 0 (greedy samples would be identical)")
        check.declared(self)
        check.done()
