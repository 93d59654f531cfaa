"""The kinds of job a sweep runs, one registry entry each: which config it takes, how a spec's settings, seed
and checkpoints become that config, how it runs, and which metrics its receipt holds.

Every job returns a receipt dict with `metrics`: {checkpoint label: {metric: value}}, the label being the
update count as a string ("50", "100", ...; "0" is before training where a job scores it). To add a kind, write
a `JobKind` and add it to KINDS; `glm53 sweep` and `glm53 analyze` need nothing else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from ..checkpoints.names import RECEIPT_NAME, checkpoint_name
from ..checkpoints.retention import prune_checkpoints
from ..data.suites import get_suite, suite_settings
from ..data.tasks import frozen_tasks, read_tasks
from ..decode.sampling import MAX_NEW_TOKENS, SAMPLED_TEMPERATURE, Sampling, temperature_problem
from ..evaluate.eval_config import EvalConfig, sampled_evaluation
from ..runtime.config import RuntimeConfig
from ..runtime.composition import composed, record
from ..runtime.files import atomic_write_json, read_jsonl
from ..runtime.settings import MAX_SEED, Checks, config_from_settings, setting, setting_names
from ..train.rl_config import RLConfig
from .corpus_job import CORPUS
from .scored_per_split import END_LABEL, PRETRAIN_SPLITS, RL_SPLITS, make_pretrain as _make_pretrain


@dataclass(frozen=True)
class JobKind:
    name: str
    description: str
    metrics: tuple[str, ...]
    make: Callable[[dict, int, tuple[int, ...], Path], Any]  # (settings, seed, checkpoints, job dir) -> config
    run: Callable[[Any, Path, Callable[[str], None]], dict]  # (config, job dir, log) -> receipt
    uses_checkpoints: bool = True  # False: one evaluation, labelled "eval"
    verifies: bool = True  # its results include the sandbox's verdicts (the isolation policy applies)
    scores_end: bool = False  # no checkpoints named: scored at each job's own end ("end"), so lengths may differ

    def labels(self, checkpoints: tuple[int, ...]) -> list[str]:
        if not self.uses_checkpoints:
            return ["eval"]
        return [str(c) for c in checkpoints] if checkpoints or not self.scores_end else [END_LABEL]


# ---------------------------------------------------------------- expression-pretrain (the studies' own job)

def _make_expression(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path):
    from ..train.expression_pretrain import ExpressionPretrainConfig

    return config_from_settings(ExpressionPretrainConfig, settings, "expression-pretrain", seed=seed,
                                eval_at=tuple(checkpoints))


def _run_expression(cfg, job_dir: Path, log) -> dict:
    from ..train.expression_pretrain import expression_pretrain

    return expression_pretrain(cfg, log=log, out=job_dir / "run")


# ---------------------------------------------------------------- pretrain (the coding pretraining)

def _run_pretrain(cfg, job_dir: Path, log) -> dict:
    from ..train.pretrain import pretrain

    receipt = pretrain(cfg, log=log)
    loss_at = {row["step"]: row["loss"] for row in _read_curve(Path(cfg.out))}
    metrics = {str(c["step"]): {"dev_pass_rate": c["dev_passed"] / max(c["dev_tasks"], 1),
                                "train_loss": loss_at.get(c["step"], float("nan")),
                                "weights_sha256": c["weights_sha256"]}
               for c in receipt["checkpoints"]}
    return {"job": "pretrain", "settings": cfg.to_dict(), "seed": cfg.seed, "metrics": metrics,
            "run_receipt": _run_receipt(cfg, job_dir),
            "elapsed_seconds": receipt["elapsed_seconds_this_invocation"], "threads": receipt["threads"]}


def _speculative_figures(model, prompts: list[str], max_new_tokens: int) -> dict:
    from ..decode.speculative import generate_greedy_plain, generate_greedy_speculative

    plain, plain_stats = generate_greedy_plain(model, prompts, max_new_tokens)
    fast, stats = generate_greedy_speculative(model, prompts, max_new_tokens)
    return {"speculative_equal": sum(a == b for a, b in zip(fast, plain)) / len(plain),  # 1.0 unless rounding flips
            "mtp_acceptance_rate": stats["acceptance_rate"],
            "speculative_speedup": plain_stats["seconds"] / stats["seconds"],
            "speculative_forwards_saved": 1 - stats["forwards"] / plain_stats["forwards"]}


def _run_receipt(cfg, job_dir: Path) -> str:
    """Where the job's training receipt lies, relative to the job folder."""
    return str(Path(cfg.out).relative_to(job_dir) / RECEIPT_NAME)


