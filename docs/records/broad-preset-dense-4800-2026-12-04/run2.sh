#!/bin/bash
# The dense candidate on the MoE preset's time: 4,800 steps (about 740 s at 0.154 s a step), alone on the machine.
cd /work/s25/preset
export PYTHONUNBUFFERED=1
echo "== $(date -u +%T) start dense-4800; code $(git -C /work/main rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
/usr/bin/time -v /work/main/.venv/bin/glm53 run --preset broad --out broad-dense-4800 --no-progress \
  --pretrain.experts 1 --pretrain.top-k 1 --pretrain.shared-experts 0 --pretrain.expert-hidden 768 \
  --pretrain.steps 4800 --pretrain.checkpoints 2400,3600,4800 > console2.log 2>&1
echo "== $(date -u +%T) end dense-4800 rc=$?; load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
