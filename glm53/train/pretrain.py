"""Pretraining on the generated-function stream, or on one's own corpus (`--corpus`, data/corpus.py), mixed
with it or not: next-byte cross-entropy plus the router balance term, and a validation loss (validation.py).

Reference settings (the defaults): 400 steps of 32 x 128, AdamW lr 3e-4 with betas (0.9, 0.95), weight decay
0.1 on matrices only, gradient clipping 1.0, balance coefficient 0.01, constant learning rate (warmup and
cosine decay are options), checkpoints at 100, 200 and 400 plus the random initialization at step 0.

Exact resume: the batch for step t is a pure function of (seed, t); checkpoints carry the optimizer and RNG
states; so a run stopped at a checkpoint and resumed produces the same losses as one that never stopped.

Data parallel (under torchrun, distributed.py): each rank takes a contiguous block of each step's rows and the
model is wrapped in DistributedDataParallel. Every loss term is written as this rank's share of the global batch's
value (token sums over the global token count; the per-rank means of the balance and indexer terms, whose ranks
hold equal numbers of tokens, averaged), so the gradients equal the single-process ones up to summation order,
and a run may resume under another world size (the batch never depended on it). The expert counts of the
balance loss and of the sigmoid-bias router are summed over ranks.

The settings are pretrain_config.py's `PretrainConfig`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from inspect import signature
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from ..data.corpus import Corpus, load_corpus
from ..data.bpe_tokenizer import tokenizer_for
from ..data.broad.stream_primitives import pinned_file, stream_file_changed
from ..data.pretrain_batches import IGNORE_INDEX, compiled_widths, pretraining_batch, widened
from ..data.run_order import run_stream
from ..data.suites import DEFAULT_SUITE, SUITE_NAMES, get_suite
from ..data.tasks import Task
from ..data.training_stream import pinned_sha256
from ..decode.sampling import Sampling
from ..evaluate.evaluate import EvalConfig, evaluate
from ..model.model import GLM53
from ..runtime.cpu import cpu_description
from ..runtime.device import autocast, compiled, peak_memory_bytes
from ..runtime.config import RESUMABLE_CHANGES
from ..runtime.distributed import SINGLE, DataParallel
from ..runtime.files import atomic_write_json, remove_stale_temporaries, run_lock, truncate_jsonl
from ..runtime.tracking import reporting
from ..verify.verifier import isolation_report
from ..checkpoints.format import save_checkpoint
from ..checkpoints.names import RECEIPT_NAME, RUN_CONFIG_NAME, checkpoint_name
from .loss import language_loss_sum, training_loss
from .muon import newton_schulz_precision
from .optimizers import decay_groups, make_optimizer  # noqa: F401 - part of this module's API
from .run_folder import check_run_folder, restore_latest, rng_state, start_run_folder
from .training_start import build_training
from .pretrain_config import EXTENSIONS, LABELS, PretrainConfig
from ..checkpoints.retention import RETENTION_CHANGES, apply_retention
from .validation import Validation, corpus_samples, validation_due, validation_set

LOG_NAME = "train_log.jsonl"
# what a resumed run may change besides EXTENSIONS: when the validation loss is measured leaves training alone
VALIDATION_SETTINGS = frozenset({"eval_every", "validation_rows"})


def learning_rate(cfg: PretrainConfig, step: int) -> float:
    """LR for 0-based update `step`: linear warmup, then constant or cosine down to min_lr_ratio * lr."""
    return cfg.optimization.lr_at(step, cfg.steps)


def expert_load_cv(usage: torch.Tensor) -> float:
    """How unevenly a step's tokens spread over the experts: the coefficient of variation (std / mean) of each
    layer's expert usage [layers, experts], averaged over layers; 0 is perfectly even."""
    usage = usage.float()
    return float((usage.std(dim=1, unbiased=False) / usage.mean(dim=1)).mean())


def dev_completions(model: GLM53, tasks: list[Task], max_new_tokens: int, suite: str = DEFAULT_SUITE) -> list[dict]:
    """Greedy completion of each dev prompt, verified against its hidden cases."""
    result = evaluate(model, tasks, EvalConfig(sampling=Sampling(max_new_tokens=max_new_tokens), seed=0, suite=suite))
    return [{"task_id": r["task_id"], "family": r["family"], "completion": r["samples"][0]["completion"],
             "status": r["samples"][0]["verdict"]["status"], "hit_token_cap": r["samples"][0]["hit_token_cap"]}
            for r in result["tasks"]]


