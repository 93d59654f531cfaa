"""Training speed of the 25.7M model with and without a competing busy process, under OpenMP spin settings.

    python scripts/bench_sharing.py [--steps 6] [--precision bf16] [--only glm53]

Each setting runs in a fresh interpreter (the OpenMP runtime reads its settings once, at load), first on a quiet
machine, then beside `yes > /dev/null`. Prints the median seconds per step (32 x 128, with the kernel settings
`glm53 calibrate` chose for this machine, as pretraining's `--kernels auto` uses them) and the busy/quiet ratio,
with the CPU model. `--only TEXT` runs the settings whose name contains TEXT.
"""

import argparse
import os
import platform
import subprocess
import sys
import time

STEP = r"""
import glm53  # first: it sets the OpenMP spin before torch loads the runtime
import sys, time, torch
from glm53 import GLM53, ModelConfig
from glm53.data.pretrain_batches import pretraining_batch
from glm53.runtime.device import autocast
from glm53.train.loss import language_loss, training_loss
from glm53.train.pretrain import make_optimizer
from glm53.train.pretrain_config import PretrainConfig
from glm53.runtime.kernel_settings import resolve_kernels
torch.manual_seed(0)
model = GLM53(ModelConfig(**resolve_kernels("auto", sys.argv[2], torch.device("cpu"))))
optimizer = make_optimizer(model, PretrainConfig(out="-"))
times = []
for step in range(int(sys.argv[1]) + 1):
    inputs, labels = pretraining_batch(step, 32, 128, 42)
    t0 = time.perf_counter()
    with autocast(torch.device("cpu"), sys.argv[2]):
        logits, aux = model(inputs, return_aux=True)
        loss, _ = training_loss(language_loss(logits, labels), aux, 0.01)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    times.append(time.perf_counter() - t0)
timed = sorted(times[1:])
print(timed[len(timed) // 2])
"""

SETTINGS = {"runtime default (GOMP_SPINCOUNT=300000)": {"GOMP_SPINCOUNT": "300000", "KMP_BLOCKTIME": "200"},
            "GOMP_SPINCOUNT=10000 (glm53 before)": {"GOMP_SPINCOUNT": "10000"},
            "glm53 default (GOMP_SPINCOUNT=3000)": {},
            "GOMP_SPINCOUNT=1000": {"GOMP_SPINCOUNT": "1000"},
            "passive (no spin)": {"OMP_WAIT_POLICY": "PASSIVE"}}


def median_step(extra_env: dict, steps: int, precision: str) -> float:
    env = {**os.environ, **extra_env}
    out = subprocess.run([sys.executable, "-c", STEP, str(steps), precision], env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    parser.add_argument("--only", default="", help="run only the settings whose name contains this text")
    args = parser.parse_args()
    settings = {name: env for name, env in SETTINGS.items() if args.only in name}
    if not settings:
        parser.error(f"--only {args.only!r} matches no setting; the settings are: {', '.join(SETTINGS)}")
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    print("cpu:", next((line.split(":", 1)[1].strip() for line in cpu if line.startswith("Model name")),
                       platform.processor()), f"| {os.cpu_count()} cores | {args.precision}")
    for name, env in settings.items():
        quiet = median_step(env, args.steps, args.precision)
        busy_process = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            busy = median_step(env, args.steps, args.precision)
        finally:
            busy_process.kill()
            busy_process.wait()
        print(f"{name:38s} quiet {quiet:5.2f} s/step, beside a busy process {busy:5.2f} s/step ({busy / quiet:.1f}x)")


if __name__ == "__main__":
    main()
