"""Verifier throughput: verdicts per second through the API (verify_many) and through `glm53 verify` (the whole
command, start-up included), for ordinary programs, then with a share of programs that spin until their CPU budget
(the verifier's DEFAULT_CPU_S) ends them, in one sitting, each line with the machine's load beside it.

    python scripts/bench_verifier.py [--programs 3000] [--workers N] [--spinning-share 0.05] [--layers]

Ordinary programs: bodies over the confirm split's tasks (11-12 hidden cases each), a third right and two thirds
wrong, every one valid, so every one runs in a sandbox process. `--layers` also times the API with the isolation
layers added one at a time, so that each layer's cost shows.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glm53.data.tasks import frozen_tasks
from glm53.verify.verifier import SandboxPool, verify_many

LAYER_STEPS = [(), ("namespaces",), ("namespaces", "drop-user"), ("namespaces", "drop-user", "seccomp")]
SPIN = "\n    return sum(range(10**12))\n"  # valid at the reference level; spins until its CPU budget is spent


def programs(n: int, spin_share: float) -> list[dict]:
    tasks = frozen_tasks("confirm", 8)
    bodies = ["{canonical}", "\n    return 0\n", "\n    return 1 if 0 else 2\n"]
    rows, spin_every = [], round(1 / spin_share) if spin_share else 0
    for i in range(n):
        task = tasks[i % len(tasks)]
        body = bodies[i % len(bodies)].replace("{canonical}", task.canonical_completion)
        if spin_every and i % spin_every == spin_every // 2:
            body = SPIN
        rows.append({"prompt": task.prompt, "completion": body, "entry_point": task.entry_point,
                     "cases": [[list(args), expected] for args, expected in task.cases]})
    return rows


def api_rate(rows: list[dict], workers: int | None, layers=LAYER_STEPS[-1]) -> tuple[float, dict, str]:
    items = [(r["prompt"] + r["completion"], r["entry_point"], [(tuple(a), e) for a, e in r["cases"]]) for r in rows]
    with SandboxPool(workers=workers, layers=layers) as pool:
        verify_many(items[:20], pool=pool)  # start the workers
        started = time.perf_counter()
        verdicts = verify_many(items, pool=pool)
        elapsed = time.perf_counter() - started
        level = pool.isolation()["level"]
    counts: dict = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    return len(items) / elapsed, counts, level


def cli_rate(rows: list[dict], folder: Path) -> tuple[float, dict]:
    source, out = folder / f"in-{len(rows)}-{time.monotonic_ns()}.jsonl", folder / f"out-{time.monotonic_ns()}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "glm53", "verify", "--in", str(source), "--out", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    counts: dict = {}
    with open(out) as f:
        for line in f:
            status = json.loads(line)["verdict"]["status"]
            counts[status] = counts.get(status, 0) + 1
    return len(rows) / elapsed, counts


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_line() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lscpu if line.startswith("Model name")), "unknown")
    return f"cpu: {model}, {os.cpu_count()} cores | python {sys.version.split()[0]}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--spinning-share", "--spin-share", dest="spin_share", type=float, default=0.05,
                        help="share of programs that spin until their CPU budget ends them (0 to skip)")
    parser.add_argument("--layers", action="store_true", help="also time each isolation layer's cost")
    args = parser.parse_args()
    if not 0 <= args.spin_share < 1:
        parser.error(f"--spinning-share must be in [0, 1), got {args.spin_share}")
    print(cpu_line(), "|", load())
    ordinary = programs(args.programs, 0.0)
    with tempfile.TemporaryDirectory() as folder:
        rate, counts, level = api_rate(ordinary, args.workers)
        print(f"API  ordinary:    {rate:5.0f} verdicts/s  ({len(ordinary)} programs, level {level}, {counts}; "
              f"{load()})")
        rate, counts = cli_rate(ordinary, Path(folder))
        print(f"CLI  ordinary:    {rate:5.0f} verdicts/s  (glm53 verify, start-up included, {counts}; {load()})")
        if args.spin_share:
            spinning = programs(args.programs, args.spin_share)
            rate, counts, _ = api_rate(spinning, args.workers)
            print(f"API  {args.spin_share:.0%} spinning: {rate:5.0f} verdicts/s  ({len(spinning)} programs, {counts}; "
                  f"{load()})")
            rate, counts = cli_rate(spinning, Path(folder))
            print(f"CLI  {args.spin_share:.0%} spinning: {rate:5.0f} verdicts/s  ({counts}; {load()})")
    if args.layers:
        for layers in LAYER_STEPS:
            rate, _, level = api_rate(ordinary, args.workers, layers)
            print(f"API  layers {'+'.join(layers) or 'none':32s} ({level}): {rate:5.0f} verdicts/s")


if __name__ == "__main__":
    main()