def train_step(cfg: PretrainConfig, step: int, model: GLM53, forward, optimizer, device, precision: str,
               dp: DataParallel = SINGLE, corpus: Corpus | None = None) -> dict:
    """One optimizer step on the batch of 0-based `step` (this rank's rows of it); returns its log row (without
    timings), the same on every rank."""
    k = cfg.grad_accumulation
    inputs, labels = pretraining_batch(step, cfg.batch_size * k, cfg.sequence_length, cfg.seed, cfg.suite, corpus,
                                       cfg.corpus_mix, cfg.loss_on, run_stream(cfg), tokenizer=tokenizer_for(cfg.model),
                                       docstring_share=cfg.docstring_share, corpus_in_buckets=cfg.corpus_in_buckets,
                                       stream_primitives=cfg.stream_primitives,
                                       stream_primitives_share=cfg.stream_primitives_share)
    if cfg.compile:  # a few widths, not one a step: each new width compiles again (about 45 s on 2 cores)
        inputs, labels = widened(inputs, labels, tokenizer_for(cfg.model).pad_id, cfg.sequence_length)
    rows = dp.share(cfg.batch_size * k)
    return training_update(cfg, step, model, forward, optimizer, inputs[rows].to(device), labels[rows].to(device),
                           device, precision, dp)


def training_update(cfg: PretrainConfig, step: int, model: GLM53, forward, optimizer, inputs: torch.Tensor,
                    labels: torch.Tensor, device, precision: str, dp: DataParallel = SINGLE) -> dict:
    """The training step on a batch already made (train_step's, and what `glm53 bench` and `glm53 calibrate`
    time): the learning rate of update `step`, forward under `precision`, the loss (loss.py), backward, clip,
    optimizer step, router biases; returns the log row.

    Each term is this rank's share of the global loss; DDP averages gradients over ranks, so the shares are scaled
    by the world size before backward (a no-op in one process). --grad-accumulation K: the step's batch is the
    K x --batch-size rows one step of that batch would read, run as K micro-batches whose gradients add up before
    the one optimizer step (token sums over the whole step's token count; simplification: the balance and indexer
    terms, means per forward, are averaged over the micro-batches, as over ranks)."""
    k = cfg.grad_accumulation
    lr = learning_rate(cfg, step)
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    model.set_indexer_dense(step < cfg.indexer_warmup_steps)
    mtp = cfg.model.mtp_depth > 0
    local_tokens = torch.stack([(labels != IGNORE_INDEX).sum(), (labels[:, 1:] != IGNORE_INDEX).sum()]).double()
    tokens, mtp_tokens = dp.sum(local_tokens).tolist()
    optimizer.zero_grad(set_to_none=True)
    step_terms, usage = 0.0, 0.0
    for part_inputs, part_labels in zip(inputs.chunk(k), labels.chunk(k)):
        with autocast(device, precision):
            logits, aux = forward(part_inputs, return_aux=True)
            lm_share = language_loss_sum(logits, part_labels) / tokens
            mtp_share = language_loss_sum(aux.mtp_logits, part_labels[:, 1:]) / mtp_tokens if mtp else None
            loss_share, shares = training_loss(lm_share, aux, cfg.balance_coef, mtp=mtp_share, mtp_coef=cfg.mtp_coef,
                                               indexer_coef=cfg.indexer_coef, world_size=dp.world_size * k)
        (loss_share * dp.world_size).backward()
        step_terms = step_terms + torch.cat([shares, loss_share.detach()[None]])
        usage = usage + aux.expert_usage / k
    # the terms and the weighted total over every rank, in one sum
    lm_loss, mtp_loss, balance_loss, indexer_loss, total = dp.sum(step_terms).tolist()
    if not math.isfinite(total):  # the global figure, so every rank stops alike
        raise FloatingPointError(f"step {step + 1}: loss is {total}; lower --lr or check the data")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optimization.grad_clip)
    optimizer.step()
    model.update_router_biases(dp.sum if dp.active else None)
    return {"step": step + 1, "loss": lm_loss, "balance_loss": balance_loss, "indexer_loss": indexer_loss,
            **({"mtp_loss": mtp_loss} if mtp else {}), "expert_load_cv": expert_load_cv(usage),
            "grad_norm": float(grad_norm), "lr": lr, "tokens": int(tokens)}


