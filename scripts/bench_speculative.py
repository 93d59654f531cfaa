"""Self-speculative greedy decoding against plain greedy decoding, one prompt at a time, on a checkpoint with MTP.

    python scripts/bench_speculative.py runs/mtp/checkpoint-0100 [--split confirm] [--per-family 8] [--tokens 48]

Prints the CPU (lscpu), the draft acceptance rate, main-model forwards, seconds and the speed-up, and whether
both decoders produced the same tokens (they must). Both run once untimed on two prompts first.
"""

from __future__ import annotations

import argparse
import subprocess

import torch

from glm53.data.tasks import frozen_tasks
from glm53.decode.speculative import generate_greedy_plain, generate_greedy_speculative
from glm53.checkpoints.format import load_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("--split", default="confirm")
    p.add_argument("--per-family", type=int, default=8)
    p.add_argument("--tokens", type=int, default=48)
    args = p.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print("\n".join(line for line in lscpu.splitlines() if line.split(":")[0].strip() in
                    ("Model name", "CPU family", "Model", "CPU(s)", "L2 cache", "L3 cache")))
    model = load_model(args.checkpoint).model
    prompts = [t.prompt for t in frozen_tasks(args.split, args.per_family)]
    generate_greedy_plain(model, prompts[:2], 8)
    generate_greedy_speculative(model, prompts[:2], 8)
    plain, plain_stats = generate_greedy_plain(model, prompts, args.tokens)
    fast, stats = generate_greedy_speculative(model, prompts, args.tokens)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {len(prompts)} {args.split} prompts, "
          f"up to {args.tokens} new tokens, batch 1")
    print(f"plain greedy       {plain_stats['tokens']} tokens, {plain_stats['forwards']} forwards, "
          f"{plain_stats['seconds']:.1f} s, {plain_stats['tokens'] / plain_stats['seconds']:.1f} tokens/s")
    print(f"self-speculative   {stats['tokens']} tokens, {stats['forwards']} forwards, {stats['seconds']:.1f} s, "
          f"{stats['tokens'] / stats['seconds']:.1f} tokens/s; drafts accepted {stats['accepted']}/{stats['drafted']} "
          f"({stats['acceptance_rate']:.1%})")
    print(f"speed-up {plain_stats['seconds'] / stats['seconds']:.2f}x; same tokens on "
          f"{sum(a == b for a, b in zip(fast, plain))}/{len(prompts)} prompts")


if __name__ == "__main__":
    main()
