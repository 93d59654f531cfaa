#!/bin/bash
# Session 24's quiet queue, second part (the first's e4 jobs lacked --budget-minutes 60: e4 takes about 38 min).
cd /work/preset-runs/s24
export PYTHONUNBUFFERED=1
G=/work/main/.venv/bin/glm53
P=/work/main/.venv/bin/python
log() { echo "== $(date -u +%H:%M:%S) $*; code $(git -C /work/main rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log; }
gate() { while [ -e pause ]; do sleep 5; done; }
job() { name=$1; shift; gate; log "start $name"; /usr/bin/time -v "$@" > $name.log 2>&1; log "end $name rc=$?"; }
job sr-e4-44 $G speedrun --out sr/e4-seed44 --recipe e4 --seed 44 --budget-minutes 60 --no-progress
job tp-e4 $P /work/main/scripts/bench_throughput.py --recipe e4 --steps 30 --json tp-e4.json
job tp-bpe $P /work/main/scripts/bench_throughput.py --recipe muon-qk-bpe --steps 60 --no-matmul --json tp-bpe.json
job tp-bpe-compile $P /work/main/scripts/bench_throughput.py --recipe muon-qk-bpe --steps 60 --warmup 10 --no-matmul --set compile=true --json tp-bpe-compile.json
job sr-e4-43 $G speedrun --out sr/e4-seed43 --recipe e4 --seed 43 --budget-minutes 60 --no-progress
log "queue done"
