"""The dense form of one routed expert against the routed form it replaces, paired and interleaved on the same weights
and batch: a training step (forward, backward, optimizer) of the whole model at a recipe's shapes, and the MoE layer
alone (docs/speed.md). Prints each repeat's seconds and the median ratio routed / dense.

    python scripts/bench_dense_moe.py [--recipe muon-qk-bpe-dense] [--repeats 7] [--precision bf16]

The routed form is the fast form before the dense one (MixtureOfExperts.add_routed_fast: top-1 of one logit, count,
sort, gather, scatter), reached by switching `runs_dense` off; both compute the same function (tests/model/
test_kernels.py). Interleaved A B A B, so drift of a shared host falls on both alike; read the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    from glm53 import GLM53, ModelConfig
    from glm53.model.moe import MixtureOfExperts
    from glm53.recipes.book import pretraining

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="muon-qk-bpe-dense")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=3, help="timed steps a repeat (after one warm-up step)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    args = p.parse_args()
    recipe = pretraining(args.recipe)
    fields = set(ModelConfig.__dataclass_fields__)
    config = ModelConfig(**{k: v for k, v in recipe.items() if k in fields})
    if config.experts != 1:
        raise SystemExit(f"recipe {args.recipe} has {config.experts} routed experts; the dense form needs one")
    torch.manual_seed(0)
    model = GLM53(config)
    batch, length = recipe.get("batch_size", 16), recipe.get("sequence_length", 128)
    ids = torch.randint(4, config.vocab_size, (batch, length + 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    moes = [m for m in model.modules() if isinstance(m, MixtureOfExperts)]

    def use_dense(on: bool) -> None:
        for moe in moes:
            moe.runs_dense = (lambda: True) if on else (lambda: False)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, config.vocab_size), ids[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    x = torch.randn(batch * length, config.dim, requires_grad=True)

    def layer() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            out, balance, _ = moes[0](x[None])
        (out.float().sum() + balance).backward()

    for name, work in (("training step", step), ("MoE layer (forward + backward)", layer)):
        seconds = {"routed": [], "dense": []}
        for form in ("routed", "dense"):  # warm-up
            use_dense(form == "dense")
            work()
        for _ in range(args.repeats):
            for form in ("routed", "dense"):
                use_dense(form == "dense")
                start = time.perf_counter()
                for _ in range(args.steps if work is step else 10):
                    work()
                seconds[form].append(time.perf_counter() - start)
        ratios = [r / d for r, d in zip(seconds["routed"], seconds["dense"])]
        print(f"{name}, {args.recipe} shapes ({batch} x {length}, dim {config.dim}, hidden "
              f"{config.expert_hidden}), {args.precision}, {torch.get_num_threads()} threads:")
        for form in ("routed", "dense"):
            print(f"  {form:6s} " + " ".join(f"{s:.3f}" for s in seconds[form]))
        print(f"  routed / dense: median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
