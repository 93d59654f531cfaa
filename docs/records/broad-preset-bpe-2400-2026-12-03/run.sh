#!/bin/bash
cd /work/main
export PYTHONUNBUFFERED=1
rm -rf /tmp/bpe2400q
(uptime; lscpu | grep 'Model name') > /tmp/bpe2400q.start
/usr/bin/time -v .venv/bin/glm53 run --preset broad --out /tmp/bpe2400q \
  --pretrain.optimizer muon --pretrain.muon-lr 0.02 --pretrain.qk-norm \
  --pretrain.tokenizer broad-bpe-2048 --pretrain.vocab-size 2048 \
  --pretrain.steps 2400 --pretrain.checkpoints 1200,1800,2400 > /tmp/bpe2400q.log 2>&1
uptime >> /tmp/bpe2400q.start