def _read_curve(out: Path) -> list[dict]:
    from ..train.pretrain import LOG_NAME

    return read_jsonl(out / LOG_NAME)


# ---------------------------------------------------------------- pretrain-eval (architecture ablations)

@dataclass
class PretrainEvalSettings:
    """What a pretrain-eval job adds to `glm53 pretrain`: a greedy evaluation on a frozen split at some of its
    checkpoints (the decoding speed measured on the same completions) and the window of the loss average."""

    eval_at: tuple[int, ...] = setting((100,), "checkpoints scored greedily on the frozen split")
    eval_split: str = setting("confirm", "frozen split scored")
    eval_per_family: int = setting(8, "tasks per family", at_least=1)
    eval_max_new_tokens: int = setting(MAX_NEW_TOKENS, "token cap of the greedy completions", at_least=1)
    loss_window: int = setting(10, "the pretraining loss at step N is the mean over steps N - window + 1 .. N",
                               at_least=1)
    speculative: bool = setting(True, "with an MTP block: also decode the split one prompt at a time, plainly and "
                                      "with self-speculation, for the acceptance rate and the speed-up")

    def __post_init__(self) -> None:
        self.eval_at = tuple(self.eval_at)
        check = Checks("pretrain-eval")
        check.declared(self)
        check.done()


@dataclass
class PretrainEvalJob:
    pretrain: Any
    extra: PretrainEvalSettings

    def to_dict(self) -> dict:
        return {**self.pretrain.to_dict(), **asdict(self.extra), "eval_at": list(self.extra.eval_at)}


def _make_pretrain_eval(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path) -> PretrainEvalJob:
    own = set(setting_names(PretrainEvalSettings))
    extra = config_from_settings(PretrainEvalSettings,
                                 {k: v for k, v in settings.items() if k.replace("-", "_") in own}, "pretrain-eval")
    pretrain = _make_pretrain({k: v for k, v in settings.items() if k.replace("-", "_") not in own}, seed,
                              tuple(sorted(set(checkpoints) | set(extra.eval_at))), job_dir)
    missing = sorted(set(extra.eval_at) - set(pretrain.checkpoints))
    if missing:
        raise ValueError(f"pretrain-eval: eval_at {missing} must be checkpoints within steps {pretrain.steps}")
    return PretrainEvalJob(pretrain, extra)


def _run_pretrain_eval(job: PretrainEvalJob, job_dir: Path, log) -> dict:
    import time

    from ..decode.engine import generate_groups
    from ..evaluate.evaluate import evaluate
    from ..checkpoints.format import load_model
    from ..train.pretrain import pretrain

    cfg, extra = job.pretrain, job.extra
    receipt = pretrain(cfg, log=log)
    curve = _read_curve(Path(cfg.out))
    metrics: dict[str, dict] = {}
    for c in receipt["checkpoints"]:
        window = [row for row in curve if c["step"] - extra.loss_window < row["step"] <= c["step"]]
        metrics[str(c["step"])] = {"weights_sha256": c["weights_sha256"]}
        if window:  # not at step 0
            metrics[str(c["step"])]["train_loss"] = sum(r["loss"] for r in window) / len(window)
        for name in ("indexer_loss", "mtp_loss", "expert_load_cv"):
            if window and all(name in r for r in window):
                metrics[str(c["step"])][name] = sum(r[name] for r in window) / len(window)
    metrics[str(cfg.steps)]["train_tokens_per_second"] = receipt["train_tokens_per_second"]
    tasks = get_suite(cfg.suite).tasks(extra.eval_split, extra.eval_per_family)
    greedy = Sampling(temperature=0.0, max_new_tokens=extra.eval_max_new_tokens)
    outcomes, records = {}, {}
    for step in extra.eval_at:
        model = load_model(Path(cfg.out) / checkpoint_name(step), expect=cfg.model).model
        result = evaluate(model, tasks, EvalConfig(samples=1, sampling=greedy, suite=cfg.suite),
                          accepted_partial=cfg.runtime.accept_partial_isolation)
        metrics[str(step)]["greedy_pass_at_1"] = result["summary"]["pass_at_k"]["1"]
        # decoding alone, timed apart from the sandboxed tests: the same prompts, greedy, in one call of the engine
        started = time.perf_counter()
        decoded = generate_groups(model, [t.prompt for t in tasks], 1, greedy)
        seconds = time.perf_counter() - started
        metrics[str(step)]["decode_tokens_per_second"] = sum(len(g[0]["token_ids"]) for g in decoded) / seconds
        if extra.speculative and model.mtp is not None:
            metrics[str(step)].update(_speculative_figures(model, [t.prompt for t in tasks], extra.eval_max_new_tokens))
        outcomes[str(step)] = {r["task_id"]: float(r["passed"] > 0) for r in result["tasks"]}
        # every prompt, completion and verdict of the score, beside the receipt (which names the file)
        records[str(step)] = f"eval-{extra.eval_split}-step-{step:04d}.json"
        atomic_write_json(job_dir / records[str(step)], {"checkpoint_sha256": metrics[str(step)]["weights_sha256"],
                                                         **result})
        log(f"step {step}: {extra.eval_split} greedy {sum(outcomes[str(step)].values()):.0f}/{len(tasks)}, "
            f"{metrics[str(step)]['decode_tokens_per_second']:.0f} decoded tokens/s")
    last = str(extra.eval_at[-1])
    return {"job": "pretrain-eval", "settings": job.to_dict(), "seed": cfg.seed, "metrics": metrics,
            "task_outcomes": {"greedy_pass_at_1": outcomes[last]}, "task_outcomes_at": last, "eval_records": records,
            "parameter_counts": receipt["parameter_counts"],
            "run_receipt": _run_receipt(cfg, job_dir),
            "elapsed_seconds": receipt["elapsed_seconds_this_invocation"], "threads": receipt["threads"]}


