"""`glm53 bench --profile`: where a training step's time goes, per component, forward and backward.

Timing uses module hooks with a wall clock (CPU work is synchronous): a forward pre/post hook pair around each
component, and a full backward pre/post hook pair for its backward. Components are the leaves a reader finds in
glm53/model/: embedding, RMSNorm, linear attention, sparse attention, MoE (its routing timed on its own),
hyper-connections (their own work, the block inside excluded); the head and loss, backward as a whole and the
optimizer step are timed around their calls. What no hook covers (autograd bookkeeping between modules) is
reported as `other`. The hooks cost a little time themselves, so the total is slightly above an unhooked step.
Simplification: backward time of modules whose inputs need no gradient still counts from their output's gradient.

`operator_split` times two more steps under torch.profiler, by kind of operator instead: matrix products (with
the FLOP rate they reach), fused attention kernels, and everything else (element-wise passes, copies, casts,
gathers, reductions), with the number of operator calls; it shows how far the step's fraction of the matmul
ceiling is held down by the matrix products themselves and how far by the rest. `against_ceiling` adds the step's
fraction of the matmul ceiling and its seconds outside every operator (the framework's overhead).

`--recipe NAME` profiles a recipe of the book (the speedrun's record, muon-qk-bpe-dense, for one) as `glm53 pretrain
--recipe NAME` builds it: its tokenizer, stream, shapes, optimizer and precision.
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from ..data.pretrain_batches import pretraining_batch
from ..model.config import ModelConfig
from ..model.hyper_connections import HyperConnection
from ..model.indexer_attention import IndexerSparseAttention
from ..model.kimi_delta_attention import KimiDeltaAttention
from ..model.linear_attention import LinearAttention
from ..model.manifold_hyper_connections import ManifoldHyperConnection
from ..model.model import GLM53
from ..model.moe import MixtureOfExperts
from ..model.norm import RMSNorm
from ..model.sparse_attention import SparseAttention
from ..runtime.device import autocast
from ..train.loss import language_loss, training_loss
from ..train.pretrain import make_optimizer, training_update
from ..train.pretrain_config import PretrainConfig
from .ceiling import PRECISION_DTYPES, flops_per_token, matmul_gflops

COMPONENTS = {nn.Embedding: "embedding", RMSNorm: "block norms", LinearAttention: "linear attention",
              KimiDeltaAttention: "linear attention", SparseAttention: "sparse attention",
              IndexerSparseAttention: "sparse attention", MixtureOfExperts: "moe experts",
              HyperConnection: "hyper-connections", ManifoldHyperConnection: "hyper-connections"}
BLOCK_NORMS = ("attention_norm", "moe_norm")  # not the norms inside an attention layer: their time is the layer's


class ComponentTimer:
    """Accumulates forward and backward seconds per component while attached to a model."""

    def __init__(self, model: nn.Module):
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.handles, self._starts = [], {}
        for path, module in model.named_modules():
            name = next((n for cls, n in COMPONENTS.items() if isinstance(module, cls)), None)
            if module is getattr(model, "final_norm", None):
                name = "final norm"
            elif isinstance(module, RMSNorm) and not path.endswith(BLOCK_NORMS):
                name = None
            if name is not None:
                self._attach(module, name)
            if isinstance(module, MixtureOfExperts):
                self._wrap_route(module)

    def _attach(self, module: nn.Module, name: str) -> None:
        key = id(module)

        def start(kind):
            def hook(*_):
                self._starts[(key, kind)] = time.perf_counter()
            return hook

        def stop(kind):
            def hook(*_):
                self.seconds[(name, kind)] += time.perf_counter() - self._starts.pop((key, kind), time.perf_counter())
            return hook

        self.handles += [module.register_forward_pre_hook(start("forward")),
                         module.register_forward_hook(stop("forward")),
                         module.register_full_backward_pre_hook(start("backward")),
                         module.register_full_backward_hook(stop("backward"))]

    def _wrap_route(self, moe: MixtureOfExperts) -> None:
        route = moe.route

        def timed_route(x):
            t0 = time.perf_counter()
            out = route(x)
            self.seconds[("moe routing", "forward")] += time.perf_counter() - t0
            return out

        moe.route = timed_route
        self.handles.append(_Restore(moe, "route"))

    def exclusive(self, kind: str) -> dict[str, float]:
        """Seconds of one direction with nesting taken out: a hyper-connection holds a whole block (its norms,
        attention and MoE), the MoE's time holds its routing."""
        s = {n: v for (n, k), v in self.seconds.items() if k == kind}
        inside_blocks = sum(s.get(n, 0.0)
                            for n in ("block norms", "linear attention", "sparse attention", "moe experts"))
        if "hyper-connections" in s:
            s["hyper-connections"] = max(0.0, s["hyper-connections"] - inside_blocks)
        if "moe experts" in s and "moe routing" in s:
            s["moe experts"] -= s["moe routing"]
        return s

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class _Restore:
    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def remove(self) -> None:
        self.obj.__dict__.pop(self.name, None)