def data_parallel_forward(model: GLM53, dp: DataParallel, device: torch.device):
    """The model itself in one process; under data parallelism, wrapped in DistributedDataParallel, with the
    routers counting expert load over every rank."""
    if not dp.active:
        return model
    from torch.nn.parallel import DistributedDataParallel

    model.set_load_sum(dp.sum)
    # buffers (RoPE tables, router biases) are equal on every rank by construction: nothing to broadcast before
    # each forward (the flag's name changed in torch 2.13)
    no_sync = "forward_sync_buffers" if "forward_sync_buffers" in signature(DistributedDataParallel).parameters \
        else "broadcast_buffers"
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                   **{no_sync: False})


def pretrain(cfg: PretrainConfig, dev_tasks: list[Task] | None = None, log=print, dp: DataParallel = SINGLE,
             device: torch.device | None = None, keep: Callable[[list[dict]], set[str]] | None = None) -> dict:
    """Run (or resume) pretraining; returns the receipt dict that is also written to the run folder (by rank 0,
    under data parallelism; the other ranks return None). One process at a time may write a run folder; what an
    interrupted atomic write left behind is removed first. `keep`: the checkpoints (folder names, from the
    checkpoint records so far) whose weights --keep-last must spare (the main job's RL start)."""
    if not cfg.out:
        raise ValueError("pretrain: out must name the run folder (--out)")
    if cfg.suite in SUITE_NAMES and get_suite(cfg.suite).tokenizer_problem(cfg.model):
        raise ValueError(f"pretrain: {get_suite(cfg.suite).tokenizer_problem(cfg.model)}")
    if cfg.batch_size % dp.world_size:
        raise ValueError(f"pretrain: --batch-size {cfg.batch_size} does not divide among {dp.world_size} ranks; use a "
                         f"multiple of {dp.world_size} or another --nproc-per-node")
    corpus = load_corpus(cfg.corpus, cfg.corpus_validation_share, cfg.sequence_length,
                         tokenizer_for(cfg.model)) if cfg.corpus else None
    dev_tasks = get_suite(cfg.suite).checked_dev_tasks([] if corpus and dev_tasks is None else dev_tasks,
                                                       cfg.dev_max_new_tokens, cfg.model.max_sequence_length)
    if not dp.is_main:  # (the dev tasks were checked before run_lock makes the folder)
        return _pretrain(cfg, dev_tasks, lambda *_: None, dp, device, corpus, keep)
    with run_lock(cfg.out):
        remove_stale_temporaries(cfg.out)
        return _pretrain(cfg, dev_tasks, log, dp, device, corpus, keep)


@dataclass
class _Run:
    """What one invocation of `glm53 pretrain` holds: the settings as resolved (calibrated kernels applied), the
    model and its optimizer, and the progress so far (restored by --resume)."""
    cfg: PretrainConfig
    out: Path
    log: Callable[[str], None]
    dp: DataParallel
    device: torch.device
    precision: str
    kernels: dict
    dev_tasks: list[Task]
    model: GLM53
    optimizer: torch.optim.Optimizer
    start_step: int = 0
    tokens_seen: int = 0
    curve: list[dict] = field(default_factory=list)
    checkpoints: list[dict] = field(default_factory=list)
    resumed_from: str | None = None
    corpus: Corpus | None = None
    validation: Validation | None = None
    keep: Callable[[list[dict]], set[str]] | None = None  # checkpoints whose weights --keep-last spares


