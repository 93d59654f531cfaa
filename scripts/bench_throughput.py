"""What a speedrun recipe does with the machine: training tokens/s and model TFLOP/s, beside the machine's own
matrix-product figures, measured in one sitting (issue 46's throughput question).

    python scripts/bench_throughput.py --recipe e4 --steps 40
    python scripts/bench_throughput.py --recipe muon --set compile=true --set batch_size=32

It runs the recipe's real training step (train/pretrain.py's `train_step`, the speedrun's) on the broad stream's
first batches: `--warmup` steps untimed (a compile happens there), then `--steps` timed. The model's arithmetic is
counted, not estimated: torch's FlopCounterMode over one whole step (forward and backward, matrix products and
attention; element-wise work is not counted, as in the public speedruns' MFU figures). The matrix-product figures
are torch.mm on square bf16 and fp32 matrices and on one of the broad model's own shapes.

It prints one line per figure and, with --json FILE, writes them (with lscpu's model name and the load average).
A timing, not a test: the host's load moves it; compare recipes only in paired, interleaved runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def matmul_tflops(n: int, m: int, k: int, dtype, seconds: float = 1.0) -> float:
    """TFLOP/s of torch.mm([n, k] @ [k, m]) in `dtype`, best of repeated timings over about `seconds`."""
    import torch

    a, b = torch.randn(n, k).to(dtype), torch.randn(k, m).to(dtype)
    for _ in range(3):
        torch.mm(a, b)
    best, spent = float("inf"), 0.0
    while spent < seconds:
        started = time.perf_counter()
        for _ in range(5):
            torch.mm(a, b)
        took = (time.perf_counter() - started) / 5
        best, spent = min(best, took), spent + 5 * took
    return 2 * n * m * k / best / 1e12


def parse_value(text: str):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="e4", help="a recipe of the book (glm53/recipes/)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a pretraining setting over the recipe's (PretrainConfig field, model fields flat)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (a compile happens there)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-matmul", action="store_true", help="skip the matrix-product figures")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from glm53.model.model import GLM53
    from glm53.runtime.cpu import cpu_description
    from glm53.runtime.device import compiled, resolve_precision
    from glm53.train.optimizers import make_optimizer
    from glm53.train.pretrain import train_step
    from glm53.train.pretrain_config import PretrainConfig
    from glm53.recipes.book import pretraining

    overrides = dict(item.split("=", 1) for item in args.set)
    settings = {**pretraining(args.recipe), **{k: parse_value(v) for k, v in overrides.items()}}
    steps = args.warmup + args.steps + 1
    cfg = PretrainConfig(**{**settings, "steps": max(settings.get("steps", steps), steps)}, out="unused", suite="broad",
                         seed=args.seed, validation_rows=0)
    device = torch.device("cpu")
    precision = resolve_precision(cfg.runtime.precision, device)
    if cfg.runtime.threads:
        torch.set_num_threads(cfg.runtime.threads)
    torch.manual_seed(cfg.seed)
    model = GLM53(cfg.model)
    optimizer = make_optimizer(model, cfg)
    forward = compiled(model) if cfg.compile else model
    model.train()
    figures = {"recipe": args.recipe, "overrides": overrides, "precision": precision, "compile": cfg.compile,
               "threads": torch.get_num_threads(), "cpu": cpu_description()["model"], "torch": torch.__version__,
               "load_before": os.getloadavg()[0]}

    started = time.perf_counter()
    for step in range(args.warmup):
        train_step(cfg, step, model, forward, optimizer, device, precision)
    figures["warmup_seconds"] = time.perf_counter() - started

    from glm53.data.bpe_tokenizer import tokenizer_for
    from glm53.data.pretrain_batches import pretraining_batch
    from glm53.data.tokenizer import PAD_ID

    tokens = {"label": 0, "document": 0, "row": 0}
    timed = range(args.warmup, args.warmup + args.steps)
    started = time.perf_counter()
    for step in timed:
        tokens["label"] += train_step(cfg, step, model, forward, optimizer, device, precision)["tokens"]
    seconds = time.perf_counter() - started
    for step in timed:  # the same steps' inputs, counted after the clock stopped (the step made them once already)
        inputs = pretraining_batch(step, cfg.batch_size, cfg.sequence_length, cfg.seed, cfg.suite,
                                   loss_on=cfg.loss_on, tokenizer=tokenizer_for(cfg.model),
                                   docstring_share=cfg.docstring_share, stream_primitives=cfg.stream_primitives,
                                   stream_primitives_share=cfg.stream_primitives_share)[0]
        tokens["document"] += int((inputs != PAD_ID).sum())
        tokens["row"] += inputs.numel()
    # the model's arithmetic in one step, counted (on the step after the timed ones, so the timing is not slowed)
    counter = FlopCounterMode(display=False)
    with counter:
        train_step(cfg, args.warmup + args.steps, model, forward, optimizer, device, precision)
    step_flops = counter.get_total_flops()
    figures |= {"steps": args.steps, "seconds": seconds, "seconds_per_step": seconds / args.steps,
                "label_tokens_per_second": tokens["label"] / seconds,  # the loss's targets
                "document_tokens_per_second": tokens["document"] / seconds,  # inputs that are not padding
                "row_tokens_per_second": tokens["row"] / seconds,  # every input position, padding included
                "step_flops": step_flops, "model_tflops": step_flops * args.steps / seconds / 1e12,
                "load_after": os.getloadavg()[0]}
    if not args.no_matmul:
        for name, shape in {"512^3": (512, 512, 512), "1024^3": (1024, 1024, 1024),
                            "3072x128 @ 128x256": (3072, 256, 128)}.items():
            for dtype in (torch.bfloat16, torch.float32):
                figures[f"matmul {name} {str(dtype)[6:]} TFLOP/s"] = matmul_tflops(*shape, dtype)
    for key, value in figures.items():
        print(f"{key:>40}: {value:.4g}" if isinstance(value, float) else f"{key:>40}: {value}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