def profile_training(model: nn.Module, batches, precision: str, warmup: int = 1, cfg: PretrainConfig | None = None,
                     optimizer=None) -> dict:
    """Seconds per step, mean over the steps after `warmup`: forward and backward per component (with what no
    component covers as `other`), the loss, and the optimizer (clipping included). The loss is the training
    loss of pretraining's step, with its coefficients (train/loss.py's `training_loss`; until issue 45 a copy of
    the language and balance terms alone). `cfg` and `optimizer`: a recipe's (default: pretraining's defaults)."""
    cfg = cfg or PretrainConfig(out="-", model=model.config)
    optimizer = optimizer or make_optimizer(model, cfg)
    device = torch.device("cpu")
    sums: dict[str, dict[str, float]] = {"forward": defaultdict(float), "backward": defaultdict(float)}
    whole: dict[str, float] = defaultdict(float)
    timed = 0
    for step, (inputs, labels) in enumerate(batches):
        timer = ComponentTimer(model) if step >= warmup else None
        marks = [time.perf_counter()]
        with autocast(device, precision):
            logits, aux = model(inputs, return_aux=True)
            marks.append(time.perf_counter())
            mtp = language_loss(aux.mtp_logits, labels[:, 1:]) if aux.mtp_logits is not None else None
            loss, _ = training_loss(language_loss(logits, labels), aux, cfg.balance_coef, mtp=mtp,
                                    mtp_coef=cfg.mtp_coef, indexer_coef=cfg.indexer_coef)
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():  # the embedding's input needs no gradient: its hook fires on the output's
            warnings.simplefilter("ignore", UserWarning)
            loss.backward()
        marks.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optimization.grad_clip)
        optimizer.step()
        marks.append(time.perf_counter())
        if timer is None:
            continue
        timer.remove()
        timed += 1
        spans = (b - a for a, b in zip(marks, marks[1:]))
        for name, seconds in zip(("forward", "loss", "backward", "optimizer"), spans):
            whole[name] += seconds
        for kind in ("forward", "backward"):
            for name, seconds in timer.exclusive(kind).items():
                sums[kind][name] += seconds
    if not timed:
        raise ValueError("profile_training needs more batches than warm-up steps")
    out = {"step": sum(whole.values()) / timed, "loss": whole["loss"] / timed, "optimizer": whole["optimizer"] / timed,
           "timed_steps": timed}
    for kind in ("forward", "backward"):
        parts = {name: seconds / timed for name, seconds in sorted(sums[kind].items())}
        parts["other"] = max(0.0, whole[kind] / timed - sum(parts.values()))
        out[kind] = {"total": whole[kind] / timed, "parts": parts}
    return out


MATRIX_PRODUCTS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::mv",
                   "aten::addmv_", "aten::addr", "aten::dot", "aten::vdot")


