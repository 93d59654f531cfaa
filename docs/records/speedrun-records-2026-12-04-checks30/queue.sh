#!/bin/bash
# Session 25's quiet timed sitting: each run alone on the machine (2 threads), interleaved by seed, the order rotated.
cd /work/s25/timed
export PYTHONUNBUFFERED=1
G=/work/main/.venv/bin/glm53
log() { echo "== $(date -u +%H:%M:%S) $*; code $(git -C /work/main rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log; }
gate() { while [ -e pause ]; do sleep 5; done; }
job() { name=$1; shift; gate; log "start $name"; "$@" > $name.log 2>&1; log "end $name rc=$?"; }
while pgrep -f "lane.sh" >/dev/null; do sleep 5; done
lscpu > lscpu.txt
for order in "42 muon-qk-bpe muon-qk-bpe-dense muon-qk-bpe-b32" "43 muon-qk-bpe-dense muon-qk-bpe-b32 muon-qk-bpe" \
             "44 muon-qk-bpe-b32 muon-qk-bpe muon-qk-bpe-dense"; do
  set -- $order; seed=$1; shift
  for recipe in "$@"; do
    job $recipe-seed$seed $G speedrun --out sr/$recipe-seed$seed --recipe $recipe --seed $seed --no-progress
  done
done
log "queue done"
