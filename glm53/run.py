"""`glm53 run`: the whole experiment in one command.

pretrain -> pick the RL start checkpoint -> RLOO -> pick the RL checkpoint on dev -> open the confirm split once
(before and after, greedy) -> paired statistics -> charts and REPORT.md, all under one run folder.

Two choices differ from the reference, both by measurement on this CPU (seed 42):
- pretraining uses lr 1e-3 with 20 warmup steps instead of a constant 3e-4 (same steps, batch and data): after
  100 steps it solves 56/64 confirm tasks greedily, where the reference recipe reached 15-36/64;
- RL then trains all eight families (12 rl tasks each) at temperature 0.8, its 1,536 rollouts in 384 groups of
  4. With the reference's RL settings (three families, 0.35) on that start, 95 of 96 groups had all-equal
  rewards, so RL had nothing to learn from (23/24 -> 23/24, 56/64 -> 56/64); all eight families at 0.8 in 96
  groups of 16 gave 56 -> 61/64, and the same rollouts in groups of 4 beat groups of 16 in sampled pass@1 on
  6 of 6 training seeds (`glm53 sweep rl-run-start`, README).
The reference settings stay one flag away: --rl.families increment,double,even --rl.temperature 0.35
--rl.tasks-per-family 32, and `glm53 pretrain`'s own defaults are the reference's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .data.suites import (BROAD_CONTEXT, BROAD_MAX_NEW_TOKENS, BROAD_SEQUENCE_LENGTH, DEFAULT_SUITE, SUITE_NAMES,
                          get_suite)
from .data.tasks import frozen_tasks, parse_families, read_tasks, write_tasks
from .evaluate.compare import compare
from .evaluate.evaluate import evaluate
from .evaluate.report import REFERENCE_RL_FAMILIES, make_charts, write_report
from .model.config import ModelConfig
from .runtime.device import DEVICE_CHOICES, resolve_device
from .runtime.files import AtomicDirectory, atomic_write_json, refuse_nonempty_dir, remove_stale_temporaries, run_lock
from .runtime.settings import Checks, setting
from .runtime.tracking import TRACKERS
from .train.checkpoint import (RECEIPT_NAME, TRAINER_STATE_NAME, check_run_folder, checkpoint_name, load_model,
                               save_checkpoint, start_run_folder)
from .train.pretrain import pretrain
from .train.pretrain_config import PretrainConfig
from .train.rl import rl_train
from .train.rl_config import RLConfig

PRESETS = {
    "full": {"pretrain": dict(steps=400, checkpoints=(100, 200, 400), batch_size=32, sequence_length=128, lr=1e-3,
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
    # broad: the broad suite in about 13 minutes on the main job's 2-core Zen 5 (docs/broad-run.md): length-bucketed
    # rows of up to 324 tokens cost about 1.5 main-job steps each, RL rollouts about 4 main-job rollouts
    "broad": {"suite": "broad",
              "pretrain": dict(steps=240, checkpoints=(160, 240), batch_size=32, sequence_length=BROAD_SEQUENCE_LENGTH,
                               lr=1e-3, warmup_steps=20, lr_schedule="cosine", dev_max_new_tokens=BROAD_MAX_NEW_TOKENS,
                               model={"max_sequence_length": BROAD_CONTEXT}),
              "rl_start": 0,  # the pretraining checkpoint that passes the most dev tasks
              "rl": dict(groups=128, group_size=4, tasks_per_family=256, checkpoints=(64, 128), groups_per_step=16,
                         temperature=0.8, families="all", max_new_tokens=BROAD_MAX_NEW_TOKENS, dev_per_family=32,
                         dev_samples=1, dev_temperature=0.0),
              "confirm_per_family": 64},
}
RUN_OWNED = ("out", "device", "progress", "resume", "report_to", "suite")  # nested settings the run sets for both
RESUMABLE_CHANGES = ("device", "progress", "resume", "report_to", "report_name", "report_group")
RUN_RECEIPT_NAME = "run-receipt.json"


@dataclass
class RunConfig:
    """`glm53 run`: the pretraining and RL configs (every setting reachable as --pretrain.X and --rl.X) plus
    what joins them. Values come from the dataclass defaults, then the preset, then the command line."""

    out: str = setting("", "run folder (must not exist)", required=True)
    preset: str = setting("full", "full: the main job (~8 min); quick: a small version; broad: the broad suite "
                                  "(at most 15 min)", choices=tuple(PRESETS))
    rl_start: int = setting(100, "pretraining step whose checkpoint RL starts from (0: the checkpoint that passes "
                                 "the most dev tasks, the later one on ties)")
    confirm_per_family: int = setting(8, "confirm-split tasks per family, opened once at the end (broad suite: tasks "
                                         "of each evaluation split, the human split whole)")
    device: str = setting("auto", "auto (cuda, mps, cpu), cpu, cuda or mps", choices=DEVICE_CHOICES)
    progress: bool = setting(True, "show progress bars (--no-progress: plain log lines)")
    resume: bool = setting(False, "continue a stopped run in --out where it stopped")
    report_to: str = setting("none", "also log both stages' per-step figures to a tracker (offline unless you "
                                     "configure it), grouped by the run folder", choices=TRACKERS)
    pretrain: PretrainConfig = setting(default_factory=PretrainConfig, skip=RUN_OWNED)
    rl: RLConfig = setting(default_factory=RLConfig, skip=RUN_OWNED + ("init", "tasks_file"))
    suite: str = setting(DEFAULT_SUITE, "task suite of both stages and the evaluation, reference or broad (--suite "
                                        "broad alone runs --preset broad, whose context and token caps fit its bodies)")

    def __post_init__(self) -> None:
        check = Checks("run")
        check.at_least("confirm_per_family", self.confirm_per_family, 1)
        check.require(self.rl_start == 0 or self.rl_start in self.pretrain.checkpoints,
                      f"--rl-start {self.rl_start} must be one of the pretraining checkpoints "
                      f"({','.join(map(str, self.pretrain.checkpoints))}; set them with --pretrain.checkpoints), or 0")
        check.one_of("suite", self.suite, SUITE_NAMES)
        check.done()
        run = Path(self.out)
        shared = {"device": self.device, "progress": self.progress, "resume": False,  # stages resume one by one
                  "report_to": self.report_to, "report_group": str(run), "suite": self.suite}
        self.pretrain = replace(self.pretrain, out=str(run / "pretrain"), **shared)  # checks the suite's context
        init = str(run / "pretrain" / checkpoint_name(self.rl_start)) if self.rl_start else ""  # 0: chosen on dev
        self.rl = replace(self.rl, init=init, out=str(run / "rl"), **shared)

    @classmethod
    def from_preset(cls, out: str, preset: str = "full", **overrides) -> "RunConfig":
        """A preset with overrides in its own shape, e.g. pretrain=dict(steps=3), rl_start=3."""
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        spec = {k: dict(v) if isinstance(v, dict) else v for k, v in PRESETS[preset].items()}
        for key, value in overrides.items():
            spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
        pretraining = spec.pop("pretrain")
        if isinstance(pretraining.get("model"), dict):  # a preset's model settings over the defaults
            pretraining["model"] = ModelConfig(**pretraining["model"])
        return cls(out=out, preset=preset, pretrain=PretrainConfig(**pretraining), rl=RLConfig(**spec.pop("rl")),
                   **spec)

    def to_dict(self) -> dict:
        own = ("out", "preset", "rl_start", "confirm_per_family", "device", "progress", "resume", "report_to", "suite")
        nested = {"pretrain": self.pretrain.to_dict(), "rl": self.rl.to_dict()}
        for stage in nested.values():  # the stages' own copies of run-level settings
            for key in RESUMABLE_CHANGES:
                stage.pop(key, None)
        return {**{k: getattr(self, k) for k in own}, **nested}


def _stage(train, stage_cfg, resume: bool, log) -> dict:
    """Run a training stage, or with `resume` finish it: a finished stage's receipt is read back, a stopped one
    continues from its latest checkpoint, one that never reached a checkpoint starts again."""
    out = Path(stage_cfg.out)
    if resume and (out / RECEIPT_NAME).is_file():
        log(f"resume: {out} already finished")
        return json.loads((out / RECEIPT_NAME).read_text())
    resumable = resume and any((p / TRAINER_STATE_NAME).is_file() for p in out.glob("checkpoint-*"))
    return train(replace(stage_cfg, resume=resumable), log=log)


def run_pipeline(cfg: RunConfig, log=print) -> dict:
    """The main job. With cfg.resume, a stopped run continues where it stopped and ends as an uninterrupted
    run would have (the same checkpoints, evaluations and report)."""
    run = Path(cfg.out)
    with run_lock(run):
        settings = {k: v for k, v in cfg.to_dict().items() if k not in RESUMABLE_CHANGES}
        if cfg.resume:
            check_run_folder(run, settings, True, set())
            if (run / RUN_RECEIPT_NAME).exists():
                raise FileExistsError(f"--resume: the run in {run} already finished ({RUN_RECEIPT_NAME} exists)")
        else:
            refuse_nonempty_dir(run, "Pass --resume to continue a stopped run, or choose another --out.")
            start_run_folder(run, settings)
        remove_stale_temporaries(run)
        return _run_stages(cfg, run, log)


def _run_stages(cfg: RunConfig, run: Path, log) -> dict:
    seconds: dict[str, float] = {}
    started = time.perf_counter()

    t0 = time.perf_counter()
    pretrain_receipt = _stage(pretrain, cfg.pretrain, cfg.resume, log)
    seconds["pretrain"] = time.perf_counter() - t0

    rl_cfg = cfg.rl if cfg.rl_start else replace(cfg.rl, init=str(run / "pretrain" / _dev_start(pretrain_receipt, log)))
    start = Path(rl_cfg.init)
    t0 = time.perf_counter()
    rl_receipt = _stage(rl_train, rl_cfg, cfg.resume, log)
    seconds["rl"] = time.perf_counter() - t0

    scored = [c for c in rl_receipt["checkpoints"] if c["group"] > 0 and c["dev"]]
    best = max(scored, key=lambda c: (c["dev"]["exact_rollouts"], c["group"])) if scored else rl_receipt["checkpoints"][-1]
    log(f"selected RL checkpoint: group {best['group']} (dev exact {best['dev']['exact_rollouts'] if best['dev'] else '-'})")
    after_model = load_model(run / "rl" / best["path"], resolve_device(cfg.device))
    final = _save_final(run, after_model, best, get_suite(cfg.suite))
    stages = (pretrain_receipt, rl_receipt, start, best, after_model, final, seconds, started)
    if cfg.suite == "reference":
        return _reference_evaluation(cfg, run, log, *stages)
    return _suite_evaluation(cfg, run, log, *stages)


def _dev_start(pretrain_receipt: dict, log) -> str:
    """The pretraining checkpoint (after step 0) that passes the most dev tasks, the later one on ties."""
    trained = [c for c in pretrain_receipt["checkpoints"] if c["step"] > 0]
    chosen = max(trained, key=lambda c: (c["dev_passed"], c["step"]))
    log(f"RL starts from pretraining step {chosen['step']}: dev " + ", ".join(
        f"{c['step']}: {c['dev_passed']}/{c['dev_tasks']}" for c in trained))
    return chosen["path"]


def _save_final(run: Path, model, best: dict, suite) -> dict:
    """DIR/final/: the chosen model in the save_pretrained format (model.safetensors, config.json) with its
    metadata, no trainer state: `GLM53.from_pretrained(DIR/final)` and `glm53 eval --checkpoint DIR/final` load it."""
    if not (run / "final").is_dir():  # a resumed run that saved it keeps it
        save_checkpoint(run / "final", model, {"stage": "final", "chosen": f"rl/{best['path']}",
                                               "chosen_by": "dev exact rollouts, the later on ties", "group": best["group"],
                                               **suite.receipt()})
    sha = json.loads((run / "final" / "metadata.json").read_text())["weights_sha256"]
    if sha != best["weights_sha256"]:
        raise RuntimeError(f"{run / 'final'} holds other weights ({sha[:12]}) than rl/{best['path']} "
                           f"({best['weights_sha256'][:12]})")
    return {"path": "final", "from": f"rl/{best['path']}", "weights_sha256": sha}


def _reference_evaluation(cfg: RunConfig, run: Path, log, pretrain_receipt: dict, rl_receipt: dict, start: Path,
                          best: dict, after_model, final: dict, seconds: dict, started: float) -> dict:
    """The reference suite's end of the main job: the confirm split opened once, before and after RL."""
    t0 = time.perf_counter()
    dev_device = resolve_device(cfg.device)
    if not (run / "eval").is_dir():  # a resumed run whose evaluation finished reads it back
        with AtomicDirectory(run / "eval") as tmp:  # the evaluation appears whole or not at all
            write_tasks(frozen_tasks("confirm", cfg.confirm_per_family), tmp / "confirm-tasks.jsonl")
            tasks = read_tasks(tmp / "confirm-tasks.jsonl")
            before = evaluate(load_model(start, dev_device), tasks)
            after = evaluate(after_model, tasks)
            for name, result, ckpt in (("before", before, start), ("after", after, run / "rl" / best["path"])):
                result["checkpoint"] = str(ckpt)
                atomic_write_json(tmp / f"{name}-confirm.json", result)
            atomic_write_json(tmp / "comparison.json", compare(before, [after], names=["rl-start", "after-rl"]))
    tasks_file = run / "eval" / "confirm-tasks.jsonl"
    before, after, comparison = (json.loads((run / "eval" / f"{name}.json").read_text())
                                 for name in ("before-confirm", "after-confirm", "comparison"))
    again = evaluate(after_model, read_tasks(tasks_file))
    identical = [r["samples"][0]["completion"] for r in again["tasks"]] == \
        [r["samples"][0]["completion"] for r in after["tasks"]]
    seconds["evaluation"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    families = parse_families(cfg.rl.families)
    info = {"seed": cfg.pretrain.seed, "rl_seed": cfg.rl.seed, "preset": cfg.preset, "device": str(dev_device),
            "rl_families": list(families), "selected_rl_group": best["group"],
            "tasks_file_check": {"file": "eval/confirm-tasks.jsonl", "tasks": again["summary"]["tasks"],
                                 "solved": again["summary"]["tasks_solved_any"], "identical": identical}}
    charts = make_charts(run, before, after, pretrain_receipt, rl_receipt)
    seconds["report"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - started
    info["seconds"] = seconds
    write_report(run, info, before, after, comparison, charts)
    sub = lambda r: sum(r["by_family"][f]["tasks_solved_any"] for f in families)  # noqa: E731
    ref = lambda r: sum(r["by_family"][f]["tasks_solved_any"] for f in REFERENCE_RL_FAMILIES)  # noqa: E731
    receipt = {**info, **get_suite(cfg.suite).receipt(), "final": final, "config": json.loads(json.dumps(cfg.to_dict())),
               "rl_start_checkpoint": str(start), "selected_rl_checkpoint": best["path"],
               "checkpoint_sha256": {"rl_start": rl_receipt["initial_sha256"], "after": best["weights_sha256"]},
               "confirm": {"before_all": before["summary"]["tasks_solved_any"],
                           "after_all": after["summary"]["tasks_solved_any"], "tasks": after["summary"]["tasks"],
                           "before_rl_families": sub(before), "after_rl_families": sub(after),
                           "rl_family_tasks": sum(after["by_family"][f]["tasks"] for f in families),
                           "before_reference_families": ref(before), "after_reference_families": ref(after),
                           "mcnemar_p": comparison["comparisons"][0]["overall"]["mcnemar_p"]},
               "charts": charts, "sandbox": after["sandbox"]}
    atomic_write_json(run / RUN_RECEIPT_NAME, receipt)
    c = receipt["confirm"]
    log(f"confirm greedy: increment/double/even {c['before_reference_families']} -> {c['after_reference_families']} "
        f"of 24, RL families {c['before_rl_families']} -> {c['after_rl_families']} of {c['rl_family_tasks']}, "
        f"all {c['before_all']} -> {c['after_all']} of {c['tasks']}; {seconds['total']:.0f} s; report {run / 'REPORT.md'}")
    return receipt


def _suite_evaluation(cfg: RunConfig, run: Path, log, pretrain_receipt: dict, rl_receipt: dict, start: Path,
                      best: dict, after_model, final: dict, seconds: dict, started: float) -> dict:
    """A suite with several evaluation splits (broad): each split (its first confirm_per_family tasks; the human
    split whole) scored greedily before and after RL with RL's token cap, paired per split; charts, REPORT.md and
    the receipt."""
    from .decode.generate import Sampling
    from .evaluate.evaluate import EvalConfig, subset
    from .evaluate.report import training_charts
    from .evaluate.suite_report import split_chart, split_rows, write_suite_report

    suite, t0, device = get_suite(cfg.suite), time.perf_counter(), resolve_device(cfg.device)
    splits = {s: suite.tasks(s, None if s == "human" else cfg.confirm_per_family) for s in suite.eval_splits}
    if not (run / "eval").is_dir():  # a resumed run whose evaluation finished reads it back
        eval_cfg = EvalConfig(suite=suite.name, sampling=Sampling(max_new_tokens=cfg.rl.max_new_tokens))  # RL's cap
        every = [t for tasks in splits.values() for t in tasks]  # one call: larger decoding batches
        with AtomicDirectory(run / "eval") as tmp:
            scored = {"before": evaluate(load_model(start, device), every, eval_cfg),
                      "after": evaluate(after_model, every, eval_cfg)}
            for split, tasks in splits.items():
                write_tasks(tasks, tmp / f"{split}-tasks.jsonl")
                ids = [t.task_id for t in tasks]
                parts = {name: subset(result, ids) for name, result in scored.items()}
                for name, ckpt in (("before", start), ("after", run / "rl" / best["path"])):
                    parts[name]["checkpoint"] = str(ckpt)
                    atomic_write_json(tmp / f"{name}-{split}.json", parts[name])
                atomic_write_json(tmp / f"comparison-{split}.json",
                                  compare(parts["before"], [parts["after"]], names=["rl-start", "after-rl"]))
    results = {split: tuple(json.loads((run / "eval" / f"{name}-{split}.json").read_text())
                            for name in ("before", "after", "comparison")) for split in splits}
    seconds["evaluation"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    rows = split_rows(results)
    info = {"seed": cfg.pretrain.seed, "rl_seed": cfg.rl.seed, "preset": cfg.preset, "device": str(device),
            **suite.receipt(), "rl_start": str(start.relative_to(run)) if start.is_relative_to(run) else str(start),
            "rl_tasks": cfg.rl.tasks_per_family, "selected_rl_group": best["group"]}
    charts = training_charts(run, pretrain_receipt, rl_receipt, "pass@1 (dev tasks)") + [split_chart(run, rows)]
    seconds["report"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - started
    info["seconds"] = seconds
    write_suite_report(run, info, results, charts)
    receipt = {**info, "final": final, "config": json.loads(json.dumps(cfg.to_dict())),
               "rl_start_checkpoint": str(start), "selected_rl_checkpoint": best["path"],
               "checkpoint_sha256": {"rl_start": rl_receipt["initial_sha256"], "after": best["weights_sha256"]},
               "splits": rows, "charts": charts, "sandbox": results[next(iter(results))][1]["sandbox"]}
    atomic_write_json(run / RUN_RECEIPT_NAME, receipt)
    log("greedy pass@1 before -> after RL: " + ", ".join(f"{s} {r['before']} -> {r['after']} of {r['tasks']}"
                                                          for s, r in rows.items())
        + f"; {seconds['total']:.0f} s; report {run / 'REPORT.md'}")
    return receipt
