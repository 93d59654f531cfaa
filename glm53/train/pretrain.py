"""Pretraining on the generated-function stream: next-byte cross-entropy plus the router balance term.

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
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from inspect import signature
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..runtime.kernel_settings import KERNEL_CHOICES, resolve_kernels
from .checkpoint import (RECEIPT_NAME, RUN_CONFIG_NAME, checkpoint_name, check_run_folder, restore_latest, rng_state,
                         save_checkpoint, start_run_folder)
from ..model.config import ModelConfig
from ..data.pretrain_batches import IGNORE_INDEX, pretraining_batch
from ..runtime.device import DEVICE_CHOICES, PRECISIONS, autocast, peak_memory_bytes, resolve_device, resolve_precision
from ..runtime.distributed import SINGLE, DataParallel
from ..evaluate.evaluate import EvalConfig, evaluate
from ..decode.generate import Sampling
from ..runtime.files import atomic_write_json, remove_stale_temporaries, run_lock, truncate_jsonl
from ..model.model import GLM53
from .schedule import SCHEDULES, scheduled_lr
from ..runtime.settings import Checks, default_checkpoints, setting
from ..data.tasks import Task, frozen_tasks
from ..runtime.tracking import TRACKERS, reporting, tracker_problem
from ..verify.verifier import isolation_report

LOG_NAME = "train_log.jsonl"
DEFAULT_CHECKPOINTS = (100, 200, 400)
# Settings a resumed run may change without changing what the earlier steps computed.
RESUMABLE_CHANGES = {"steps", "checkpoints", "device", "progress", "resume", "out", "threads", "report_to",
                     "report_name", "report_group"}


@dataclass
class PretrainConfig:
    out: str = setting("", "run folder (must not exist, unless --resume)", required=True)
    steps: int = setting(400, "optimizer steps")
    checkpoints: tuple[int, ...] | None = setting(None, "steps to save a checkpoint at (the last step always is)",
                                                  shown="100,200,400, those within --steps")
    batch_size: int = setting(32, "rows per step")
    sequence_length: int = setting(128, "tokens per row")
    lr: float = setting(3e-4, "peak learning rate (AdamW)")
    betas: tuple[float, float] = setting((0.9, 0.95), "AdamW betas")
    weight_decay: float = setting(0.1, "AdamW weight decay on matrices")
    grad_clip: float = setting(1.0, "gradient-norm clip")
    balance_coef: float = setting(0.01, "weight of the router balance loss")
    indexer_coef: float = setting(1.0, "weight of the indexer's KL term (sparse_selection=indexer); it trains only "
                                       "the indexers, whose input is detached")
    mtp_coef: float = setting(0.3, "weight of the multi-token-prediction loss (mtp_depth = 1)")
    indexer_warmup_steps: int = setting(0, "first steps in which indexer layers attend densely while their indexer "
                                           "learns toward that attention (sparse_selection=indexer)")
    lr_schedule: str = setting("constant", "after warmup", choices=SCHEDULES)
    warmup_steps: int = setting(0, "linear warmup steps")
    min_lr_ratio: float = setting(0.1, "cosine schedule: final lr / peak lr")
    seed: int = setting(42, "seed of the initialization and the data stream")
    device: str = setting("auto", "auto (cuda, mps, cpu), cpu, cuda or mps", choices=DEVICE_CHOICES)
    precision: str = setting("auto", "auto: bf16 autocast on hardware with native bf16, else fp32", choices=PRECISIONS)
    kernels: str = setting("auto", "auto: the kernel settings `glm53 calibrate` measured fastest here, when cached "
                                   "(recorded in the receipt's config); config: the model flags as given",
                           choices=KERNEL_CHOICES)
    compile: bool = setting(False, "torch.compile the model (a one-time compile of about a minute)")
    resume: bool = setting(False, "continue the run in --out from its latest checkpoint")
    progress: bool = setting(True, "show a progress bar (--no-progress: plain log lines)")
    threads: int = setting(0, "torch threads (0: torch's default; under torchrun, cores / ranks on this machine)")
    report_to: str = setting("none", "also log each step's figures to a tracker (offline unless you configure it)",
                             choices=TRACKERS)
    report_name: str = setting("", cli=False)  # the tracker's run name (default: the run folder), set by sweeps
    report_group: str = setting("", cli=False)  # the tracker's group of runs (a sweep), set by sweeps
    dev_max_new_tokens: int = setting(48, "token cap of the dev completions sampled at each checkpoint")
    model: ModelConfig = setting(default_factory=ModelConfig, flatten=True)

    def __post_init__(self) -> None:
        self.checkpoints = default_checkpoints(self.checkpoints, DEFAULT_CHECKPOINTS, self.steps)
        check = Checks("pretrain")
        check.at_least("steps", self.steps, 1)
        check.require(all(1 <= c <= self.steps for c in self.checkpoints),
                      f"--checkpoints {','.join(map(str, self.checkpoints))} must lie in [1, --steps {self.steps}]")
        check.at_least("batch_size", self.batch_size, 1)
        check.within("sequence_length", self.sequence_length, 2, self.model.max_sequence_length)
        check.positive("lr", self.lr)
        check.require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                      f"--betas must be two numbers in [0, 1), got {self.betas}")
        check.at_least("weight_decay", self.weight_decay, 0)
        check.positive("grad_clip", self.grad_clip)
        check.at_least("balance_coef", self.balance_coef, 0)
        check.at_least("indexer_coef", self.indexer_coef, 0)
        check.at_least("mtp_coef", self.mtp_coef, 0)
        check.require(self.model.mtp_depth == 0 or self.sequence_length >= 3,
                      f"--sequence-length {self.sequence_length} is too short for --mtp-depth 1, which predicts two "
                      "tokens ahead: use 3 or more")
        check.within("indexer_warmup_steps", self.indexer_warmup_steps, 0, self.steps)
        check.require(self.indexer_warmup_steps == 0 or self.model.sparse_selection == "indexer",
                      "--indexer-warmup-steps needs --sparse-selection indexer (there is no indexer to warm up)")
        check.one_of("lr_schedule", self.lr_schedule, SCHEDULES)
        check.within("warmup_steps", self.warmup_steps, 0, self.steps)
        check.within("min_lr_ratio", self.min_lr_ratio, 0, 1)
        check.at_least("dev_max_new_tokens", self.dev_max_new_tokens, 1)
        check.one_of("device", self.device, DEVICE_CHOICES)
        check.one_of("precision", self.precision, PRECISIONS)
        check.one_of("kernels", self.kernels, KERNEL_CHOICES)
        check.at_least("threads", self.threads, 0)
        check.one_of("report_to", self.report_to, TRACKERS)
        check.require(tracker_problem(self.report_to) is None, str(tracker_problem(self.report_to)))
        check.done()
        if self.steps not in self.checkpoints:
            self.checkpoints = self.checkpoints + (self.steps,)  # the final weights are always kept

    def to_dict(self) -> dict:
        d = asdict(self)
        d["checkpoints"] = list(self.checkpoints)
        d["betas"] = list(self.betas)
        return d


def learning_rate(cfg: PretrainConfig, step: int) -> float:
    """LR for 0-based update `step`: linear warmup, then constant or cosine down to min_lr_ratio * lr."""
    return scheduled_lr(cfg.lr, step, cfg.steps, cfg.warmup_steps, cfg.lr_schedule, cfg.min_lr_ratio)


def decay_groups(model: GLM53, weight_decay: float) -> list[dict]:
    """Decay matrices (attention, router, experts); not norms, stream weights, the embedding or an untied head
    (treated like the tied embedding it replaces)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and not name.startswith(("embedding.", "head.")) else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: GLM53, cfg: PretrainConfig) -> torch.optim.AdamW:
    # fused: one kernel pass over each parameter's weights, gradient and moments (on a 2-core Zen 5, 8 ms a step for
    # the 25.7M parameters against 28 ms for foreach); it rounds differently from the per-parameter loop
    return torch.optim.AdamW(decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=tuple(cfg.betas), fused=True)


