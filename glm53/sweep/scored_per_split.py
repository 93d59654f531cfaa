"""Jobs scored on every evaluation split of a suite: rl-splits (post-training) and pretrain-splits (pretraining).

The rl-splits job: RL from a given checkpoint (glm53 rl), then greedy pass@1 on every evaluation split of its
suite, for the start checkpoint and for the RL run's last one. Its metrics, at the one label "eval", are per
split: `<split>_pass_at_1_before`, `<split>_pass_at_1` (after RL) and `<split>_lift` (after - before); the
seed is the RL seed. `glm53 analyze` tests every `*_lift` metric against zero over the seeds (the exact sign-flip
test; analysis.py), so a spec of one arm and several seeds gives each split's RL lift with its p.

The start's score is the same for every seed and arm (greedy decoding of one checkpoint), so inside a sweep folder
the first job to finish it writes it to `start-scores/<key>.json` and the others read it (`start_scores`); the key
names the start's weights, the tasks, the evaluation settings and the thread count, so a file is only read for the
same greedy decoding. A race between parallel jobs is harmless: both compute the same result, and the file is
written atomically by whichever ends first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..checkpoints.retention import prune_checkpoints
from ..data.suites import ALL_SPLITS, get_suite, suite_settings
from ..decode.sampling import Sampling
from ..evaluate.eval_config import EvalConfig
from ..runtime.files import atomic_write_json
from ..runtime.settings import Checks, config_from_settings, setting, setting_names
from ..train.pretrain_config import PretrainConfig
from ..train.rl_config import RLConfig


@dataclass
class SplitEvalConfig:
    """The evaluation that ends an rl-splits job, the same for every seed."""

    eval_splits: str = setting("all", "comma-separated splits to score, or all (the suite's evaluation splits)")
    eval_count: int = setting(64, "tasks of each split (reference suite: per family); the human split is scored "
                                  "whole", at_least=1)
    eval_max_new_tokens: int = setting(0, "token cap (0: the RL run's max_new_tokens)", at_least=0)
    keep_weights: bool = setting(False, "keep the RL run's checkpoint weights (their hashes stay in the receipts)")

    def __post_init__(self) -> None:
        check = Checks("rl-splits")
        check.declared(self)
        check.done()


@dataclass
class RLSplitsJob:
    rl: Any
    final: SplitEvalConfig

    def to_dict(self) -> dict:
        return {**self.rl.to_dict(), **asdict(self.final)}

    def splits(self) -> tuple[str, ...]:
        suite = get_suite(self.rl.suite)
        if self.final.eval_splits in ("", "all"):
            return suite.eval_splits
        names = tuple(s.strip() for s in self.final.eval_splits.split(","))
        unknown = [s for s in names if s not in suite.splits]
        if unknown:
            raise ValueError(f"rl-splits: eval_splits {unknown} are not splits of the {suite.name} suite "
                             f"({', '.join(suite.splits)})")
        return names


def make_rl_splits(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path) -> RLSplitsJob:
    own = set(setting_names(SplitEvalConfig))
    final = config_from_settings(SplitEvalConfig, {k: v for k, v in settings.items() if k.replace("-", "_") in own},
                                 "rl-splits")
    rl_settings = suite_settings({"dev_per_family": 0, **{k: v for k, v in settings.items()
                                                          if k.replace("-", "_") not in own}}, "rl")
    rl = config_from_settings(RLConfig, rl_settings, "rl", seed=seed, checkpoints=tuple(checkpoints or ()),
                              out=str(job_dir / "run"), progress=False, resume=False)
    if not rl.init:
        raise ValueError('rl-splits: the spec\'s settings must name the start checkpoint (init = "{setup}/run/'
                         'checkpoint-0100")')
    job = RLSplitsJob(rl, final)
    job.splits()  # unknown splits are refused before anything runs
    return job


def sweep_folder_of(job_dir: Path) -> Path | None:
    """The sweep folder holding a job's folder (`<sweep>/runs/<arm>/seed-<n>`, runner.job_dir), or None."""
    job_dir = Path(job_dir).resolve()
    if len(job_dir.parents) >= 3 and job_dir.parents[1].name == "runs" and job_dir.name.startswith("seed-"):
        return job_dir.parents[2]
    return None


