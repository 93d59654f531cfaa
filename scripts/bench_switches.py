"""Seconds per training step of the reference model and of each released-model switch, and where KDA's time goes.

    python scripts/bench_switches.py [--steps 3] [--batch 32] [--length 128] [--only reference,kda] [--precision bf16]
                                     [--processes 6]

Each architecture is built from the same seed and trained (forward, backward, AdamW step; fp32, or under bf16 autocast
as the fast path runs on CPUs with native bf16) on the same pretraining batches for one untimed and `--steps` timed
steps; the median is printed with its ratio to the reference, and the decoding speed: greedy, every row to the token
cap (EOS banned, so every architecture decodes the same number of tokens), 16 prompts in one batch through the cached
engine. Then one KDA layer and one elu linear-attention layer are timed forward + backward at the model's shapes,
split into the attention core and the rest of the layer. Figures vary by ~10% between runs on a shared machine:
compare the ratios of one run. The CPU (lscpu) is printed first.

`--processes N` times the training step instead in N fresh processes per architecture, interleaved (each round runs
every architecture once, so a drift of the machine's speed touches all alike), each the median of `--steps` steps
after 4 warm-up steps; it prints every process's figure and the median over processes, and skips decoding.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from glm53 import GLM53, ModelConfig
from glm53.data.pretrain_batches import pretraining_batch
from glm53.model.kimi_delta_attention import KimiDeltaAttention, kda_fast
from glm53.model.linear_attention import LinearAttention, feature_map, linear_attention_fast
from glm53.runtime.device import autocast
from glm53.train.loss import language_loss, training_loss

VARIANTS = {
    "reference": {}, "kda": dict(linear_attention="kda"), "indexer": dict(sparse_selection="indexer"),
    "nope": dict(position="none"), "released-attention": dict(linear_attention="kda", sparse_selection="indexer",
                                                             position="none"),
    "mhc": dict(residual="mhc"), "sigmoid-bias": dict(router="sigmoid-bias"), "untied": dict(tie_embeddings=False),
    "mtp": dict(mtp_depth=1), "released": "preset",
}


def build(overrides) -> GLM53:
    torch.manual_seed(0)
    return GLM53(ModelConfig.named("released") if overrides == "preset" else ModelConfig(**overrides))


def decode_tokens_per_second(model: GLM53, tokens: int = 48) -> float:
    from glm53.data.tasks import frozen_tasks
    from glm53.decode.engine import generate_groups
    from glm53.decode.generate import Sampling

    prompts = [t.prompt for t in frozen_tasks("confirm", 2)]
    sampling = Sampling(temperature=0.0, max_new_tokens=tokens, ignore_eos=True)
    generate_groups(model, prompts[:2], 1, Sampling(temperature=0.0, max_new_tokens=4, ignore_eos=True))
    started = time.perf_counter()
    out = generate_groups(model, prompts, 1, sampling)
    return sum(len(g[0]["token_ids"]) for g in out) / (time.perf_counter() - started)


def step_seconds(model: GLM53, steps: int, batch: int, length: int, precision: str = "fp32", warmup: int = 1) -> float:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    times = []
    for step in range(steps + warmup):
        inputs, labels = pretraining_batch(step, batch, length)
        started = time.perf_counter()
        with autocast(torch.device("cpu"), precision):
            logits, aux = model(inputs, return_aux=True)
            mtp = language_loss(aux.mtp_logits, labels[:, 1:]) if aux.mtp_logits is not None else None
            loss, _ = training_loss(language_loss(logits, labels), aux, 0.01, mtp=mtp, mtp_coef=0.3, indexer_coef=1.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        model.update_router_biases()
        times.append(time.perf_counter() - started)
    return statistics.median(times[warmup:])


def timed(fn, repeats: int = 3, precision: str = "fp32") -> float:
    with autocast(torch.device("cpu"), precision):
        fn()
        started = time.perf_counter()
        for _ in range(repeats):
            fn()
    return (time.perf_counter() - started) / repeats


def layer_breakdown(batch: int, length: int, precision: str = "fp32") -> dict:
    """Forward + backward seconds of one layer, and of its attention core alone, at the model's shapes."""
    torch.manual_seed(0)
    cfg = ModelConfig(linear_attention="kda")
    H, d = cfg.heads, cfg.head_dim
    x = torch.randn(batch, length, cfg.dim, requires_grad=True)
    kda, elu = KimiDeltaAttention(cfg), LinearAttention(ModelConfig())
    cos, sin = GLM53(ModelConfig(layers=1)).rope(length)

    def backward_of(f):
        return lambda: f().sum().backward()

    q, k, v = (torch.randn(batch, length, H, d, requires_grad=True) for _ in range(3))
    g = (-0.1 * torch.rand(batch, length, H, d)).requires_grad_(True)
    beta = torch.rand(batch, length, H, requires_grad=True)
    return {
        "kda layer": timed(backward_of(lambda: kda(x)), precision=precision),
        "kda core (chunked)": timed(backward_of(lambda: kda_fast(torch.nn.functional.normalize(q, dim=-1),
                                                                  torch.nn.functional.normalize(k, dim=-1), v, g, beta,
                                                                  cfg.kda_chunk)[0]), precision=precision),
        "elu layer": timed(backward_of(lambda: elu(x, cos, sin)), precision=precision),
        "elu core (chunked)": timed(backward_of(lambda: linear_attention_fast(feature_map(q), feature_map(k), v)),
                                    precision=precision),
    }