def bare_training_step(model: GLM53, optimizer, inputs: torch.Tensor, labels: torch.Tensor, precision: str) -> None:
    """One CPU training step as the benchmarks time it: forward under `precision`, language loss plus the balance
    term, backward, optimizer step (no clipping, no schedule, no logging)."""
    from ..runtime.device import autocast

    with autocast(torch.device("cpu"), precision):
        logits, aux = model(inputs, return_aux=True)
        loss = language_loss(logits, labels) + 0.01 * aux.balance_loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def language_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def language_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The summed next-token cross-entropy (PAD never a target); divided by the global token count, it is this
    rank's share of the batch mean."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX,
                           reduction="sum")


def expert_load_cv(usage: torch.Tensor) -> float:
    """How unevenly a step's tokens spread over the experts: the coefficient of variation (std / mean) of each
    layer's expert usage [layers, experts], averaged over layers; 0 is perfectly even."""
    usage = usage.float()
    return float((usage.std(dim=1, unbiased=False) / usage.mean(dim=1)).mean())


def default_dev_tasks() -> list[Task]:
    return frozen_tasks("dev", per_family=1)


def dev_completions(model: GLM53, tasks: list[Task], max_new_tokens: int) -> list[dict]:
    """Greedy completion of each dev prompt, verified against its hidden cases."""
    result = evaluate(model, tasks, EvalConfig(sampling=Sampling(max_new_tokens=max_new_tokens), seed=0))
    return [{"task_id": r["task_id"], "family": r["family"], "completion": r["samples"][0]["completion"],
             "status": r["samples"][0]["verdict"]["status"], "hit_token_cap": r["samples"][0]["hit_token_cap"]}
            for r in result["tasks"]]


