# 2026-12-04 18:00 UTC, code c019540 (the broad preset with rl-generalize's budget-4x as its RL), 2-core Intel Xeon with AMX
cd /work/main && PYTHONUNBUFFERED=1 /usr/bin/time -v .venv/bin/glm53 run --preset broad --out runs/broad-rl --no-progress \
  > console.txt 2> time.txt
