"""`glm53 bench`: the plain path and the fast path timed in one run, on the same weights.

plain = cumulative linear attention (materialized prefix states), gathered sparse attention (per-call index
        table), looped experts, fp32, and generation that recomputes the whole prefix for every new token.
fast  = chunked linear attention, cached-mask SDPA sparse attention, grouped experts, the default precision
        (bf16 autocast where the CPU has native bf16), and the cached engine.

The training phases time pretraining's own step (train/pretrain.py's `training_update`, on a batch made before
the clock starts): the learning rate, forward, the loss (train/loss.py), backward, gradient clipping, the optimizer,
the router biases and the log row's figures. Until issue 45 they timed a copy of it without the learning rate, the
router biases and the log's figures, so seconds per step recorded before then may be slightly lower.

Each phase runs in a fresh process so that its peak memory (peak resident set size on the CPU) is its own;
every phase builds the model from the same seed, so both paths start from identical weights (checked by hash).
Figures are medians over timed steps after warm-up steps (bf16 matmuls on CPU build a kernel for every new
shape, and expert batch sizes change from step to step, so the fast path gets 8 warm-up steps and the engine
an untimed warm-up call); they vary by about 10% between runs on a shared machine, so compare the ratios
measured in one run.
"""

from __future__ import annotations

import multiprocessing as mp
import platform
import statistics
import time

import torch

from ..checkpoints.format import weights_sha256
from ..data.pretrain_batches import pretraining_batch
from ..data.tasks import frozen_tasks
from ..decode.engine import generate_groups
from ..decode.generate import generate_uncached
from ..decode.sampling import Sampling
from ..model.config import MODEL_PRESETS, ModelConfig
from ..model.model import GLM53
from ..runtime.cpu import cpu_description, cpu_summary
from ..runtime.device import compiled, peak_memory_bytes, resolve_precision
from ..runtime.kernel_settings import resolve_kernels
from ..train.pretrain import make_optimizer, training_update
from ..train.pretrain_config import PretrainConfig
from .ceiling import PRECISION_DTYPES, flops_per_token, matmul_ceiling, matmul_gflops
from .profile import format_profile, profile_phase, profile_recipe_phase

QUICK = dict(model=dict(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, sparse_window=8, sparse_stride=8,
                        max_sequence_length=192),
             batch_size=2, sequence_length=128, warmup_steps=1, timed_steps=1, plain_timed_steps=1,
             prompt_tokens=12, new_tokens=4, group_size=4, groups=2)
FULL = dict(model={}, batch_size=32, sequence_length=128, warmup_steps=8, timed_steps=6, plain_timed_steps=2,
            prompt_tokens=60, new_tokens=48, group_size=16, groups=16)


def _build(model_kwargs: dict, plain: bool, seed: int):
    cfg = ModelConfig(**model_kwargs)
    torch.manual_seed(seed)
    return GLM53(cfg.plain() if plain else cfg)


def train_phase(model_kwargs: dict, plain: bool, precision: str, compile_model: bool, batch_size: int,
                sequence_length: int, warmup: int, timed: int, seed: int, ceiling_size: int = 2048) -> dict:
    """Seconds per training step (median of the timed steps) of pretraining's own step on a batch made beforehand
    (train/pretrain.py's `training_update`), and the matmul ceiling in `precision` measured in the
    same process right before each timed step and right after the last (`matmul_gflops_per_step`; the highest is
    `matmul_gflops_beside`): a shared host's speed drifts by 10-30% within minutes, and the ceiling measured at the
    end of `glm53 bench` may fall in another phase of it. Each timed step is then also set against the higher of the
    two ceilings measured on either side of it (`run_bench`'s step-by-step fraction)."""
    model = _build(model_kwargs, plain, seed)
    sha = weights_sha256(model)
    cfg = PretrainConfig(out="-", batch_size=batch_size, sequence_length=sequence_length, model=model.config)
    optimizer = make_optimizer(model, cfg)
    forward = compiled(model) if compile_model else model
    device = torch.device("cpu")
    times, losses, ceilings = [], [], []
    for step in range(warmup + timed):
        if step >= warmup:
            ceilings.append(matmul_gflops(PRECISION_DTYPES[precision], ceiling_size, repeats=3))
        inputs, labels = pretraining_batch(step, batch_size, sequence_length)
        t0 = time.perf_counter()
        row = training_update(cfg, step, model, forward, optimizer, inputs, labels, device, precision)
        times.append(time.perf_counter() - t0)
        losses.append(row["loss"])
    ceilings.append(matmul_gflops(PRECISION_DTYPES[precision], ceiling_size, repeats=3))
    seconds = statistics.median(times[warmup:])
    return {"seconds_per_step": seconds, "tokens_per_second": batch_size * sequence_length / seconds,
            "peak_memory_bytes": peak_memory_bytes(device), "step_seconds": times, "losses": losses,
            "warmup_steps": warmup, "weights_sha256": sha, "precision": precision, "compiled": compile_model,
            "matmul_gflops_per_step": ceilings, "matmul_gflops_beside": max(ceilings)}