# ---------------------------------------------------------------- rl (post-training from a given checkpoint)

def _make_rl(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path):
    cfg = config_from_settings(RLConfig, suite_settings(settings, "rl"), "rl", seed=seed,
                               checkpoints=tuple(checkpoints), out=str(job_dir / "run"), progress=False, resume=False)
    if not cfg.init:
        raise ValueError('rl: the spec\'s settings must name the start checkpoint (init = "runs/p/checkpoint-0100")')
    return cfg


def _run_rl(cfg, job_dir: Path, log) -> dict:
    from ..train.rl import rl_train

    receipt = rl_train(cfg, log=log)
    metrics = {}
    for c in receipt["checkpoints"]:
        dev = c.get("dev") or {}
        metrics[str(c["group"])] = {"dev_exact_rate": dev.get("exact_rollouts", 0) / max(dev.get("rollouts", 0), 1),
                                    "dev_pass_at_1": (dev.get("pass_at_k") or {}).get("1", 0.0),
                                    "weights_sha256": c["weights_sha256"]}
    return {"job": "rl", "settings": cfg.to_dict(), "seed": cfg.seed, "metrics": metrics,
            "run_receipt": _run_receipt(cfg, job_dir)}


# ---------------------------------------------------------------- rl-eval (RL, then one evaluation of its result)

@dataclass
class FinalEvalConfig:
    """The evaluation that ends an rl-eval job, the same for every arm and seed: greedy pass@1 and sampled pass@k
    (the unbiased estimator, k up to eval_samples) on a frozen split, over the families RL trained on."""

    eval_split: str = setting("confirm", "frozen split scored after RL")
    eval_per_family: int = setting(8, "tasks per trained family", at_least=1)
    eval_samples: int = setting(8, "sampled completions per task for pass@k (0: greedy only)", at_least=0)
    eval_temperature: float = setting(SAMPLED_TEMPERATURE, "temperature of the sampled completions", at_least=0)
    eval_max_new_tokens: int = setting(0, "token cap (0: the RL run's max_new_tokens)", at_least=0)
    eval_seed: int = setting(20260827, "sampling seed (the same for every arm and training seed: paired)", at_least=0,
                             at_most=MAX_SEED)
    keep_weights: bool = setting(False, "keep the RL run's checkpoint weights (about 100 MB each; a screen of 65 jobs "
                                        "would keep 13 GB); their hashes stay in the receipts either way")

    def __post_init__(self) -> None:
        check = Checks("rl-eval")
        check.declared(self)
        check.require(self.eval_samples <= 1 or self.eval_temperature > 0,
                      "eval_samples > 1 needs an eval_temperature > 0")
        check.require(temperature_problem("eval_temperature", self.eval_temperature) is None,
                      str(temperature_problem("eval_temperature", self.eval_temperature)))
        check.done()


@dataclass
class RLEvalJob:
    rl: Any
    final: FinalEvalConfig

    def to_dict(self) -> dict:
        return {**self.rl.to_dict(), **asdict(self.final)}


def _make_rl_eval(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path) -> RLEvalJob:
    eval_names = set(setting_names(FinalEvalConfig))
    final = config_from_settings(FinalEvalConfig, {k: v for k, v in settings.items()
                                                   if k.replace("-", "_") in eval_names}, "rl-eval")
    rl_settings = {k: v for k, v in settings.items() if k.replace("-", "_") not in eval_names}
    rl = _make_rl({"dev_per_family": 0, **rl_settings}, seed, checkpoints or (), job_dir)
    return RLEvalJob(rl, final)


