"""`glm53 speedrun`'s settings. Light: no torch (speedrun.py runs it).

The command pretrains one of the speedrun's rows in the recipe book (glm53/recipes/: each the previous record plus
one change) until the target. Its default is the current record (recipes/book.py RECORD); the first row, `e4`, is
`glm53 run --preset broad`'s pretraining as it stood when the speedrun began (docs/broad-run.md, run e4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..recipes.book import RECORD, pretraining, recipe_chain, recipe_names, resolved, suite_of
from ..runtime.composition import composed, record
from ..runtime.config import RuntimeConfig
from ..runtime.settings import Checks, setting
from ..train.pretrain_config import PretrainConfig

# The target: the pooled body loss (nats a byte of the reference bodies, evaluate/body_loss.py) of the first
# TARGET_TASKS dev tasks. 0.18 is run e4's end (0.179 at step 3,600).
TARGET_BODY_LOSS = 0.18
TARGET_TASKS = 64
PASS_TASKS = 32  # greedy pass@1 at the target, on the first 32 dev tasks (the pretraining dev prompts)
SUITE = "broad"  # the stream it trains on and the dev tasks it measures
FIRST_ROW = recipe_chain(RECORD)[0]  # e4: the row every speedrun recipe's chain starts from


def speedrun_recipes() -> tuple[str, ...]:
    """The recipes `glm53 speedrun --recipe` takes: the speedrun's rows, the book's pretraining recipes (no RL) on
    the broad suite. (`glm53 pretrain --recipe` takes any recipe, a run's included.)"""
    return tuple(name for name in recipe_names() if suite_of(name) == SUITE and not resolved(name).get("rl"))


@composed
@dataclass
class SpeedrunConfig:
    """`glm53 speedrun`: pretrain on the broad stream until the dev body loss reaches the target, on the clock."""

    out: str = setting("", "folder to write (must not exist)", required=True, block="command")
    recipe: str = setting(RECORD, "the recipe (docs/speedrun.md): its pretraining settings, before any "
                                  "--pretrain.X flag; the default is the current record, e4 the first row",
                          choices=speedrun_recipes(), block="command")
    seed: int = setting(42, "seed of the initialization and the stream's order", at_least=0, below=2**31,
                        block="command")
    budget_minutes: float = setting(40.0, "give up (exit 1) when the clock passes this many minutes", above=0,
                                    block="command")
    target: float = setting(TARGET_BODY_LOSS, "body loss to reach, nats a byte of the first 64 dev tasks' reference "
                                              "bodies", above=0, block="command")
    # 5 s: a check of 64 tasks takes 0.2-0.3 s off the clock with byte pairs (about 1.5 s with bytes, e4), and every
    # 30 s quantized 3-minute runs to the 30 s (docs/speedrun.md, the fourth record); the 2026-12-03 records used 30
    check_every_seconds: float = setting(5.0, "check the target every this many seconds on the clock (and at the "
                                              "schedule's last step)", above=0, block="command")
    check_every_steps: int = setting(0, "instead, check every this many steps (0: by --check-every-seconds): a "
                                        "screen that counts steps to the target, whatever the machine's load",
                                     at_least=0, block="command")
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=("resume", "report_to", "report_name", "report_group", "trust_unverified",
                                           "accept_partial_isolation"), block="runtime")
    # the base the command puts --recipe's whole chain over: the first row, which every chain starts from (a base
    # of a later recipe would leak its settings into an earlier one's run); checkpoints: none is written, and step 1
    # is valid for any --pretrain.steps, so the default instance holds one step (a Python caller gives its own)
    pretrain: PretrainConfig = setting(default_factory=lambda: PretrainConfig(**{**pretraining(FIRST_ROW),
                                                                                 "steps": 1, "warmup_steps": 0,
                                                                                 "checkpoints": (1,)}),
                                       skip=("out", "suite", "seed", "recipe", "checkpoints", "corpus", "corpus_mix",
                                             "corpus_validation_share", "eval_every", "validation_rows",
                                             "dev_max_new_tokens", "keep_last", "save_optimizer")
                                       + tuple(f for f in RuntimeConfig.__dataclass_fields__))

    def __post_init__(self) -> None:
        check = Checks("speedrun")
        check.declared(self)
        check.done()
        # the stage's runtime is the command's; the pretraining folder is never written (the speedrun writes its own)
        self.pretrain = replace(self.pretrain, out=self.out, suite=SUITE, seed=self.seed, recipe=self.recipe,
                                checkpoints=(self.pretrain.steps,), validation_rows=0, runtime=self.runtime)

    def to_dict(self) -> dict:
        return record(self)
