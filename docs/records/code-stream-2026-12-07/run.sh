# 2026-12-07 19:39 UTC, code 5af4380, 2-core AMD EPYC Zen 4 (family 25 model 17, KVM, AVX-512 with bf16),
# torch 2.13.0+cpu; the first run of the code-stream preset, on a quiet machine
cd /work/main && PYTHONUNBUFFERED=1 /usr/bin/time -v .venv/bin/glm53 run --preset code-stream \
  --out /tmp/runs39/code-stream --no-progress > console.txt 2> time.txt
