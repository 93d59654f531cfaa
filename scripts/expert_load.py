"""How evenly each checkpoint's routers spread tokens over the experts, on the same pretraining batches.

    python scripts/expert_load.py CHECKPOINT [CHECKPOINT ...] [--steps 90:100] [--batch 32]

For every checkpoint: the coefficient of variation (std / mean) of each layer's expert usage over the batches of
pretraining steps `--steps` (the same batches for every checkpoint, seed 42), then its mean and maximum over
layers. 0 is perfectly even; with 8 experts a layer that sends everything to 2 of them scores 1.73.
"""

from __future__ import annotations

import argparse

import torch

from glm53.data.bpe_tokenizer import tokenizer_for
from glm53.data.pretrain_batches import pretraining_batch
from glm53.checkpoints.format import load_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--steps", default="90:100", help="pretraining steps whose batches are routed (start:stop)")
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    start, stop = (int(x) for x in args.steps.split(":"))
    for path in args.checkpoints:
        model = load_model(path).model.eval()
        usage = 0
        with torch.no_grad():
            for step in range(start, stop):
                inputs, _ = pretraining_batch(step, args.batch, 128, tokenizer=tokenizer_for(model.config))
                usage = usage + model(inputs, return_aux=True)[1].expert_usage
        cv = usage.std(dim=1, unbiased=False) / usage.mean(dim=1)
        print(f"{path}: expert-load CV mean {float(cv.mean()):.3f}, max {float(cv.max()):.3f} over "
              f"{cv.numel()} layers ({model.config.router})")


if __name__ == "__main__":
    main()
