#!/usr/bin/env bash
# One-shot check on a CUDA machine (no install: the package runs from the checkout with what the machine has).
# Runs the test suite, then pretraining, cached/uncached generation, eval and RL on the GPU.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
W=${GPU_CHECK_DIR:-/tmp/glm53-gpu}
rm -rf "$W"; mkdir -p "$W"
nvidia-smi -L
python3 -c "import torch, huggingface_hub, safetensors; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'hub', huggingface_hub.__version__)"
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests --deselect tests/test_cli.py::test_console_script_is_installed 2>&1 | tail -4
python3 -m glm53.cli info | head -5
time python3 -m glm53.cli pretrain --out "$W/p" --steps 60 --checkpoints 30,60 --device cuda --no-progress 2>&1 | grep -E "pass@1|done|step +(1|10|30|60) |device"
python3 - "$W" <<'PY'
import sys, time, torch
from glm53.checkpoints.format import load_model
from glm53.decode.engine import generate_groups
from glm53.decode.generate import Sampling, generate_uncached
from glm53.data.tasks import frozen_tasks
m = load_model(f"{sys.argv[1]}/p/checkpoint-0060", "cuda").model
prompts = [t.prompt for t in frozen_tasks("confirm", 1)]
a = generate_groups(m, prompts, 2, Sampling(max_new_tokens=24))
b = generate_uncached(m, prompts, 2, Sampling(max_new_tokens=24))
print("cuda cached greedy == uncached greedy:", a == b)
for prec in ("fp32", "bf16"):
    generate_groups(m, prompts * 2, 16, Sampling(temperature=0.8, max_new_tokens=48, ignore_eos=True), generator=torch.Generator("cuda").manual_seed(0), precision=prec)
    torch.cuda.synchronize(); t = time.perf_counter()
    generate_groups(m, prompts * 2, 16, Sampling(temperature=0.8, max_new_tokens=48, ignore_eos=True), generator=torch.Generator("cuda").manual_seed(0), precision=prec)
    torch.cuda.synchronize(); s = time.perf_counter() - t
    print(f"cuda {prec}: 16 groups x 16 x 48 tokens in {s:.2f} s ({256 * 48 / s:.0f} tokens/s)")
PY
python3 -m glm53.cli eval --checkpoint "$W/p/checkpoint-0060" --split confirm --per-family 4 --device cuda --out "$W/e.json" 2>&1 | tail -2
time python3 -m glm53.cli rl --init "$W/p/checkpoint-0060" --out "$W/rl" --groups 32 --checkpoints 16,32 --device cuda --no-progress 2>&1 | grep -E "dev|done|step"
