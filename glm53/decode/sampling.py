"""How tokens are drawn (`Sampling`), and the sampling defaults every stage shares, each written once here. Light:
no torch, so the configs that nest it load without it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..runtime.composition import composed
from ..runtime.settings import Checks, setting

# sampling divides float32 scores by the temperature: above float32's largest number it becomes inf, and a banned
# token's -inf / inf is NaN (torch: "probability tensor contains either `inf`, `nan` or element < 0"); any
# temperature above ~100 samples nearly uniformly already
MAX_TEMPERATURE = 3.4028234663852886e38
SAMPLED_TEMPERATURE = 0.35  # the temperature of sampled completions: RL rollouts, dev and sampled evaluations
MAX_NEW_TOKENS = 48  # token cap of a completion (every task's body fits well within it)


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
        check.done()

    def to_dict(self) -> dict:
        return asdict(self)
