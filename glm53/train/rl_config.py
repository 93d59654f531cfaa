"""`glm53 rl`'s settings: every flag with its default and help, checked as a whole when the config is made
(rl.py runs it; rl_update.py is its update)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..data.broad.docstring import DEFAULT_STYLE, RL_PROMPT_STYLES, styled_tasks
from ..data.commands import prompt_style_problem
from ..data.suites import DEFAULT_SUITE, SUITE_NAMES, get_suite
from ..data.tasks import completion_room_problem, read_tasks
from ..decode.sampling import SAMPLED_TEMPERATURE, Sampling
from ..evaluate.eval_config import EvalConfig, sampled_evaluation
from ..model.config import ModelConfig
from ..runtime.config import DECODE_PRECISION, PRECISIONS, RuntimeConfig
from ..runtime.composition import composed, record
from ..runtime.memory import rollout_memory_problem
from ..runtime.settings import MAX_SEED, Checks, default_checkpoints, setting
from ..checkpoints.retention import Retention
from ..verify.rewards import BUILTIN_REWARDS, parse_reward_spec
from .optimization import MUON_SETTINGS, Optimization

TRAIN_SCOPES = ("all", "last-block", "last-block-head", "experts")  # rl_update.py's set_train_scope
# policy-gradient: RLOO and the GRPO family (advantages from the rewards); rejection-sampling: expert iteration, the
# STaR / ReST-EM family (the verified programs, weight 1 each, the rest left out: fine-tuning on what passed)
OBJECTIVES = ("policy-gradient", "rejection-sampling")
TASK_SOURCES = ("rl-split", "stream")  # the frozen rl split's first N tasks, or N fresh ones drawn like the stream
# The objective's choices (policy_gradient.py and completion_batch.py take them from here)
BASELINES = ("leave-one-out", "group-mean")
REWARD_SCALINGS = ("none", "group-std", "batch-std")
AGGREGATIONS = ("sequence-mean", "token-sum", "token-mean", "max-tokens")
NORMALIZATIONS = AGGREGATIONS  # the --normalization flag names the loss aggregation (policy_gradient.py)
UPDATE_IMPLS = ("fast", "plain")  # completion_batch.py's forms
DEFAULT_CHECKPOINTS = (24, 48, 72, 96)
NOT_FOR_ROLLOUTS = ("top_k", "top_p", "ignore_eos")
REWARD_HELP = ("reward, the weighted sum of functions f(task, completion, verdict) -> float: NAME[=WEIGHT] "
               "(weight 1 when left out), comma-separated or the flag repeated, NAME a built-in (binary, partial) or "
               "package.module:function; e.g. --reward binary --reward mypkg.rewards:length_penalty=0.1 (docs/rl.md)")


def check_rewards_named(reward: str, given: str | None, flag: str, config_file, source: str | None = None) -> None:
    """A reward function is code the run imports, so it is imported only when the command line names it (`given`,
    the flag's value): never on the word of a --config file or a replayed record (under `python -m glm53` the current
    folder is on the import path, so a file's `mod:fn` would import whatever mod.py lies there)."""
    named = {name for name, _ in parse_reward_spec(given)} if given else set()
    for name, _ in parse_reward_spec(reward):
        if name not in BUILTIN_REWARDS and name not in named:
            source = source or (f"--config {config_file}" if config_file else "the run's settings")
            raise ValueError(f"{flag} {name} comes from {source}, not the command line: glm53 imports a reward's "
                             f"module only when the command line names it; give {flag} {reward} to run it, or leave "
                             "it out of the file")


@dataclass(frozen=True)
class RolloutSampling(Sampling):
    """How the rollouts are sampled: above temperature 0 (at 0 every sample of a group is the same program)."""

    def __post_init__(self) -> None:
        check = Checks("rl")
        check.require(self.temperature > 0, f"--temperature must be > 0: at 0 every sample of a group is the same "
                                            f"program, so no group has a reward signal (got {self.temperature})")
        check.done()
        super().__post_init__()


ROLLOUTS = RolloutSampling(temperature=SAMPLED_TEMPERATURE)


@composed
@dataclass
class RLConfig:
    init: str = setting("", "checkpoint to start from", required=True, block="command")
    out: str = setting("", "run folder (must not exist, unless --resume)", required=True, block="command")
    groups: int = setting(96, "prompt groups in the whole run", at_least=1, block="optimization")
    group_size: int = setting(16, "completions sampled per prompt (>= 2: leave-one-out needs another sample)",
                                 at_least=2, block="rollouts")
    families: str = setting("increment,double,even", "task families to train on (comma-separated, or all; broad "
                                                      "suite: root primitives, or all)", block="data")
    tasks_per_family: int = setting(32, "rl-split tasks per family (broad suite: the first N tasks of the rl split)",
                                    at_least=1, block="data")
    sampling: RolloutSampling = setting(ROLLOUTS, flatten=True, skip=NOT_FOR_ROLLOUTS,
                                        helps={"temperature": "sampling temperature of the rollouts (> 0)"},
                                        block="rollouts")
    optimization: Optimization = setting(default_factory=lambda: Optimization(lr=5e-5, betas=(0.9, 0.999),
                                                                              weight_decay=0.0), flatten=True,
                                         skip=("betas", "weight_decay", "lr_schedule", "warmup_steps", "min_lr_ratio",
                                               *MUON_SETTINGS),
                                         helps={"lr": "learning rate (AdamW, no weight decay)"}, block="optimization")
    train_scope: str = setting("last-block-head", "which parameters train (experts: every block's routed and shared "
                                                  "experts, not the router)", choices=TRAIN_SCOPES,
                               block="optimization")
    objective: str = setting("policy-gradient", "policy-gradient (advantages from the rewards: RLOO, GRPO, ...) or "
                                                "rejection-sampling (expert iteration: each update fine-tunes on the "
                                                "step's programs the verifier passed, weight 1, the rest left out)",
                             choices=OBJECTIVES, block="optimization")
    reward: str = setting("binary", REWARD_HELP, repeatable=True, block="rewards")
    allow_unordered_reward: bool = setting(False, "train on a reward that breaks the ordering rule (passed > failed "
                                                  ">= invalid), which the run checks on a probe set when it starts",
                                           block="rewards")
    invalid_penalty: float = setting(-0.1, "reward of a statically invalid program (<= 0, the reward of "
                                                  "a valid program that fails every case: never paid for)", at_most=0,
                                     block="rewards")
    exact_bonus: float = setting(0.0, "partial reward: bonus when every case passes", at_least=0, block="rewards")
    checkpoints: tuple[int, ...] | None = setting(None, "groups done at which to save and score on dev",
                                                  shown="24,48,72,96, those within --groups", block="retention")
    seed: int = setting(31415, "seed of the task schedule and the sampling", at_least=0, at_most=MAX_SEED,
                        block="command")
    groups_per_step: int = setting(16, "prompt groups per optimizer step", at_least=1, block="optimization")
    grad_accumulation: int = setting(1, "micro-batches each update runs its rows (and replay rows) in, their "
                                        "gradients added up before the one optimizer step: the step of "
                                        "--groups-per-step groups in the memory of a K-th of it (equal to rounding)",
                                     at_least=1, block="optimization")
    normalization: str = setting("sequence-mean", "loss aggregation: each completion's mean or summed token "
                                 "log-prob (then the mean over completions), token-mean over the batch (DAPO) or the "
                                 "batch sum over completions x max-new-tokens (Dr. GRPO)", choices=NORMALIZATIONS,
                                 block="optimization")
    advantage_baseline: str = setting("leave-one-out", "baseline of a group's advantages: the other samples' mean "
                                      "(RLOO) or the group mean (GRPO)", choices=BASELINES, block="optimization")
    reward_scaling: str = setting("none", "divide advantages by the group's reward std (GRPO) or the step's",
                                  choices=REWARD_SCALINGS, block="optimization")
    mask_truncated: bool = setting(False, "leave completions that hit the token cap out of the update",
                                   block="optimization")
    iterations: int = setting(1, "optimisation passes over each step's rollouts (PPO-style ratio clipping after the "
                                 "first)", at_least=1, block="optimization")
    clip_low: float = setting(0.2, "with --iterations > 1: the ratio is clipped below at 1 - clip_low", at_least=0,
                              at_most=1, block="optimization")
    clip_high: float = setting(0.2, "with --iterations > 1: the ratio is clipped above at 1 + clip_high "
                                    "(0.28: DAPO's clip-higher)", at_least=0, block="optimization")
    entropy_coef: float = setting(0.0, "entropy bonus: subtract this times the mean token entropy from the loss",
                                  at_least=0, block="optimization")
    dynamic_sampling: bool = setting(False, "replace groups whose rewards are all equal by groups of fresh tasks "
                                            "(DAPO) until the step's groups all carry signal or the draw cap is "
                                            "reached", block="rollouts")
    dynamic_sampling_max_draws: int = setting(3, "with --dynamic-sampling: at most this many times a step's "
                                                 "groups are sampled in all", at_least=1, block="rollouts")
    update_impl: str = setting("fast", "forward of the policy update: fast runs each group's shared prompt once and "
                                       "copies its cache to the group's rows; plain runs every row in full (equal up "
                                       "to rounding)", choices=UPDATE_IMPLS, block="optimization")
    kl_coef: float = setting(0.0, "KL penalty to the initial policy (0 = off)", at_least=0, block="optimization")
    replay_coef: float = setting(0.0, "replay cross-entropy on pretraining examples (0 = off)", at_least=0,
                                 block="optimization")
    replay_batch: int = setting(16, "replay examples per step", at_least=1, block="optimization")
    dev_per_family: int = setting(4, "dev tasks per family scored at each checkpoint (broad suite: the first N)",
                                  at_least=0, block="dev evaluation")
    # its token cap is the rollouts' (max_new_tokens); see dev_eval
    dev: EvalConfig = setting(default_factory=sampled_evaluation, flatten="dev_",
                              skip=("max_new_tokens", "precision", "timeout_s", "suite") + NOT_FOR_ROLLOUTS,
                              helps={"samples": "samples per dev task", "temperature": "temperature of the dev samples",
                                     "seed": "seed of the dev sampling"}, block="dev evaluation")
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     helps={"precision": "precision of the update"}, block="runtime")
    sample_precision: str = setting(DECODE_PRECISION, "precision of the rollouts", choices=PRECISIONS, block="rollouts")
    tasks_file: str | None = setting(None, "task file to train on instead of the rl split (JSON Lines, "
                                                    "or a dataset: DIR, DIR:SPLIT, FILE.parquet)", block="data")
    task_source: str = setting("rl-split", "rl-split: the first --tasks-per-family tasks of the rl split; stream "
                                           "(broad suite): --tasks-per-family tasks drawn like the pretraining stream "
                                           "from document 60,000,000 on (no held-out pair or phrasing, as in the "
                                           "stream; --families keeps those of its roots), so a run of as many groups "
                                           "over all families sees each once",
                               choices=TASK_SOURCES, block="data")
    prompt_style: str = setting(DEFAULT_STYLE, "broad suite: how the prompts of the run's tasks and dev tasks give "
                                               "the description: comment (comment lines above the def line), "
                                               "docstring (a PEP 257 docstring with one of the task's cases as an "
                                               "example) or both (each task in one of the two, chosen by a hash of "
                                               "its id: about half each); not with --tasks-file",
                                choices=RL_PROMPT_STYLES, block="data")
    suite: str = setting(DEFAULT_SUITE, "task suite, reference or broad: its rl and dev splits, stop rule and language "
                                        "level (broad: also all families, 256 tasks, 32 dev tasks and 192 tokens, "
                                        "unless given)", choices=SUITE_NAMES, block="command")
    # --keep-last, --save-optimizer
    retention: Retention = setting(default_factory=Retention, flatten=True, block="retention")

    def __post_init__(self) -> None:
        self.checkpoints = default_checkpoints(self.checkpoints, DEFAULT_CHECKPOINTS, self.groups)
        check = Checks("rl")
        check.require(all(1 <= c <= self.groups for c in self.checkpoints),
                      f"--checkpoints {','.join(map(str, self.checkpoints))} must lie in [1, --groups {self.groups}]")
        check.declared(self)
        try:
            parse_reward_spec(self.reward)
        except ValueError as err:
            check.require(False, str(err))
        check.require(not self.dynamic_sampling or self.dynamic_sampling_max_draws >= 2,
                      f"--dynamic-sampling needs --dynamic-sampling-max-draws >= 2 (1 draws no fresh group), got "
                      f"{self.dynamic_sampling_max_draws}")
        check.require(self.iterations == 1 or (self.clip_low > 0 and self.clip_high > 0),
                      f"--iterations {self.iterations} needs a clipping range on both sides (--clip-low and "
                      f"--clip-high > 0; got {self.clip_low} and {self.clip_high})")
        if self.objective == "rejection-sampling":  # it keeps what passed: the reward's shape is not used
            defaults = {f.name: f.default for f in fields(self)}
            for name in ("reward", "invalid_penalty", "exact_bonus", "allow_unordered_reward", "advantage_baseline",
                         "reward_scaling"):
                flag, value = "--" + name.replace("_", "-"), getattr(self, name)
                check.require(value == defaults[name],
                              f"{flag} {value} has no effect under --objective rejection-sampling, which fine-tunes on "
                              f"the programs that pass (weight 1) and leaves the rest out; drop {flag} or use "
                              "--objective policy-gradient")
        self.retention.check(check, self.runtime.resume)
        check.require(self.task_source == "rl-split" or (self.suite == "broad" and not self.tasks_file),
                      f"--task-source stream draws tasks from the broad suite's pretraining stream: use it with "
                      f"--suite broad and no --tasks-file (got --suite {self.suite}"
                      + (f", --tasks-file {self.tasks_file})" if self.tasks_file else ")"))
        if self.prompt_style != DEFAULT_STYLE:
            check.require(not self.tasks_file, f"--prompt-style renders the suite's tasks; a --tasks-file's prompts "
                                               f"are trained on as written: leave --prompt-style {DEFAULT_STYLE}")
            if self.suite in SUITE_NAMES:
                problem = prompt_style_problem(self.suite, self.prompt_style)
                check.require(problem is None, str(problem))
        if self.suite in SUITE_NAMES:  # the splits hold what is asked (a task file or the stream replaces the split)
            suite = get_suite(self.suite)
            from_split = not self.tasks_file and self.task_source == "rl-split"
            counts = ((("--tasks-per-family", self.tasks_per_family),) if from_split else ()) + \
                (("--dev-per-family", self.dev_per_family),)
            for flag, count in counts:
                check.require(suite.count_problem(flag, count) is None, str(suite.count_problem(flag, count)))
        check.done()
        if self.groups not in self.checkpoints:
            self.checkpoints = self.checkpoints + (self.groups,)

    def training_tasks(self, count: int | None = None) -> list:
        """The tasks RL draws its groups from: the task file's, or the rl split's or the stream's (--task-source)
        first `count` (default --tasks-per-family; per family in the reference suite)."""
        if self.tasks_file:
            return read_tasks(self.tasks_file)
        count = self.tasks_per_family if count is None else count
        suite = get_suite(self.suite)
        if self.task_source == "stream":
            return styled_tasks(suite.stream_tasks(count, self.families), self.prompt_style)
        return styled_tasks(suite.tasks("rl", count, self.families), self.prompt_style)

    def checked_tasks(self, tasks: list | None = None, dev_tasks: list | None = None) -> tuple[list, list]:
        """The run's tasks and dev tasks (`training_tasks` and the suite's dev tasks where not given), refused in
        one line before anything is written (rl.py calls it before run_lock makes the folder) when there are none,
        or when the start checkpoint (its config.json, read without loading the weights) cannot take them: another
        tokenizer or too short a context for the suite, a prompt plus --max-new-tokens past its context, or more
        rollouts than this machine's memory holds."""
        try:
            config = ModelConfig.from_dict(json.loads((Path(self.init) / "config.json").read_text()))
        except (ValueError, TypeError) as err:
            raise ValueError(f"{Path(self.init) / 'config.json'} is not a valid model config: {err}") from None
        suite = get_suite(self.suite)
        problem = suite.model_problem(config)
        if problem:
            raise ValueError(f"rl: {self.init}: {problem}")
        if tasks is None:  # a sweep's job names its task file in the config alone
            tasks = self.training_tasks()
        if not tasks:
            raise ValueError(f"rl: no task of families {self.families} among the first {self.tasks_per_family} of "
                             + ("the stream's tasks (--task-source stream)" if self.task_source == "stream"
                                else "the rl split"))
        if dev_tasks is None:
            dev_tasks = styled_tasks(suite.dev_tasks_for(tasks, self.dev_per_family, self.families), self.prompt_style)
        problem = completion_room_problem([*tasks, *dev_tasks], self.sampling.max_new_tokens,
                                          config.max_sequence_length, "--max-new-tokens", suite.fit_context, None)
        if problem:  # the first rollout would fail there
            raise ValueError(f"rl: {self.init}: {problem}")
        problem = rollout_memory_problem(self, config)  # a group or dev sample count this machine cannot hold
        if problem:
            raise ValueError(f"rl: {problem}")
        return tasks, dev_tasks

    @property
    def dev_eval(self) -> EvalConfig:
        """The dev evaluation as it runs: its samples at the rollouts' token cap."""
        return replace(self.dev, suite=self.suite,
                       sampling=replace(self.dev.decoding.sampling, max_new_tokens=self.sampling.max_new_tokens))

    def to_dict(self) -> dict:
        return record(self)