def start_scores(loaded, tasks: list, eval_cfg, accepted: bool, job_dir: Path, log) -> tuple[dict, str]:
    """The start checkpoint's greedy evaluation on `tasks`, shared by the jobs of one sweep (module docstring).
    The file is read only when its identity equals this job's: the weights' hash and the model's config, every
    task's id, prompt, entry point, language and cases, the evaluation settings, the thread count and glm53's
    version; a file that is unreadable or names another identity is computed again and replaced.
    Returns the result and how it was had: "computed", "read <file>", or "computed (not in a sweep folder)"."""
    import torch

    from ..evaluate.evaluate import evaluate

    folder = sweep_folder_of(job_dir)
    model = loaded.model
    if folder is None or not loaded.weights_sha256:
        return evaluate(model, tasks, eval_cfg, accepted_partial=accepted), "computed (not in a sweep folder)"
    task_text = json.dumps([[t.task_id, t.prompt, t.entry_point, getattr(t, "language", ""), repr(t.cases)]
                            for t in tasks])
    identity = {"weights_sha256": loaded.weights_sha256, "model": asdict(model.config),
                "tasks_sha256": hashlib.sha256(task_text.encode()).hexdigest(), "tasks": [t.task_id for t in tasks],
                "eval": asdict(eval_cfg), "threads": torch.get_num_threads(), "accepted_partial": accepted,
                "glm53": __version__}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    path = folder / "start-scores" / f"{key}.json"
    stale = path.exists()
    if stale:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
        if saved.get("identity") == identity and "result" in saved:
            log(f"start scores read from {path.relative_to(folder)}")
            return saved["result"], f"read {path.relative_to(folder)}"
    result = evaluate(model, tasks, eval_cfg, accepted_partial=accepted)
    try:  # a file in the way (unreadable, or another identity under the same key) is replaced
        atomic_write_json(path, {"identity": identity, "result": result}, overwrite=stale)
    except FileExistsError:  # a parallel job wrote the same result first
        pass
    return result, "computed"


def split_evaluation(job: RLSplitsJob) -> tuple[dict, Any]:
    """The tasks of each scored split ({split: tasks}) and the greedy settings of an rl-splits job's scoring."""
    cfg, final = job.rl, job.final
    suite = get_suite(cfg.suite)
    tasks = {s: suite.eval_tasks(s, final.eval_count) for s in job.splits()}
    return tasks, EvalConfig(suite=suite.name, sampling=Sampling(max_new_tokens=final.eval_max_new_tokens or
                                                                 cfg.sampling.max_new_tokens))


