"""The policy update of `glm53 rl`: one optimizer step (or `iterations` of them, PPO-style clipped after the
first) on a step's groups with signal, plus the optional KL and replay terms; and which parameters train.

Under data parallelism (runtime/distributed.py) each rank computes on its share of the update's rows and its loss
is its share of the step's loss (every aggregation divides by the step's totals); gradients are summed with one
all-reduce per pass. rl.py calls `update_policy` once per step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..data.pretrain_batches import IGNORE_INDEX, encode_documents
from ..data.suites import get_suite
from ..data.bpe_tokenizer import tokenizer_for
from ..model.model import GLM53
from ..model.moe import MixtureOfExperts
from ..runtime.device import autocast
from ..runtime.distributed import SINGLE, DataParallel
from .completion_batch import make_completion_batch
from .policy_gradient import aggregate_objective, aggregate_policy_loss, clipped_token_objective
from .rl_config import RLConfig

REPLAY_STREAM_OFFSET = 50_000_000  # replay documents come from far beyond any pretraining run


def set_train_scope(model: GLM53, scope: str) -> list[torch.nn.Parameter]:
    """Mark the parameters RL trains (rl_config.TRAIN_SCOPES) and return them. experts: the routed experts' stacked
    weights and the shared experts of every block, not the router (so the choice of experts stays the start's),
    nor the MTP block's (RL has no MTP loss)."""
    for p in model.parameters():
        p.requires_grad_(scope == "all")
    if scope == "experts":
        for module in model.layers.modules():
            if isinstance(module, MixtureOfExperts):
                for p in (module.expert_up, module.expert_down, *module.shared.parameters()):
                    p.requires_grad_(True)
    elif scope != "all":
        head = (model.embedding,) + ((model.head,) if model.head is not None else ())  # the head: tied or not
        for module in (model.layers[-1], model.final_norm) + (head if scope == "last-block-head" else ()):
            for p in module.parameters():
                p.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]