def generation_phase(model_kwargs: dict, plain: bool, precision: str, prompts: list[str], group_size: int,
                     new_tokens: int, seed: int, repeats: int = 1) -> dict:
    sampling = Sampling(temperature=0.8, max_new_tokens=new_tokens, ignore_eos=True)

    model = _build(model_kwargs, plain, seed)
    sha = weights_sha256(model)
    times = []
    for r in range(repeats + (0 if plain else 1)):  # the cached engine gets one untimed warm-up call
        generator = torch.Generator().manual_seed(seed)
        t0 = time.perf_counter()
        if plain:
            out = generate_uncached(model, prompts, group_size, sampling, generator=generator)
        else:
            out = generate_groups(model, prompts, group_size, sampling, generator=generator, precision=precision)
        times.append(time.perf_counter() - t0)
    timed = times if plain else times[1:]
    seconds = statistics.median(timed)
    tokens = sum(len(s["token_ids"]) for group in out for s in group)
    return {"seconds": seconds, "new_tokens": tokens, "tokens_per_second": tokens / seconds,
            "seconds_per_completion": seconds / (len(prompts) * group_size), "completions": len(prompts) * group_size,
            "peak_memory_bytes": peak_memory_bytes(torch.device("cpu")), "weights_sha256": sha,
            "cached": not plain, "precision": precision, "runs_seconds": timed}


def _prompt_of(tokens: int) -> str:
    base = "# Complete this Python function.\n# Return the absolute value of x.\ndef absolute_qwertyu(x):"
    text = (base * 4)[-(tokens - 1):]  # BOS + (tokens - 1) bytes
    return text


def run_profile(quick: bool = False, seed: int = 0, log=print, model: str = "reference", recipe: str | None = None,
                recipe_overrides: dict | None = None) -> dict:
    """Per-component seconds per training step, fast (default precision) and plain (fp32), each in a fresh process,
    for the named architecture `model` (see MODEL_PRESETS; "released" has the released model's attention), or for a
    `recipe` of the book as pretraining builds it (its shapes, optimizer and precision; `recipe_overrides`: flat
    settings over it)."""
    if recipe is not None:
        from ..recipes.book import pretraining

        steps = 1 if quick else 3
        with mp.get_context("spawn").Pool(1) as pool:
            profiles = {"fast": pool.apply(profile_recipe_phase, (recipe, False, steps, seed, recipe_overrides))}
        with mp.get_context("spawn").Pool(1) as pool:
            profiles["plain"] = pool.apply(profile_recipe_phase, (recipe, True, 1, seed, recipe_overrides))
        log(format_profile(profiles))
        return {"machine": {"platform": platform.platform(), "cpu": cpu_description()},
                "settings": {"recipe": recipe, **pretraining(recipe), **(recipe_overrides or {})}, "profile": profiles}
    s = QUICK if quick else FULL
    s = {**s, "model": {**MODEL_PRESETS[model], **s["model"]}, "architecture": model}
    fast_precision = resolve_precision("auto", torch.device("cpu"))
    kernels = resolve_kernels("auto", fast_precision, torch.device("cpu"))  # as `glm53 bench` times the fast path
    steps = 1 if quick else 3
    with mp.get_context("spawn").Pool(1) as pool:
        profiles = {"fast": pool.apply(profile_phase, ({**s["model"], **kernels}, False, fast_precision,
                                                       s["batch_size"], s["sequence_length"], steps, seed))}
    if fast_precision != "fp32":
        with mp.get_context("spawn").Pool(1) as pool:
            profiles["fast fp32"] = pool.apply(profile_phase, (s["model"], False, "fp32", s["batch_size"],
                                                               s["sequence_length"], steps, seed))
    with mp.get_context("spawn").Pool(1) as pool:
        profiles["plain"] = pool.apply(profile_phase, (s["model"], True, "fp32", s["batch_size"],
                                                       s["sequence_length"], 1, seed))
    log(format_profile(profiles))
    return {"machine": {"platform": platform.platform(), "cpu": cpu_description(),
                        "fast_kernels": kernels or "the model config's"}, "settings": dict(s), "profile": profiles}