def final_evaluation(job: RLEvalJob) -> tuple[list, EvalConfig, EvalConfig | None]:
    """The tasks, and the greedy and sampled settings (None: greedy only), of the evaluation that ends an rl-eval
    job: the eval split's tasks of the families RL trained on (with a task file, the file's families)."""
    cfg, final = job.rl, job.final
    families = cfg.families if cfg.tasks_file is None else ",".join(sorted({t.family for t in
                                                                            read_tasks(cfg.tasks_file)}))
    tasks = get_suite(cfg.suite).tasks(final.eval_split, final.eval_per_family, families)  # broad: first N in all
    cap = final.eval_max_new_tokens or cfg.sampling.max_new_tokens
    greedy = EvalConfig(samples=1, sampling=Sampling(temperature=0.0, max_new_tokens=cap), suite=cfg.suite)
    sampled = EvalConfig(samples=final.eval_samples, seed=final.eval_seed, sampling=Sampling(
        temperature=final.eval_temperature, max_new_tokens=cap), suite=cfg.suite) if final.eval_samples else None
    return tasks, greedy, sampled


def _run_rl_eval(job: RLEvalJob, job_dir: Path, log) -> dict:
    from ..evaluate.evaluate import evaluate
    from ..train.rl import rl_train

    cfg, final = job.rl, job.final
    receipt = rl_train(cfg, log=log)
    loaded = load_final(cfg, receipt)
    model = loaded.model
    tasks, greedy_cfg, sampled_cfg = final_evaluation(job)
    accepted = cfg.runtime.accept_partial_isolation
    greedy = evaluate(model, tasks, greedy_cfg, accepted_partial=accepted)
    outcomes = {r["task_id"]: {"family": r["family"], "greedy_passed": r["passed"] > 0} for r in greedy["tasks"]}
    metrics = {"greedy_pass_at_1": greedy["summary"]["pass_at_k"]["1"]}
    sampled = None
    if sampled_cfg is not None:
        sampled = evaluate(model, tasks, sampled_cfg, accepted_partial=accepted)
        for r in sampled["tasks"]:
            outcomes[r["task_id"]]["samples_passed"] = r["passed"]
        metrics["sampled_pass_at_1"] = sampled["summary"]["pass_at_k"]["1"]
        metrics["sampled_pass_at_k"] = sampled["summary"]["pass_at_k"][str(final.eval_samples)]
    steps, rollouts = receipt["steps"], receipt["rollouts"]
    metrics["train_exact_rate"] = sum(r["verdict"]["status"] == "passed" for r in rollouts) / len(rollouts)
    metrics["reward_mean"] = sum(r["reward"] for r in rollouts) / len(rollouts)
    metrics["zero_variance_fraction"] = receipt["zero_variance_groups"] / cfg.groups
    curves = {name: [[s["groups_done"] * cfg.group_size, s[name]] for s in steps]
              for name in ("reward_mean", "zero_variance_fraction")}
    if not final.keep_weights:
        prune_checkpoints(cfg.out, whole=0)
    log(f"{final.eval_split}: greedy {sum(o['greedy_passed'] for o in outcomes.values())}/{len(tasks)}"
        + (f", sampled pass@1 {metrics['sampled_pass_at_1']:.3f}" if sampled else ""))
    return {"job": "rl-eval", "settings": job.to_dict(), "seed": cfg.seed, "metrics": {"eval": metrics},
            "task_outcomes": {"greedy_pass_at_1": {t: float(o["greedy_passed"]) for t, o in outcomes.items()}},
            "tasks": outcomes, "curves": curves, "curve_x": "rollouts",
            "final_weights_sha256": loaded.weights_sha256, "initial_sha256": receipt["initial_sha256"],
            "eval_settings": {"greedy": greedy["settings"], "sampled": sampled["settings"] if sampled else None},
            "rl_seconds": receipt["elapsed_seconds_this_invocation"], "run_receipt": _run_receipt(cfg, job_dir),
            "eval_seconds": greedy["elapsed_seconds"] + (sampled["elapsed_seconds"] if sampled else 0.0)}


def load_final(cfg, receipt: dict):
    """The last checkpoint of the RL run `cfg` that wrote `receipt` (a LoadedModel)."""
    from ..checkpoints.format import load_model

    last = max(receipt["checkpoints"], key=lambda c: c["group"])
    return load_model(Path(cfg.out) / last["path"])