def replay_batch(step: int, batch: int, device, suite: str = "reference",
                 tokenizer=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pretraining-style examples of `suite`'s stream with labels on the solution tokens (body + EOS) only (the
    model's `tokenizer`: bytes by default)."""
    tokenizer = tokenizer or tokenizer_for("byte")
    texts, prompt_lengths = [], []
    stream = get_suite(suite)
    for r in range(batch):
        task = stream.pretraining_task(REPLAY_STREAM_OFFSET + step * batch + r)
        texts.append(task.prompt + task.canonical_completion)
        prompt_lengths.append(len(tokenizer.encode(task.prompt, bos=True)))
    inputs, labels = encode_documents(texts, max(len(tokenizer.encode(t)) for t in texts) + 1, tokenizer)
    for i, n in enumerate(prompt_lengths):
        labels[i, : n - 1] = IGNORE_INDEX
    return inputs.to(device), labels.to(device)


def update_policy(model, reference, optimizer, trainable, cfg: RLConfig, precision: str, device, prompt_ids,
            completion_ids, advantages, step: int, dp: DataParallel = SINGLE) -> dict:
    """cfg.iterations optimizer steps on the groups with signal (plus replay/KL terms); after the first, each token's
    term is the clipped PPO objective against the log-probs the rollouts were scored with before any of them.
    Returns the step's figures (those of the last pass, with clip fractions averaged over the passes). Under data
    parallelism this rank computes on its share of the rows, and the figures are the step's. --grad-accumulation K:
    this rank's rows (and the replay rows) run as K micro-batches whose gradients add up before each optimizer step;
    every term is already a share of the step's totals, so the step equals the unsplit one to rounding."""
    if not advantages and cfg.replay_coef <= 0:
        return {"updated": False, "loss": 0.0, "grad_norm": 0.0, "entropy": None, "kl": None}
    rows = dp.share(len(advantages))
    mine = (prompt_ids[rows], completion_ids[rows], advantages[rows])
    parts = [range(len(mine[2]))[p] for p in _micro_slices(len(mine[2]), cfg.grad_accumulation)]
    chunks = [(make_completion_batch(cfg.update_impl, [mine[0][i] for i in part], [mine[1][i] for i in part], device,
                                     model.config.max_sequence_length), [mine[2][i] for i in part]) for part in parts]
    # the step's totals, by which every rank divides its sums
    local = sum((b.mask.sum() for b, _ in chunks), torch.zeros((), dtype=torch.long, device=device))
    totals = {"rows": len(advantages), "tokens": int(dp.sum(local))}
    old_logp, clipped = [None] * len(chunks), []
    if cfg.iterations > 1:
        with torch.no_grad(), autocast(device, precision):
            model.train()
            old_logp = [_token_logp(b.logits(model), b.targets, b.mask).detach() for b, _ in chunks]
    for _ in range(cfg.iterations):
        figures = _update_pass(model, reference, optimizer, trainable, cfg, precision, device, chunks, old_logp,
                               bool(advantages), step, dp, totals)
        clipped.append((figures.pop("clipped_low", 0.0), figures.pop("clipped_high", 0.0)))
    if cfg.iterations > 1:
        figures["clipped_low"] = sum(c[0] for c in clipped) / len(clipped)
        figures["clipped_high"] = sum(c[1] for c in clipped) / len(clipped)
    return figures


def _micro_slices(rows: int, k: int) -> list[slice]:
    """The non-empty contiguous slices that split `rows` rows into at most k micro-batches, as even as can be."""
    edges = [round(i * rows / k) for i in range(k + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def _token_logp(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return logits.float().log_softmax(dim=-1).gather(-1, targets[..., None]).squeeze(-1) * mask


def _update_pass(model, reference, optimizer, trainable, cfg: RLConfig, precision: str, device, chunks, old_logp,
                 policy: bool, step: int, dp: DataParallel, totals: dict) -> dict:
    """One optimizer step. `chunks`: this rank's rows as (completion batch, advantages) micro-batches (none when it
    holds no row); `policy`: whether the step has any row at all. Every term is this rank's share of the step's
    value, and so is each figure in `shares`; their sums over ranks are the step's loss and figures. Micro-batch i
    is policy chunk i with replay chunk i, one backward each (one in all without accumulation, as before it)."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    shares: dict[str, torch.Tensor] = {}
    replay = _replay_rows(step, cfg, device, dp, tokenizer_for(model.config)) if cfg.replay_coef > 0 else None
    micro = max(len(chunks), len(replay[0]) if replay else 0)
    step_loss = torch.zeros((), device=device)
    for i in range(micro):
        loss = torch.zeros((), device=device)
        if i < len(chunks):
            loss = _policy_terms(loss, model, reference, cfg, precision, device, *chunks[i], old_logp[i], totals,
                                 shares)
        if replay and i < len(replay[0]):
            with autocast(device, precision):
                r_logits = model(replay[0][i])
            replay_share = F.cross_entropy(r_logits.float().reshape(-1, r_logits.shape[-1]), replay[1][i].reshape(-1),
                                           ignore_index=IGNORE_INDEX, reduction="sum") / replay[2]
            loss = loss + cfg.replay_coef * replay_share
            _add(shares, "replay_loss", replay_share.detach())
        if loss.requires_grad:
            loss.backward()
        step_loss = step_loss + loss.detach()
    dp.sum_gradients(trainable)
    grad_norm = torch.nn.utils.clip_grad_norm_(trainable, cfg.optimization.grad_clip)
    optimizer.step()
    model.update_router_biases(dp.sum if dp.active else None)
    names = ["loss", "entropy", "policy_loss", "kl", "replay_loss", "clipped_low", "clipped_high"]
    shares["loss"] = step_loss
    summed = dp.sum(torch.stack([shares.get(n, torch.zeros(())).float().cpu() for n in names])).tolist()
    step_figures = dict(zip(names, summed))
    figures: dict = {"updated": True, "loss": step_figures["loss"], "grad_norm": float(grad_norm)}
    if policy:
        figures.update({k: step_figures[k] for k in ("entropy", "policy_loss")})
        if cfg.iterations > 1:
            figures.update({k: step_figures[k] for k in ("clipped_low", "clipped_high")})
    figures["entropy"] = figures.get("entropy")
    figures["kl"] = step_figures["kl"] if policy and reference is not None else None
    if cfg.replay_coef > 0:
        figures["replay_loss"] = step_figures["replay_loss"]
    return figures


def _add(shares: dict, name: str, value: torch.Tensor) -> None:
    shares[name] = shares[name] + value if name in shares else value


def _replay_rows(step: int, cfg: RLConfig, device, dp: DataParallel, tokenizer=None):
    """This rank's replay rows as (inputs per micro-batch, labels per micro-batch, the step's replay token count)."""
    r_inputs, r_labels = replay_batch(step, cfg.replay_batch, device, cfg.suite, tokenizer)
    rows = dp.share(cfg.replay_batch)
    r_inputs, r_labels = r_inputs[rows], r_labels[rows]
    replay_tokens = max(int(dp.sum((r_labels != IGNORE_INDEX).sum())), 1)
    parts = _micro_slices(r_inputs.shape[0], cfg.grad_accumulation)
    return [r_inputs[p] for p in parts], [r_labels[p] for p in parts], replay_tokens


def _policy_terms(loss, model, reference, cfg: RLConfig, precision: str, device, batch, advantages, old_logp,
                  totals: dict, shares: dict) -> torch.Tensor:
    """`loss` plus one micro-batch's policy, entropy and KL terms (its share of the step's loss, added in the order
    the weights' rounding was recorded with); adds its figures to `shares`."""
    tokens = max(totals["tokens"], 1)
    targets, mask = batch.targets, batch.mask
    with autocast(device, precision):
        logits = batch.logits(model)
    logp_all = logits.float().log_softmax(dim=-1)
    token_logp = logp_all.gather(-1, targets[..., None]).squeeze(-1) * mask
    adv = torch.tensor(advantages, device=device)
    if old_logp is None:
        policy_loss = aggregate_policy_loss(token_logp, mask, adv, cfg.normalization, cfg.sampling.max_new_tokens,
                                            totals["rows"], tokens)
    else:
        objective, low, high = clipped_token_objective(token_logp, old_logp, adv, mask, cfg.clip_low, cfg.clip_high)
        policy_loss = aggregate_objective(objective, mask, cfg.normalization, cfg.sampling.max_new_tokens,
                                          totals["rows"], tokens)
        local = float(mask.sum()) / tokens  # the fractions are of this rank's tokens
        _add(shares, "clipped_low", torch.tensor(low * local))
        _add(shares, "clipped_high", torch.tensor(high * local))
    loss = loss + policy_loss
    with torch.set_grad_enabled(cfg.entropy_coef > 0):
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        entropy_share = (entropy * mask).sum() / tokens
    if cfg.entropy_coef > 0:
        loss = loss - cfg.entropy_coef * entropy_share
    _add(shares, "entropy", entropy_share.detach())
    _add(shares, "policy_loss", policy_loss.detach())
    if reference is not None:
        with torch.no_grad(), autocast(device, precision):
            ref_logits = batch.logits(reference)
        ref_logp = ref_logits.float().log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)
        log_ratio = (ref_logp - token_logp) * mask
        kl_share = ((log_ratio.exp() - 1 - log_ratio) * mask).sum() / tokens
        loss = loss + cfg.kl_coef * kl_share
        _add(shares, "kl", kl_share.detach())
    return loss