def run_bench(quick: bool = False, isolate: bool = True, compile_model: bool = False, seed: int = 0,
              log=print) -> dict:
    s = QUICK if quick else FULL
    model_kwargs = s["model"]
    cfg = ModelConfig(**model_kwargs)
    fast_precision = resolve_precision("auto", torch.device("cpu"))
    decode_precision = resolve_precision("auto", torch.device("cpu"), purpose="decode")
    kernels = resolve_kernels("auto", fast_precision, torch.device("cpu"))  # calibrated, when cached
    fast_kwargs = {**model_kwargs, **kernels}
    ctx = mp.get_context("spawn")

    def phase(fn, *args):
        if not isolate:
            return fn(*args)
        with ctx.Pool(1) as pool:
            return pool.apply(fn, args)

    B, T = s["batch_size"], s["sequence_length"]
    log(f"glm53 bench: training at {B} x {T}, {s['timed_steps']} timed steps after {s['warmup_steps']} warm-up "
        f"(plain: {s['plain_timed_steps']} after 1); torch {torch.__version__}, {torch.get_num_threads()} threads")
    size = 512 if quick else 2048  # of the matmul ceiling
    train = {"plain": phase(train_phase, model_kwargs, True, "fp32", False, B, T, 1, s["plain_timed_steps"], seed,
                            size)}
    log(f"  train plain      {train['plain']['seconds_per_step']:.2f} s/step")
    train["fast"] = phase(train_phase, fast_kwargs, False, fast_precision, False, B, T, s["warmup_steps"],
                          s["timed_steps"], seed, size)
    log(f"  train fast       {train['fast']['seconds_per_step']:.2f} s/step ({fast_precision})")
    train["fast_fp32"] = phase(train_phase, model_kwargs, False, "fp32", False, B, T, s["warmup_steps"],
                               s["timed_steps"], seed, size)
    log(f"  train fast fp32  {train['fast_fp32']['seconds_per_step']:.2f} s/step")
    if compile_model:
        train["fast_compiled"] = phase(train_phase, model_kwargs, False, fast_precision, True, B, T,
                                       s["warmup_steps"] + 2, s["timed_steps"], seed, size)
        log(f"  train compiled   {train['fast_compiled']['seconds_per_step']:.2f} s/step")

    prompt = _prompt_of(s["prompt_tokens"])
    many = [t.prompt for t in frozen_tasks("confirm", per_family=2)][: s["groups"]]
    G, N = s["group_size"], s["new_tokens"]
    gen = {"plain_uncached_one_group": phase(generation_phase, model_kwargs, True, "fp32", [prompt], G, N, seed)}
    log(f"  generate plain   {gen['plain_uncached_one_group']['seconds']:.2f} s for {G} x {N} tokens")
    gen["fast_cached_one_group"] = phase(generation_phase, model_kwargs, False, decode_precision, [prompt], G, N, seed,
                                         3)
    log(f"  generate fast    {gen['fast_cached_one_group']['seconds']:.2f} s for {G} x {N} tokens ({decode_precision})")
    gen["fast_cached_one_group_fp32"] = phase(generation_phase, model_kwargs, False, "fp32", [prompt], G, N, seed, 3)
    log(f"  generate fast    {gen['fast_cached_one_group_fp32']['seconds']:.2f} s for {G} x {N} tokens (fp32)")
    gen["fast_cached_many_groups"] = phase(generation_phase, model_kwargs, False, decode_precision, many, G, N, seed, 2)
    log(f"  generate fast    {gen['fast_cached_many_groups']['seconds']:.2f} s for {len(many)} groups of {G} x {N}")

    shas = {r["weights_sha256"] for r in list(train.values()) + list(gen.values())}
    flops = flops_per_token(cfg, T)
    ceiling = matmul_ceiling(size)
    p, f = train["plain"], train["fast"]
    result = {
        "machine": {"platform": platform.platform(), "cpu": cpu_description(), "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "fast_precision": fast_precision,
                    "decode_precision": decode_precision, "fast_kernels": kernels or "the model config's"},
        "settings": {k: v for k, v in s.items()}, "model_config": cfg.to_dict(),
        "same_weights": len(shas) == 1, "train": train, "generation": gen,
        "flops": flops, "matmul_gflops": ceiling,
        "ratios": {
            "train_tokens_per_second_fast_over_plain": f["tokens_per_second"] / p["tokens_per_second"],
            "train_tokens_per_second_fast_fp32_over_plain": train["fast_fp32"]["tokens_per_second"]
            / p["tokens_per_second"],
            "train_peak_memory_fast_over_plain": f["peak_memory_bytes"] / p["peak_memory_bytes"],
            "generation_one_group_cached_over_plain": gen["fast_cached_one_group"]["tokens_per_second"]
            / gen["plain_uncached_one_group"]["tokens_per_second"],
            "generation_per_completion_many_groups_over_one_group":
                gen["fast_cached_one_group"]["seconds_per_completion"]
                / gen["fast_cached_many_groups"]["seconds_per_completion"],
        },
        "fraction_of_matmul_ceiling": {
            name: r["tokens_per_second"] * flops["train_flops_per_token"] / 1e9 / ceiling[r["precision"]]
            for name, r in train.items()},
        "fraction_of_matmul_ceiling_beside": {  # against the ceiling measured in the phase's own process
            name: r["tokens_per_second"] * flops["train_flops_per_token"] / 1e9 / r["matmul_gflops_beside"]
            for name, r in train.items()},
        "fraction_of_matmul_ceiling_step_by_step": {
            name: step_by_step_fraction(r, B * T * flops["train_flops_per_token"]) for name, r in train.items()},
    }
    return result


