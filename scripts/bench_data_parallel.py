"""Pretraining throughput of N torchrun ranks x 1 thread against 1 process x N threads, on this machine.

    python scripts/bench_data_parallel.py [--ranks 2] [--steps 8] [--batch-size 32]

Runs `glm53 pretrain` both ways on the same settings (the reference model unless --model-flags says otherwise) and
prints the median tokens/s of the optimizer steps after the first (checkpoint writing and dev sampling are not in it),
with the CPU model (lscpu) and the torch version. Writes into a temporary folder it removes. Also times one all-reduce
of a tensor the size of the model's gradient between the ranks (gloo), the communication data parallelism adds to
every step.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(command: list[str], env: dict) -> None:
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"failed: {shlex.join(command)}\n{result.stderr[-3000:]}")


def tokens_per_second(out: Path) -> float:
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    return statistics.median(r["tokens_per_second"] for r in rows[1:])


def _all_reduce_worker(rank: int, world: int, numel: int, store: str, result: str) -> None:
    import time

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    grad = torch.ones(numel)
    dist.all_reduce(grad)  # warm-up
    times = []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(grad)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        Path(result).write_text(str(statistics.median(times)))
    dist.destroy_process_group()


def all_reduce_seconds(world: int, numel: int) -> float:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_all_reduce_worker, args=(world, numel, f"{tmp}/store", f"{tmp}/result"), nprocs=world)
        return float(Path(f"{tmp}/result").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model-flags", default="", help="extra glm53 pretrain flags, e.g. '--layers 4'")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "OMP_NUM_THREADS")}
    env["PYTHONWARNINGS"] = "ignore"
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "one-task.jsonl"
        run([sys.executable, "-m", "glm53", "tasks", "export", "--split", "dev", "--per-family", "1", "--families",
             "increment", "--out", str(tasks)], env)
        common = ["pretrain", "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--checkpoints",
                  str(args.steps), "--no-progress", "--tasks", str(tasks), "--dev-max-new-tokens", "1",
                  *shlex.split(args.model_flags)]
        one = Path(tmp) / "one"
        run([sys.executable, "-m", "glm53", *common, "--out", str(one), "--threads", str(args.ranks)], env)
        many = Path(tmp) / "many"
        run([torchrun, "--nproc-per-node", str(args.ranks), "-m", "glm53", *common, "--out", str(many),
             "--threads", "1"], env)
        single, parallel = tokens_per_second(one), tokens_per_second(many)
        receipt = json.loads((many / "training-receipt.json").read_text())
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?")
    import torch

    print(f"CPU: {model}, {os.cpu_count()} cores; torch {torch.__version__}; precision {receipt['precision']}; "
          f"{args.steps} steps of {args.batch_size} x 128")
    print(f"1 process x {args.ranks} threads: {single:8.0f} tokens/s")
    print(f"{args.ranks} ranks x 1 thread (gloo): {parallel:8.0f} tokens/s ({parallel / single:.2f}x)")
    numel = receipt["parameter_counts"]["total"]
    seconds = all_reduce_seconds(args.ranks, numel)
    print(f"one gloo all-reduce of the gradient ({numel:,} fp32 values, {numel * 4 / 2**20:.0f} MiB): "
          f"{seconds * 1e3:.0f} ms; a step of {args.batch_size} x 128 takes "
          f"{args.batch_size * 128 / parallel * 1e3:.0f} ms with {args.ranks} ranks")


if __name__ == "__main__":
    main()
