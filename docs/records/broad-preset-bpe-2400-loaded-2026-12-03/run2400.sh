#!/usr/bin/env bash
# A longer schedule within the preset's 15 minutes: muon-qk-bpe pretraining for 2,400 steps, after CI ends.
cd /work/preset-runs
export PYTHONUNBUFFERED=1
while ! grep -q "^rc=" /tmp/ci-run.log; do sleep 5; done
echo "== $(date -u +%H:%M:%S) start 2400; code $(git -C /work/main rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
/usr/bin/time -v /work/main/.venv/bin/python -m glm53 run --preset broad --out broad-bpe-2400 \
  --pretrain.optimizer muon --pretrain.muon-lr 0.02 --pretrain.qk-norm \
  --pretrain.tokenizer broad-bpe-2048 --pretrain.vocab-size 2048 \
  --pretrain.steps 2400 --pretrain.checkpoints 1200,1800,2400 > broad-bpe-2400.log 2>&1
echo "== $(date -u +%H:%M:%S) end 2400 rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
