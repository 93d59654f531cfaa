#!/bin/bash
# The pair again with the target checked every 5 s (a check takes 0.2 s; every 30 s quantized 3-minute runs).
cd /work/s25/timed
export PYTHONUNBUFFERED=1
G=/work/main/.venv/bin/glm53
log() { echo "== $(date -u +%H:%M:%S) $*; code $(git -C /work/main rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log; }
gate() { while [ -e pause ]; do sleep 5; done; }
job() { name=$1; shift; gate; log "start $name"; "$@" > $name.log 2>&1; log "end $name rc=$?"; }
while pgrep -f "queue.sh" >/dev/null; do sleep 5; done
for order in "42 muon-qk-bpe-dense muon-qk-bpe" "43 muon-qk-bpe muon-qk-bpe-dense" "44 muon-qk-bpe-dense muon-qk-bpe"; do
  set -- $order; seed=$1; shift
  for recipe in "$@"; do
    job c5-$recipe-seed$seed $G speedrun --out sr5/$recipe-seed$seed --recipe $recipe --seed $seed --check-every-seconds 5 --no-progress
  done
done
log "queue2 done"
