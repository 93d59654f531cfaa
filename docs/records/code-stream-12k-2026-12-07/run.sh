# 2026-12-07 19:57 UTC, code 7f0b2bf, 2-core AMD EPYC Zen 4 (family 25 model 17, KVM, AVX-512 with bf16),
# torch 2.13.0+cpu; the code-stream preset with three times its updates (one seed, exploratory: not a study)
cd /work/main && PYTHONUNBUFFERED=1 /usr/bin/time -v .venv/bin/glm53 run --preset code-stream \
  --pretrain.steps 12000 --pretrain.checkpoints 6000,9000,12000 \
  --out /tmp/runs39/code-stream-12k --no-progress > console.txt 2> time.txt
