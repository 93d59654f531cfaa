"""Print a sample of the broad suite: tasks of every split (prompt + reference body) and the distribution of
prompt + body lengths in bytes (the model's context is about 256 bytes).

    python scripts/broad_sample.py                 # 10 tasks a split, lengths over 200 tasks a split
    python scripts/broad_sample.py --show 3 --stats 500 --extra glm53/data/broad/examples/extra_primitives.toml
"""

from __future__ import annotations

import argparse
import collections

from glm53.data.broad import FROZEN_SPLITS, broad_pretraining_task, frozen_broad_tasks, load_registry


def lengths_line(name: str, tasks) -> str:
    sizes = sorted(len(t.text.encode()) for t in tasks)
    q = lambda p: sizes[round(p * (len(sizes) - 1))]  # noqa: E731
    depths = collections.Counter(t.depth for t in tasks)
    multi = sum(t.body.count("\n") > 2 for t in tasks)
    return (f"{name:8s} n={len(sizes):4d}  bytes min {sizes[0]:3d}  p10 {q(.1):3d}  median {q(.5):3d}  "
            f"p90 {q(.9):3d}  max {sizes[-1]:3d}  <=256: {sum(s <= 256 for s in sizes) / len(sizes):5.1%}  "
            f"depth 1/2/3: {depths[1]}/{depths[2]}/{depths[3]}  multi-line bodies: {multi / len(sizes):.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, default=10, help="tasks printed per split")
    parser.add_argument("--stats", type=int, default=200, help="tasks per split for the length distribution")
    parser.add_argument("--extra", default=None, help="a user's primitive file (TOML) merged into the registry")
    args = parser.parse_args()
    registry = load_registry(args.extra)
    splits = {split: frozen_broad_tasks(split, max(args.show, args.stats), registry) for split in FROZEN_SPLITS}
    splits["pretrain"] = [broad_pretraining_task(i, registry=registry) for i in range(max(args.show, args.stats))]
    for split, tasks in splits.items():
        print(f"===== {split} =====")
        for task in tasks[:args.show]:
            print(f"--- {task.task_id}  root {task.root}  depth {task.depth}  phrasings {' '.join(task.phrasings)}")
            print(task.text)
    print("===== prompt + body, bytes =====")
    for split, tasks in splits.items():
        print(lengths_line(split, tasks[:args.stats]))


if __name__ == "__main__":
    main()
