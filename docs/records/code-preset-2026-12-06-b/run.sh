# 2026-12-06 04:11 UTC, code f5ac9f2 + this stop's uncommitted changes as landed (the corpus length buckets after the
# review's fixes, the code recipe as recorded), 2-core Intel Xeon (family 6 model 167, AMX), torch 2.13.0+cpu
cd /work/main && PYTHONUNBUFFERED=1 /usr/bin/time -v .venv/bin/glm53 run --preset code --out /tmp/runs2/code \
  --no-progress > console.txt 2> time.txt
