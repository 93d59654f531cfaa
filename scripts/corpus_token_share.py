"""What share of a run's loss tokens come from its corpus, at given row shares (--corpus-mix counts rows).

    python scripts/corpus_token_share.py CORPUS.jsonl [--recipe code] [--mix 0.02 0.06 0.25] [--steps 48]

A corpus row (a whole function, every token a target) is far longer than a generated row's target (the body alone
under loss_on "completion"), so a share of rows is a much larger share of the loss, which is a token sum: the
batches of the recipe's first --steps updates are built at each mix and at 0, and the corpus's share of the targets
is estimated as (targets at the mix - the generated rows' targets at 0, scaled by 1 - mix) / targets at the mix.
"""

from __future__ import annotations

import argparse

from glm53.data.bpe_tokenizer import tokenizer_for
from glm53.data.corpus import load_corpus
from glm53.data.pretrain_batches import IGNORE_INDEX, pretraining_batch
from glm53.data.run_order import run_stream
from glm53.recipes.book import pretraining, suite_of
from glm53.train.pretrain_config import PretrainConfig


def config(recipe: str, corpus: str, mix: float, steps: int) -> PretrainConfig:
    """The recipe's pretraining settings with `mix` of the rows from `corpus` (a valid schedule of `steps` updates)."""
    length = max(steps, pretraining(recipe).get("warmup_steps", 0), 8)  # a valid schedule; only its batches are read
    return PretrainConfig(**{**pretraining(recipe), "out": "unused", "suite": suite_of(recipe), "steps": length,
                             "checkpoints": (length,), "corpus": corpus, "corpus_mix": mix})


def targets(recipe: str, corpus: str, mix: float, steps: int, rows=None) -> int:
    """The loss tokens of the recipe's first `steps` batches with `mix` of the rows from `corpus` (`rows`: the
    corpus already read with the recipe's tokenizer, which does not depend on the mix)."""
    cfg = config(recipe, corpus, mix, steps)
    tokenizer = tokenizer_for(cfg.model)
    if rows is None:
        rows = load_corpus(cfg.corpus, cfg.corpus_validation_share, cfg.sequence_length, tokenizer)
    total = 0
    for step in range(steps):
        _, labels = pretraining_batch(step, cfg.batch_size, cfg.sequence_length, cfg.seed, cfg.suite, rows,
                                      cfg.corpus_mix, cfg.loss_on, run_stream(cfg), tokenizer=tokenizer,
                                      docstring_share=cfg.docstring_share, corpus_in_buckets=cfg.corpus_in_buckets,
                                      stream_primitives=cfg.stream_primitives,
                                      stream_primitives_share=cfg.stream_primitives_share)
        total += int((labels != IGNORE_INDEX).sum())
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", help="a corpus.jsonl (glm53 corpus build's output)")
    p.add_argument("--recipe", default="code", help="the recipe whose pretraining batches are built (default: code)")
    p.add_argument("--mix", type=float, nargs="+", default=[0.02, 0.06, 0.25, 0.5], help="row shares to measure")
    p.add_argument("--steps", type=int, default=48, help="updates to build (a multiple of 8: whole length windows)")
    args = p.parse_args()
    if not all(0 < m < 1 for m in args.mix):
        p.error("--mix: each share must be between 0 and 1 (exclusive), e.g. --mix 0.02 0.25")
    cfg = config(args.recipe, args.corpus, 0.0, args.steps)
    rows = load_corpus(cfg.corpus, cfg.corpus_validation_share, cfg.sequence_length, tokenizer_for(cfg.model))
    generated = targets(args.recipe, args.corpus, 0.0, args.steps, rows)
    print(f"{args.recipe}, {args.steps} updates: {generated} loss tokens without the corpus")
    for mix in args.mix:
        total = targets(args.recipe, args.corpus, mix, args.steps, rows)
        share = (total - generated * (1 - mix)) / total
        print(f"corpus_mix {mix:g} (rows): {total} loss tokens, about {share:.0%} of them the corpus's")


if __name__ == "__main__":
    main()
