"""`glm53 run`'s settings: `RunConfig`, which nests the pretraining and RL configs (every setting reachable as
--pretrain.X and --rl.X) and the runtime both stages share. Its presets are the run recipes of the recipe book
(glm53/recipes/: full, quick, broad and the RL arms measured). Light: no torch (run.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from .checkpoints.names import checkpoint_name
from .data.suites import DEFAULT_SUITE, SUITE_NAMES, get_suite
from .runtime.config import RuntimeConfig, threads_problem
from .runtime.composition import composed, record
from .runtime.settings import Checks, setting
from .train.pretrain_config import PretrainConfig
from .train.rl_config import RLConfig
from .recipes.book import run_recipe_names, run_settings

STAGE_RUNTIME = ("precision", "threads")  # runtime settings each stage has its own of: --pretrain.threads, ...
RUN_RUNTIME = tuple(f.name for f in fields(RuntimeConfig) if f.name not in STAGE_RUNTIME)  # the run sets for both
RUN_RECEIPT_NAME = "run-receipt.json"
KEEP_CHECKPOINTS = ("needed", "all")


@composed
@dataclass
class RunConfig:
    """`glm53 run`: the pretraining and RL configs (every setting reachable as --pretrain.X and --rl.X) plus
    what joins them. Values come from the dataclass defaults, then the preset, then the command line."""

    out: str = setting("", "run folder (must not exist)", required=True, block="command")
    preset: str = setting("full", "a run recipe (glm53/recipes/): full: the main job (~6 min); quick: a small "
                                  "version; broad: the broad suite (10-13 min on 2 cores: docs/broad-run.md); the "
                                  "others: RL arms the studies measured", choices=run_recipe_names(), block="command")
    rl_start: int = setting(100, "pretraining step whose checkpoint RL starts from (0: the checkpoint that passes "
                                 "the most dev tasks, the later one on ties)", at_least=0, block="command")
    confirm_per_family: int = setting(8, "confirm-split tasks per family, opened once at the end (broad suite: tasks "
                                         "of each evaluation split, the human split whole)", at_least=1,
                                      block="command")
    suite: str = setting(DEFAULT_SUITE, "task suite of both stages and the evaluation, reference or broad (--suite "
                                        "broad alone runs --preset broad, whose context and token caps fit its bodies)",
                         choices=SUITE_NAMES, block="command")
    keep_checkpoints: str = setting("needed", "needed: as each stage finishes, delete every trainer state and the "
                                              "weights of every checkpoint but the RL start and the chosen RL "
                                              "checkpoint (metadata.json stays; the report and --resume need nothing "
                                              "else); all: keep every checkpoint whole", choices=KEEP_CHECKPOINTS,
                                    block="retention")
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=STAGE_RUNTIME + ("report_name", "report_group", "trust_unverified"),
                                     helps={"progress": "show progress bars (--no-progress: plain log lines)",
                                            "resume": "continue a stopped run in --out where it stopped",
                                            "report_to": "also log both stages' per-step figures to a tracker "
                                                         "(offline unless you configure it), grouped by the run "
                                                         "folder"}, block="runtime")
    # the preset names the run's recipe: its pretraining stage names none of its own
    pretrain: PretrainConfig = setting(default_factory=PretrainConfig, skip=("out", "suite", "recipe") + RUN_RUNTIME)
    rl: RLConfig = setting(default_factory=RLConfig, skip=("out", "init", "tasks_file", "suite") + RUN_RUNTIME)

    def __post_init__(self) -> None:
        check = Checks("run")
        check.require(self.rl_start == 0 or self.rl_start in self.pretrain.checkpoints,
                      f"--rl-start {self.rl_start} must be one of the pretraining checkpoints "
                      f"({','.join(map(str, self.pretrain.checkpoints))}; set them with --pretrain.checkpoints), or 0")
        check.require(not self.runtime.resume or (self.pretrain.retention.save_optimizer
                                                  and self.rl.retention.save_optimizer),
                      "--resume needs the optimizer state that --no-pretrain.save-optimizer and --no-rl.save-optimizer "
                      "leave out of every checkpoint: drop them (a run started with either cannot be resumed)")
        check.declared(self)
        for stage in ("pretrain", "rl"):  # each stage's threads, under the job's --force-threads
            problem = threads_problem(getattr(self, stage).runtime.threads, self.runtime.force_threads,
                                      f"--{stage}.threads")
            check.require(problem is None, str(problem))
        if self.suite in SUITE_NAMES:  # every split the job opens holds what it asks, checked now, not at its end
            suite = get_suite(self.suite)
            from_split = self.rl.task_source == "rl-split"  # the stream holds as many tasks as asked
            for flag, count in (("--confirm-per-family", self.confirm_per_family),
                                *((("--rl.tasks-per-family", self.rl.tasks_per_family),) if from_split else ()),
                                ("--rl.dev-per-family", self.rl.dev_per_family)):
                check.require(suite.count_problem(flag, count) is None, str(suite.count_problem(flag, count)))
            check.require(suite.tokenizer_problem(self.pretrain.model) is None,
                          str(suite.tokenizer_problem(self.pretrain.model)))
        check.done()
        run = Path(self.out)
        shared = {name: getattr(self.runtime, name) for name in RUN_RUNTIME}
        shared.update(resume=False, report_group=str(run))  # the stages resume one by one; the run is the group
        self.pretrain = replace(self.pretrain, out=str(run / "pretrain"), suite=self.suite, **shared)  # checks context
        init = str(run / "pretrain" / checkpoint_name(self.rl_start)) if self.rl_start else ""  # 0: chosen on dev
        self.rl = replace(self.rl, init=init, out=str(run / "rl"), suite=self.suite, **shared)

    @staticmethod
    def inherited_settings(value) -> dict:
        """The stages' suite is the run's (__post_init__ sets it): given to them as they are built from flags or a
        file, so that their own checks (--rl.task-source stream needs the broad suite) see it."""
        suite = value("suite") or DEFAULT_SUITE
        return {"pretrain.suite": suite, "rl.suite": suite}

    @classmethod
    def from_preset(cls, out: str, preset: str = "full", **overrides) -> "RunConfig":
        """A preset (a run recipe of the book) with overrides in its own shape, e.g. pretrain=dict(steps=3),
        rl_start=3."""
        if preset not in run_recipe_names():
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(run_recipe_names())} (the run "
                             "recipes of glm53/recipes/)")
        spec = run_settings(preset)
        for key, value in overrides.items():
            spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
        inherited = cls.inherited_settings(spec.get)  # built with the run's suite, as from flags or a file
        pretrain, rl = ({**spec.pop(stage), "suite": inherited[f"{stage}.suite"]} for stage in ("pretrain", "rl"))
        return cls(out=out, preset=preset, pretrain=PretrainConfig(**pretrain), rl=RLConfig(**rl), **spec)

    def to_dict(self) -> dict:
        settings = record(self)
        for stage in ("pretrain", "rl"):  # the stages' own copies of the run's runtime settings
            for key in RUN_RUNTIME:
                settings[stage].pop(key, None)
        settings["pretrain"].pop("recipe", None)  # the run's recipe is its preset
        return settings

    def folder_settings(self) -> dict:
        """What the run folder records (run.json) and a resumed run must match: the settings but the runtime."""
        runtime = {f.name for f in fields(RuntimeConfig)}
        return {k: v for k, v in self.to_dict().items() if k not in runtime}
