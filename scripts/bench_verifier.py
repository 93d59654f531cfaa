"""Verifier throughput: verdicts per second through verify_many for typical one-line completions.

    python scripts/bench_verifier.py [--programs 2000] [--workers N]

The mix imitates what a partly trained model writes: correct bodies, wrong bodies, and statically invalid
ones (which never reach a process), over the confirm split's tasks and their hidden cases.
"""

import argparse
import time

from glm53.tasks import frozen_tasks
from glm53.verifier import SandboxPool, verify_many


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    tasks = frozen_tasks("confirm", 8)
    bodies = ["{canonical}", "\n    return x + 2\n", "\n    return x if x x 0 else x\n", "{canonical}",
              "\n    return 0\n", "{canonical}"]
    items = []
    for i in range(args.programs):
        task = tasks[i % len(tasks)]
        body = bodies[i % len(bodies)].replace("{canonical}", task.canonical_completion)
        items.append((task.prompt + body, task.entry_point, task.cases))
    with SandboxPool(workers=args.workers) as pool:
        verify_many(items[:50], pool=pool)  # start the workers
        started = time.perf_counter()
        verdicts = verify_many(items, pool=pool)
        elapsed = time.perf_counter() - started
        workers = pool.size
    counts = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    print(f"{len(items)} programs in {elapsed:.2f} s: {len(items) / elapsed:.0f} verdicts/s "
          f"({workers} workers; {counts})")


if __name__ == "__main__":
    main()