def operator_split(model: nn.Module, batches, precision: str, cfg: PretrainConfig | None = None,
                   optimizer=None) -> dict:
    """Training steps (pretraining's own, train/pretrain.py's `training_update`; until issue 45 a copy without
    clipping, the schedule and the log's figures) under torch.profiler, one per batch: their operators' own
    seconds per step by kind. Times come from a profile without shapes (recording shapes roughly doubles what
    small operators cost); the matrix products' FLOPs from one more step that records them. `cfg` and `optimizer`
    as in `profile_training`."""
    cfg = cfg or PretrainConfig(out="-", model=model.config)
    optimizer = optimizer or make_optimizer(model, cfg)
    cpu = torch.device("cpu")
    with profile(activities=[ProfilerActivity.CPU]) as timed:
        for step, (inputs, labels) in enumerate(batches):
            training_update(cfg, step, model, model, optimizer, inputs, labels, cpu, precision)
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as counted:
        training_update(cfg, len(batches), model, model, optimizer, *batches[-1], cpu, precision)
    flops = sum(e.flops or 0 for e in counted.key_averages() if e.key in MATRIX_PRODUCTS)
    matrix = attention = other = 0.0
    calls = 0
    for event in timed.key_averages():
        if not event.key.startswith("aten::"):
            continue
        seconds = event.self_cpu_time_total / 1e6
        calls += event.count
        if event.key in MATRIX_PRODUCTS:
            matrix += seconds
        elif "scaled_dot_product" in event.key:
            attention += seconds
        else:
            other += seconds
    n = len(batches)
    return {"matrix_product_seconds": matrix / n,
            "matrix_product_gflops_per_second": flops / (matrix / n) / 1e9 if matrix else 0.0,
            "attention_kernel_seconds": attention / n, "other_operator_seconds": other / n,
            "operator_calls": calls // n, "steps": n}


def profile_phase(model_kwargs: dict, plain: bool, precision: str, batch_size: int, sequence_length: int,
                  steps: int, seed: int) -> dict:
    """One bench phase (run in its own process by `glm53 bench --profile`)."""
    cfg = ModelConfig(**model_kwargs)
    torch.manual_seed(seed)
    model = GLM53(cfg.plain() if plain else cfg)
    batches = [pretraining_batch(step, batch_size, sequence_length) for step in range(steps + 2)]
    result = {"precision": precision, **profile_training(model, batches, precision, warmup=2)}
    result["operators"] = operator_split(model, batches[-2:], precision)
    return {**result, **against_ceiling(result, model.config, batch_size, sequence_length, precision)}


def profile_recipe_phase(recipe: str, plain: bool, steps: int, seed: int, overrides: dict | None = None) -> dict:
    """One phase for a recipe of the book (`glm53 bench --profile --recipe NAME`): its model, tokenizer, stream,
    shapes, optimizer and precision as `glm53 pretrain --recipe NAME` builds them (plain: the plain model in fp32).
    `overrides`: flat settings over the recipe's (the tests' small shapes)."""
    from dataclasses import replace

    from ..recipes.book import pretraining
    from ..train.training_start import build_training

    cfg = PretrainConfig(out="-", **{**pretraining(recipe), "seed": seed, **(overrides or {})})
    if plain:
        cfg = replace(cfg, model=cfg.model.plain(), runtime=replace(cfg.runtime, precision="fp32"))
    start = build_training(cfg)
    cfg, model, precision = start.cfg, start.model, start.precision
    batches = [pretraining_batch(step, cfg.batch_size, cfg.sequence_length, cfg.seed, cfg.suite, loss_on=cfg.loss_on,
                                 tokenizer=start.tokenizer, docstring_share=cfg.docstring_share,
                                 stream_primitives=cfg.stream_primitives,
                                 stream_primitives_share=cfg.stream_primitives_share)
               for step in range(steps + 2)]
    result = {"precision": precision, **profile_training(model, batches, precision, warmup=2, cfg=cfg,
                                                           optimizer=start.optimizer)}
    result["operators"] = operator_split(model, batches[-2:], precision, cfg=cfg, optimizer=start.optimizer)
    return {**result, **against_ceiling(result, cfg.model, cfg.batch_size, cfg.sequence_length, precision)}


def against_ceiling(result: dict, model: ModelConfig, batch_size: int, sequence_length: int, precision: str) -> dict:
    """The step's training FLOPs (ceiling.flops_per_token, every position of every row) over its seconds, as a fraction
    of a square matmul's rate in the step's precision measured here right after it; and the step's seconds outside
    every aten operator's own time (Python, autograd's engine, dispatch: the framework's overhead)."""
    flops = flops_per_token(model, sequence_length)["train_flops_per_token"] * batch_size * sequence_length
    ceiling = matmul_gflops(PRECISION_DTYPES[precision], repeats=3)
    ops = result["operators"]
    inside = ops["matrix_product_seconds"] + ops["attention_kernel_seconds"] + ops["other_operator_seconds"]
    return {"train_gflops_per_step": flops / 1e9, "matmul_ceiling_gflops": ceiling,
            "fraction_of_ceiling": flops / result["step"] / (ceiling * 1e9),
            "outside_operators_seconds": max(0.0, result["step"] - inside)}


def format_profile(profiles: dict) -> str:
    names = sorted({n for p in profiles.values() for kind in ("forward", "backward") for n in p[kind]["parts"]},
                   key=lambda n: (n == "other", n))
    heads = list(profiles)
    lines = [f"{'seconds per step':34s}" + "".join(f"{h + ' (' + profiles[h]['precision'] + ')':>18s}" for h in heads)]
    for kind in ("forward", "backward"):
        for name in names:
            lines.append(f"  {kind + ' ' + name:32s}" + "".join(
                f"{profiles[h][kind]['parts'].get(name, 0.0):18.3f}" for h in heads))
        lines.append(f"  {kind + ' total':32s}" + "".join(f"{profiles[h][kind]['total']:18.3f}" for h in heads))
    for row in ("loss", "optimizer", "step"):
        lines.append(f"  {row:32s}" + "".join(f"{profiles[h][row]:18.3f}" for h in heads))
    if all("operators" in p for p in profiles.values()):
        lines.append("two more steps under torch.profiler, operators' own seconds per step by kind:")
        for key, label in (("matrix_product_seconds", "matrix products"),
                           ("matrix_product_gflops_per_second", "  their GFLOP/s"),
                           ("attention_kernel_seconds", "fused attention kernels"),
                           ("other_operator_seconds", "all other operators"), ("operator_calls", "operator calls")):
            fmt = "{:18.0f}" if key in ("matrix_product_gflops_per_second", "operator_calls") else "{:18.3f}"
            lines.append(f"  {label:32s}" + "".join(fmt.format(profiles[h]["operators"][key]) for h in heads))
    if all("fraction_of_ceiling" in p for p in profiles.values()):
        for key, label, fmt in (("outside_operators_seconds", "step outside the operators", "{:18.3f}"),
                                ("train_gflops_per_step", "training GFLOP a step", "{:18.2f}"),
                                ("matmul_ceiling_gflops", "matmul ceiling GFLOP/s", "{:18.0f}"),
                                ("fraction_of_ceiling", "step's fraction of it", "{:18.1%}")):
            lines.append(f"  {label:32s}" + "".join(fmt.format(profiles[h][key]) for h in heads))
    return "\n".join(lines)
