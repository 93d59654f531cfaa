"""Verifier throughput: verdicts per second through verify_many for typical one-line completions, with every
isolation layer on and then with layers added one at a time, so that each layer's cost shows.

    python scripts/bench_verifier.py [--programs 2000] [--workers N]

The mix imitates what a partly trained model writes: correct bodies, wrong bodies, and statically invalid
ones (which never reach a process), over the confirm split's tasks and their hidden cases.
"""

import argparse
import platform
import subprocess
import time

from glm53.data.tasks import frozen_tasks
from glm53.verify.verifier import SandboxPool, verify_many

SETTINGS = [(), ("namespaces",), ("namespaces", "drop-user"), ("namespaces", "drop-user", "seccomp")]


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
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    print("cpu:", next((line.split(":", 1)[1].strip() for line in cpu if line.startswith("Model name")),
                       platform.processor()), "| python", platform.python_version())
    for layers in SETTINGS:
        with SandboxPool(workers=args.workers, layers=layers) as pool:
            verify_many(items[:50], pool=pool)  # start the workers
            started = time.perf_counter()
            verdicts = verify_many(items, pool=pool)
            elapsed = time.perf_counter() - started
            level = pool.isolation()["level"]
        counts = {}
        for v in verdicts:
            counts[v.status] = counts.get(v.status, 0) + 1
        print(f"layers {'+'.join(layers) or 'none':32s} ({level:7s}): {len(items)} programs in {elapsed:.2f} s, "
              f"{len(items) / elapsed:4.0f} verdicts/s ({pool.size} workers; {counts})")


if __name__ == "__main__":
    main()
