#!/usr/bin/env bash
# The speedrun's GPU row (docs/speedrun.md): a recipe (the row's, muon-qk-bpe, by default) on a CUDA machine, seeds
# 42-44, one after another, from the checkout with what the machine has installed (no install), the target checked
# every CHECK_EVERY seconds (10, as the 2026-12-04 row was run), each run stopped after RUN_LIMIT seconds (150).
# Each run's speedrun.json, check log and console log land in $OUT/gpu-speedrun.tgz (the weights are left out),
# beside nvidia-smi's and lscpu's lines; the runs' record row (scripts/speedrun_table.py) is printed last.
#   OUT=/tmp/gpu-out bash scripts/gpu_speedrun.sh [RECIPE [SPEEDRUN FLAGS...]]
# Settings by environment: COMPILE=1 (--pretrain.compile: Inductor fuses element-wise operators, so fewer of the
# launches that bound a small model's step; CUDA graphs are not on: untested without a GPU), BATCH=N (--pretrain.batch-size N, a batch sized for the
# device), SEEDS ("42 43 44"), DEVICE (cuda; tests/speed/test_gpu_speedrun_script.py runs this path with DEVICE=cpu
# on a tiny config, so the script is checked where there is no GPU).
set -u
recipe=${1:-muon-qk-bpe}
shift $(( $# > 0 ? 1 : 0 ))
OUT=${OUT:-/tmp/gpu-speedrun}
W=${WORK:-/tmp/glm53-gpu-speedrun}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
flags=(--device "${DEVICE:-cuda}" --check-every-seconds "${CHECK_EVERY:-10}" --no-progress)
[ "${COMPILE:-0}" = 1 ] && flags+=(--pretrain.compile)
[ -n "${BATCH:-}" ] && flags+=(--pretrain.batch-size "$BATCH")
rm -rf "$W"; mkdir -p "$W" "$OUT"
{ if command -v nvidia-smi > /dev/null; then nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; else echo "no nvidia-smi"; fi
  lscpu | grep -E "^Model name|^CPU\(s\)"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  echo "flags: ${flags[*]} $*"
  git rev-parse --short HEAD 2>/dev/null; } > "$W/machine.txt" 2>&1
cat "$W/machine.txt"
for seed in ${SEEDS:-42 43 44}; do
  timeout "${RUN_LIMIT:-150}" python3 -m glm53 speedrun --out "$W/$recipe-seed$seed" --recipe "$recipe" --seed "$seed" \
    "${flags[@]}" "$@" > "$W/$recipe-seed$seed.console.log" 2>&1
  echo "seed $seed: exit $?"; tail -n 2 "$W/$recipe-seed$seed.console.log"
done
(cd "$W" && tar czf "$OUT/gpu-speedrun.tgz" --exclude=final ./*)
python3 scripts/speedrun_table.py "$W"