def step_by_step_fraction(phase: dict, flops_per_step: float) -> float:
    """Median over the timed steps of each step's GFLOP/s over the higher of the two ceilings measured right before
    and right after it: the host's drift between a step and its own ceilings is seconds, not minutes."""
    timed = phase["step_seconds"][phase["warmup_steps"]:]
    ceilings = phase["matmul_gflops_per_step"]
    return statistics.median(flops_per_step / seconds / 1e9 / max(ceilings[i], ceilings[i + 1])
                             for i, seconds in enumerate(timed))


def format_report(r: dict) -> str:
    t, g, q = r["train"], r["generation"], r["ratios"]
    gib = 2**30
    m = r["machine"]
    kernels = m["fast_kernels"]
    kernels = ", ".join(f"{k} {v}" for k, v in kernels.items()) if isinstance(kernels, dict) else kernels
    lines = [
        f"glm53 bench  (torch {m['torch']}, {m['threads']} threads, same weights: {r['same_weights']})",
        f"cpu: {cpu_summary(m['cpu'])}",
        f"fast path: training {m['fast_precision']}, decoding {m['decode_precision']}; kernels: {kernels}",
        f"model: {r['flops']['train_flops_per_token'] / 1e6:.1f} MFLOP per training token; matmul ceiling "
        f"{r['matmul_gflops']['fp32']:.0f} GFLOP/s fp32, {r['matmul_gflops']['bf16']:.0f} GFLOP/s bf16",
        "",
        f"{'training':28s} {'s/step':>8s} {'tokens/s':>10s} {'peak GiB':>9s} {'of ceiling':>11s} "
        f"{'of the ceiling beside it':>31s} {'step by step':>13s}",
    ]
    for name, row in t.items():
        lines.append(f"{name + ' (' + row['precision'] + ')':28s} {row['seconds_per_step']:8.2f} "
                     f"{row['tokens_per_second']:10.0f} {row['peak_memory_bytes'] / gib:9.2f} "
                     f"{r['fraction_of_matmul_ceiling'][name]:11.1%} "
                     f"{r['fraction_of_matmul_ceiling_beside'][name]:15.1%} "
                     f"of {row['matmul_gflops_beside']:4.0f} GFLOP/s"
                     f"{r['fraction_of_matmul_ceiling_step_by_step'][name]:14.1%}")
    lines += ["", f"{'generation':28s} {'seconds':>8s} {'tokens/s':>10s} {'s/completion':>13s}"]
    for name, row in g.items():
        lines.append(f"{name:28s} {row['seconds']:8.2f} {row['tokens_per_second']:10.0f} "
                     f"{row['seconds_per_completion']:13.4f}")
    lines += ["", "ratios (fast / plain, measured in this run)"]
    lines += [f"  {k:55s} {v:6.2f}" for k, v in q.items()]
    return "\n".join(lines)
