# 2026-12-04 18:57 UTC, code ac9fde7 (the broad preset with expert iteration on fresh stream tasks as its RL), 2-core Intel Xeon with AMX
cd /work/main && PYTHONUNBUFFERED=1 /usr/bin/time -v .venv/bin/glm53 run --preset broad --out runs/broad-rl2 --no-progress \
  > console.txt 2> time.txt