def train_step(cfg: PretrainConfig, step: int, model: GLM53, forward, optimizer, device, precision: str,
               dp: DataParallel = SINGLE) -> dict:
    """One optimizer step on the batch of 0-based `step` (this rank's rows of it); returns its log row (without
    timings), the same on every rank.

    Each term below is this rank's share of the global loss; DDP averages gradients over ranks, so the shares
    are scaled by the world size before backward (a no-op in one process)."""
    inputs, labels = pretraining_batch(step, cfg.batch_size, cfg.sequence_length, cfg.seed)
    rows = dp.share(cfg.batch_size)
    inputs, labels = inputs[rows].to(device), labels[rows].to(device)
    lr = learning_rate(cfg, step)
    for group in optimizer.param_groups:
        group["lr"] = lr
    model.set_indexer_dense(step < cfg.indexer_warmup_steps)
    mtp = cfg.model.mtp_depth > 0
    local_tokens = torch.stack([(labels != IGNORE_INDEX).sum(), (labels[:, 1:] != IGNORE_INDEX).sum()]).double()
    tokens, mtp_tokens = dp.sum(local_tokens).tolist()
    with autocast(device, precision):
        logits, aux = forward(inputs, return_aux=True)
        lm_share = language_loss_sum(logits, labels) / tokens
        mtp_share = language_loss_sum(aux.mtp_logits, labels[:, 1:]) / mtp_tokens if mtp else lm_share.new_zeros(())
        shares = torch.stack([lm_share, mtp_share, aux.balance_loss.float() / dp.world_size,
                              aux.indexer_loss.float() / dp.world_size])
        weights = torch.tensor([1.0, cfg.mtp_coef, cfg.balance_coef, cfg.indexer_coef], device=shares.device)
        loss_share = (shares * weights).sum()
    lm_loss, mtp_loss, balance_loss, indexer_loss = dp.sum(shares.detach()).tolist()
    total = lm_loss + cfg.mtp_coef * mtp_loss + cfg.balance_coef * balance_loss + cfg.indexer_coef * indexer_loss
    if not math.isfinite(total):  # the global figure, so every rank stops alike
        raise FloatingPointError(f"step {step + 1}: loss is {total}; lower --lr or check the data")
    optimizer.zero_grad(set_to_none=True)
    (loss_share * dp.world_size).backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    model.update_router_biases(dp.sum if dp.active else None)
    return {"step": step + 1, "loss": lm_loss, "balance_loss": balance_loss, "indexer_loss": indexer_loss,
            **({"mtp_loss": mtp_loss} if mtp else {}), "expert_load_cv": expert_load_cv(aux.expert_usage),
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
             device: torch.device | None = None) -> dict:
    """Run (or resume) pretraining; returns the receipt dict that is also written to the run folder (by rank 0,
    under data parallelism; the other ranks return None). One process at a time may write a run folder; what an
    interrupted atomic write left behind is removed first."""
    if not cfg.out:
        raise ValueError("pretrain: out must name the run folder (--out)")
    if cfg.batch_size % dp.world_size:
        raise ValueError(f"pretrain: --batch-size {cfg.batch_size} does not divide among {dp.world_size} ranks; use a "
                         f"multiple of {dp.world_size} or another --nproc-per-node")
    if not dp.is_main:
        return _pretrain(cfg, dev_tasks, lambda *_: None, dp, device)
    with run_lock(cfg.out):
        remove_stale_temporaries(cfg.out)
        return _pretrain(cfg, dev_tasks, log, dp, device)


