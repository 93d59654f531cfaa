"""The residual streams' composite gain of each checkpoint, on the same pretraining batches.

    python scripts/stream_gain.py CHECKPOINT [CHECKPOINT ...] [--steps 90:100] [--batch 32]

For mHC checkpoints (`residual = "mhc"`): the largest singular value of the product of every layer's S x S stream
mixing, per token (mean and max over every token of the batches of pretraining steps `--steps`, seed 42), and the
same for the unprojected matrices exp(logits) the Sinkhorn step starts from. A checkpoint with today's
hyper-connections mixes nothing: gain 1 by construction (printed as such).
"""

from __future__ import annotations

import argparse


from glm53.data.bpe_tokenizer import tokenizer_for
from glm53.data.pretrain_batches import pretraining_batch
from glm53.model.manifold_hyper_connections import composite_gain
from glm53.checkpoints.format import load_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--steps", default="90:100", help="pretraining steps whose batches are run (start:stop)")
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    start, stop = (int(x) for x in args.steps.split(":"))
    for path in args.checkpoints:
        model = load_model(path).model.eval()
        tokenizer = tokenizer_for(model.config)
        gains = [composite_gain(model, pretraining_batch(step, args.batch, 128, tokenizer=tokenizer)[0])
                 for step in range(start, stop)]
        mean = lambda key: sum(g[key] for g in gains) / len(gains)  # noqa: E731 (every batch has as many tokens)
        peak = lambda key: max(g[key] for g in gains)  # noqa: E731
        print(f"{path} ({model.config.residual}, {gains[0]['layers']} mixings): composite gain mean "
              f"{mean('mean'):.4f}, max {peak('max'):.4f}; unprojected exp(logits): mean "
              f"{mean('unconstrained_mean'):.3f}, max {peak('unconstrained_max'):.3f}")


if __name__ == "__main__":
    main()
