#!/usr/bin/env bash
# glm53 run --preset broad with the speedrun's muon-qk-bpe pretraining for 1,600 steps, after the timed records end.
cd /work/preset-runs
export PYTHONUNBUFFERED=1 PYTHONPATH=/work/wt-bpe2

echo "== $(date -u +%H:%M:%S) start; code $(git -C /work/wt-bpe2 rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
/usr/bin/time -v /work/main/.venv/bin/python -m glm53 run --preset broad --out broad-bpe-1600 \
  --pretrain.optimizer muon --pretrain.muon-lr 0.02 --pretrain.qk-norm \
  --pretrain.tokenizer broad-bpe-2048 --pretrain.vocab-size 2048 \
  --pretrain.steps 1600 --pretrain.checkpoints 800,1200,1600 > broad-bpe-1600.log 2>&1
echo "== $(date -u +%H:%M:%S) end rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