def _pretrain(cfg: PretrainConfig, dev_tasks: list[Task] | None, log, dp: DataParallel,
              device: torch.device | None, corpus: Corpus | None = None, keep=None) -> dict | None:
    run = _start(cfg, dev_tasks, log, dp, device, corpus)
    run.keep = keep
    cfg, model, optimizer, device, precision = run.cfg, run.model, run.optimizer, run.device, run.precision
    counts = model.parameter_counts()
    log(f"glm53 pretrain: {counts['total']:,} parameters ({counts['active']:,} active), layers "
        f"{cfg.model.layer_pattern}, device {device} ({precision}{', compiled' if cfg.compile else ''}"
        f"{', calibrated kernels ' + str(run.kernels) if run.kernels else ''}), "
        f"{cfg.steps} steps of {cfg.batch_size} x {cfg.sequence_length}"
        + (f" x {cfg.grad_accumulation} accumulated" if cfg.grad_accumulation > 1 else ""))
    for line in ([corpus.describe(cfg.corpus_mix)] if corpus else []) + [Validation.describe(run.validation)]:
        log(line)
    forward = data_parallel_forward(model, dp, device)
    if dp.active:
        log(f"data parallel: {dp.world_size} ranks ({dp.backend}), {cfg.batch_size // dp.world_size} rows each, "
            f"{torch.get_num_threads()} threads per rank")
    forward = compiled(forward, shapes=compiled_widths(cfg.sequence_length)) if cfg.compile else forward
    if run.start_step == 0 and not cfg.runtime.resume and dp.is_main:
        _save_checkpoint(run, 0)

    started, val_loss = time.perf_counter(), None
    model.train()
    rt = cfg.runtime
    with reporting(rt.report_to if dp.is_main else "none", run.out, rt.report_name, rt.report_group,
                   cfg.to_dict()) as tracker, \
            tqdm(total=cfg.steps, initial=run.start_step, disable=not (rt.progress and dp.is_main), desc="pretrain",
                 unit="step", dynamic_ncols=True) as bar:
        if tracker is not None and run.start_step == 0 and "val_loss" in run.checkpoints[0]:
            tracker.log({"val_loss": run.checkpoints[0]["val_loss"]}, 0)  # the random initialization's
        for step in range(run.start_step, cfg.steps):
            t0 = time.perf_counter()
            row = train_step(cfg, step, model, forward, optimizer, device, precision, dp, run.corpus)
            run.tokens_seen += row["tokens"]
            row["tokens_seen"] = run.tokens_seen
            row["seconds"] = time.perf_counter() - t0
            row["tokens_per_second"] = cfg.batch_size * cfg.grad_accumulation * cfg.sequence_length / row["seconds"]
            run.curve.append(row)
            if not dp.is_main:
                continue  # rank 0 alone logs, evaluates and saves; the others meet it at the next step's collectives
            if run.validation is not None and validation_due(cfg, step + 1):
                row["val_loss"] = run.validation.loss(model, device, precision)
            with open(run.out / LOG_NAME, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            if tracker is not None:
                tracker.log(row, step + 1)
            val_loss = row.get("val_loss", val_loss)
            bar.set_postfix(loss=f"{row['loss']:.3f}", **({"val": f"{val_loss:.3f}"} if val_loss is not None else {}),
                            tok_s=f"{row['tokens_per_second']:.0f}")
            bar.update(1)
            if not rt.progress and ((step + 1) % 10 == 0 or step == 0 or "val_loss" in row):
                log(f"step {step + 1:5d} loss {row['loss']:.4f} balance {row['balance_loss']:.3f} "
                    f"grad {row['grad_norm']:.2f} {row['tokens_per_second']:.0f} tok/s"
                    + (f" val_loss {row['val_loss']:.4f}" if "val_loss" in row else ""))
            if step + 1 in cfg.checkpoints:
                _save_checkpoint(run, step + 1, row.get("val_loss"))
    elapsed = time.perf_counter() - started
    if not dp.is_main:
        return None
    return _finish(run, counts, elapsed)


def _start(cfg: PretrainConfig, dev_tasks: list[Task] | None, log, dp: DataParallel,
           device: torch.device | None, corpus: Corpus | None = None) -> _Run:
    """Build the run's start as the speedrun does (training_start.py: the settings resolved here, the seeded model,
    its optimizer, the tokenizer, the documents), check the run folder, then start it or resume from its latest
    checkpoint (with the same corpus)."""
    out = Path(cfg.out)
    dev_tasks = get_suite(cfg.suite).checked_dev_tasks([] if corpus and dev_tasks is None else dev_tasks,
                                                       cfg.dev_max_new_tokens, cfg.model.max_sequence_length)
    start = build_training(cfg, device, dp)
    cfg, model, optimizer = start.cfg, start.model, start.optimizer
    run = _Run(cfg, out, log, dp, start.device, start.precision, start.kernels, dev_tasks, model, optimizer,
               corpus=corpus)
    run.validation = validation_set(cfg, corpus)  # before anything is written: it may refuse the run

    def check_folder() -> None:
        check_run_folder(out, cfg.to_dict(), cfg.runtime.resume, RESUMABLE_CHANGES | EXTENSIONS | VALIDATION_SETTINGS
                         | RETENTION_CHANGES | LABELS)
        if cfg.runtime.resume:
            cfg.check_resumed_steps(json.loads((out / RUN_CONFIG_NAME).read_text()).get("steps"))

    dp.on_main(check_folder)
    if not cfg.runtime.resume:
        if dp.is_main:
            start_run_folder(out, cfg.to_dict())
    else:
        latest, state = restore_latest(out, model, optimizer, start.device)
        if state.get("stream_primitives_sha256", "") != pinned_sha256(cfg.stream_primitives):
            raise ValueError(f"--resume: the --stream-primitives file {cfg.stream_primitives} differs from the one "
                             f"{out} was trained on (sha256 {state.get('stream_primitives_sha256') or 'none'}); "
                             "restore its content, or start a new --out")
        if (held := state.get("stream_primitives_share", 1.0)) != cfg.stream_primitives_share:  # 1.0: from before it
            raise ValueError(f"--resume: --stream-primitives-share {cfg.stream_primitives_share} differs from the "
                             f"{held} {out} was trained with; resume with --stream-primitives-share {held}, or start "
                             "a new --out")
        if state.get("corpus_sha256") != (corpus.summary["sha256"] if corpus else None):
            raise ValueError(f"--resume: the --corpus files differ from those {out} was trained on (sha256 "
                             f"{state.get('corpus_sha256')}); resume with the same files, or start a new --out")
        run.start_step, run.tokens_seen, run.resumed_from = state["step"], state["tokens_seen"], state["resumed_from"]
        run.checkpoints = state["checkpoints"]
        start_step = run.start_step
        keep = lambda row: row["step"] <= start_step  # noqa: E731
        run.curve = truncate_jsonl(out / LOG_NAME, keep) if dp.is_main else []
        log(f"resuming {out} from step {start_step} ({latest.name})")
    return run


def _save_checkpoint(run: _Run, step: int, val_loss: float | None = None) -> None:
    """Sample the dev prompts and save the model with its optimizer and RNG states (rank 0 only; without them under
    --no-save-optimizer), then prune what --keep-last lets go; the validation loss of step 0 is measured here, the
    others' by the training loop."""
    cfg, log = run.cfg, run.log
    if cfg.stream_primitives and stream_file_changed(cfg.stream_primitives):
        log(f"  note: {cfg.stream_primitives} was edited since this run pinned it; the run reads the content it "
            "started with (a resume would be refused)")
    if step == 0 and run.validation is not None:
        val_loss = run.validation.loss(run.model, run.device, run.precision)
    if val_loss is not None:
        log(f"  [step {step}] validation loss {val_loss:.4f}")
    samples = dev_completions(run.model, run.dev_tasks, cfg.dev_max_new_tokens, cfg.suite) if run.dev_tasks else []
    held = corpus_samples(run.model, run.corpus, cfg.dev_max_new_tokens) if run.corpus else []  # the dev prompts'
    for h in held:  # place in a corpus run, its validation loss beside them
        log(f"  [step {step}] held-out {h['prompt']!r} -> {h['completion']!r}")
    for s in samples:
        log(f"  [step {step}] {s['task_id']}: {s['status']:8s} {s['completion']!r}")
    dev_pass = sum(s["status"] == "passed" for s in samples)
    if samples:
        log(f"  [step {step}] dev greedy pass@1: {dev_pass}/{len(samples)}")
    record = {"step": step, "path": checkpoint_name(step), "dev_completions": samples, "dev_passed": dev_pass,
              "dev_tasks": len(samples), **({"val_loss": val_loss} if val_loss is not None else {}),
              **({"corpus_samples": held} if run.corpus else {})}
    trainer_state = {"optimizer": run.optimizer.state_dict(), "rng": rng_state(), "step": step,
                     "tokens_seen": run.tokens_seen, "checkpoints": run.checkpoints + [record],
                     "corpus_sha256": run.corpus.summary["sha256"] if run.corpus else None,
                     "stream_primitives_sha256": pinned_sha256(cfg.stream_primitives),
                     "stream_primitives_share": cfg.stream_primitives_share}
    meta = {"stage": "random_initialization" if step == 0 else "coding_pretraining", "step": step,
            "tokens_seen": run.tokens_seen, "seed": cfg.seed, "dev_completions": samples,
            "dev_pass_at_1": dev_pass / len(samples) if samples else None, **({"corpus_samples": held} if held else {})}
    sha = save_checkpoint(run.out / checkpoint_name(step), run.model, meta,
                          trainer_state if cfg.retention.save_optimizer else None)
    run.checkpoints.append({**record, "weights_sha256": sha})
    apply_retention(run.out, cfg.retention, run.checkpoints, run.keep)
    log(f"  saved {checkpoint_name(step)} (sha256 {sha[:12]})")


def _stream_receipt(spec: str) -> dict:
    """The stream file a run read (`stream_primitives` in its receipt: as given, its path and sha256), or {}."""
    if not spec:
        return {}
    path, sha256 = pinned_file(spec)
    return {"stream_primitives": {"given": spec, "path": str(path), "sha256": sha256}}


def _finish(run: _Run, counts: dict, elapsed: float) -> dict:
    """Write the run's receipt (rank 0): settings, throughput, memory, the checkpoints and the final loss."""
    cfg, curve, out = run.cfg, run.curve, run.out
    trained = [r for r in curve if r["step"] > run.start_step]
    receipt = {
        "schema_version": "1.0", "status": "completed", "stage": "coding_pretraining",
        "config": cfg.model.to_dict(), "run": cfg.to_dict(), **get_suite(cfg.suite).receipt(),
        "parameter_counts": counts, "seed": cfg.seed, "corpus": run.corpus.summary if run.corpus else None,
        "validation": run.validation.to_dict() if run.validation else None,
        **_stream_receipt(cfg.stream_primitives),
        "steps": cfg.steps, "tokens_seen": run.tokens_seen, "device": str(run.device), "precision": run.precision,
        # Muon's Newton-Schulz products: bf16 where the hardware has it natively, fp32 where it would be emulated
        "muon_newton_schulz": newton_schulz_precision(run.device) if cfg.optimization.optimizer == "muon" else None,
        "elapsed_seconds_this_invocation": elapsed, "resumed_from_step": run.start_step if cfg.runtime.resume else None,
        "resumed_from": run.resumed_from,
        # input tokens per second of optimizer steps (checkpoint writing and dev sampling excluded)
        "train_tokens_per_second": len(trained) * cfg.batch_size * cfg.grad_accumulation * cfg.sequence_length
        / max(sum(r["seconds"] for r in trained), 1e-9),
        "peak_memory_bytes": peak_memory_bytes(run.device), "checkpoints": run.checkpoints,
        # what --keep-last pruned (again here: a prune cut short by an interruption is finished)
        "retention": apply_retention(out, cfg.retention, run.checkpoints, run.keep),
        "final_loss": curve[-1]["loss"] if curve else None,
        "final_val_loss": next((r["val_loss"] for r in reversed(curve) if "val_loss" in r), None),
        "torch_version": torch.__version__,
        # the machine's model and family numbers: a study's jobs may run on several machines, and speed or the
        # precision (bf16 where the CPU has it natively) differs between them. The machine that finished the run
        # (a run resumed elsewhere began on another; under data parallelism, rank 0's)
        "cpu": cpu_description(),
        "threads": torch.get_num_threads(), "data_parallel": run.dp.to_dict(), "sandbox": isolation_report(),
    }
    atomic_write_json(out / RECEIPT_NAME, receipt)
    run.log(f"done: {cfg.steps} steps, final loss {receipt['final_loss']:.4f}, {elapsed:.1f} s this invocation, "
            f"receipt {out / RECEIPT_NAME}")
    return receipt
