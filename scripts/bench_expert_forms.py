"""A fast form of the routed experts against the form it replaces, paired and interleaved on the same weights and
batch: a training step (forward, backward, optimizer) of the whole model at a recipe's shapes, and the MoE layer
alone (docs/speed.md). Prints each repeat's seconds and the median ratio old / new.

    python scripts/bench_expert_forms.py --compare dense [--recipe muon-qk-bpe-dense] [--repeats 7] [--precision bf16]
    python scripts/bench_expert_forms.py --compare grouped [--recipe reference|muon-qk-bpe] [--precision fp32|bf16]

`dense`: one routed expert as a dense SwiGLU against the routed form before it (top-1 of one logit, count, sort,
gather, scatter), reached by switching `runs_dense` off. `grouped`: the routed experts as three grouped products
(torch's grouped_mm) against the loop over experts, `moe.GROUPED` switched between "always" and "never". Each pair
computes the same function (tests/model/test_kernels.py, tests/model/test_compile.py). Interleaved A B A B, so
drift of a shared host falls on both alike; read the ratio, not the seconds. `--recipe reference` is the 25.7M
reference model.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    from glm53 import GLM53, ModelConfig
    from glm53.model import moe
    from glm53.recipes.book import pretraining

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compare", choices=("dense", "grouped"), required=True)
    p.add_argument("--recipe", default=None, help="a recipe's shapes, or 'reference' (default: muon-qk-bpe-dense for "
                   "--compare dense, reference for --compare grouped)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=3, help="timed steps a repeat (after one warm-up step)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    args = p.parse_args()
    name = args.recipe or ("muon-qk-bpe-dense" if args.compare == "dense" else "reference")
    if name == "reference":
        config, batch, length = ModelConfig(), 16, 128
    else:
        recipe = pretraining(name)
        fields = set(ModelConfig.__dataclass_fields__)
        config = ModelConfig(**{k: v for k, v in recipe.items() if k in fields})
        batch, length = recipe.get("batch_size", 16), recipe.get("sequence_length", 128)
    if args.compare == "dense" and config.experts != 1:
        raise SystemExit(f"recipe {name} has {config.experts} routed experts; the dense form needs one")
    if args.compare == "grouped" and config.experts == 1:
        raise SystemExit(f"recipe {name} has one expert, which runs dense; name a recipe with routed experts")
    if args.compare == "grouped" and not moe.HAS_GROUPED_MM:
        raise SystemExit(f"torch {torch.__version__} has no grouped_mm (torch >= 2.9)")
    torch.manual_seed(0)
    model = GLM53(config)
    ids = torch.randint(4, config.vocab_size, (batch, length + 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    moes = [m for m in model.modules() if isinstance(m, moe.MixtureOfExperts)]
    forms = ("routed", "dense") if args.compare == "dense" else ("loop", "grouped")

    def use(form: str) -> None:
        if args.compare == "dense":
            for layer in moes:
                layer.runs_dense = (lambda: True) if form == "dense" else (lambda: False)
        else:
            moe.GROUPED = "always" if form == "grouped" else "never"

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            out = model(ids[:, :-1])
        logits = out if torch.is_tensor(out) else out[0]
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, config.vocab_size), ids[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    x = torch.randn(batch * length, config.dim, requires_grad=True)

    def layer() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            out, balance, _ = moes[0](x[None])
        (out.float().sum() + balance).backward()

    for title, work in (("training step", step), ("MoE layer (forward + backward)", layer)):
        seconds = {form: [] for form in forms}
        for form in forms:  # warm-up
            use(form)
            work()
        for _ in range(args.repeats):
            for form in forms:
                use(form)
                start = time.perf_counter()
                for _ in range(args.steps if work is step else 10):
                    work()
                seconds[form].append(time.perf_counter() - start)
        ratios = [a / b for a, b in zip(seconds[forms[0]], seconds[forms[1]])]
        print(f"{title}, {name} shapes ({batch} x {length}, dim {config.dim}, {config.experts} experts, hidden "
              f"{config.expert_hidden}), {args.precision}, {torch.get_num_threads()} threads:")
        for form in forms:
            print(f"  {form:7s} " + " ".join(f"{s:.3f}" for s in seconds[form]))
        print(f"  {forms[0]} / {forms[1]}: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
