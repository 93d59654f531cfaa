"""Muon's step with every same-shaped matrix orthogonalised in one Newton-Schulz call (StackedMuon's default)
against one call a parameter (`batched=False`, the plain form; tests/train/test_muon.py holds them equal bit for
bit), or (`--compare precision`) its Newton-Schulz products in bf16 against fp32, paired and interleaved on the same
parameters and gradients, at a recipe's model (docs/speed.md).

    python scripts/bench_muon_step.py [--recipe muon-qk-bpe-dense] [--compare batching|precision] [--repeats 7]
                                      [--steps 10]

Prints the shapes Muon takes, each repeat's seconds for `--steps` optimizer steps and the median ratio of the first
form's seconds to the second's. Read the ratio, not the seconds: a shared host drifts, and both forms see the drift
alike.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import torch


def main() -> None:
    from glm53 import GLM53, ModelConfig
    from glm53.recipes.book import pretraining
    from glm53.train.muon import StackedMuon, muon_groups, newton_schulz_precision

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="muon-qk-bpe-dense", help="a recipe's model, or 'reference'")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--compare", choices=("batching", "precision"), default="batching",
                   help="batching: per-parameter against batched; precision: bf16 against fp32 Newton-Schulz products")
    args = p.parse_args()
    if args.recipe == "reference":
        config = ModelConfig()
    else:
        fields = set(ModelConfig.__dataclass_fields__)
        config = ModelConfig(**{k: v for k, v in pretraining(args.recipe).items() if k in fields})
    torch.manual_seed(0)
    hidden, _ = muon_groups(GLM53(config))
    for p_ in hidden:
        p_.grad = torch.randn_like(p_)
    shapes = Counter(tuple(p_.shape[-2:]) for p_ in hidden)
    print(f"{args.recipe}: {len(hidden)} Muon parameters in {len(shapes)} shapes: "
          + ", ".join(f"{n} x {list(s)}" for s, n in shapes.most_common()))
    if args.compare == "batching":  # both forms in the precision this machine's rule picks
        print(f"Newton-Schulz products in {newton_schulz_precision(torch.device('cpu'))} (the rule on this CPU)")
        optimizers = {"per-parameter": StackedMuon(hidden, lr=0.02, batched=False),
                      "batched": StackedMuon(hidden, lr=0.02)}
    else:
        optimizers = {"bf16": StackedMuon(hidden, lr=0.02, precision="bf16"),
                      "fp32": StackedMuon(hidden, lr=0.02, precision="fp32")}
    first, second = optimizers
    seconds = {name: [] for name in optimizers}
    for opt in optimizers.values():  # warm-up (momentum buffers allocated)
        opt.step()
    for _ in range(args.repeats):
        for name, opt in optimizers.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                opt.step()
            seconds[name].append(time.perf_counter() - start)
    ratios = [a / b for a, b in zip(seconds[first], seconds[second])]
    print(f"{args.steps} Muon steps, {torch.get_num_threads()} threads:")
    for name in optimizers:
        print(f"  {name:13s} " + " ".join(f"{s:.3f}" for s in seconds[name]))
    print(f"  {first} / {second}: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