def run_rl_splits(job: RLSplitsJob, job_dir: Path, log) -> dict:
    from ..checkpoints.format import load_model
    from ..evaluate.split_scores import evaluate_splits, per_split
    from ..train.rl import rl_train

    cfg, final = job.rl, job.final
    suite = get_suite(cfg.suite)
    receipt = rl_train(cfg, log=log)
    last = max(receipt["checkpoints"], key=lambda c: c["group"])
    models = {"before": load_model(cfg.init), "after": load_model(Path(cfg.out) / last["path"])}
    tasks, eval_cfg = split_evaluation(job)
    every = [t for split in tasks.values() for t in split]
    accepted = cfg.runtime.accept_partial_isolation
    before, start_source = start_scores(models["before"], every, eval_cfg, accepted, job_dir, log)
    after, parts = evaluate_splits(models["after"].model, tasks, eval_cfg, accepted)
    scored = {"before": per_split(before, tasks), "after": parts}
    metrics, outcomes = {}, {}
    for split in tasks:
        rate = {name: results[split]["summary"]["pass_at_k"]["1"] for name, results in scored.items()}
        metrics.update({f"{split}_pass_at_1_before": rate["before"], f"{split}_pass_at_1": rate["after"],
                        f"{split}_lift": rate["after"] - rate["before"]})
        outcomes[f"{split}_pass_at_1"] = {r["task_id"]: float(r["passed"] > 0) for r in parts[split]["tasks"]}
    if not final.keep_weights:
        prune_checkpoints(cfg.out, whole=0)  # every checkpoint's weights and state go; the hashes stay
    log(", ".join(f"{s} {metrics[f'{s}_pass_at_1_before']:.3f} -> {metrics[f'{s}_pass_at_1']:.3f}" for s in tasks))
    return {"job": "rl-splits", "settings": job.to_dict(), "seed": cfg.seed, **suite.receipt(),
            "metrics": {"eval": metrics}, "task_outcomes": outcomes,
            "final_weights_sha256": models["after"].weights_sha256, "initial_sha256": receipt["initial_sha256"],
            "eval_settings": after["settings"], "rl_seconds": receipt["elapsed_seconds_this_invocation"],
            "eval_seconds": after["elapsed_seconds"] + (before["elapsed_seconds"] if
                                                                  start_source.startswith("computed") else 0.0),
            "start_scores": start_source,
            "run_receipt": str(Path(cfg.out).relative_to(job_dir) / "training-receipt.json")}


RL_SPLITS = dict(
    name="rl-splits",
    description="post-training from init (glm53 rl), then greedy pass@1 on every evaluation split of its suite "
                "before and after RL, and each split's lift; the seed is the RL seed",
    metrics=tuple(f"{s}_{m}" for s in ALL_SPLITS for m in ("lift", "pass_at_1", "pass_at_1_before")),
    make=make_rl_splits, run=run_rl_splits, uses_checkpoints=False)


# ---------------------------------------------------------------- pretrain-splits (the pretraining-data studies)
# A pretraining run (glm53 pretrain, any of its settings, e.g. data_order and distinct_documents), scored at each of
# the spec's checkpoints on the broad suite's splits: the body loss (evaluate/body_loss.py, smooth: it separates
# short runs whose pass@1 is still near 0) and, unless pass_at_1 is false, greedy pass@1.

@dataclass
class PretrainSplitsSettings:
    """What a pretrain-splits job adds to `glm53 pretrain`."""

    eval_splits: str = setting("confirm,compose,phrase,human", "comma-separated splits of the broad suite to score")
    eval_count: int = setting(64, "tasks of each split (the human split is scored whole)", at_least=1)
    pass_at_1: bool = setting(True, "also greedy pass@1 on each split (the body loss is always scored)")
    eval_max_new_tokens: int = setting(0, "token cap of the greedy completions (0: the suite's)", at_least=0)
    keep_weights: bool = setting(False, "keep the checkpoints' weights (their hashes stay in the receipts)")

    def __post_init__(self) -> None:
        check = Checks("pretrain-splits")
        check.declared(self)
        check.done()

    def splits(self) -> tuple[str, ...]:
        names = tuple(s.strip() for s in self.eval_splits.split(",") if s.strip())
        known = get_suite("broad").eval_splits
        unknown = [s for s in names if s not in known]
        if unknown or not names:
            raise ValueError(f"pretrain-splits: eval_splits {unknown or names} must be evaluation splits of the broad "
                             f"suite ({', '.join(known)})")
        return names


@dataclass
class PretrainSplitsJob:
    pretrain: Any
    extra: PretrainSplitsSettings

    def to_dict(self) -> dict:
        return {**self.pretrain.to_dict(), **asdict(self.extra)}


def make_pretrain(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path):
    """A spec's settings, seed and checkpoints as `glm53 pretrain`'s config (the pretrain job kinds share it)."""
    return config_from_settings(PretrainConfig, suite_settings(settings, "pretrain"), "pretrain", seed=seed,
                                checkpoints=tuple(checkpoints), out=str(job_dir / "run"), progress=False, resume=False)


