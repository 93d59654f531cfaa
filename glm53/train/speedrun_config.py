"""`glm53 speedrun`'s settings and its recipes. Light: no torch (speedrun.py runs it).

A recipe is a named set of pretraining settings (every --pretrain.X flag, the model's included) on the broad
suite. Each record of docs/speedrun.md is the previous recipe plus one change, so a recipe here names its parent
and the change it makes; `recipe_settings` resolves the chain. The first, `e4`, is `glm53 run --preset broad`'s
pretraining as it stood when the speedrun began (docs/broad-run.md, run e4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..data.suites import BROAD_SEQUENCE_LENGTH
from ..model.config import MODEL_PRESETS
from ..runtime.composition import composed, record
from ..runtime.config import RuntimeConfig
from ..runtime.settings import Checks, setting
from .pretrain_config import PretrainConfig

# The target: the pooled body loss (nats a byte of the reference bodies, evaluate/body_loss.py) of the first
# TARGET_TASKS dev tasks. 0.18 is run e4's end (0.179 at step 3,600).
TARGET_BODY_LOSS = 0.18
TARGET_TASKS = 64
PASS_TASKS = 32  # greedy pass@1 at the target, on the first 32 dev tasks (the pretraining dev prompts)

# name -> (parent, the change in words, the settings it changes). Settings are PretrainConfig's, model fields
# included (flattened), as `glm53 pretrain` takes them.
RECIPES: dict[str, tuple[str | None, str, dict]] = {
    "e4": (None, "glm53 run --preset broad's pretraining: the broad model, 3,600 steps of 16 length-bucketed rows, "
                 "AdamW at 3e-3, cosine, loss on the bodies",
           dict(steps=3600, batch_size=16, sequence_length=BROAD_SEQUENCE_LENGTH, lr=3e-3, warmup_steps=20,
                lr_schedule="cosine", loss_on="completion", **MODEL_PRESETS["broad"])),
    # screened at equal steps on 2026-12-03 (docs/speedrun.md, "Levers screened"); not yet timed as records
    "muon": ("e4", "Muon at 0.02 on the blocks' matrices and stacked experts (AdamW 3e-3 on the rest), on a 1,500-step "
                   "schedule (the screen: body loss 0.230 at its end, short of the target)",
             dict(optimizer="muon", muon_lr=0.02, steps=1500)),
    "muon-qk": ("muon", "QK-norm (each head's q and k at unit RMS before RoPE), on a 1,000-step schedule (the screen: "
                        "the target at step 850)",
                dict(qk_norm=True, steps=1000)),
    "muon-qk-bpe": ("muon-qk", "a byte-pair tokenizer of 2,048 ids trained on the broad stream (about 5 bytes a token "
                               "on the dev bodies, against 1), the same 1,000-step schedule",
                    dict(tokenizer="broad-bpe-2048", vocab_size=2048)),
    # timed against muon-qk-bpe on 2026-12-04 (docs/speedrun.md): dense, from the fourth screen, is the fourth record
    "muon-qk-bpe-dense": ("muon-qk-bpe", "a dense feed-forward of 768 (one always-chosen expert) in place of 4 routed "
                                         "experts of 256 (top-2) and a shared one: the same 768 active hidden units",
                          dict(experts=1, top_k=1, shared_experts=0, expert_hidden=768)),
}
# the current record: `glm53 speedrun`'s default, as modded-nanogpt's train script is its record; the first row
# stays reachable by name (--recipe e4). A recipe that missed its target leaves the code; its verdict and the last
# commit that had it stay in docs/speedrun.md (muon-qk-bpe-b32: last in 8df6dc9).
RECORD = "muon-qk-bpe-dense"


def recipe_chain(name: str) -> list[str]:
    """The recipe's ancestry, first recipe first."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")
    chain = [name]
    while RECIPES[chain[-1]][0] is not None:
        chain.append(RECIPES[chain[-1]][0])
    return chain[::-1]


def recipe_settings(name: str) -> dict:
    """The pretraining settings of recipe `name`: its parents' changes, then its own."""
    settings: dict = {}
    for step in recipe_chain(name):
        settings.update(RECIPES[step][2])
    return settings


@composed
@dataclass
class SpeedrunConfig:
    """`glm53 speedrun`: pretrain on the broad stream until the dev body loss reaches the target, on the clock."""

    out: str = setting("", "folder to write (must not exist)", required=True)
    recipe: str = setting(RECORD, "the recipe (docs/speedrun.md): its pretraining settings, before any "
                                  "--pretrain.X flag; the default is the current record, e4 the first row",
                          choices=tuple(RECIPES))
    seed: int = setting(42, "seed of the initialization and the stream's order", at_least=0, below=2**31)
    budget_minutes: float = setting(40.0, "give up (exit 1) when the clock passes this many minutes", above=0)
    target: float = setting(TARGET_BODY_LOSS, "body loss to reach, nats a byte of the first 64 dev tasks' reference "
                                              "bodies", above=0)
    # 5 s: a check of 64 tasks takes 0.2-0.3 s off the clock with byte pairs (about 1.5 s with bytes, e4), and every
    # 30 s quantized 3-minute runs to the 30 s (docs/speedrun.md, the fourth record); the 2026-12-03 records used 30
    check_every_seconds: float = setting(5.0, "check the target every this many seconds on the clock (and at the "
                                              "schedule's last step)", above=0)
    check_every_steps: int = setting(0, "instead, check every this many steps (0: by --check-every-seconds): a "
                                        "screen that counts steps to the target, whatever the machine's load",
                                     at_least=0)
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=("resume", "report_to", "report_name", "report_group", "trust_unverified",
                                           "accept_partial_isolation"))
    # the base the command puts --recipe's whole chain over: the first row, which every chain starts from (a base
    # of a later recipe would leak its settings into an earlier one's run); checkpoints: none is written, and step 1
    # is valid for any --pretrain.steps, so the default instance holds one step (a Python caller gives its own)
    pretrain: PretrainConfig = setting(default_factory=lambda: PretrainConfig(**{**recipe_settings("e4"),
                                                                                 "steps": 1, "warmup_steps": 0,
                                                                                 "checkpoints": (1,)}),
                                       skip=("out", "suite", "seed", "checkpoints", "corpus", "corpus_mix",
                                             "corpus_validation_share", "eval_every", "validation_rows",
                                             "dev_max_new_tokens", "keep_last", "save_optimizer")
                                       + tuple(f for f in RuntimeConfig.__dataclass_fields__))

    def __post_init__(self) -> None:
        check = Checks("speedrun")
        check.declared(self)
        check.done()
        # the stage's runtime is the command's; the pretraining folder is never written (the speedrun writes its own)
        self.pretrain = replace(self.pretrain, out=self.out, suite="broad", seed=self.seed,
                                checkpoints=(self.pretrain.steps,), validation_rows=0, runtime=self.runtime)

    def to_dict(self) -> dict:
        return record(self)
