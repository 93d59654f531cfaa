"""The pretraining-data studies' own job: train the 248K miniature on expression data in one data order and
score the held-out structures at chosen updates (reference-system.md §9.1-9.2).

Settings as in the reference: 200 updates of 24 x 128, AdamW 8e-4 with betas (0.9, 0.95), weight decay 0.1,
gradient clip 1.0, balance coefficient 0.01, fp32, constant learning rate (so the scores at update 50 equal
those of a 50-update run in the interleaved and repeated orders). The seed sets both the initialization and
the data (the reference's choice).

Differences from the reference, inherited from this project's model and trainer (not tuned to the study):
weight decay applies to matrices only (the reference decayed every parameter); the balance loss has a gradient
(the reference's was a count with none, so its top-1 router never learned); the hyper-connections write only
the block's update back (the reference wrote input + update). `hc_double_residual = true` restores the last.
One choice of this job for speed: each batch is cut after its longest row (`trim_padding`), about 5% of the
time; the positions cut are padding in every row, so only the balance term sees a difference (it counted them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.expressions import DATA_ORDERS, batch_texts, heldout_metrics, item_order
from ..checkpoints.format import weights_sha256
from ..data.pretrain_batches import IGNORE_INDEX, encode_documents
from ..model.config import ModelConfig
from ..model.model import GLM53
from ..runtime.config import RuntimeConfig
from ..runtime.composition import composed, record
from ..runtime.settings import MAX_SEED, Checks, setting
from ..runtime.tracking import reporting
from .optimization import MUON_SETTINGS, Optimization
from .loss import language_loss, training_loss
from .optimizers import decay_groups


def miniature() -> ModelConfig:
    return ModelConfig.named("miniature")


@composed
@dataclass
class ExpressionPretrainConfig:
    data_order: str = setting("diverse-88", "which structures each update sees, in which order", choices=DATA_ORDERS)
    steps: int = setting(200, "optimizer updates", at_least=1)
    eval_at: tuple[int, ...] = setting((50, 100, 200), "updates after which the held-out structures are scored")
    batch_size: int = setting(24, "examples per update", at_least=1)
    sequence_length: int = setting(128, "tokens per row", at_least=2)
    optimization: Optimization = setting(default_factory=lambda: Optimization(lr=8e-4), flatten=True,
                                         skip=("lr_schedule", "warmup_steps", "min_lr_ratio", *MUON_SETTINGS),
                                         helps={"lr": "constant learning rate (AdamW)"})
    balance_coef: float = setting(0.01, "weight of the router balance loss", at_least=0)
    trim_padding: bool = setting(True, "cut each batch after its longest row (those positions are padding in "
                                       "every row; only the balance term counted them)")
    seed: int = setting(11, "seed of the initialization and the data", at_least=0, at_most=MAX_SEED)
    # a CPU in fp32, one process: of the runtime only the tracker applies
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=("device", "precision", "threads", "progress", "resume",
                                           "accept_partial_isolation"),
                                     helps={"report_to": "also log each update's figures to a tracker (with an "
                                                         "output folder)"})
    model: ModelConfig = setting(default_factory=miniature, flatten=True, record="nested")

    def __post_init__(self) -> None:
        self.eval_at = tuple(sorted(set(int(s) for s in self.eval_at)))
        check = Checks("expression-pretrain")
        check.declared(self)
        check.require(bool(self.eval_at) and all(1 <= s <= self.steps for s in self.eval_at),
                      f"--eval-at {','.join(map(str, self.eval_at))} must name updates in [1, --steps {self.steps}]")
        check.require(self.model.tokenizer == "byte", f"the expression data is read as bytes; --tokenizer "
                                                      f"{self.model.tokenizer} is for the broad stream: use byte")
        check.require(self.sequence_length <= self.model.max_sequence_length,
                      f"--sequence-length {self.sequence_length} must be <= --max-sequence-length "
                      f"{self.model.max_sequence_length}")
        check.done()

    def to_dict(self) -> dict:
        return record(self)


def trim_padding(inputs: torch.Tensor, labels: torch.Tensor):
    """Drop the trailing positions that are padding in every row. The model is causal and padding is never a
    target, so no real position's output and no loss term changes; the balance term, which counts every
    position it routes, no longer counts these."""
    keep = int((labels != IGNORE_INDEX).any(dim=0).nonzero().max()) + 1
    return inputs[:, :keep], labels[:, :keep]


def optimizer_for(model: GLM53, cfg: ExpressionPretrainConfig) -> torch.optim.AdamW:
    # fused: one kernel per parameter; a small model spends a fifth of its optimizer time otherwise
    opt = cfg.optimization
    return torch.optim.AdamW(decay_groups(model, opt.weight_decay), lr=opt.lr, betas=opt.betas, fused=True)


def expression_pretrain(cfg: ExpressionPretrainConfig, log=None, out: str | Path | None = None) -> dict:
    """Train on CPU in fp32 and return the receipt: held-out metrics and weights hash at each update of eval_at
    (and before training), the loss curve, and what ran. With `report_to`, each update's loss and the held-out
    metrics also go to a tracker whose files live in `out` (required then)."""
    rt = cfg.runtime
    if rt.report_to != "none":
        if out is None:
            raise ValueError(f"expression-pretrain: --report-to {rt.report_to} needs an output folder for its files")
        Path(out).mkdir(parents=True, exist_ok=True)
    with reporting(rt.report_to, out or ".", rt.report_name, rt.report_group, cfg.to_dict()) as tracker:
        return _train(cfg, log, tracker)


def _train(cfg: ExpressionPretrainConfig, log, tracker) -> dict:
    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    model = GLM53(cfg.model)
    optimizer = optimizer_for(model, cfg)
    items = item_order(cfg.data_order, cfg.steps, cfg.batch_size)
    evaluations = {0: {**heldout_metrics(model.eval(), cfg.seed, cfg.sequence_length),
                       "weights_sha256": weights_sha256(model)}}
    losses, tokens_seen = [], 0
    model.train()
    for step in range(cfg.steps):
        inputs, labels = encode_documents(batch_texts(items, step, cfg.batch_size, cfg.seed), cfg.sequence_length)
        if cfg.trim_padding:
            inputs, labels = trim_padding(inputs, labels)
        logits, aux = model(inputs, return_aux=True)
        lm_loss = language_loss(logits, labels)
        loss, _ = training_loss(lm_loss, aux, cfg.balance_coef)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"update {step + 1}: loss is {loss.item()}; lower --lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optimization.grad_clip)
        optimizer.step()
        losses.append(lm_loss.item())
        tokens_seen += int((labels != IGNORE_INDEX).sum())
        row = {"loss": losses[-1], "balance_loss": aux.balance_loss.item(), "tokens_seen": tokens_seen}
        if step + 1 in cfg.eval_at:
            evaluations[step + 1] = {**heldout_metrics(model.eval(), cfg.seed, cfg.sequence_length),
                                     "weights_sha256": weights_sha256(model)}
            model.train()
            row.update({f"heldout_{k}": v for k, v in evaluations[step + 1].items()})
            if log:
                log(f"update {step + 1}: held-out byte accuracy {evaluations[step + 1]['target_byte_accuracy']:.3f}")
        if tracker is not None:
            tracker.log(row, step + 1)
    return {"job": "expression-pretrain", "settings": cfg.to_dict(), "seed": cfg.seed,
            "parameter_counts": model.parameter_counts(), "layer_pattern": cfg.model.layer_pattern,
            "metrics": {str(k): v for k, v in evaluations.items()}, "loss_curve": losses,
            "tokens_seen": tokens_seen,
            "elapsed_seconds": time.perf_counter() - started, "threads": torch.get_num_threads()}
