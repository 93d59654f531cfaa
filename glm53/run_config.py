"""`glm53 run`'s settings: the presets and `RunConfig`, which nests the pretraining and RL configs (every setting
reachable as --pretrain.X and --rl.X) and the runtime both stages share. Light: no torch (run.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from .checkpoints.names import checkpoint_name
from .data.suites import BROAD_MAX_NEW_TOKENS, DEFAULT_SUITE, SUITE_NAMES, get_suite
from .runtime.config import RuntimeConfig, threads_problem
from .runtime.composition import composed, record
from .runtime.settings import Checks, setting
from .train.pretrain_config import PretrainConfig
from .train.rl_config import RLConfig
from .train.speedrun_config import recipe_settings

PRESETS = {
    # full: the reference run's first 100 steps (400 x 32 rows at a constant 1e-3 after 20 warmup steps, `glm53
    # pretrain --steps 400`): RL starts from step 100, and a constant rate makes step 100 the same whatever the
    # total, so the 300 steps after it (three quarters of the job's time, read by nothing downstream) are not run
    # (docs/main-job.md). --pretrain.steps 400 --pretrain.checkpoints 100,200,400 runs them.
    "full": {"pretrain": dict(steps=100, checkpoints=(100,), batch_size=32, sequence_length=128, lr=1e-3,
                              warmup_steps=20),
             "rl_start": 100,
             # 1,536 rollouts in groups of 4 (rl-run-start: sampled pass@1 +1.3 pp over 96 x 16, 6/6 seeds)
             "rl": dict(groups=384, group_size=4, tasks_per_family=12, checkpoints=(96, 192, 288, 384), temperature=0.8,
                        families="all"),
             "confirm_per_family": 8},
    # quick: 100 steps of 16 rows learn visibly (6/8 and 7/8 dev functions at step 100 in two runs; 60 steps: 0/8)
    "quick": {"pretrain": dict(steps=100, checkpoints=(50, 100), batch_size=16, sequence_length=128, lr=1e-3,
                               warmup_steps=10),
              "rl_start": 100,
              "rl": dict(groups=16, group_size=8, tasks_per_family=2, checkpoints=(8, 16), dev_per_family=1,
                         dev_samples=4, temperature=0.8, families="all"),
              "confirm_per_family": 4},
    # broad: the speedrun's record recipe (docs/speedrun.md, `muon-qk-bpe`: the broad model with QK-norm and the
    # 2,048-id byte-pair tokenizer, Muon 0.02 on the blocks' matrices, AdamW 3e-3 on the rest, rows of 16 with the
    # loss on the bodies, cosine) on a 2,400-step schedule, which meets the four bands within 15 minutes on 2 cores
    # (docs/broad-run.md). Until 2026-12-03 it was run e4's AdamW recipe on bytes for 3,600 steps (--recipe e4).
    "broad": {"suite": "broad",
              "pretrain": dict(recipe_settings("muon-qk-bpe"), steps=2400, checkpoints=(1200, 1800, 2400),
                               dev_max_new_tokens=BROAD_MAX_NEW_TOKENS),
              "rl_start": 0,  # the pretraining checkpoint that passes the most dev tasks
              # expert iteration on 2,048 rollouts of 512 fresh tasks drawn like the stream, 32 updates of every
              # parameter at lr 2e-4 (rl-generalize's stream-rejection-sampling: compose +5.3, phrase +8.3 points
              # from the start on ten fresh seeds, Holm p = 0.008, no split down; compose +5.8 over budget-4x, the
              # preset's RL for the afternoon of 2026-12-04, which kept confirm 2.8 points higher:
              # docs/studies/rl-generalize.md)
              "rl": dict(groups=512, group_size=4, tasks_per_family=512, task_source="stream",
                         objective="rejection-sampling", checkpoints=(256, 512), groups_per_step=16, lr=2e-4,
                         train_scope="all", temperature=0.8, families="all", max_new_tokens=BROAD_MAX_NEW_TOKENS,
                         dev_per_family=32, dev_samples=1, dev_temperature=0.0),
              "confirm_per_family": 64},
}
STAGE_RUNTIME = ("precision", "threads")  # runtime settings each stage has its own of: --pretrain.threads, ...
RUN_RUNTIME = tuple(f.name for f in fields(RuntimeConfig) if f.name not in STAGE_RUNTIME)  # the run sets for both
RUN_RECEIPT_NAME = "run-receipt.json"
KEEP_CHECKPOINTS = ("needed", "all")


@composed
@dataclass
class RunConfig:
    """`glm53 run`: the pretraining and RL configs (every setting reachable as --pretrain.X and --rl.X) plus
    what joins them. Values come from the dataclass defaults, then the preset, then the command line."""

    out: str = setting("", "run folder (must not exist)", required=True)
    preset: str = setting("full", "full: the main job (~6 min); quick: a small version; broad: the broad suite "
                                  "(10-13 min on 2 cores: docs/broad-run.md)", choices=tuple(PRESETS))
    rl_start: int = setting(100, "pretraining step whose checkpoint RL starts from (0: the checkpoint that passes "
                                 "the most dev tasks, the later one on ties)", at_least=0)
    confirm_per_family: int = setting(8, "confirm-split tasks per family, opened once at the end (broad suite: tasks "
                                         "of each evaluation split, the human split whole)", at_least=1)
    suite: str = setting(DEFAULT_SUITE, "task suite of both stages and the evaluation, reference or broad (--suite "
                                        "broad alone runs --preset broad, whose context and token caps fit its bodies)",
                         choices=SUITE_NAMES)
    keep_checkpoints: str = setting("needed", "needed: as each stage finishes, delete every trainer state and the "
                                              "weights of every checkpoint but the RL start and the chosen RL "
                                              "checkpoint (metadata.json stays; the report and --resume need nothing "
                                              "else); all: keep every checkpoint whole", choices=KEEP_CHECKPOINTS)
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=STAGE_RUNTIME + ("report_name", "report_group", "trust_unverified"),
                                     helps={"progress": "show progress bars (--no-progress: plain log lines)",
                                            "resume": "continue a stopped run in --out where it stopped",
                                            "report_to": "also log both stages' per-step figures to a tracker "
                                                         "(offline unless you configure it), grouped by the run "
                                                         "folder"})
    pretrain: PretrainConfig = setting(default_factory=PretrainConfig, skip=("out", "suite") + RUN_RUNTIME)
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
        """A preset with overrides in its own shape, e.g. pretrain=dict(steps=3), rl_start=3."""
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        spec = {k: dict(v) if isinstance(v, dict) else v for k, v in PRESETS[preset].items()}
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
        return settings

    def folder_settings(self) -> dict:
        """What the run folder records (run.json) and a resumed run must match: the settings but the runtime."""
        runtime = {f.name for f in fields(RuntimeConfig)}
        return {k: v for k, v in self.to_dict().items() if k not in runtime}