def make_pretrain_splits(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path) -> PretrainSplitsJob:
    own = set(setting_names(PretrainSplitsSettings))
    extra = config_from_settings(PretrainSplitsSettings, {k: v for k, v in settings.items()
                                                          if k.replace("-", "_") in own}, "pretrain-splits")
    pretrain = make_pretrain({k: v for k, v in settings.items() if k.replace("-", "_") not in own}, seed,
                             checkpoints, job_dir)
    if pretrain.suite != "broad":
        raise ValueError(f"pretrain-splits: scores the broad suite's splits; set suite = \"broad\" "
                         f"(got {pretrain.suite})")
    extra.splits()  # unknown splits are refused before anything runs
    return PretrainSplitsJob(pretrain, extra)


def run_pretrain_splits(job: PretrainSplitsJob, job_dir: Path, log) -> dict:
    from ..evaluate.body_loss import body_loss, reference_bodies
    from ..checkpoints.format import load_model
    from ..evaluate.split_scores import evaluate_splits
    from ..train.pretrain import pretrain

    cfg, extra = job.pretrain, job.extra
    suite = get_suite(cfg.suite)
    receipt = pretrain(cfg, log=log)
    splits = extra.splits()
    tasks = {s: suite.eval_tasks(s, extra.eval_count) for s in splits}
    bodies = {s: reference_bodies(cfg.suite, s, len(tasks[s])) for s in splits}
    eval_cfg = EvalConfig(suite=suite.name, sampling=Sampling(max_new_tokens=extra.eval_max_new_tokens or
                                                              suite.max_new_tokens))
    metrics, outcomes = {}, {}
    for c in receipt["checkpoints"]:
        if c["step"] == 0:
            continue
        model = load_model(Path(cfg.out) / c["path"], expect=cfg.model).model
        row = {"weights_sha256": c["weights_sha256"]}
        row.update({f"{s}_body_loss": body_loss(model, bodies[s]) for s in splits})
        if extra.pass_at_1:
            _, parts = evaluate_splits(model, tasks, eval_cfg, cfg.runtime.accept_partial_isolation)
            for s in splits:
                row[f"{s}_pass_at_1"] = parts[s]["summary"]["pass_at_k"]["1"]
                outcomes[f"{s}_pass_at_1"] = {r["task_id"]: float(r["passed"] > 0) for r in parts[s]["tasks"]}
        metrics[str(c["step"])] = row
        log(f"step {c['step']}: " + ", ".join(f"{s} loss {row[f'{s}_body_loss']:.3f}" +
                                             (f" pass {row[f'{s}_pass_at_1']:.3f}" if extra.pass_at_1 else "")
                                             for s in splits))
    if not extra.keep_weights:
        prune_checkpoints(cfg.out, whole=0)  # every checkpoint's weights and state go; the hashes stay
    return {"job": "pretrain-splits", "settings": job.to_dict(), "seed": cfg.seed, **suite.receipt(),
            "metrics": metrics, "task_outcomes": outcomes, "task_outcomes_at": str(cfg.steps),
            "parameter_counts": receipt["parameter_counts"],
            "run_receipt": str(Path(cfg.out).relative_to(job_dir) / "training-receipt.json"),
            "elapsed_seconds": receipt["elapsed_seconds_this_invocation"], "threads": receipt["threads"]}


PRETRAIN_SPLITS = dict(
    name="pretrain-splits",
    description="coding pretraining (glm53 pretrain, e.g. with data_order or distinct_documents), scored at each "
                "checkpoint on the broad suite's splits: body loss and greedy pass@1",
    metrics=tuple(f"{s}_{m}" for s in ALL_SPLITS for m in ("body_loss", "pass_at_1")),
    make=make_pretrain_splits, run=run_pretrain_splits)