# ---------------------------------------------------------------- eval (sampled evaluation of one checkpoint)

@composed
@dataclass
class EvalJobConfig:
    """A sampled evaluation whose seed is the sampling seed: the spread of pass rates over seeds."""

    checkpoint: str = setting("", "checkpoint folder to evaluate", required=True)
    split: str = setting("confirm", "frozen task split")
    per_family: int = setting(8, "tasks per family", at_least=1)
    families: str = setting("", "comma-separated families (empty: all)")
    evaluation: EvalConfig = setting(default_factory=sampled_evaluation, flatten=True,
                                     skip=("top_k", "top_p", "ignore_eos", "precision", "timeout_s"))
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, cli=False, record=False)  # set by the sweep

    def __post_init__(self) -> None:
        check = Checks("eval")
        check.declared(self)
        check.done()

    def to_dict(self) -> dict:
        return record(self)


def _make_eval(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path):
    cfg = config_from_settings(EvalJobConfig, settings, "eval", seed=seed)
    if not cfg.checkpoint:
        raise ValueError("eval: the spec's settings must name a checkpoint folder "
                         "(checkpoint = \"runs/p/checkpoint-0100\")")
    return cfg


def _run_eval(cfg: EvalJobConfig, job_dir: Path, log) -> dict:
    from ..evaluate.evaluate import evaluate
    from ..checkpoints.format import load_model

    loaded = load_model(cfg.checkpoint)
    tasks = frozen_tasks(cfg.split, cfg.per_family, cfg.families or None)
    result = evaluate(loaded.model, tasks, cfg.evaluation, accepted_partial=cfg.runtime.accept_partial_isolation)
    passed = sum(r["passed"] for r in result["tasks"])
    metrics = {"pass_rate": passed / (len(tasks) * cfg.evaluation.decoding.samples),
               "tasks_solved": sum(r["passed"] > 0 for r in result["tasks"]) / len(tasks)}
    return {"job": "eval", "settings": cfg.to_dict(), "seed": cfg.evaluation.decoding.seed,
            "metrics": {"eval": metrics}, "checkpoint_sha256": loaded.weights_sha256, "tasks": result["tasks"]}


KINDS: dict[str, JobKind] = {k.name: k for k in (
    JobKind("expression-pretrain", "the 248K miniature on expression data, scored on held-out structures",
            ("target_byte_accuracy", "target_loss", "perplexity", "exact_match"), _make_expression,
            _run_expression, verifies=False),
    JobKind("pretrain", "coding pretraining (glm53 pretrain), greedy dev pass rate at each checkpoint",
            ("dev_pass_rate", "train_loss"), _make_pretrain, _run_pretrain),
    JobKind("pretrain-eval", "coding pretraining (glm53 pretrain), the mean loss before each checkpoint, training "
                             "tokens/s, and greedy pass@1 and decoding tokens/s on a frozen split at eval_at",
            ("train_loss", "greedy_pass_at_1", "train_tokens_per_second", "decode_tokens_per_second", "indexer_loss",
             "mtp_loss", "expert_load_cv", "mtp_acceptance_rate", "speculative_speedup"),
            _make_pretrain_eval, _run_pretrain_eval),
    JobKind("rl", "post-training from the checkpoint named by init (glm53 rl), dev scores at each checkpoint; the "
                  "seed is the RL seed (schedule and sampling)", ("dev_exact_rate", "dev_pass_at_1"),
            _make_rl, _run_rl),
    JobKind("rl-eval", "post-training from init (glm53 rl), then greedy pass@1 and sampled pass@k on a frozen split "
                       "over the trained families; the seed is the RL seed, the evaluation's seed is fixed",
            ("greedy_pass_at_1", "sampled_pass_at_1", "sampled_pass_at_k", "train_exact_rate", "reward_mean",
             "zero_variance_fraction"), _make_rl_eval, _run_rl_eval, uses_checkpoints=False),
    JobKind("eval", "sampled evaluation of one checkpoint (glm53 eval), the seed being the sampling seed",
            ("pass_rate", "tasks_solved"), _make_eval, _run_eval, uses_checkpoints=False),
    JobKind(**CORPUS),  # corpus_job.py: a [setup] that builds the corpus the arms read
    JobKind(**RL_SPLITS),  # scored_per_split.py: RL, then every split of its suite before and after
    JobKind(**PRETRAIN_SPLITS),  # scored_per_split.py: pretraining scored on the broad suite's splits
)}


def job_kind(name: str) -> JobKind:
    if name not in KINDS:
        raise ValueError(f"unknown job kind {name!r}; known kinds are {', '.join(KINDS)}")
    return KINDS[name]
