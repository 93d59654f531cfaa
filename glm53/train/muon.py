"""Muon for the hidden matrices, AdamW for the rest: `--optimizer muon` (make_optimizer in pretrain.py).

Muon (Keller Jordan's, as in torch.optim.Muon since torch 2.9) keeps a momentum of each matrix's gradient and
steps along an orthogonalised version of it: a few Newton-Schulz iterations take the momentum M = U S V^T to about
U V^T, so every direction of the update moves by about the same amount whatever the gradient's spectrum. The public
speedruns report about 2x fewer tokens to the same loss than AdamW on transformer hidden layers.

torch.optim.Muon takes 2-D parameters only. This model keeps each MoE layer's routed experts stacked in one 3-D
parameter ([experts, out, in], moe.py), so `StackedMuon` does the same arithmetic over any leading dimensions: each
expert's matrix is orthogonalised on its own, in one batched product. With no leading dimension it is
torch.optim.Muon's step to rounding (a test holds the two equal, and each 3-D slice equal to torch's step on that
slice alone) when its Newton-Schulz products run in bf16, as torch's always do (below).

Which parameters Muon takes (`muon_groups`): every matrix inside the blocks (attention projections, the experts,
the shared experts). AdamW keeps the embedding (and an untied head, an MTP block's projection), the routers (a
gate's few rows are not a hidden transform), the norms, the hyper-connection stream weights and anything else
that is not a matrix, as the speedruns do.

Simplifications: one process's step (data-parallel ranks each run the same step on the same averaged gradient; the
speedruns' sharding of the Newton-Schulz work over ranks is left out). The step batches the matrices of one shape
into one Newton-Schulz call, up to BATCH_ELEMENTS (each matrix still orthogonalised on its own); `batched=False` is
the plain per-parameter form, tested equal.

Precision: the Newton-Schulz products run in bf16, as torch.optim.Muon's do, where the hardware multiplies bf16
natively (a CUDA GPU from Ampere on, a CPU with AVX512-BF16 or AMX), and in fp32 elsewhere: on a CPU without them
(AMD Zen 3, for one) a bf16 product is emulated, and the broad preset's Muon step took 4.3 s in bf16 on a 2-core
Zen 3 (docs/speed.md). `newton_schulz_precision` is the rule; the pretraining and speedrun receipts record what it
chose. Simplification: each process applies the rule to its own hardware (data-parallel ranks on one machine agree).
"""

from __future__ import annotations

import math

import torch
from torch.optim import Optimizer

from ..runtime.device import native_bf16

# torch.optim.Muon's defaults (the quintic's coefficients from the speedruns), repeated here as StackedMuon's
NS_COEFFICIENTS = (3.4445, -4.775, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7
LR_ADJUSTMENTS = ("original", "match_rms_adamw")
# The most elements one batched Newton-Schulz call takes: batching pays where per-call overhead dominates (a small
# model's matrices), not where the products are large and the concatenation is one more copy (the reference
# model's 768 x 192 matrices, 8 experts a parameter, all in one call: its Muon step 0.78x and 0.92x the loop's speed
# in two runs; capped, 1.27x; scripts/bench_muon_step.py, docs/speed.md)
BATCH_ELEMENTS = 1 << 21
NS_PRECISIONS = {"bf16": torch.bfloat16, "fp32": torch.float32}


def newton_schulz_precision(device: torch.device, precision: str = "auto") -> str:
    """The Newton-Schulz products' precision on `device`: auto is bf16 where the hardware multiplies bf16 natively
    (torch.optim.Muon's choice), fp32 where bf16 would be emulated; bf16 or fp32 as named."""
    check_precision(precision)
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


def check_precision(precision: str) -> None:
    """Refuse a Newton-Schulz precision other than auto, bf16 or fp32 (without probing the hardware)."""
    if precision != "auto" and precision not in NS_PRECISIONS:
        raise ValueError(f"Newton-Schulz precision {precision!r}: choose auto, bf16 or fp32")


def orthogonalize(update: torch.Tensor, steps: int = NS_STEPS, coefficients=NS_COEFFICIENTS,
                  eps: float = NS_EPS, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """About U V^T of each trailing [rows, cols] matrix of `update` (U S V^T its SVD), by `steps` quintic
    Newton-Schulz iterations in `dtype` (bf16, as torch.optim.Muon computes it for one matrix, or fp32)."""
    a, b, c = coefficients
    x = update.to(dtype)
    tall = x.size(-2) > x.size(-1)
    if tall:  # iterate on the wide orientation: X X^T is then the smaller square
        x = x.mT
    x = x / x.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)  # spectral norm <= Frobenius norm <= 1
    stacked = x.reshape(-1, *x.shape[-2:])  # one batched product for every matrix (torch's addmm form for one)
    for _ in range(steps):
        gram = stacked @ stacked.mT
        stacked = torch.baddbmm(stacked, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), stacked, beta=a)
    x = stacked.reshape(x.shape)
    return x.mT if tall else x


def adjusted_lr(lr: float, shape: torch.Size, adjustment: str) -> float:
    """The step size for a matrix of `shape`'s trailing [rows, cols]: "original" (Muon's, sqrt(max(1, rows/cols)))
    or "match_rms_adamw" (0.2 sqrt(max(rows, cols)): an update of about AdamW's size, so AdamW's lr carries over)."""
    rows, cols = shape[-2], shape[-1]
    if adjustment == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr * math.sqrt(max(1.0, rows / cols))