def in_fresh_processes(names: list[str], args) -> None:
    """Each variant's step in `args.processes` fresh processes, interleaved round by round."""
    seconds = {name: [] for name in names}
    for round_ in range(args.processes):
        for name in names:
            child = subprocess.run([sys.executable, __file__, "--child", name, "--steps", str(args.steps), "--batch",
                                    str(args.batch), "--length", str(args.length), "--precision", args.precision],
                                   capture_output=True, text=True)
            if child.returncode:
                sys.exit(f"bench_switches.py: timing {name} in a fresh process failed:\n{child.stderr[-2000:]}")
            seconds[name].append(json.loads(child.stdout.splitlines()[-1])["seconds"])
            print(f"  round {round_ + 1}: {name:20s} {seconds[name][-1]:7.3f} s/step", flush=True)
    base = statistics.median(seconds["reference"]) if "reference" in seconds else None
    for name in names:
        s = statistics.median(seconds[name])
        print(f"  {name:20s} median {s:7.3f} s/step over {args.processes} processes (range {min(seconds[name]):.3f}-"
              f"{max(seconds[name]):.3f})" + (f"  {s / base:5.2f}x reference" if base else ""), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--only", default="", help="comma-separated variants (default: all)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: training under bf16 autocast, as the fast path on CPUs with native bf16")
    p.add_argument("--processes", type=int, default=0,
                   help="time the training step in this many fresh processes per variant, interleaved")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one variant's step, for --processes
    args = p.parse_args()
    if args.child:
        model = build(VARIANTS[args.child])
        print(json.dumps({"seconds": step_seconds(model, args.steps, args.batch, args.length, args.precision, 4)}))
        return
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print("\n".join(line for line in lscpu.splitlines()
                    if line.split(":")[0].strip() in ("Model name", "CPU family", "Model", "CPU(s)", "L2 cache",
                                                      "L3 cache", "Flags")))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.precision}, "
          f"{args.batch} x {args.length}, "
          f"median of {args.steps} steps after {4 if args.processes else 1}")
    names = [n for n in VARIANTS if not args.only or n in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(VARIANTS) if args.only else set()
    if unknown:
        p.error(f"--only: unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.processes:
        in_fresh_processes(names, args)
    else:
        base = None
        for name in names:
            model = build(VARIANTS[name])
            decode = decode_tokens_per_second(model)
            s = step_seconds(model, args.steps, args.batch, args.length, args.precision)
            base = base or (s if name == "reference" else None)
            print(f"  {name:20s} {s:7.2f} s/step" + (f"  {s / base:5.2f}x reference" if base else "")
                  + f"   decoding {decode:6.1f} tokens/s", flush=True)
    print("one layer, forward + backward (s):")
    for name, s in layer_breakdown(args.batch, args.length, args.precision).items():
        print(f"  {name:20s} {s:7.3f}")


if __name__ == "__main__":
    main()