def _pretrain(cfg: PretrainConfig, dev_tasks: list[Task] | None, log, dp: DataParallel,
              device: torch.device | None) -> dict | None:
    out = Path(cfg.out)
    device = device or resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    kernels = resolve_kernels(cfg.kernels, precision, device)
    if kernels:  # the run folder and receipts record the resolved settings, so a rerun can give them
        cfg = replace(cfg, model=replace(cfg.model, **kernels))
    dev_tasks = dev_tasks if dev_tasks is not None else default_dev_tasks()
    if cfg.threads and not dp.active:  # under torchrun, from_environment has set them
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    model = GLM53(cfg.model).to(device)
    optimizer = make_optimizer(model, cfg)
    start_step, tokens_seen, curve, checkpoints, resumed_from = 0, 0, [], [], None

    def check_folder() -> None:
        check_run_folder(out, cfg.to_dict(), cfg.resume, RESUMABLE_CHANGES)
        if cfg.resume and cfg.lr_schedule == "cosine" and \
                json.loads((out / RUN_CONFIG_NAME).read_text()).get("steps") != cfg.steps:
            raise ValueError("--resume: steps differ, and a cosine schedule depends on the total")

    dp.on_main(check_folder)
    if not cfg.resume:
        if dp.is_main:
            start_run_folder(out, cfg.to_dict())
    else:
        latest, state = restore_latest(out, model, optimizer, device)
        start_step, tokens_seen, resumed_from = state["step"], state["tokens_seen"], state["resumed_from"]
        checkpoints = state["checkpoints"]
        keep = lambda row: row["step"] <= start_step  # noqa: E731
        curve = truncate_jsonl(out / LOG_NAME, keep) if dp.is_main else []
        log(f"resuming {out} from step {start_step} ({latest.name})")

    counts = model.parameter_counts()
    log(f"glm53 pretrain: {counts['total']:,} parameters ({counts['active']:,} active), layers "
        f"{cfg.model.layer_pattern}, device {device} ({precision}{', compiled' if cfg.compile else ''}"
        f"{', calibrated kernels ' + str(kernels) if kernels else ''}), "
        f"{cfg.steps} steps of {cfg.batch_size} x {cfg.sequence_length}")
    forward = data_parallel_forward(model, dp, device)
    if dp.active:
        log(f"data parallel: {dp.world_size} ranks ({dp.backend}), {cfg.batch_size // dp.world_size} rows each, "
            f"{torch.get_num_threads()} threads per rank")
    forward = torch.compile(forward) if cfg.compile else forward

    def checkpoint(step: int) -> None:
        samples = dev_completions(model, dev_tasks, cfg.dev_max_new_tokens) if dev_tasks else []
        for s in samples:
            log(f"  [step {step}] {s['task_id']}: {s['status']:8s} {s['completion']!r}")
        dev_pass = sum(s["status"] == "passed" for s in samples)
        if samples:
            log(f"  [step {step}] dev greedy pass@1: {dev_pass}/{len(samples)}")
        record = {"step": step, "path": checkpoint_name(step), "dev_completions": samples, "dev_passed": dev_pass,
                  "dev_tasks": len(samples)}
        trainer_state = {"optimizer": optimizer.state_dict(), "rng": rng_state(), "step": step,
                         "tokens_seen": tokens_seen, "checkpoints": checkpoints + [record]}
        meta = {"stage": "random_initialization" if step == 0 else "coding_pretraining", "step": step,
                "tokens_seen": tokens_seen, "seed": cfg.seed, "dev_completions": samples,
                "dev_pass_at_1": dev_pass / len(samples) if samples else None}
        sha = save_checkpoint(out / checkpoint_name(step), model, meta, trainer_state)
        checkpoints.append({**record, "weights_sha256": sha})
        log(f"  saved {checkpoint_name(step)} (sha256 {sha[:12]})")

    if start_step == 0 and not cfg.resume and dp.is_main:
        checkpoint(0)

    started = time.perf_counter()
    model.train()
    with reporting(cfg.report_to if dp.is_main else "none", out, cfg.report_name, cfg.report_group,
                   cfg.to_dict()) as tracker, \
            tqdm(total=cfg.steps, initial=start_step, disable=not (cfg.progress and dp.is_main), desc="pretrain",
                 unit="step", dynamic_ncols=True) as bar:
        for step in range(start_step, cfg.steps):
            t0 = time.perf_counter()
            row = train_step(cfg, step, model, forward, optimizer, device, precision, dp)
            tokens_seen += row["tokens"]
            row["tokens_seen"] = tokens_seen
            row["seconds"] = time.perf_counter() - t0
            row["tokens_per_second"] = cfg.batch_size * cfg.sequence_length / row["seconds"]
            curve.append(row)
            if not dp.is_main:
                continue  # rank 0 alone logs, evaluates and saves; the others meet it at the next step's collectives
            with open(out / LOG_NAME, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            if tracker is not None:
                tracker.log(row, step + 1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", tok_s=f"{row['tokens_per_second']:.0f}")
            bar.update(1)
            if not cfg.progress and ((step + 1) % 10 == 0 or step == 0):
                log(f"step {step + 1:5d} loss {row['loss']:.4f} balance {row['balance_loss']:.3f} "
                    f"grad {row['grad_norm']:.2f} {row['tokens_per_second']:.0f} tok/s")
            if step + 1 in cfg.checkpoints:
                checkpoint(step + 1)
    elapsed = time.perf_counter() - started
    if not dp.is_main:
        return None
    trained = [r for r in curve if r["step"] > start_step]
    receipt = {
        "schema_version": "1.0", "status": "completed", "stage": "coding_pretraining",
        "config": cfg.model.to_dict(), "run": cfg.to_dict(), "parameter_counts": counts, "seed": cfg.seed,
        "steps": cfg.steps, "tokens_seen": tokens_seen, "device": str(device), "precision": precision,
        "elapsed_seconds_this_invocation": elapsed, "resumed_from_step": start_step if cfg.resume else None,
        "resumed_from": resumed_from,
        # input tokens per second of optimizer steps (checkpoint writing and dev sampling excluded)
        "train_tokens_per_second": len(trained) * cfg.batch_size * cfg.sequence_length
        / max(sum(r["seconds"] for r in trained), 1e-9),
        "peak_memory_bytes": peak_memory_bytes(device), "checkpoints": checkpoints,
        "final_loss": curve[-1]["loss"] if curve else None, "torch_version": torch.__version__,
        "threads": torch.get_num_threads(), "data_parallel": dp.to_dict(), "sandbox": isolation_report(),
    }
    atomic_write_json(out / RECEIPT_NAME, receipt)
    log(f"done: {cfg.steps} steps, final loss {receipt['final_loss']:.4f}, {elapsed:.1f} s this invocation, "
        f"receipt {out / RECEIPT_NAME}")
    return receipt