class StackedMuon(Optimizer):
    """Muon over parameters of two or more dimensions, each trailing matrix orthogonalised on its own. Weight decay
    is decoupled and scaled by the unadjusted lr (param *= 1 - lr * weight_decay), as torch.optim.Muon does."""

    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, weight_decay: float = 0.0,
                 nesterov: bool = True, ns_steps: int = NS_STEPS, adjust_lr: str = "original", batched: bool = True,
                 precision: str = "auto"):
        if lr < 0 or not 0 <= momentum < 1 or weight_decay < 0 or ns_steps < 1 or adjust_lr not in LR_ADJUSTMENTS:
            raise ValueError(f"StackedMuon: lr {lr} >= 0, momentum {momentum} in [0, 1), weight decay {weight_decay} "
                             f">= 0, ns_steps {ns_steps} >= 1 and adjust_lr one of {LR_ADJUSTMENTS}")
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                                      ns_steps=ns_steps, adjust_lr=adjust_lr))
        # batched: the matrices of one shape in a group orthogonalised by one `orthogonalize` call (up to
        # BATCH_ELEMENTS: a handful of batched products for all of a small model's layers, not for each parameter);
        # False: one call a parameter, the plain form it is tested against
        self.batched = batched
        check_precision(precision)  # refused here, not at the first step
        # auto, bf16 or fp32: the Newton-Schulz products' precision, resolved on the parameters' device at each step
        self.precision = precision
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim < 2:
                    raise ValueError(f"StackedMuon takes matrices (or stacks of them), not a {p.ndim}-D parameter of "
                                     f"shape {tuple(p.shape)}: give it to AdamW")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            live = [p for p in group["params"] if p.grad is not None]
            if not live:
                continue
            dtype = NS_PRECISIONS[newton_schulz_precision(live[0].device, self.precision)]
            if not self.batched:  # the plain form: one parameter at a time
                for p in live:
                    self._apply(p, orthogonalize(self._momentum_update(p, group), group["ns_steps"], dtype=dtype),
                                group)
                continue
            by_shape: dict[tuple[int, ...], list[torch.Tensor]] = {}
            for p in live:
                by_shape.setdefault(tuple(p.shape[-2:]), []).append(p)
            # each chunk's updates are made, orthogonalised and applied before the next chunk's: one chunk's worth of
            # updates lives at a time, as one parameter's did in the plain form
            for chunk in (chunk for same in by_shape.values() for chunk in _batches(same)):
                updates = [self._momentum_update(p, group).reshape(-1, *p.shape[-2:]) for p in chunk]
                together = orthogonalize(torch.cat(updates) if len(updates) > 1 else updates[0], group["ns_steps"],
                                         dtype=dtype)
                for p, update in zip(chunk, together.split([u.shape[0] for u in updates])):
                    self._apply(p, update.reshape(p.shape), group)
        return loss

    def _momentum_update(self, p: torch.Tensor, group: dict) -> torch.Tensor:
        """Advance p's momentum by its gradient; the update to orthogonalise (Nesterov's look-ahead, or the buffer)."""
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p)
        buf = state["momentum_buffer"]
        buf.lerp_(p.grad, 1 - group["momentum"])
        return p.grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf

    @staticmethod
    def _apply(p: torch.Tensor, update: torch.Tensor, group: dict) -> None:
        lr = group["lr"]
        p.mul_(1 - lr * group["weight_decay"])
        p.add_(update.to(p.dtype), alpha=-adjusted_lr(lr, p.shape, group["adjust_lr"]))


def _batches(params: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """Consecutive runs of `params` of at most BATCH_ELEMENTS elements each (a larger parameter alone)."""
    chunks, size = [], 0
    for p in params:
        if not chunks or size + p.numel() > BATCH_ELEMENTS:
            chunks.append([])
            size = 0
        chunks[-1].append(p)
        size += p.numel()
    return chunks


def muon_groups(model: torch.nn.Module) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    """(the hidden matrices Muon takes, everything else) by the rule in the module docstring: the 2-D weights of
    the blocks and the stacked experts, but not the routers (nor a KDA block's 3-D convolution kernels)."""
    muon, rest = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        matrix = p.ndim == 2 or name.endswith((".expert_up", ".expert_down"))
        (muon if matrix and name.startswith("layers.") and ".router." not in name else rest).append(p)
    return muon, rest


class OptimizerPair:
    """Two optimizers stepped as one, so the training loop, the schedule and checkpoints see one optimizer: its
    param_groups are both optimizers' (each group's `lr_scale` relates its peak lr to the run's --lr, which the
    schedule multiplies), and its state_dict holds both."""

    def __init__(self, first, second):
        self.optimizers = (first, second)
        self.param_groups = first.param_groups + second.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()

    def state_dict(self) -> dict:
        return {"optimizers": [optimizer.state_dict() for optimizer in self.optimizers]}

    def load_state_dict(self, state_dict: dict) -> None:
        saved = state_dict.get("optimizers")
        if saved is None or len(saved) != len(self.optimizers):
            raise ValueError("this checkpoint's optimizer state is not a Muon + AdamW pair: it was trained with "
                             "another --optimizer; resume with the run's own --optimizer")
        for optimizer, state in zip(self.optimizers, saved):
            optimizer.load_state_dict(state)
