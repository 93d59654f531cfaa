#!/usr/bin/env bash
# one lane of equal-step screens (1 thread each): lane.sh NAME "FLAGS" NAME "FLAGS" ...
cd /work/main
while [ $# -gt 0 ]; do
  name=$1; flags=$2; shift 2
  while [ -e /work/s25/screens/pause ]; do sleep 5; done
  echo "$(date -u +%FT%TZ) start $name commit $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg) flags: $flags" >> /work/s25/screens/progress.log
  PYTHONUNBUFFERED=1 .venv/bin/glm53 speedrun --out /work/s25/screens/$name --recipe muon-qk-bpe --seed 42 \
     --check-every-steps 50 --threads 1 $flags > /work/s25/screens/$name.log 2>&1
  echo "$(date -u +%FT%TZ) end $name rc $? load $(cut -d' ' -f1-3 /proc/loadavg)" >> /work/s25/screens/progress.log
done
