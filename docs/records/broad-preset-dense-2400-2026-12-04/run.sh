#!/bin/bash
# The broad preset on the dense candidate (muon-qk-bpe-dense's model on the preset's 2,400 steps), alone on the machine.
cd /work/s25/preset
export PYTHONUNBUFFERED=1
while pgrep -f "queue2.sh" >/dev/null; do sleep 3; done
lscpu > lscpu.txt
echo "== $(date -u +%T) start; code $(git -C /work/main rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
/usr/bin/time -v /work/main/.venv/bin/glm53 run --preset broad --out broad-dense --no-progress \
  --pretrain.experts 1 --pretrain.top-k 1 --pretrain.shared-experts 0 --pretrain.expert-hidden 768 > console.log 2>&1
echo "== $(date -u +%T) end rc=$?; load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
