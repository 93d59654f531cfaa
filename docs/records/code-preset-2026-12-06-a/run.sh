# 2026-12-06 03:16 UTC, code f5ac9f2 + the uncommitted corpus length buckets (before the review's fixes: each
# bucketed batch then kept one more column, every label of it ignored; the loss is the same), 2-core Intel Xeon
# (family 6 model 167, AMX), torch 2.13.0+cpu
cd /tmp/runs && /usr/bin/time -v glm53 run --preset code --out /tmp/runs/code-s42 > code-s42.log 2>&1
