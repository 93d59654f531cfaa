#!/bin/bash
# interleaved: eager vs --pretrain.compile, cold cache first then warm; muon-qk-bpe-dense, seeds 42-44
set -u
cd /work/main
export GLM53_CACHE_DIR=/work/main/runs/sr1206/cache
rm -rf $GLM53_CACHE_DIR/inductor
G=.venv/bin/glm53
run() { name=$1; shift; echo "== $name start $(date +%T)"; /usr/bin/time -f "%e s wall" $G speedrun --recipe muon-qk-bpe-dense --check-every-seconds 5 --out runs/sr1206/$name "$@" > runs/sr1206/$name.log 2>&1; echo "== $name end $(date +%T) rc=$?"; tail -3 runs/sr1206/$name.log; }
run eager-42 --seed 42
run compile-cold-42 --seed 42 --pretrain.compile
run eager-43 --seed 43
run compile-warm-43 --seed 43 --pretrain.compile
run eager-44 --seed 44
run compile-warm-44 --seed 44 --pretrain.compile
run compile-warm-42 --seed 42 --pretrain.compile
echo ALLDONE
