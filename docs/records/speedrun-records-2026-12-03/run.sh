#!/usr/bin/env bash
# Clean timed records, after the screens in /tmp/bpe-try end: for seed 42 muon-qk-bpe, muon-qk, e4; for seed 43
# muon-qk-bpe, muon-qk. Default threads (2), nothing else running, one code tree (/work/wt-bpe at its commit).
cd /work/speedrun-records
export PYTHONUNBUFFERED=1 PYTHONPATH=/work/wt-bpe
P=/work/main/.venv/bin/python
while pgrep -f "out /tmp/bpe-try" >/dev/null; do sleep 5; done
echo "== $(date -u +%H:%M:%S) screens done; code $(git -C /work/wt-bpe rev-parse --short HEAD) $(git -C /work/wt-bpe status --short | wc -l) changed files" >> progress.log
for job in "muon-qk-bpe 42" "muon-qk 42" "e4 42" "muon-qk-bpe 43" "muon-qk 43"; do
  set -- $job
  out=$1-seed$2
  echo "== $(date -u +%H:%M:%S) start $out load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
  $P -m glm53 speedrun --out $out --recipe $1 --seed $2 --budget-minutes 60 > $out.log 2>&1
  rc=$?
  echo "== $(date -u +%H:%M:%S) end $out rc=$rc load $(cut -d' ' -f1-3 /proc/loadavg)" >> progress.log
done
